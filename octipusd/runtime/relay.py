"""The permission relay of one run: the vendor's permission requests become Octipus approvals.

A vendor asks before a native tool runs (``cli-native:<Tool>``); the relay decides through the
permission gate (rules, grants, flow guard, approvals), then, for a native tool that may change
something (:func:`~octipusd.policy.native.native_mutates`), through the recovery review gate like
an Octipus mutation (seed 000), and writes the adapter's answer to the vendor's stdin. A
``control_cancel_request`` for the same request id cancels the wait (its approval is marked
cancelled) and nothing is answered. An approval of a managed run that expires fails the run
(seed 003 "Permissions and limits").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from octipusd.adapter import PermissionDecision, PermissionRequestEvent
from octipusd.policy.native import NATIVE_CONTRACT, native_mutates
from octipusd.policy.rules import CLI_NATIVE_PREFIX
from octipusd.runtime.host import action_scope
from octipusd.toolkit import CallContext, CallStop, GateResult, RecoveryContract, StopCause

if TYPE_CHECKING:
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = ["BRIDGE_NAME", "BRIDGE_PREFIX", "PermissionRelay"]

#: MCP server name of the bridge as vendors see it.
BRIDGE_NAME = "octipus"
#: Tool ids of the bridge, as Claude names them.
BRIDGE_PREFIX = f"mcp__{BRIDGE_NAME}__"


class PermissionRelay:
    """Answers one run's vendor permission requests through Octipus policy.

    Args:
        supervisor: The run.
    """

    def __init__(self, supervisor: RunSupervisor) -> None:
        self._run = supervisor
        self._waits: dict[str, anyio.CancelScope] = {}
        self._context: CallContext | None = None

    def context(self) -> CallContext:
        """The gate's view of the run (made once, when the run's identity is known)."""
        if self._context is None:
            run = self._run
            identity = run.identity
            self._context = CallContext(
                run_id=run.run.id,
                session_id=run.session_id,
                workspace=str(identity.workspace) if identity is not None else "",
                attended=run.attended,
                on_waiting=run.set_waiting,
                review_required=run.review_required,
                space=run.space,
                plan=run.run.plan_mode,
                stage=identity.stage if identity is not None else None,
                host_services=run.run.host_services,
            )
        return self._context

    def cancel(self, request_id: str) -> None:
        """The vendor abandoned a request: stop waiting for its answer (sources.md §1.6)."""
        scope = self._waits.pop(request_id, None)
        if scope is not None:
            scope.cancel()

    async def relay(self, event: PermissionRequestEvent) -> None:
        """Decide a vendor permission request and answer it (cancellable by :meth:`cancel`).

        A request the vendor withdraws, or leaves behind by finishing, while one of its approvals
        is pending fails the run (seed 003 "Approval waits in managed CLI runs", :meth:`abandoned`).
        """
        ctx = dataclasses.replace(self.context(), approvals=[])
        tool_id = f"{CLI_NATIVE_PREFIX}{event.tool_name}"
        with anyio.CancelScope() as scope:
            self._waits[event.request_id] = scope
            try:
                await self._answer(event, ctx, tool_id)
            except anyio.get_cancelled_exc_class():
                if ctx.approvals:
                    with anyio.CancelScope(shield=True):
                        await self.abandoned(tool_id, ctx.approvals, withdrawn=scope.cancel_called)
                raise
            finally:
                self._waits.pop(event.request_id, None)

    async def abandoned(
        self, tool_id: str, approval_ids: list[str], *, withdrawn: bool = False, stop: CallStop | None = None
    ) -> None:
        """The caller of ``tool_id`` stopped waiting while its approvals were pending: the run fails now.

        Seed 003: a tool caller disconnecting during an approval fails the run immediately, and a
        completion while an approval is still pending is recorded as a failure, not a success. The
        run's pending approvals are cancelled; nothing is granted. A run already ending is left to
        its own end.

        Args:
            tool_id: The call that was waiting.
            approval_ids: Its approvals still pending.
            withdrawn: The vendor withdrew the request (a ``control_cancel_request``).
            stop: Why the bridge cancelled the call (its caller left, a deadline, the run's end);
                None when the bridge gave no cause.
        """
        run = self._run
        if run.ending is not None:
            return
        process = run.attempt.process
        if withdrawn:
            why = f"the vendor withdrew its request for {tool_id}"
        elif process is not None and process.returncode is not None:
            why = f"the vendor finished without waiting for {tool_id}"
        elif stop is None:
            why = f"the wait of {tool_id} was cancelled"
        elif stop.cause is StopCause.CALLER_LEFT:
            why = f"the caller of {tool_id} disconnected"
        else:
            why = f"the bridge stopped {tool_id} ({stop.reason})"
        reason = (
            f"{why} while approval {', '.join(approval_ids)} was pending; a run does not complete with an "
            "unanswered approval, so it failed and nothing was granted"
        )
        run.fail(reason)
        await run.services.broker.cancel_run(run.run.id, reason)

    async def _answer(self, event: PermissionRequestEvent, ctx: CallContext, tool_id: str) -> None:
        run = self._run
        process, adapter = run.attempt.process, run.adapter
        assert process is not None and adapter is not None
        updated_input: dict[str, Any] | None = None
        if event.tool_name.startswith(BRIDGE_PREFIX):
            name = event.tool_name.removeprefix(BRIDGE_PREFIX)
            allowed = any(t.name == name for t in run.tools.values())
            reason = (
                f"allow: {event.tool_name} is an Octipus tool of this run (Octipus policy applies on the bridge)"
                if allowed
                else f"deny: {event.tool_name} is not registered for this run"
            )
        else:
            result = await self.decide(
                tool_id, event.input, action=event.tool_name, vendor_request_id=event.request_id, ctx=ctx
            )
            if result.allowed and native_mutates(
                run.services.gate.flow_id(tool_id).removeprefix(CLI_NATIVE_PREFIX)
            ):
                result = await self.recovery_review(ctx, tool_id, result.updated_input or event.input)
            allowed, reason, updated_input = result.allowed, result.reason, result.updated_input
        if allowed and run.ending is not None:  # a stop or failure while it was decided: nothing more runs
            allowed, reason = False, f"deny: the run is ending ({run.ending})"
        await run.services.hub.emit(
            run.run.id,
            "permission_decision",
            {"tool_id": tool_id, "request_id": event.request_id, "allowed": allowed, "reason": reason},
        )
        decision = PermissionDecision(
            allow=allowed, message=reason, updated_input=(updated_input or event.input) if allowed else None
        )
        await process.write_line(adapter.encode_permission_response(event, decision))

    async def recovery_review(
        self,
        ctx: CallContext,
        tool_id: str,
        arguments: Mapping[str, Any],
        contract: RecoveryContract = NATIVE_CONTRACT,
    ) -> GateResult:
        """A mutation (native, or an Octipus tool with its own ``contract``) passes the recovery review
        gate (seed 000): after an uncertain action of the user and session, a person reviews it
        first (an unattended run reports that review is required); a review that expires fails
        the run."""
        run = self._run
        assert run.identity is not None
        result = await run.services.recovery.check(
            ctx, action_scope(run.identity), tool_id, arguments, contract
        )
        if result.expired:
            await self.expired(result)
        return result

    async def decide(
        self,
        tool_id: str,
        arguments: Mapping[str, Any],
        *,
        action: str | None,
        vendor_request_id: str | None,
        ctx: CallContext | None = None,
    ) -> GateResult:
        """Decide one call through the permission gate (with ``ctx``, the call's own view of the
        run, default :meth:`context`); an expired approval fails the run."""
        result = await self._run.services.gate.decide(
            ctx or self.context(), tool_id, arguments, action=action, vendor_request_id=vendor_request_id
        )
        if result.expired:
            await self.expired(result)
        return result

    async def expired(self, result: GateResult) -> None:
        """An approval of a managed run expired: the run fails (seed 003)."""
        run = self._run
        run.fail(result.reason)
        await run.services.broker.cancel_run(run.run.id, "the run failed: an approval expired")
