"""Calls a person starts by hand (seed 001).

A person can start a mutating tool (``shell__run`` or an MCP connector tool) by hand from a
client (seed 001's "Test-tab" call; ``POST /v1/actions/calls``). :class:`ActionService`:

* keys each request by the client's ``request_id`` (unique per user): a client that lost the
  acknowledgement and retries gets the stored invocation back; nothing runs twice, and nothing is
  decided twice: the invocation is recorded before its decision, under the decision claim of the
  request that recorded it, so only that request decides it (and spends a grant use);
* decides it with the permission rules (:class:`~octipusd.runtime.call_decisions.CallDecisions`):
  DENY refuses it (journal ``not_executed``); ALLOW dispatches it at once (an ALLOW resting on a
  scoped grant spends one use of it, as an agent's call does, so a grant with ``--uses 1`` allows
  one call, whoever makes it; the use and the decision commit together); ASK stores an approval
  (kind ``tool``, no run) and the invocation then *owes an execution*: when someone approves it
  (the approval's decision moves the invocation to ``approved`` in its own transaction), the
  committed decision signals the recovery worker with the user's scope. A call the daemon
  recorded but did not decide before it stopped is decided again at start-up
  (:meth:`ActionService.recover_undecided`);
* dispatches with an exact claim (token + timestamp) taken before dispatch and checked again,
  atomically, when ``started`` is written; the call runs outside any database transaction;
  its outcome and the invocation's status commit together.

Preparation (the claim re-check, the rules read fresh, the recovery review of the user's and
session's uncertain actions and the wait of an approved repeat for a reviewed request that may
still land (:class:`~octipusd.runtime.call_review.CallReview`), connecting to the connector) can
fail. A validation or policy rejection ends the invocation (``not_executed``); a dependency
failure (a timeout, a server that cannot be reached, a database error) releases only its own
claim, leaves the invocation ``approved`` and retries it for that user after
:data:`~octipusd.runtime.recovery.RETRY_SECONDS` (30 s). A call that may have run is never
dispatched again: after a restart, an invocation claimed by the stopped daemon whose action had
started becomes ``uncertain`` (see ``Store.quarantine_invocations``).

The call runs in the session's workspace as the person who started it, with a
:class:`~octipusd.runtime.manual_host.ManualCallHost` (it has no run: no plan, no children).
The :class:`~octipusd.runtime.recovery.RecoveryWorker` dispatches the invocations owed later.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from octipusd.errors import (
    ConflictError,
    InvalidRequestError,
    KeyInUseError,
    NotFoundError,
    PreparationError,
    describe_error,
    traceback_of,
)
from octipusd.journal.executor import ActionJournal, args_hash
from octipusd.journal.operator import RecoveryOperator
from octipusd.journal.retry import duplicate_refusal
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.gate import PermissionGate
from octipusd.policy.rules import Level
from octipusd.runtime.call_decisions import CallDecisions, manual_scope, record_refusal
from octipusd.runtime.call_review import CallReview
from octipusd.runtime.manual_host import ManualCallHost
from octipusd.runtime.recovery import RecoveryWorker
from octipusd.store.aio import in_thread
from octipusd.store.invocation_store import ToolInvocation
from octipusd.store.records import Approval
from octipusd.store.repository import Store
from octipusd.toolkit import (
    NO_SANDBOX,
    ActionOutcome,
    Executed,
    RunIdentity,
    ShellSandbox,
    ShellTerms,
    ToolOutcome,
    ToolSpec,
    run_unjournaled,
    strip_identity_arguments,
)
from octipusd.toolkit.secrets import SecretResolver, run_spec
from octipusd.tools import DEFAULT_TOOLS
from octipusd.tools.shell_background import SHELL_RUN_BACKGROUND

__all__ = ["REQUEST_ID_MAX_CHARS", "WAIT_RECHECK_SECONDS", "ActionService", "ToolResolver", "manual_run_id"]

log = logging.getLogger("octipusd.runtime.actions")

#: Longest client ``request_id`` of a hand-started call (characters).
REQUEST_ID_MAX_CHARS = 200
#: While a caller waits for an invocation to end, seconds between two reads of it (a backstop
#: to the change signal).
WAIT_RECHECK_SECONDS = 1.0

#: ``(tool id) -> async context yielding its ToolSpec``; raises NotFoundError for an unknown tool.
ToolResolver = Callable[[str], AbstractAsyncContextManager[ToolSpec]]


def manual_run_id(invocation_id: str) -> str:
    """The run marker of a hand-started call's processes (``OCTIPUS_RUN_ID``): a restarted daemon
    stops the leftovers of an invocation that may have been running."""
    return f"manual-{invocation_id}"


def _text(value: str | dict[str, Any]) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class ActionService:
    """Hand-started calls and their dispatch (see the module docstring).

    Args:
        store: The store.
        journal: The execution boundary.
        operator: Probes of uncertain actions (run during preparation, seed 004).
        gate: The permission gate (rules read fresh on every decision).
        broker: Approvals.
        resolve: Finds the tool spec of a tool id (built-in or connector).
        owner: This daemon instance's id (claims carry it).
        vault: Resolves a call's vault placeholders as the user who started it (None: refused).
        sandbox: The daemon's shell sandbox (``security.shellSandbox``); a hand-started call has no
            run, so it never shares the host's services.
    """

    def __init__(
        self,
        *,
        store: Store,
        journal: ActionJournal,
        operator: RecoveryOperator,
        gate: PermissionGate,
        broker: ApprovalBroker,
        resolve: ToolResolver,
        owner: str,
        vault: SecretResolver | None = None,
        sandbox: ShellSandbox = NO_SANDBOX,
    ) -> None:
        self.store = store
        self.journal = journal
        self.operator = operator
        self.gate = gate
        self.broker = broker
        self.resolve = resolve
        self.owner = owner
        self.vault = vault
        self.sandbox = sandbox
        self.worker = RecoveryWorker(store, operator, self.dispatch, redecide=self.recover_undecided)
        self.decisions = CallDecisions(
            store=store,
            gate=gate,
            broker=broker,
            journal=journal,
            owner=owner,
            worker=self.worker,
            dispatch=self.dispatch,
        )
        self.reviews = CallReview(store, journal, operator, broker, self.worker)
        self._changed: dict[str, anyio.Event] = {}
        broker.add_listener(self._on_decided)

    # ------------------------------------------------------------------ entry points

    async def submit(
        self,
        *,
        user: str,
        session_id: str,
        tool: str,
        arguments: dict[str, Any],
        request_id: str | None,
    ) -> tuple[ToolInvocation, bool]:
        """Start a call by hand: decide it and run it now, or store it as owed.

        Args:
            user: Who starts it.
            session_id: The session whose workspace and journal scope it uses.
            tool: ``shell__run`` or ``server.tool``.
            arguments: The tool's arguments (identity keys are dropped).
            request_id: The client's idempotency key (1-200 characters), or None.

        Returns:
            ``(invocation, created)``: the invocation as it stands after this request (completed,
            awaiting approval, denied...), and False when ``request_id`` was seen before (the
            stored invocation is returned and nothing runs).

        Raises:
            NotFoundError: no such session or tool.
            InvalidRequestError: a bad request id, or a tool that cannot be started by hand.
            ConflictError: the request id was used for a different call.
        """
        if request_id is not None and not 1 <= len(request_id) <= REQUEST_ID_MAX_CHARS:
            raise InvalidRequestError(f"request_id: must be 1 to {REQUEST_ID_MAX_CHARS} characters")
        args = strip_identity_arguments(arguments)
        if request_id is not None:
            existing = await in_thread(self.store.find_invocation, user, request_id)
            if existing is not None:
                if existing.session_id != session_id:
                    raise InvalidRequestError(
                        f"request id {request_id!r} was already used in session {existing.session_id} "
                        f"(invocation {existing.id}); use a new request id for a call in another session"
                    )
                if existing.tool != tool or existing.args_hash != args_hash(args):
                    raise ConflictError(
                        f"request id {request_id!r} was already used for another call (invocation "
                        f"{existing.id}); use a new request id for a different call"
                    )
                return existing, False
        session = await in_thread(self.store.get_session, session_id)
        if tool not in self._manual_tools() and "." not in tool:
            raise InvalidRequestError(
                f"{tool!r} cannot be started by hand; use shell__run or an MCP connector tool (server.tool)"
                + (
                    " (a background command belongs to an agent's run)"
                    if tool == SHELL_RUN_BACKGROUND.name
                    else ""
                )
            )
        # recorded undecided first, under this daemon's decision claim: a retry racing this request
        # finds it and decides (spends) nothing, and a daemon that stops before deciding it leaves it
        # to the next one's start-up recovery (recover_undecided)
        token = uuid.uuid4().hex
        invocation, created = await in_thread(
            lambda: self.store.create_invocation(
                user=user,
                session_id=session.id,
                tool=tool,
                arguments=args,
                args_hash=args_hash(args),
                request_id=request_id,
                status="awaiting_approval",
                claim=(token, self.owner),
            )
        )
        if not created:
            return invocation, False
        await self.decisions.decide(invocation, session.workspace, token)
        return await in_thread(self.store.get_invocation, invocation.id), True

    async def recover_undecided(self) -> int:
        """Decide again the calls a stopped daemon recorded but never decided (start-up; see
        :meth:`CallDecisions.recover_undecided <octipusd.runtime.call_decisions.CallDecisions.recover_undecided>`).
        """
        return await self.decisions.recover_undecided()

    async def review(
        self, *, user: str, session_id: str, approve: bool, decided_by: str, reason: str | None
    ) -> Approval:
        """A person reviews the session's next batch of unresolved actions without a pending call
        (:meth:`CallReview.review <octipusd.runtime.call_review.CallReview.review>`)."""
        return await self.reviews.review(
            user=user, session_id=session_id, approve=approve, decided_by=decided_by, reason=reason
        )

    async def wait(self, invocation_id: str, timeout_seconds: float) -> ToolInvocation:
        """Wait until the invocation is terminal or ``timeout_seconds`` pass; return it."""
        with anyio.move_on_after(timeout_seconds):
            while True:
                current = await in_thread(self.store.get_invocation, invocation_id)
                if current.terminal:
                    return current
                event = self._changed.setdefault(invocation_id, anyio.Event())
                with anyio.move_on_after(WAIT_RECHECK_SECONDS):
                    await event.wait()
        return await in_thread(self.store.get_invocation, invocation_id)

    # ------------------------------------------------------------------ dispatch

    async def dispatch(self, invocation_id: str) -> bool:
        """Claim and run one approved invocation, exactly once.

        Returns:
            True if this caller dispatched it (or ended it in preparation); False if another
            executor holds it or it is no longer approved.

        Raises:
            PreparationError: a dependency failed before dispatch; the claim was released and
                the invocation stays approved (the worker retries it).
        """
        token = uuid.uuid4().hex
        if not await in_thread(
            lambda: self.store.claim_invocation(invocation_id, token=token, owner=self.owner)
        ):
            return False
        try:
            invocation = await in_thread(self.store.get_invocation, invocation_id)
            async with AsyncExitStack() as stack:
                try:
                    ready = await self._prepare(invocation, token)
                    if ready is None:  # ended, or handed to a recovery review
                        return True
                    if await self.reviews.waits_for_landing(invocation, token):
                        return True  # handed back until no reviewed request can land any more
                    spec = await stack.enter_async_context(ready[0])  # e.g. connecting to the server
                    # reading tools stay available while a recovery review is owed (seed 000)
                    if spec.mutating and not await self.reviews.clear(invocation, token):
                        return True  # handed to a recovery review
                    duplicate = await duplicate_refusal(
                        self.operator,
                        manual_scope(invocation),
                        spec.tool_id,
                        invocation.arguments or {},
                        spec.recovery_contract,
                        live=self.journal.live,
                    )
                except (NotFoundError, InvalidRequestError) as exc:
                    await self._end_not_executed(invocation, token, exc.message)
                    return True
                except Exception as exc:  # nothing ran: the claim is released with the reason
                    log.warning(
                        "invocation %s: preparation failed", invocation_id, exc_info=traceback_of(exc)
                    )
                    await self._release(invocation_id, token, exc)
                    self.worker.retry_later(invocation.user)
                    raise PreparationError(
                        f"invocation {invocation_id} was not run: {describe_error(exc)}; it stays approved and the "
                        f"daemon retries it in {self.worker.retry_seconds:g} s "
                        f"(`octipusctl actions cancel {invocation_id}` withdraws it)"
                    ) from exc
                if duplicate is not None:
                    await self._end_not_executed(invocation, token, duplicate, refused=True)
                    return True
                await self._execute(invocation, token, spec, ready[1])
            return True
        finally:
            self._touch(invocation_id)

    async def _release(self, invocation_id: str, token: str, exc: BaseException) -> None:
        """Give back only this claim after a preparation failure (seed 001)."""
        detail = describe_error(exc)
        released = await in_thread(
            lambda: self.store.release_invocation_claim(
                invocation_id, token, reason=f"preparation failed, will retry: {detail}"
            )
        )
        if not released:
            log.warning("invocation %s: claim changed during a failed preparation", invocation_id)

    async def _prepare(
        self, invocation: ToolInvocation, token: str
    ) -> tuple[AbstractAsyncContextManager[ToolSpec], str] | None:
        """Checks before dispatch; None when the invocation was ended or requeued for review.

        The rules' re-check is reported to the approval the invocation waited for, if any
        (:meth:`ApprovalBroker.report_recheck`), so ``octipusctl approvals approve`` says when the
        call it approved is denied after all."""
        if not await in_thread(self.store.invocation_claimed, invocation.id, token):
            return None
        session = await in_thread(self.store.get_session, invocation.session_id)
        args = invocation.arguments or {}
        decision = await self.gate.evaluate(
            invocation.tool, args, action=None, session_id=session.id, workspace=session.workspace
        )
        denied = decision.level is Level.DENY
        reason = f"permission revoked before the call started: {decision.explanation}" if denied else ""
        if invocation.approval_id is not None:  # the person who approved it is told, as for a run's call
            self.broker.report_recheck(
                invocation.approval_id, allowed=not denied, reason=reason or decision.explanation
            )
        if denied:
            await self._end_not_executed(invocation, token, reason, refused=True)
            return None
        return self.resolve(invocation.tool), decision.explanation

    async def _execute(self, invocation: ToolInvocation, token: str, spec: ToolSpec, reason: str) -> None:
        session = await in_thread(self.store.get_session, invocation.session_id)
        identity = RunIdentity(
            run_id=manual_run_id(invocation.id),
            session_id=session.id,
            user=invocation.user,
            worker_id=f"manual:{invocation.user}",
            workspace=Path(session.workspace),
            attended=True,
        )
        args = dict(invocation.arguments or {})
        host = ManualCallHost(spec.tool_id, reason, self.vault, shell=ShellTerms(self.sandbox))

        async def body() -> str | dict[str, Any] | ToolOutcome:
            with anyio.fail_after(spec.timeout_seconds):
                return await run_spec(spec, identity, host, args)

        def commit(outcome: ActionOutcome, detail: str | None, executed: Executed) -> bool:
            return self.store.finish_invocation(
                invocation.id,
                token,
                status=str(outcome),
                result=_text(executed.value),
                is_error=executed.is_error,
                error=detail if outcome is not ActionOutcome.COMPLETED else None,
                outcome=str(outcome),
                detail=detail,
                answered=executed.answered,
            )

        if not spec.mutating:  # a trusted read-only connector tool: checking external state
            executed = await run_unjournaled(spec.tool_id, body, spec.timeout_seconds)
            await in_thread(
                lambda: self.store.finish_invocation(
                    invocation.id,
                    token,
                    status="completed",
                    result=_text(executed.value),
                    is_error=executed.is_error,
                    error=None,
                )
            )
            return
        try:
            await self.journal.execute(
                manual_scope(invocation, token),
                spec.tool_id,
                args,
                spec.recovery_contract,
                body,
                timeout_seconds=spec.timeout_seconds,
                commit=commit,
                dispatch=spec.dispatch(),
            )
        except KeyInUseError as exc:  # its key is busy: nothing ran, and it ends here
            await self._end_not_executed(invocation, token, exc.message, refused=True)
        except ConflictError as exc:  # the claim was lost before started: nothing ran
            log.warning("invocation %s not run: %s", invocation.id, exc.message)

    async def _end_not_executed(
        self, invocation: ToolInvocation, token: str, reason: str, *, refused: bool = False
    ) -> None:
        if refused:
            await record_refusal(self.journal, invocation, reason)
        await in_thread(
            lambda: self.store.finish_invocation(
                invocation.id, token, status="not_executed", result=reason, is_error=True, error=reason
            )
        )

    @staticmethod
    def _manual_tools() -> frozenset[str]:
        # a background command belongs to the run that started it (it ends with that run): a call
        # started by hand has none, so it is refused here, before anyone is asked to approve it
        return frozenset(t.tool_id for t in DEFAULT_TOOLS if t.mutating and t is not SHELL_RUN_BACKGROUND)

    def _touch(self, invocation_id: str) -> None:
        event = self._changed.pop(invocation_id, None)
        if event is not None:
            event.set()

    def _on_decided(self, approval: Approval) -> None:
        """Broker listener: a committed decision may make an invocation owed (seed 001 signal)."""
        if approval.run_id is None:
            self.worker.signal_session(approval.session_id)
