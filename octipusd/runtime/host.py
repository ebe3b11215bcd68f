"""The bridge's host for one run: what Octipus tool calls of that run reach in the daemon.

:class:`RunHost` implements :class:`~octipusd.bridge.host.ToolHost` for exactly one
:class:`~octipusd.runtime.supervisor.RunSupervisor`; the bridge of the run is opened with it, so
no call looks its run up by id. Every method answers for the run it is bound to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from octipusd.errors import ConflictError
from octipusd.journal.executor import ActionScope
from octipusd.runtime.events import FEEDBACK_EVENT
from octipusd.runtime.feedback import feedback_for_agent, plan_for_agent
from octipusd.runtime.manual_host import resolve_for
from octipusd.runtime.services import report
from octipusd.store.aio import in_thread
from octipusd.toolkit import (
    UNDECLARED_CONTRACT,
    AuthorizationResult,
    BackgroundJobs,
    Body,
    CallWatch,
    ChildRequest,
    Executed,
    MonitorAccess,
    Origin,
    PipelineAccess,
    PlanUpdate,
    RunIdentity,
    ShellTerms,
    monitor_access,
    pipeline_access,
)

if TYPE_CHECKING:
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = ["RunHost", "action_scope"]

#: How the gate reports an approval wait opening (+1) or ending (-1) (:attr:`CallContext.on_waiting`).
_OnWaiting = Callable[[int], Awaitable[None]]


def _told(watch: CallWatch, then: _OnWaiting | None) -> _OnWaiting:
    """``on_waiting`` that tells the bridge's ``watch`` first, then the run (``then``)."""

    async def on_waiting(delta: int) -> None:
        watch.waiting(delta)
        if then is not None:
            await then(delta)

    return on_waiting


def action_scope(identity: RunIdentity) -> ActionScope:
    """The journal scope of an agent's call."""
    return ActionScope(
        user=identity.user,
        session_id=identity.session_id,
        run_id=identity.run_id,
        agent=identity.worker_id,
        origin=Origin.AGENT,
        pipeline_id=identity.stage.pipeline_id if identity.stage is not None else None,
        node_id=identity.stage.node_key if identity.stage is not None else None,
        author=identity.call_author,
    )


