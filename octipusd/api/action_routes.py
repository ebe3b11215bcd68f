"""API routes of the action journal (seed 000), its recovery (seed 004) and calls started by hand (seed 001).

Routes (under ``/v1``)::

    GET    /actions[?session_id=&user=&run_id=&outcome=&unresolved=true&limit=]
    GET    /actions/{id}                  the record, its receipt and an explanation
    POST   /actions/{id}/probe            run the tool's verification probe once
    POST   /actions/{id}/compensate       run the tool's declared compensation
    POST   /actions/{id}/contain          {"note": "..."}: a person contained the effect
    POST   /actions/review                {"session_id", "decision": "approve"|"deny", "reason"?}
    POST   /actions/calls                 start a tool by hand (see :class:`CallCreate`)
    GET    /actions/calls[?session_id=&limit=]   GET /actions/calls/{id}[?wait_seconds=]
    DELETE /sessions/{id}                 the session and its journal (204)
    DELETE /users/{user}/journal          every journal record of a user: {"deleted": n}

Responses: ``GET /actions`` is ``{"actions": [record...]}`` (oldest first; each record is
``ToolAction.to_dict()`` plus ``blocking``: it requires a recovery review before the next
mutation of its user and session); ``GET
/actions/{id}`` is ``{"action": record, "receipts": [entry...], "explanation": text}``; the
probe answers ``{"action_id", "status", "detail", "settled", "in_flight_until", "correction",
"action"}`` (404 when the tool declares no probe, 409 when the action is not uncertain or is
already compensated or contained; ``settled`` is false for a "not applied" answer while a request
may still land until ``in_flight_until``; ``correction`` is true when an effect found after a
"not applied" settlement reopened the action); compensate ``{"action_id",
"detail", "action"}``; contain ``{"action": record}``; review the decided approval (kind
``action_recovery``, its ``action_ids``). A call answers ``{"invocation": ..., "replayed":
bool, "approval": {...} | null}`` with 200 once the invocation is terminal and 202 while it
awaits an approval or runs; ``replayed`` is true when the ``request_id`` was seen before (the
stored invocation is returned, nothing runs again).

The requesting user is the daemon's user (``RunManager.user``, the peer-checked owner of the
socket); who decided is ``"<user> via <client>"`` as for approvals. Request bodies that fail
validation are 400 ``invalid_request`` errors naming the field and the expected shape. When
the daemon was built without an :class:`~octipusd.runtime.actions.ActionService`, the
routes that need it answer 503 ``actions_unavailable``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from octipusd.api.common import Services, client_name, dump, live_action_ids
from octipusd.api.models import API_VERSION
from octipusd.errors import ActionsUnavailableError, ConflictError, InvalidRequestError, NotFoundError
from octipusd.journal.operator import in_flight_time, in_flight_warning
from octipusd.runtime.actions import REQUEST_ID_MAX_CHARS, ActionService
from octipusd.store.aio import in_thread
from octipusd.store.invocation_store import ToolInvocation
from octipusd.store.journal_store import RESOLVED_STATES, ActionReceipt, ToolAction
from octipusd.store.records import Approval

__all__ = [
    "CallCreate",
    "ContainRequest",
    "ReviewRequest",
    "action_router",
    "explain_action",
]

M = TypeVar("M", bound=BaseModel)


#: Most records ``GET /v1/actions`` returns at once.
MAX_LIST = 1000
#: The ``limit`` query parameter of the action and call lists (records).
ListLimit = Annotated[int, Query(ge=1, le=MAX_LIST)]
#: Longest wait a call or a read of a call may ask for (seconds).
MAX_WAIT_SECONDS = 300.0
#: Recovery states a person may probe: unsettled, handed to the owner (the deadline escalates,
#: it does not remove remedies), and verified (checked again: an effect that appeared since
#: reopens the action).
_PROBED_STATES = (None, "effect_unconfirmed", "recovering", "needs_operator", "verified")


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ReviewRequest(_Body):
    """``POST /v1/actions/review``: review the session's next batch of unresolved actions.

    ``approve`` acknowledges up to 20 records (their outcome is unchanged; it does not prove the
    earlier actions failed); ``deny`` records the refusal and keeps them unresolved.
    """

    session_id: str = Field(min_length=1)
    decision: Literal["approve", "deny"]
    reason: str | None = None


class ContainRequest(_Body):
    """``POST /v1/actions/{id}/contain``: how a person contained the effect (required)."""

    note: str


class CallCreate(_Body):
    """``POST /v1/actions/calls``: start a mutating tool by hand (seed 001's "Test-tab" call).

    ``tool`` is ``shell__run`` or an MCP connector tool ``server.tool``; ``arguments`` its
    input. ``request_id`` (1-200 characters) makes a retry after a lost answer safe: the same
    id returns the stored invocation and runs nothing. ``wait_seconds`` (0-300, default 0) waits
    that long for a terminal status before answering.
    """

    session_id: str = Field(min_length=1)
    tool: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    request_id: str | None = Field(default=None, min_length=1, max_length=REQUEST_ID_MAX_CHARS)
    wait_seconds: float = Field(default=0.0, ge=0.0, le=MAX_WAIT_SECONDS)


_SHAPES: dict[type[BaseModel], str] = {
    ReviewRequest: '{"session_id": "...", "decision": "approve" | "deny", "reason": "..." (optional)}',
    ContainRequest: '{"note": "how the effect was contained"}',
    CallCreate: (
        '{"session_id": "...", "tool": "shell__run", "arguments": {...}, "request_id": "..." (optional), '
        '"wait_seconds": 0-300 (optional)}'
    ),
}


def _openapi(model: type[BaseModel]) -> dict[str, Any]:
    """The request body schema for the OpenAPI document (bodies are validated by hand)."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": model.model_json_schema()}},
        }
    }


