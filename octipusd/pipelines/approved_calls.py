"""Calls a person approved for one stage attempt (issue 28 items 1-2; seed 003 "Approvals inside a
pipeline").

A stage worker that gave up on an approval (it expired, or its CLI went away while it waited) does
not fail its pipeline: the walk parks ``awaiting_approval`` and :meth:`BlockedCalls.raise_again`
raises the blocked call again as a normal permission request (kind ``pipeline_call``: the call's
tool, subject and input, on the worker's run so the push notification fires, never expiring). Its
allowance draft waits in ``metadata.blockedCall``; the transaction approving the request moves it to
``metadata.approvedCalls`` (:meth:`~octipusd.store.Store.decide_approval`), and the same attempt runs
again. When the worker repeats the call, :class:`ApprovedCalls` (a
:class:`~octipusd.toolkit.CallAllowance` the permission gate consults where it would ask, after the
rules: a DENY wins) lets it run without a second prompt.

An allowance is narrow: the stage worker of that pipeline, node and attempt only (the root agent,
another pipeline and a child the stage spawned have no :attr:`CallContext.stage
<octipusd.toolkit.CallContext.stage>` of theirs), the same ``hostServices``, the same tool and
action and the same arguments (:func:`args_digest`: only the CLI's ``description`` label and
``timeout`` are ignored, so a different cwd, env, network, useShell or file content asks again),
while the pipeline is ``running`` or ``awaiting_approval``; the store drops them when it is
``completed``, ``failed`` or ``stopped``.

A blocked request that is not the attempt's own worker's (another run's, a questionnaire), or no
request at all, parks the stage on a plain "continue the stage" question instead: nothing is
pre-approved.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from octipusd.errors import NotFoundError
from octipusd.pipelines.answering import approval_event
from octipusd.pipelines.asking import Questions
from octipusd.pipelines.status import pending_approval
from octipusd.policy.rules import CLI_NATIVE_PREFIX
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import (
    APPROVED_CALLS_KEY,
    BLOCKED_CALL_KEY,
    PIPELINE_CALL_KIND,
    Pipeline,
    PipelineStatus,
)
from octipusd.store.records import Approval, Run
from octipusd.store.repository import Store
from octipusd.toolkit import CallContext

__all__ = ["IGNORED_KEYS", "ApprovedCalls", "BlockedCalls", "action_of", "args_digest", "holding_pipeline"]

#: Arguments an allowance ignores: the CLI's description label and timeout (seed 003).
IGNORED_KEYS: Final = frozenset({"description", "timeout"})
#: Pipeline statuses in which an allowance applies.
_LIVE: Final = frozenset({PipelineStatus.RUNNING, PipelineStatus.AWAITING_APPROVAL})

#: ``emit(run_id, kind, data)``: store and publish one run event (the approval's announcement).
Emit = Callable[[str, str, dict[str, Any]], Awaitable[Any]]


def args_digest(arguments: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of ``arguments`` without :data:`IGNORED_KEYS`."""
    kept = {k: v for k, v in arguments.items() if k not in IGNORED_KEYS}
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def action_of(tool_id: str) -> str | None:
    """The action the gate is told with ``tool_id``: a native tool's name, None for an Octipus tool."""
    return tool_id.removeprefix(CLI_NATIVE_PREFIX) if tool_id.startswith(CLI_NATIVE_PREFIX) else None


async def holding_pipeline(store: Store, ctx: CallContext) -> Pipeline | None:
    """The pipeline whose allowances may hold for ``ctx``: the one of its stage tag (a stage run's
    own), of its session, ``running`` or ``awaiting_approval``; None otherwise (no stage: the root
    agent, a child the stage spawned, a hand-started call; a gone pipeline).

    Raises:
        StoreError: The store failed (nothing is allowed by an error).
    """
    if ctx.stage is None:
        return None
    try:
        pipeline = await in_thread(store.get_pipeline, ctx.stage.pipeline_id)
    except NotFoundError:
        return None
    return pipeline if pipeline.status in _LIVE and pipeline.session_id == ctx.session_id else None