class RunHost:
    """The :class:`~octipusd.bridge.host.ToolHost` of one run.

    Args:
        supervisor: The run the bridge belongs to.
    """

    def __init__(self, supervisor: RunSupervisor) -> None:
        self._run = supervisor

    def _live(self) -> bool:
        return self._run.registry.get(self._run.run.id) is self._run

    async def authorize(
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any], watch: CallWatch | None = None
    ) -> AuthorizationResult:
        """Permission check of an Octipus tool call arriving on the bridge.

        The permission gate decides first; a mutating tool then passes the recovery review gate
        (seed 000) and its contract's unattended rule (seed 004). A refused mutating call is
        recorded in the journal as ``not_executed``. ``watch`` is told of each approval wait. A call
        cancelled while one of its approvals is pending (its caller disconnected, a bridge deadline
        passed, or the vendor ended) fails the run, naming the cause ``watch`` gives
        (:meth:`~octipusd.runtime.relay.PermissionRelay.abandoned`).
        """
        run = self._run
        if not self._live():
            return AuthorizationResult(False, "the run is no longer live")
        if run.ending is not None:
            return AuthorizationResult(False, f"the run is ending ({run.ending}); no further tool call runs")
        ctx = dataclasses.replace(run.relay.context(), approvals=[])  # this call's open approvals
        if watch is not None:
            ctx.on_waiting = _told(watch, ctx.on_waiting)
        try:
            result = await run.relay.decide(tool_id, arguments, action=None, vendor_request_id=None, ctx=ctx)
            spec = run.tools.get(tool_id)
            if spec is None or not spec.mutating:
                return AuthorizationResult(result.allowed, result.reason)
            contract = spec.recovery_contract
            if result.allowed:
                result = await run.relay.recovery_review(ctx, tool_id, arguments, contract)
        except anyio.get_cancelled_exc_class():
            # cancelled during an approval: the run fails (seed 003), saying why the bridge stopped it
            if ctx.approvals:
                with anyio.CancelScope(shield=True):
                    stop = watch.stopped() if watch is not None else None
                    await run.relay.abandoned(tool_id, ctx.approvals, stop=stop)
            raise
        if not result.allowed:
            await run.services.journal.refused(
                action_scope(identity), tool_id, arguments, contract, result.reason
            )
        return AuthorizationResult(result.allowed, result.reason)

    async def run_action(
        self,
        identity: RunIdentity,
        tool_id: str,
        arguments: dict[str, Any],
        body: Body,
        timeout_seconds: float | None,
    ) -> Executed:
        """Run a mutating call's body inside the journal's execution boundary."""
        spec = self._run.tools.get(tool_id)
        contract = spec.recovery_contract if spec is not None else UNDECLARED_CONTRACT
        return await self._run.services.journal.execute(
            action_scope(identity),
            tool_id,
            arguments,
            contract,
            body,
            timeout_seconds=timeout_seconds,
            dispatch=spec.dispatch() if spec is not None else None,
        )

    async def resolve_secrets(
        self, identity: RunIdentity, tool_id: str, names: Sequence[str]
    ) -> Mapping[str, str]:
        """Resolve a call's vault placeholders as the user the run acts for."""
        return await resolve_for(self._run.services.vault, identity, tool_id, names)

    def background_jobs(self, identity: RunIdentity) -> BackgroundJobs:
        """The run's background commands (they end with it).

        Raises:
            ConflictError: the run is not running its turn (before its bridge opened, or after).
        """
        jobs = self._run.jobs
        if jobs is None:
            raise ConflictError("the run keeps no background commands now: it is not running its turn")
        return jobs

    def shell_terms(self, identity: RunIdentity) -> ShellTerms:
        """The daemon's shell sandbox, and the run's own ``host_services`` (a child run has none)."""
        return ShellTerms(self._run.services.sandbox, host_services=self._run.run.host_services)

    async def get_work_plan(self, identity: RunIdentity) -> dict[str, Any] | None:
        """The session's durable work plan with its ``revision``, or None."""
        plan = await in_thread(self._run.services.store.get_work_plan, identity.session_id)
        return plan_for_agent(plan)

    async def save_work_plan(self, identity: RunIdentity, update: PlanUpdate) -> dict[str, Any]:
        """Save the session's work plan with the agent's feedback answers (refused on a stale
        revision, see :meth:`~octipusd.store.Store.save_work_plan`) and publish it."""
        run = self._run
        saved = await in_thread(
            run.services.store.save_work_plan,
            identity.session_id,
            update.plan,
            revision=update.revision,
            responses=update.responses,
        )
        await run.notice("work plan updated", plan=saved.plan, revision=saved.revision)
        for answer in update.responses:
            await run.services.hub.emit(
                run.run.id,
                FEEDBACK_EVENT,
                {
                    "action": "answered",
                    "feedback_id": answer.id,
                    "status": answer.status.value,
                    "response": answer.response,
                    "plan_revision": saved.revision,
                },
            )
        return plan_for_agent(saved) or {}

    async def run_context(self, identity: RunIdentity) -> dict[str, Any]:
        """Plan (with its revision), complete feedback history, queued guidance and pending children
        of the run."""
        plan, feedback = await in_thread(self._run.services.store.read_plan, identity.session_id)
        run = self._run
        live = self._live()
        return {
            "plan": plan_for_agent(plan),
            "feedback": [feedback_for_agent(item) for item in feedback],
            "guidance": run.steering.queued() if live else [],
            "pendingChildren": run.delegation.pending() if live else [],
        }

    async def spawn_child(self, identity: RunIdentity, request: ChildRequest) -> dict[str, Any]:
        """Run one child agent (seed 003 "Plans, feedback and delegation"); see
        :meth:`octipusd.runtime.delegation.Delegation.spawn`."""
        return await self._run.delegation.spawn(request)

    async def collect_children(
        self, identity: RunIdentity, child_run_ids: Sequence[str] | None, timeout_seconds: float
    ) -> dict[str, Any]:
        """Wait for the run's detached children; see :meth:`octipusd.runtime.delegation.Delegation.collect`."""
        return await self._run.delegation.collect(child_run_ids, timeout_seconds)

    async def steer_child(self, identity: RunIdentity, child_run_id: str, text: str) -> dict[str, Any]:
        """Guidance for one of the run's running children; see
        :meth:`octipusd.runtime.delegation.Delegation.steer`."""
        return await self._run.delegation.steer(child_run_id, text)

    def pipeline_access(self, identity: RunIdentity) -> PipelineAccess:
        """The pipelines' service with this run as the caller (its user, session and workspace).

        Raises:
            PipelinesUnavailableError: the daemon was built without the pipelines' service.
        """
        return pipeline_access(self._run.services.pipelines, identity)

    def monitor_access(self, identity: RunIdentity) -> MonitorAccess:
        """The monitors' service with this run as the caller (its user, session and workspace).

        Raises:
            MonitorsUnavailableError: the daemon was built without the monitors' service.
        """
        return monitor_access(self._run.services.monitors, identity)

    async def record(self, identity: RunIdentity, kind: str, data: dict[str, Any]) -> None:
        """Store a bridge event on the run; after a stop began it is dropped (and counted).

        The call does not wait for the commit (:func:`~octipusd.runtime.services.report`).
        """
        run = self._run
        if run.attempt.stopping is not None:
            run.attempt.discarded += 1
            return
        event = {"event": kind, "author": identity.call_author, **data}
        await report(run.services.hub, run.registry, identity.run_id, "bridge_call", event)