async def _parse(request: Request, model: type[M]) -> M:
    """Read and validate a JSON body; every problem is a 400 naming the field and the shape."""
    shape = _SHAPES.get(model, "a JSON object")
    raw = await request.body()
    try:
        data: Any = json.loads(raw) if raw.strip() else None
    except ValueError:
        raise InvalidRequestError(f"the request body is not valid JSON; send {shape}") from None
    if not isinstance(data, dict):
        raise InvalidRequestError(f"the request body must be a JSON object; send {shape}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(p) for p in error.get("loc", ())) or "body"
            problems.append(f"{where}: {error.get('msg')}")
        raise InvalidRequestError(f"{'; '.join(problems)}; send {shape}") from None


# ----------------------------------------------------------------------------- explanation

_OUTCOMES: dict[str, str] = {
    "started": (
        "Outcome started: the call was recorded before it ran and no outcome has been recorded yet. "
        "While it runs in this daemon it blocks nothing; a started record whose call is no longer "
        "running (the daemon stopped, or its completion could not be saved) counts as uncertain."
    ),
    "completed": (
        "Outcome completed: the call returned, which records a finished attempt, not necessarily "
        "success (a failed test or a non-zero shell exit is a completed attempt)."
    ),
    "not_executed": (
        "Outcome not_executed: trusted evidence shows nothing ran (a parser refusal, a policy "
        "rejection, invalid arguments or a proven failure before the process started), so it needs "
        "no recovery review before the next command."
    ),
    "uncertain": (
        "Outcome uncertain: partial effects may have occurred (a timeout, a kill, a signal, a lost "
        "acknowledgement or missing completion evidence); it is never repeated automatically."
    ),
}

_STATES: dict[str, str] = {
    "effect_unconfirmed": "no evidence yet says whether the effect happened",
    "verified": "a verification probe established whether the effect happened",
    "recovering": "a compensation is running",
    "compensated": "its declared compensation offset the effect",
    "contained": "a person recorded that the effect was contained",
    "needs_operator": (
        "it went to its owner: its probe stayed ambiguous past the deadline or its compensation failed"
    ),
}


def _explain_state(action: ToolAction, receipts: Sequence[ActionReceipt]) -> str:
    """The sentences on an action's recovery state: what the state means and what the latest
    evidence (the last probe, or a correction after it) found."""
    state = str(action.recovery_state)
    meaning = _STATES.get(state, "a recovery state of this daemon's version")
    evidence = [r for r in receipts if r.kind in ("probe", "correction")]
    last = evidence[-1] if evidence else None
    if last is not None and last.kind == "correction":
        earlier = last.data.get("earlier") or {}
        if state == "needs_operator":
            meaning = "it went to its owner for review"
        meaning += (
            f"; it was verified as not applied at {earlier.get('at', 'an earlier time')}, but a later probe found "
            f"the effect applied ({last.created_at.isoformat(timespec='seconds')}), so it was reopened"
        )
    elif last is not None and state not in ("compensated", "contained"):
        seen = str(last.data.get("status", "unknown")).replace("_", " ")
        meaning += (
            f"; the last probe found the effect {seen}"
            if seen != "unknown"
            else "; the last probe could not tell"
        )
        if last.data.get("note"):
            meaning += f" ({last.data['note']})"
    settled = " (this settles it)" if state in RESOLVED_STATES else ""
    return f"Recovery state {state}: {meaning}{settled}."


def explain_action(
    action: ToolAction,
    *,
    live: bool = False,
    receipts: Sequence[ActionReceipt] = (),
    now: datetime | None = None,
) -> str:
    """One paragraph saying what an action's record means (seed 000 and seed 004 wording).

    Covers the outcome, the recovery state, the review that acknowledged it (if any), whether
    it still blocks later mutations of its user and session, and its owner and deadline.

    Args:
        action: The journal record.
        live: The action is running in this daemon now (a ``started`` record that is not an
            orphan).
        receipts: Its receipt entries (the last probe's answer is named).
        now: The store's time (whether a request of it may still land); default: the system clock.

    Returns:
        The paragraph (plain text).
    """
    scope = f"user {action.user}" + (
        f" in session {action.session_id}" if action.session_id else " (no session)"
    )
    if action.run_id:
        where = f" in run {action.run_id}"
    elif action.origin == "manual":
        where = ", started by hand"
    else:
        where = ""
    parts = [f"{action.tool} ({action.risk_class}) ran for {scope}{where}."]
    parts.append(_OUTCOMES.get(action.outcome, f"Outcome {action.outcome}."))
    if action.detail:
        parts.append(f"Evidence: {action.detail}.")
    if action.recovery_state:
        parts.append(_explain_state(action, receipts))
    if action.outcome in ("uncertain", "started") and action.recovery_state not in RESOLVED_STATES:
        if action.may_still_land(now or datetime.now(UTC)):
            parts.append(
                f"A dispatched request of it may still land: {in_flight_warning(action.in_flight_until)}; "
                "until then a probe that finds nothing does not settle it, and a retry with the same "
                "idempotency key is refused."
            )
        elif action.dispatch_ended_at is not None:
            parts.append(
                f"No request of it can land any more (since {action.dispatch_ended_at.isoformat(timespec='seconds')}: "
                "it answered, or Octipus ended its transport)."
            )
    if action.review_id:
        when = f" at {action.reviewed_at.isoformat()}" if action.reviewed_at else ""
        parts.append(
            f"Recovery review {action.review_id} by {action.reviewed_by or 'unknown'}{when} acknowledged it; "
            "an acknowledgement permits further mutations but does not relabel the outcome or prove "
            "the action failed."
        )
    if action.outcome == "started" and live:
        parts.append("It is running in this daemon now.")
    elif action.resolved:
        if action.outcome in ("uncertain", "started"):
            parts.append(f"It no longer blocks later mutations of {scope}.")
    else:
        parts.append(
            f"It blocks later mutations of {scope} until a person reviews it "
            f"(octipusctl actions review --session {action.session_id or 'ID'} --approve) "
            "or evidence settles it (a probe, a compensation, or `octipusctl actions contain`)."
        )
    owner = action.recovery_owner or f"{action.user} (the user it ran for)"
    if action.deadline_at is not None:
        deadline = f"deadline {action.deadline_at.isoformat()}"
        if not action.resolved and action.recovery_state in ("effect_unconfirmed", "recovering"):
            deadline += ", after which it goes to its owner if still unconfirmed"
    else:
        deadline = f"escalation deadline {action.deadline_seconds:g} s after an uncertain outcome"
    parts.append(f"Recovery owner: {owner}; {deadline}.")
    return " ".join(parts)


# ----------------------------------------------------------------------------- helpers


def _action_view(action: ToolAction, live: set[str]) -> dict[str, Any]:
    """``ToolAction.to_dict()`` plus ``blocking``: it requires a recovery review before the next
    mutation of its user and session (unresolved, and not a call still running here)."""
    data = action.to_dict()
    data["blocking"] = not action.resolved and not (action.outcome == "started" and action.id in live)
    return data


def _approval_view(approval: Approval) -> dict[str, Any]:
    data = dump(approval)
    data["action_ids"] = list(approval.action_ids)
    return data


def _call_view(invocation: ToolInvocation, approval: Approval | None, *, replayed: bool) -> dict[str, Any]:
    return {
        "invocation": invocation.to_dict(),
        "replayed": replayed,
        "approval": _approval_view(approval) if approval is not None else None,
    }


def _check_wait(value: float | None, what: str = "wait_seconds") -> float:
    if value is None:
        return 0.0
    if not 0.0 <= value <= MAX_WAIT_SECONDS:
        raise InvalidRequestError(f"{what} must be between 0 and {MAX_WAIT_SECONDS:g} seconds, got {value:g}")
    return value


def action_router(services: Services) -> APIRouter:
    """Routes for the action journal, recovery, calls started by hand and journal deletion.

    Args:
        services: The daemon's services; ``services.actions`` may be None (those routes then
            answer 503).

    Returns:
        The router (prefix ``/v1``).
    """
    router = APIRouter(prefix=f"/{API_VERSION}")
    store, runs = services.store, services.runs

    def need_actions() -> ActionService:
        if services.actions is None:
            raise ActionsUnavailableError(
                "this octipusd was started without the action service, so the action journal cannot be "
                "reviewed or called by hand here; restart octipusd (its composition root builds it)"
            )
        return services.actions

    def live_actions() -> set[str]:
        return live_action_ids(services)

    def decided_by(request: Request) -> str:
        return f"{services.user} via {client_name(request)}"

    async def approval_of(invocation: ToolInvocation) -> Approval | None:
        if invocation.approval_id is None:
            return None
        try:
            return await in_thread(store.get_approval, invocation.approval_id)
        except NotFoundError:
            return None

    async def call_response(invocation: ToolInvocation, *, replayed: bool) -> JSONResponse:
        body = _call_view(invocation, await approval_of(invocation), replayed=replayed)
        if invocation.action_id is not None:  # whether its journal record still blocks changes
            action = await in_thread(store.get_action, invocation.action_id)
            body["action_blocking"] = not action.resolved and action.id not in live_actions()
        return JSONResponse(status_code=200 if invocation.terminal else 202, content=jsonable_encoder(body))

    # ------------------------------------------------------------------ calls started by hand
    # (declared before /actions/{id} so that "calls" is never taken for an action id)

    @router.post("/actions/calls", openapi_extra=_openapi(CallCreate))
    async def create_call(request: Request) -> JSONResponse:
        body = await _parse(request, CallCreate)
        actions = need_actions()
        invocation, created = await actions.submit(
            user=services.user,
            session_id=body.session_id,
            tool=body.tool,
            arguments=body.arguments,
            request_id=body.request_id,
        )
        if not invocation.terminal and body.wait_seconds > 0:
            invocation = await actions.wait(invocation.id, body.wait_seconds)
        return await call_response(invocation, replayed=not created)

    @router.get("/actions/calls")
    async def list_calls(
        session_id: str | None = None, user: str | None = None, limit: ListLimit = 100
    ) -> Any:
        found = await in_thread(lambda: store.list_invocations(user=user, session_id=session_id, limit=limit))
        return {"invocations": [i.to_dict() for i in found]}

    @router.get("/actions/calls/{invocation_id}")
    async def get_call(invocation_id: str, wait_seconds: float | None = None) -> JSONResponse:
        wait = _check_wait(wait_seconds)
        invocation = await in_thread(store.get_invocation, invocation_id)
        if wait > 0 and not invocation.terminal:
            invocation = await need_actions().wait(invocation_id, wait)
        return await call_response(invocation, replayed=False)

    @router.post("/actions/calls/{invocation_id}/cancel")
    async def cancel_call(invocation_id: str, request: Request) -> JSONResponse:
        invocation = await in_thread(lambda: store.cancel_invocation(invocation_id, by=decided_by(request)))
        return await call_response(invocation, replayed=False)

    # ------------------------------------------------------------------ review

    @router.post("/actions/review", openapi_extra=_openapi(ReviewRequest))
    async def review(request: Request) -> Any:
        body = await _parse(request, ReviewRequest)
        approval = await need_actions().review(
            user=services.user,
            session_id=body.session_id,
            approve=body.decision == "approve",
            decided_by=decided_by(request),
            reason=body.reason,
        )
        return _approval_view(approval)

    # ------------------------------------------------------------------ journal records

    @router.get("/actions")
    async def list_actions(
        session_id: str | None = None,
        user: str | None = None,
        run_id: str | None = None,
        outcome: str | None = None,
        unresolved: bool = False,
        limit: ListLimit = 200,
    ) -> Any:
        if session_id is not None:
            await in_thread(store.get_session, session_id)  # 404 names an unknown session
        found = await in_thread(
            store.list_actions,
            user=user,
            session_id=session_id,
            run_id=run_id,
            outcome=outcome,
            unresolved=unresolved,
            limit=limit,
        )
        live = live_actions()
        if unresolved:  # a started record still running here blocks nothing
            found = [a for a in found if not (a.outcome == "started" and a.id in live)]
        return {"actions": [_action_view(a, live) for a in found]}

    @router.get("/actions/{action_id}")
    async def get_action(action_id: str) -> Any:
        action = await in_thread(store.get_action, action_id)
        receipts = await in_thread(store.list_receipts, action_id)
        live = live_actions()
        return {
            "action": _action_view(action, live),
            "receipts": [r.to_dict() for r in receipts],
            "explanation": explain_action(action, live=action.id in live, receipts=receipts, now=store.now()),
        }

    def not_running(action: ToolAction) -> None:
        if action.outcome == "started" and action.id in live_actions():
            raise ConflictError(
                f"action {action.id} is running in this daemon now; wait for its outcome "
                f"(`octipusctl actions show {action.id}`)"
            )

    @router.post("/actions/{action_id}/probe")
    async def probe(action_id: str) -> Any:
        operator = need_actions().operator
        action = await in_thread(store.get_action, action_id)
        not_running(action)
        if action.outcome not in ("uncertain", "started"):
            raise ConflictError(f"action {action.id} is {action.outcome}; only uncertain actions are probed")
        if action.recovery_state not in _PROBED_STATES:
            raise ConflictError(
                f"action {action.id} is already {action.recovery_state}; a probe would change nothing"
            )
        contract = operator.contracts(action.tool)  # None for a tool that declares none
        if contract is None or contract.probe is None:
            raise NotFoundError(
                f"{action.tool} declares no verification probe; check its effect yourself, then record it "
                f"with `octipusctl actions contain {action.id} --note TEXT` or review it with "
                f"`octipusctl actions review --session {action.session_id or 'ID'} --approve`"
            )
        verdict = await operator.probe(action, explicit=True)
        if verdict is None:
            raise ConflictError(f"action {action.id} changed meanwhile; it is no longer awaiting a probe")
        after = await in_thread(store.get_action, action_id)
        return {
            "action_id": action.id,
            "status": str(verdict.result.status),
            "detail": verdict.result.detail,
            "settled": verdict.settled,
            "in_flight_until": in_flight_time(verdict.in_flight_until) if verdict.in_flight_until else None,
            "correction": verdict.correction,
            "action": after.to_dict(),
        }

    @router.post("/actions/{action_id}/compensate")
    async def compensate(action_id: str, request: Request) -> Any:
        operator = need_actions().operator
        action = await in_thread(store.get_action, action_id)
        not_running(action)
        detail = await operator.compensate(action, by=decided_by(request))
        after = await in_thread(store.get_action, action_id)
        return {"action_id": action.id, "detail": detail, "action": after.to_dict()}

    @router.post("/actions/{action_id}/contain", openapi_extra=_openapi(ContainRequest))
    async def contain(action_id: str, request: Request) -> Any:
        body = await _parse(request, ContainRequest)
        note = body.note.strip()
        if not note:
            raise InvalidRequestError(
                "note: must say how the effect was contained (e.g. 'reverted the commit by hand'); it is kept "
                "in the action's receipt"
            )
        operator = need_actions().operator
        action = await in_thread(store.get_action, action_id)
        not_running(action)
        await operator.contain(action, by=decided_by(request), note=note)
        return {"action": (await in_thread(store.get_action, action_id)).to_dict()}

    # ------------------------------------------------------------------ deletion

    @router.delete("/sessions/{session_id}", status_code=204)
    async def delete_session(session_id: str) -> Response:
        await in_thread(store.get_session, session_id)  # 404 first
        for run_id in runs.live_runs():
            try:
                run = await in_thread(store.get_run, run_id)
            except NotFoundError:
                continue
            if run.session_id == session_id:
                raise ConflictError(
                    f"session {session_id} has a live run ({run_id}); stop it with "
                    f"`octipusctl runs stop {run_id}`, then delete the session"
                )
        running = [
            i.id
            for i in await in_thread(lambda: store.list_invocations(session_id=session_id, limit=MAX_LIST))
            if i.status == "executing"
        ]
        if running:
            raise ConflictError(
                f"session {session_id} has a call started by hand that is running ({', '.join(running)}); "
                "wait until it ends (`octipusctl actions call-show ID --wait 60`), then delete the session"
            )
        await in_thread(store.delete_session, session_id)
        return Response(status_code=204)

    @router.delete("/users/{user}/journal")
    async def delete_user_journal(user: str) -> Any:
        live = live_actions()
        if live:
            busy = [a.id for a in await in_thread(store.list_actions, user=user, ids=live, limit=MAX_LIST)]
            if busy:
                raise ConflictError(
                    f"{user} has actions running now ({', '.join(busy)}); wait until they end, then delete "
                    "the journal"
                )
        running = [
            i.id
            for i in await in_thread(lambda: store.list_invocations(user=user, limit=MAX_LIST))
            if i.status == "executing"
        ]
        if running:
            raise ConflictError(
                f"{user} has calls started by hand that are running ({', '.join(running)}); wait until they "
                "end, then delete the journal"
            )
        deleted = await in_thread(store.delete_user_journal, user)
        return {"deleted": deleted}

    return router