class ApprovedCalls:
    """The :class:`~octipusd.toolkit.CallAllowance` of ``metadata.approvedCalls`` (see the module).

    Args:
        store: The store (the pipeline's record is read at each call the gate would ask about).
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    async def allows(
        self, ctx: CallContext, tool_id: str, arguments: Mapping[str, Any], action: str | None
    ) -> str | None:
        """Why a person already approved this call of this stage attempt, or None (ask).

        Raises:
            StoreError: The store failed (the gate's caller sees the error; nothing is allowed).
        """
        stage = ctx.stage
        pipeline = await holding_pipeline(self.store, ctx)
        if stage is None or pipeline is None:
            return None
        digest = args_digest(arguments)
        for entry in pipeline.metadata.get(APPROVED_CALLS_KEY) or ():
            if (
                isinstance(entry, dict)
                and entry.get("pipelineId") == stage.pipeline_id
                and entry.get("nodeKey") == stage.node_key
                and entry.get("attemptId") == stage.attempt_id
                and entry.get("toolId") == tool_id
                and entry.get("action") == action
                and entry.get("hostServices") is ctx.host_services
                and entry.get("argsDigest") == digest
            ):
                return (
                    f"approved ahead by {entry.get('decidedBy')} at {entry.get('decidedAt')} (approval "
                    f"{entry.get('approvalId')}) for stage {stage.stage!r} of pipeline {stage.pipeline_id}"
                )
        return None


class BlockedCalls:
    """The walk's step raising a worker's blocked call again (see the module).

    Args:
        store: The store.
        questions: The pipeline's questions (the plain "continue the stage" question).
        emit: Announces the raised approval on the worker's run (the notifier listens), or None.
    """

    def __init__(self, store: Store, questions: Questions, emit: Emit | None = None) -> None:
        self.store = store
        self.questions = questions
        self.emit = emit

    async def raise_again(
        self, pipeline_id: str, node: str, item_id: str | None, stage: str, verdict: Mapping[str, Any]
    ) -> str:
        """Step: the stage attempt's worker gave up on an approval; ask the person again.

        The request it gave up on (``verdict["blocked"]``) is raised again as a ``pipeline_call``
        approval when it is a tool approval of a worker run of this very attempt; otherwise (none,
        another run's, a questionnaire) a plain "continue the stage" question. Either way the
        pipeline is ``awaiting_approval`` with ``pendingApproval``.

        Returns:
            The new approval's id.

        Raises:
            StoreError: The database failed.
        """
        attempt_id = str(verdict["attemptId"])
        found = await self._blocked(verdict.get("blocked"), pipeline_id, attempt_id)
        why = str(verdict.get("error") or "the stage's worker gave up waiting for an approval")
        if found is None:
            question = {
                "stage": stage,
                "reason": f"the stage's worker stopped: {why}. Approve to continue the stage "
                "(nothing is approved ahead: its calls ask again); deny to stop the pipeline (resumable).",
                "fields": [],
                "kind": "continue_stage",
                "explanation": "approve to continue the stage, deny to stop the pipeline (resumable)",
            }
            return await self.questions.ask(pipeline_id, node, item_id, question)
        return await self._raise_call(pipeline_id, node, item_id, stage, attempt_id, *found, why)

    async def _raise_call(
        self,
        pipeline_id: str,
        node: str,
        item_id: str | None,
        stage: str,
        attempt_id: str,
        blocked: Approval,
        run: Run,
        why: str,
    ) -> str:
        """The blocked call asked again on its worker's run (``pipeline_call``, with why the gate
        first asked, e.g. the flow guard's warning), its allowance draft beside ``pendingApproval``;
        announced. Returns the approval's id. Raises StoreError."""
        pipeline = await in_thread(self.store.get_pipeline, pipeline_id)
        first = f"; first asked: {blocked.reason}" if blocked.reason else ""
        approval = await in_thread(
            lambda: self.store.create_approval(
                run_id=run.id,
                session_id=pipeline.session_id,
                tool_id=blocked.tool_id,
                subject=blocked.subject,
                reason=f"pipeline {pipeline.name}, stage {stage}: its worker waits for this call ({why}){first}",
                input=blocked.input,
                explanation="approve to let this stage attempt's worker run exactly this call and continue "
                "the stage; deny to stop the pipeline (resumable)",
                vendor_request_id=None,
                expires_at=None,
                kind=PIPELINE_CALL_KIND,
            )
        )
        draft = {
            "approvalId": approval.id,
            "pipelineId": pipeline_id,
            "nodeKey": node,
            "attemptId": attempt_id,
            "toolId": blocked.tool_id,
            "action": action_of(blocked.tool_id),
            "argsDigest": args_digest(blocked.input),
            "hostServices": run.host_services,
        }
        title = await self.questions.item_title(pipeline_id, item_id)
        pending = pending_approval(approval, stage=stage, item=item_id, kind="tool_call")
        pending |= {
            "pipelineId": pipeline_id,
            "node": node,
            "itemTitle": title,
            "blockedRequestId": blocked.id,
        }
        await self.questions.wait_for_person(pipeline_id, node, pending, {BLOCKED_CALL_KEY: draft})
        await self._announce(run.id, approval)
        return approval.id

    async def _blocked(
        self, approval_id: Any, pipeline_id: str, attempt_id: str
    ) -> tuple[Approval, Run] | None:
        """The blocked tool approval and its run, if that run is a worker of this attempt."""
        if not isinstance(approval_id, str):
            return None
        approval = await in_thread(self.store.get_approval, approval_id)
        if approval.kind != "tool" or approval.run_id is None:
            return None
        run = await in_thread(self.store.get_run, approval.run_id)
        if run.pipeline_id != pipeline_id or run.pipeline_attempt_id != attempt_id:
            return None
        return approval, run

    async def _announce(self, run_id: str, approval: Approval) -> None:
        """The raised approval is announced like any (the clients and the push notification)."""
        if self.emit is None:
            return
        await self.emit(run_id, "approval_requested", approval_event(approval))
