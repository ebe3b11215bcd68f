"""API routes of the permission policy: approvals (questionnaires included), rules, grants.

Routes (under ``/v1``)::

    GET  /approvals[?status=&run_id=]  GET /approvals/{id}   POST /approvals/{id}
    GET  /rules                        POST /rules            DELETE /rules/{id}
    POST /rules/explain                POST /grants           DELETE /grants/{id}

An approval of kind ``questionnaire`` (Claude's AskUserQuestion, seed 003) is answered with
``answers`` for every question; a bare approve is refused with a message saying so, and a deny
cancels it. ``remember`` with an answer creates a scoped grant in the same transaction as the
decision, so a second answer racing the first can create neither a decision nor a grant. A
recovery review (kind ``action_recovery`` or ``pipeline_replay``) answered with ``remember`` is a
400: it never becomes a permanent tool permission (seed 000). ``run_now`` approves a recovery
review and has the call it reviews run at once, even while a request of a reviewed action may
still land (the review's ``waits_until``; the call waits until then otherwise); with anything
else it is a 400.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi import APIRouter, Request, Response

from octipusd.api.common import Services, client_name, out
from octipusd.api.models import (
    API_VERSION,
    ApprovalAnswer,
    ApprovalOut,
    ExplainRequest,
    GrantCreate,
    GrantOut,
    RecheckOut,
    RuleCreate,
    RuleOut,
    RulesOut,
)
from octipusd.errors import ApprovalError, InvalidRequestError, QuestionnaireError
from octipusd.journal.review import RUN_NOW
from octipusd.policy.flowguard import FlowState, classify, from_label
from octipusd.policy.questionnaire import (
    BARE_ALLOW_ERROR,
    parse_questionnaire,
    validate_answers,
)
from octipusd.policy.rules import check_grant, check_rule, check_tool_id
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import PIPELINE_CALL_KIND
from octipusd.store.records import Approval, ApprovalStatus

#: Longest an approving answer waits for the re-check of the call it approved (seconds; the gate
#: re-checks as soon as the waiting run wakes, so this bounds only a stalled store).
RECHECK_WAIT_SECONDS = 5.0
#: Approval kinds that review work rather than approve one call: never remembered, never re-checked.
_REVIEWS = ("action_recovery", "pipeline_replay")

__all__ = ["policy_router"]


def _grant_for(approval: Approval, body: ApprovalAnswer, workspace: str) -> dict[str, Any] | None:
    """The scoped grant a ``remember`` answer creates (allow on approve, deny on deny)."""
    remember = body.remember
    if remember is None:
        return None
    if approval.kind in _REVIEWS:  # seed 000: never a permanent permission
        raise InvalidRequestError(
            f"approval {approval.id} ({approval.kind}): a recovery review is never remembered as a "
            "permission; answer without --remember"
        )
    if approval.kind == "questionnaire":
        raise InvalidRequestError(
            "a questionnaire cannot be remembered: every AskUserQuestion needs fresh answers"
        )
    if remember.match == "subject" and not approval.subject:
        raise InvalidRequestError(
            f"approval {approval.id} has no subject (command or path) to remember; use remember.match = 'tool'"
        )
    level = "allow" if body.decision == "approve" else "deny"
    matcher = approval.subject if remember.match == "subject" else None
    check_grant(approval.tool_id, matcher, level)  # validated like every grant written
    return {
        "tool_id": approval.tool_id,
        "level": level,
        "matcher": matcher,
        "session_id": approval.session_id if remember.scope == "session" else None,
        "workspace": workspace if remember.scope == "workspace" else None,
        "expires_at": datetime.now(UTC) + timedelta(seconds=remember.ttl_seconds)
        if remember.ttl_seconds
        else None,
        "max_uses": remember.max_uses,
        "note": f"remembered from approval {approval.id}",
    }


def _answers_for(approval: Approval, body: ApprovalAnswer) -> dict[str, Any] | None:
    """Validated questionnaire answers, a recovery review's run now, or None; refuses a bare
    approve of a questionnaire, and run now anywhere but in the approval of a recovery review."""
    if body.run_now:
        if approval.kind != "action_recovery" or body.decision != "approve":
            raise InvalidRequestError(
                f"approval {approval.id} ({approval.kind}): run_now goes only with approving a recovery "
                "review (it runs the reviewed call at once, while an earlier request may still land)"
            )
        return {RUN_NOW: True}
    if approval.kind != "questionnaire":
        if body.answers is not None:
            raise InvalidRequestError(
                f"approval {approval.id} is a yes/no tool approval; answers are only for questionnaires"
            )
        return None
    if body.decision == "deny":
        return None
    if not body.answers:
        raise ApprovalError(BARE_ALLOW_ERROR.replace("ID", approval.id))
    try:
        return dict(validate_answers(parse_questionnaire(approval.input), body.answers))
    except QuestionnaireError as exc:  # the same error, naming the approval
        raise QuestionnaireError(f"approval {approval.id}: {exc.message}") from None


def policy_router(services: Services) -> APIRouter:
    """Routes for approvals, rules and grants over ``services``."""
    router = APIRouter(prefix=f"/{API_VERSION}")
    store, broker = services.store, services.broker

    @router.get("/approvals")
    async def list_approvals(status: str | None = "pending", run_id: str | None = None) -> list[ApprovalOut]:
        wanted = None
        if status and status != "all":
            try:
                wanted = ApprovalStatus(status)
            except ValueError:
                raise InvalidRequestError(
                    f"unknown status {status!r}; accepted: all, {', '.join(s.value for s in ApprovalStatus)}"
                ) from None
        found = await in_thread(store.list_approvals, status=wanted, run_id=run_id)
        return [out(ApprovalOut, a) for a in found]

    @router.get("/approvals/{approval_id}")
    async def get_approval(approval_id: str) -> ApprovalOut:
        return out(ApprovalOut, await in_thread(store.get_approval, approval_id))

    @router.post("/approvals/{approval_id}")
    async def answer_approval(approval_id: str, body: ApprovalAnswer, request: Request) -> ApprovalOut:
        client = client_name(request)
        approval = await in_thread(store.get_approval, approval_id)
        # an answered approval says so first (the store's exactly-once check), whatever its kind
        answers = _answers_for(approval, body) if approval.status is ApprovalStatus.PENDING else None
        session = await in_thread(store.get_session, approval.session_id)
        grant = _grant_for(approval, body, session.workspace)
        decided = await broker.decide(
            approval_id,
            approve=body.decision == "approve",
            decided_by=f"{services.user} via {client}",
            reason=body.reason,
            answers=answers,
            grant=grant,
            # no call to re-check: a review's, or a pipeline's blocked call raised again (its worker's
            # repeated call is checked when it comes)
            recheck_seconds=0.0 if approval.kind in (*_REVIEWS, PIPELINE_CALL_KIND) else RECHECK_WAIT_SECONDS,
        )
        answered = out(ApprovalOut, decided.approval)
        if decided.recheck is not None:
            answered.recheck = RecheckOut(allowed=decided.recheck.allowed, reason=decided.recheck.reason)
        return answered

    @router.get("/rules")
    async def list_rules() -> RulesOut:
        policy = services.gate.base
        configured: dict[str, list[str]] = {"allow": [], "ask": [], "deny": []}
        for rule in policy.rules.rules:
            configured[str(rule.level)].append(rule.text)
        stored = await in_thread(store.list_rules)
        grants = await in_thread(store.list_grants)
        return RulesOut(
            defaults=policy.rules.builtin,
            configured=configured,
            stored=[out(RuleOut, r) for r in stored],
            grants=[out(GrantOut, g) for g in grants],
            flow_guard=str(services.gate.flow_guard),
        )

    @router.post("/rules", status_code=201)
    async def add_rule(body: RuleCreate) -> RuleOut:
        rule = check_rule(body.rule, body.level)
        stored = await in_thread(
            store.add_rule, level=body.level, rule=rule.text.strip(), created_by=services.user
        )
        return out(RuleOut, stored)

    @router.delete("/rules/{rule_id}", status_code=204)
    async def remove_rule(rule_id: str) -> Response:
        await in_thread(store.remove_rule, rule_id)
        return Response(status_code=204)

    @router.post("/rules/explain")
    async def explain(body: ExplainRequest) -> dict[str, Any]:
        check_tool_id(body.tool_id)  # "a b" names no tool: say so, as a rule or grant would
        workspace = body.workspace
        label = ""
        if body.session_id is not None:
            session = await in_thread(store.get_session, body.session_id)
            workspace = workspace or session.workspace
            label = session.flow_label
        policy = await services.gate.current_policy()
        result = policy.explain(
            body.tool_id, body.arguments, body.action, session_id=body.session_id, workspace=workspace
        )
        classification = classify(services.gate.flow_id(body.tool_id), body.arguments)
        escalation = FlowState(flags=from_label(label)).check(classification)
        result["flow_guard"] = {
            "mode": str(services.gate.flow_guard),
            "session_flags": sorted(from_label(label)),
            "call_sets": sorted(str(f) for f in classification.flags),
            "egress": str(classification.egress),
            "escalates": escalation if result["decision"]["level"] == "allow" else None,
        }
        return result

    @router.post("/grants", status_code=201)
    async def create_grant(body: GrantCreate) -> GrantOut:
        # validated exactly like a rule; any text is a valid matcher (FACTS.md §3: empty or ``*``
        # any, ``x:*`` a prefix, else exact)
        check_grant(body.tool_id, body.matcher, body.level)
        if body.session_id is not None:
            await in_thread(store.get_session, body.session_id)  # 404 for an unknown session
        grant = await in_thread(
            store.create_grant,
            tool_id=body.tool_id,
            level=body.level,
            matcher=body.matcher,
            session_id=body.session_id,
            workspace=body.workspace,
            expires_at=datetime.now(UTC) + timedelta(seconds=body.ttl_seconds) if body.ttl_seconds else None,
            max_uses=body.max_uses,
            created_by=services.user,
            note=body.note,
        )
        return out(GrantOut, grant)

    @router.delete("/grants/{grant_id}")
    async def revoke_grant(grant_id: str) -> GrantOut:
        return out(GrantOut, await in_thread(store.revoke_grant, grant_id, revoked_by=services.user))

    return router
