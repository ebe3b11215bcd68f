"""One run, one object: the supervisor of a run from its plan to its final status.

A :class:`RunSupervisor` owns one run (a root turn or a child agent): its state, its attempts
(one vendor invocation, plus at most one cold retry when a resumed vendor session is gone, seed
003 "Cold fallback"), the handling of each vendor event type, the active-work watchdog, its
stop, and :meth:`RunSupervisor.finish`, which stores what :func:`~octipusd.runtime.outcome.final_status`
derives from what happened. The bridge gets :class:`~octipusd.runtime.host.RunHost`, bound to
this run; permission requests the vendor relays go through
:class:`~octipusd.runtime.relay.PermissionRelay`; session reuse is in :mod:`octipusd.runtime.reuse`.

A stop really stops: once a stop (a person's, a timeout, a failure, a daemon shutdown) begins,
nothing the vendor prints afterwards is accepted into the run: no events (one notice says how
many were discarded), no result, no usage, no transcript message.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from octipusd.adapter import (
    Adapter,
    LaunchRequest,
)
from octipusd.connectors import ConnectorSet
from octipusd.environment import vendor_environment
from octipusd.errors import ConflictError, OctipusError
from octipusd.runner.containment import default_containment
from octipusd.runner.transport import Transport
from octipusd.runtime.admission import Admission
from octipusd.runtime.background import RunJobs, open_jobs
from octipusd.runtime.compaction import uncovered_chars
from octipusd.runtime.delegation import Delegation
from octipusd.runtime.host import RunHost
from octipusd.runtime.invocation import Attempt, Invocation
from octipusd.runtime.outcome import Happened, final_status
from octipusd.runtime.planning import TurnBasis, TurnPlan, plan_turn, positive_int, read_basis, stage_tools
from octipusd.runtime.relay import PermissionRelay
from octipusd.runtime.reuse import ReuseState, launch_prompt, reuse_key, save_session
from octipusd.runtime.sessions import ResumePlan, plan_resume
from octipusd.runtime.steering import Guidance, follow_up, report_unapplied
from octipusd.runtime.vendor_events import VendorEvents
from octipusd.store.aio import in_thread
from octipusd.store.records import Run, RunStatus, VendorSession
from octipusd.toolkit import ChildRequest, RunIdentity, ToolSpec
from octipusd.tools import ROOT_ROLE

if TYPE_CHECKING:
    from octipusd.adapter_events import VendorEvent
    from octipusd.bridge.server import Bridge
    from octipusd.runtime.services import RunRegistry, RunServices
    from octipusd.runtime.stage_runs import StageRequest

__all__ = ["RunSupervisor"]

log = logging.getLogger("octipusd.runtime")


#: The bridge's module, imported by the first run (:func:`_bridge_opener`).
_BRIDGE = "octipusd.bridge.server"


def _bridge_opener() -> Callable[..., AbstractAsyncContextManager[Bridge]]:
    """:func:`octipusd.bridge.server.open_bridge`, imported on first use (it loads the MCP SDK,
    which the daemon's start-up does not need)."""
    from octipusd.bridge.server import open_bridge

    return open_bridge


class RunSupervisor:
    """Owns one run of this daemon, from its frozen plan to its final status.

    Args:
        services: The daemon's shared collaborators.
        registry: The registry of live runs (this run is in it while it executes).
        run: The stored run (status ``queued``).
        attended: Whether a person answers approvals in this session.
        generation: The session's clear generation when the turn was posted.
        user_seq: Seq of this turn's user message (root turns), or None.
        parent: The parent run of a child agent, or None for a root run.
        request: The ``spawn_child`` request of a child agent.
        tree: The worktree a child works in instead of the session's workspace (its own, or a
            worktree ancestor's), or None.
        stage: The request of a pipeline stage worker (:mod:`octipusd.runtime.stage_runs`): a
            run of the session's workspace beside its root turns, with the stage's model and
            tools, keyed by its attempt; None for any other run.
    """

    def __init__(
        self,
        services: RunServices,
        registry: RunRegistry,
        run: Run,
        *,
        attended: bool,
        generation: int,
        user_seq: int | None = None,
        parent: RunSupervisor | None = None,
        request: ChildRequest | None = None,
        tree: Path | None = None,
        stage: StageRequest | None = None,
    ) -> None:
        self.services = services
        self.registry = registry
        self.run = run
        self.session_id = run.session_id
        self.attended = attended
        self.generation = generation
        self.user_seq = user_seq
        self.parent = parent
        self.depth: int = parent.depth + 1 if parent is not None else 0
        self.child_request = request
        self.stage = stage
        #: Told every vendor event the run accepts (a stage worker's text and commands), or None.
        self.observer: Callable[[VendorEvent], None] | None = None
        #: The worktree this run works in (None: the session's workspace).
        self.tree = tree
        #: What Octipus adds to a child's stored brief when it launches (a failed worktree setup).
        self.brief_note: str | None = None
        self.role = request.role if request is not None else ROOT_ROLE
        self.timeout = request.timeout_seconds if request is not None else None
        self.lineage: str | None = None
        self.identity: RunIdentity | None = None
        self.adapter: Adapter | None = None
        self.space = False
        self.tools: dict[str, ToolSpec] = {}
        self.attempt = Attempt()
        #: What the run resumes and may save, once its plan is frozen.
        self.reuse: ReuseState | None = None
        self.invocation = Invocation(self)
        #: The last invocation's exit code, usage and result, not stored yet (:meth:`_account`).
        self.accounting: dict[str, Any] = {}
        #: The session's uncovered transcript (characters), measured as the turn saved it, or None.
        self.uncovered_chars: int | None = None
        self.bridge: Bridge | None = None
        #: The run's background commands while its bridge is open (they end with it), else None.
        self.jobs: RunJobs | None = None
        self.failure: str | None = None
        self.stop_status: RunStatus | None = None
        self.stop_reason: str | None = None
        self.review_required: list[str] = []
        self.steering = Guidance()
        self.waiting_approvals = 0
        self.active_s = 0.0
        self.budget_exceeded = False
        self.done = anyio.Event()
        self.relay = PermissionRelay(self)
        self.events = VendorEvents(self)
        self.delegation = Delegation(self)
        self.host = RunHost(self)

    @property
    def is_root_turn(self) -> bool:
        """Whether this run is a turn of its session (neither a child nor a pipeline stage worker):
        it holds the session's lock, carries and saves its transcript and resumes under the adapter's
        name."""
        return self.parent is None and self.stage is None

    @property
    def in_stage(self) -> bool:
        """Whether this run is a pipeline stage worker or one of its children."""
        return self.stage is not None or (self.parent is not None and self.parent.in_stage)

    @property
    def token_budget(self) -> int | None:
        """The tokens the run may use (a child's ``tokenBudget``, a stage's ``maxTokens``), or None."""
        if self.child_request is not None:
            return self.child_request.token_budget
        return self.stage.max_tokens if self.stage is not None else None

    def child(self, run: Run, request: ChildRequest, tree: Path | None = None) -> RunSupervisor:
        """A supervisor for a child agent of this run (same session, this run as its parent), working
        in ``tree`` when given (see :mod:`octipusd.runtime.child_tree`)."""
        return RunSupervisor(
            self.services,
            self.registry,
            run,
            attended=self.attended,
            generation=self.generation,
            parent=self,
            request=request,
            tree=tree,
        )

    async def abandon(self, reason: str) -> None:
        """End a registered run that never started executing (its start was cancelled or failed):
        it leaves the registry and is stored ``cancelled``, so it blocks no later turn. Shielded."""
        with anyio.CancelScope(shield=True):
            self.registry.remove(self.run.id)
            self.run = await in_thread(
                self.services.store.finish_run,
                self.run.id,
                status=RunStatus.CANCELLED,
                reason=reason,
                exit_code=None,
                result_text=None,
            )
            self.delegation.summary_ready.set()
            self.done.set()

    # ------------------------------------------------------------------ execution

    async def execute(self) -> None:
        """Execute the run to its final status (stored, published); never raises but cancellation.

        The run first waits for admission (:mod:`octipusd.runtime.admission`; status ``queued``
        with the reason shown); one stopped while queued ends without a vendor process. A root run
        then holds its session's lock for the whole turn (turns and maintenance of a session are
        serialized); a child runs inside its parent's turn, a pipeline stage worker beside the
        session's turns. Whatever happens, the run is finished (shielded), leaves the registry and
        frees its slot.
        """
        admission = self.services.admission
        try:
            if not self.is_root_turn:
                await self._execute(admission)
                return
            async with self.registry.session_lock(self.session_id):
                await self._execute(admission)
        finally:
            admission.release(self)

    async def _admitted(self, admission: Admission) -> bool:
        """Wait for admission; False when the run was stopped while queued."""
        queued_at = anyio.current_time()
        if not await admission.wait(self):
            return False
        waited = anyio.current_time() - queued_at
        if self.run.reason is not None:  # it was queued: say for how long
            await self.notice(f"admitted after {waited:.1f} s in the queue", queued_seconds=round(waited, 3))
        return self.stop_status is None

    async def _execute(self, admission: Admission) -> None:
        run_id = self.run.id
        try:
            if await self._admitted(admission):
                await self._turn()
        except anyio.get_cancelled_exc_class():
            if self.stop_status is None:  # a child whose parent's call went away
                self.stop_status, self.stop_reason = RunStatus.CANCELLED, "its parent run ended"
            raise
        except OctipusError as exc:
            self.failure = self.failure or exc.message
        except ExceptionGroup as group:  # raised through a task group: keep a clear message
            matched, _rest = group.split(OctipusError)
            first = _first_leaf(matched) if matched is not None else None
            if first is None:
                log.exception("run %s crashed", run_id)
            self.failure = self.failure or (
                first.message if isinstance(first, OctipusError) else f"internal error: {group!r}"
            )
        except Exception as exc:
            log.exception("run %s crashed", run_id)
            self.failure = self.failure or f"internal error: {exc!r}"
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self.finish()
                finally:
                    self.registry.remove(run_id)
                    self.done.set()
                    self.services.hub.notify(run_id)

    async def _turn(self) -> None:
        services = self.services
        basis = await read_basis(
            services.store,
            services.adapters,
            services.resolutions,
            self.run,
            generation=self.generation if self.is_root_turn else None,  # a root's reuse records too
            model=self.stage.model if self.stage is not None else None,
        )
        self.adapter, self.space = basis.adapter, basis.in_space
        if self.tree is not None:  # a worktree child works there, never in the shared checkout
            basis = await self._in_tree(basis, self.tree)
        async with self._connect() as connected:
            plan = await plan_turn(
                basis,
                connected,
                depth=self.depth,
                role=self.role if self.parent is not None else None,
                levels=services.swarm.levelDefaults,
                own=stage_tools(self.stage.tool_ids, services.swarm.levelDefaults)[0] if self.stage else None,
            )
            await self._run_plan(plan)

    @staticmethod
    async def _in_tree(basis: TurnBasis, tree: Path) -> TurnBasis:
        """``basis`` with the worktree as the workspace.

        Raises:
            ConflictError: the worktree is gone (the child must not fall through to the project).
        """
        if not await anyio.Path(tree).is_dir():
            raise ConflictError(f"its worktree {tree} is gone; the child does not run in another checkout")
        real = Path(await anyio.Path(tree).resolve())
        return dataclasses.replace(basis, workspace=tree, real_workspace=real)

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[ConnectorSet]:
        """The run's connector tools (``mcpServers``), connected for the run's lifetime."""
        connectors = self.services.connectors
        if connectors is None:
            yield ConnectorSet(tools=(), notices=())
            return
        async with connectors.connect_all() as connected:
            notices = self.services.config_notices
            for message in (*(notices() if notices is not None else []), *connected.notices):
                await self.notice(message)
            yield connected

    async def _run_plan(self, plan: TurnPlan) -> None:
        """Open the bridge and run the attempts of the plan; save the session by the reuse rules.

        The vendor process is stopped (shielded) before the session is saved, also when the run
        is cancelled mid-attempt (a child whose parent was stopped).
        """
        services, run, session = self.services, self.run, plan.session
        key = await reuse_key(self, plan.adapter, plan.basis.options)
        try:
            stored = await self._stored_session(plan, key)
            # a stage attempt continues its vendor conversation only when asked to (a resume)
            usable = None if self.stage is not None and not self.stage.resume else stored
            resume = plan_resume(usable, plan.fingerprint, plan.real_workspace, plan.adapter.new_session_id())
            if resume.notice:
                await self.notice(resume.notice)
            run_dir = services.data_dir / "runs" / run.id
            run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            self.identity = RunIdentity(
                run_id=run.id,
                session_id=session.id,
                user=services.user,
                worker_id=self._worker_id(),
                workspace=plan.basis.workspace,
                attended=self.attended,  # the session's, or a schedule's unattended turn
                author=run.author,  # a space member's calls are recorded as theirs
                stage=self.stage.tag if self.stage is not None else None,
            )
            self.tools = {t.tool_id: t for t in plan.tools}
            state = self.reuse = ReuseState(
                plan=plan,
                key=key,
                resume=resume,
                stored=usable,
                launch=await launch_prompt(self, resume, usable, plan.basis.checkpoint),
                # the record this run may replace: a child saves only if no retry took the key since
                expected=stored.vendor_session_id if stored is not None else None,
            )
            try:
                # the bridge (and the MCP SDK under it) is imported by the first run, off the event loop
                open_bridge = (
                    _bridge_opener()
                    if _BRIDGE in sys.modules
                    else await anyio.to_thread.run_sync(_bridge_opener)
                )
                containment = services.containment or default_containment()
                async with (
                    open_jobs(run.id, containment) as self.jobs,
                    open_bridge(self.identity, self.host, plan.tools) as bridge,
                ):
                    await self._attempts(plan, bridge, state)
            finally:
                with anyio.CancelScope(shield=True):
                    process = self.attempt.process
                    if process is not None and process.returncode is None:
                        self.begin_stop(self.stop_reason or "the run was cancelled")
                        await process.stop(self.stop_reason or "the run was cancelled")
                    await save_session(self, plan, state)
        finally:
            if key is not None and not self.is_root_turn:
                services.claims.release(key, run.id)

    def _worker_id(self) -> str:
        """The worker whose bridge calls are serialized: the session's root agent, or this run."""
        if self.parent is not None:
            return f"child:{self.run.id}"
        return f"stage:{self.run.id}" if self.stage is not None else f"root:{self.session_id}"

    async def _stored_session(self, plan: TurnPlan, key: str | None) -> VendorSession | None:
        """The vendor record the run may resume: a root's was read with its basis, a child's is read
        under its claimed key."""
        if key is None:
            return None
        if self.is_root_turn and key == plan.session.adapter:
            return plan.basis.vendor_session
        return await in_thread(self.services.store.get_vendor_session, plan.session.id, key)

    async def _attempts(self, plan: TurnPlan, bridge: Bridge, state: ReuseState) -> None:
        """Invoke the vendor; when a resumed session is gone, drop it and retry once, cold."""
        self.bridge = bridge
        adapter, session = plan.adapter, plan.session
        # Octipus's native denials go to the vendor's own deny list too: the vendor approves some
        # calls itself and never relays them (seed 003: "a denial under either identity wins").
        # Read at launch: a DENY added during the run holds at once for relayed calls, and for the
        # calls the vendor approves itself from the next turn on.
        policy = await self.services.gate.current_policy()
        denied = tuple(policy.native_denials(session_id=session.id, workspace=str(plan.basis.workspace)))
        for attempt in (1, 2):
            request = self._request(plan, bridge, state, denied)
            if adapter.usage_is_cumulative(request):
                usage = await self.invocation.thread_usage(request)
                request = dataclasses.replace(request, thread_usage=usage)
            await self.invocation.run(request, state.resume)
            signal = self.invocation.session_gone() if state.resume.resume else None
            if signal is None:
                await follow_up(self, request)  # guidance left when the vendor finished (seed 003)
                return
            stale = state.resume.vendor_session_id
            assert state.key is not None and stale is not None
            drop = self.services.store.drop_vendor_session
            await in_thread(functools.partial(drop, session.id, state.key, vendor_session_id=stale))
            state.expected = None
            if attempt == 2 or self.stop_status is not None or self.failure is not None:
                self.attempt.confirmed = None  # a failed attempt's id is never kept
                return
            # seed 003 "Cold fallback": drop the stale id, retry this turn exactly once, cold, with
            # the full prompt; the failed attempt's id is never kept
            await self.notice(
                f"the vendor no longer has session {stale} ({signal}); the stored id was dropped and this "
                "turn is retried once as a new vendor conversation with the full prompt",
                cold_fallback=True,
            )
            await self.invocation.keep_accounting()
            self.attempt, self.failure = Attempt(), None
            state.resume, state.stored = ResumePlan(adapter.new_session_id(), False), None
            state.launch = await launch_prompt(self, state.resume, None, plan.basis.checkpoint)

    def _request(
        self, plan: TurnPlan, bridge: Bridge, state: ReuseState, denied: tuple[str, ...]
    ) -> LaunchRequest:
        basis, request = plan.basis, self.child_request
        turn_limit = request.max_turns if request is not None and request.max_turns is not None else None
        return LaunchRequest(
            binary=basis.binary,
            cwd=basis.workspace,
            run_dir=self.services.data_dir / "runs" / self.run.id,
            prompt=state.launch.text,
            vendor_session_id=state.resume.vendor_session_id,
            resume=state.resume.resume,
            model=basis.session.model,
            permission_mode=basis.mode,
            bridge=bridge.endpoint,
            env=vendor_environment(self.services.base_env, basis.adapter, basis.options),
            additive_flags=basis.adapter.check_additive_flags(basis.flags),
            options=basis.options,
            turn_limit=turn_limit or positive_int(basis.options.get("maxTurns")),
            token_limit=positive_int(basis.options.get("maxTokens")),
            space=basis.in_space,
            denied_native=denied,
            system_prompt=plan.instructions,
        )

    # ------------------------------------------------------------------ stopping

    @property
    def ending(self) -> str | None:
        """Why the run is ending (a stop began, or a failure was recorded), or None while it works.

        Once it ends, no further tool call runs, no permission is granted and no guidance is
        written to the vendor.
        """
        if self.attempt.stopping is not None:
            return self.attempt.stopping
        if self.stop_status is not None:
            return self.stop_reason or str(self.stop_status)
        return self.failure

    def begin_stop(self, reason: str) -> Transport | None:
        """Mark that a stop of the current invocation began: nothing printed from now on is accepted.

        Returns:
            The vendor process to stop, or None when none runs.
        """
        attempt = self.attempt
        if attempt.stopping is None:
            attempt.stopping = reason
            attempt.frozen_usage = attempt.usage()
        process = attempt.process
        if process is not None:
            process.begin_stop(reason)
        return process if process is not None and process.returncode is None else None

    def stop_vendor(self, tg: anyio.abc.TaskGroup, reason: str) -> None:
        """Begin a stop of the vendor and let ``tg`` carry it out."""
        process = self.begin_stop(reason)
        if process is not None:
            tg.start_soon(process.stop, reason)

    async def stop(self, status: RunStatus, reason: str) -> None:
        """Stop the run and its children at once (status ``status`` unless it already ends otherwise).

        The run's own vendor is interrupted first where it takes an interrupt (Claude's
        ``interrupt`` control request ends the current turn at once, sources.md §1.6), so it does
        not act on an answer that arrives while it is being stopped; its process and every child
        are then stopped concurrently (cancellation reaches the children, seed 003).
        """
        if self.stop_status is None:
            self.stop_status, self.stop_reason = status, reason
        self.services.admission.withdraw(self)  # a queued run ends without ever starting
        process = self.begin_stop(reason)
        await self.services.broker.cancel_run(self.run.id, reason)
        interrupt = self.adapter.encode_interrupt(f"octipus-stop-{self.run.id}") if self.adapter else None
        if process is not None and interrupt is not None:
            await process.write_line(interrupt)
        async with anyio.create_task_group() as tg:
            if process is not None:
                tg.start_soon(process.stop, reason)
            for child in self.delegation.live_children():
                tg.start_soon(child.stop, RunStatus.CANCELLED, f"its parent run {self.run.id} was stopped")

    def fail(self, reason: str) -> None:
        """Fail the run now (an approval expired): record the reason, stop the vendor in the daemon's
        task group."""
        if self.failure is None:
            self.failure = reason
        process = self.begin_stop(reason)
        if process is not None:
            self.registry.start_soon(process.stop, reason)

    async def watch_active_time(self) -> None:
        """Fail the run once its active-work time exceeds the limit.

        Time spent waiting for an approval or a child does not count (seed 003 "Permissions and
        limits"). A vendor that keeps retrying an API error therefore cannot hold a run past it.
        """
        tick = self.services.limits.watchdog_tick_s
        while True:
            await anyio.sleep(tick)
            if self.waiting_approvals == 0 and self.delegation.waiting == 0:
                self.active_s += tick  # kept across the attempts of the run (a cold retry included)
            limit = self.timeout if self.timeout is not None else self.services.limits.run_timeout_s
            if self.active_s >= limit and self.failure is None and self.stop_status is None:
                self.failure = f"the run exceeded its active-work limit of {limit:g} s and was stopped"
                process = self.begin_stop(self.failure)
                if process is not None:
                    await process.stop(self.failure)
                return

    async def set_waiting(self, delta: int) -> None:
        """Count approval waits; the run shows ``awaiting_approval`` while one is open."""
        self.waiting_approvals += delta
        if delta > 0:
            self.services.admission.changed()  # a waiting run holds no slot
        if self.stop_status is not None or self.failure is not None:
            return
        status = RunStatus.AWAITING_APPROVAL if self.waiting_approvals > 0 else RunStatus.RUNNING
        if self.run.status != status:
            self.run = await in_thread(self.services.store.update_run, self.run.id, status=status)
            await self.services.hub.emit(self.run.id, "run_status", {"status": str(status)})

    # ------------------------------------------------------------------ admission (runtime.admission.Candidate)

    @property
    def admission_id(self) -> str:
        """The run's id."""
        return self.run.id

    @property
    def waiting(self) -> bool:
        """Whether the run waits for an approval or for its children (it holds no slot then)."""
        return self.waiting_approvals > 0 or self.delegation.waiting > 0

    @property
    def vendor_pid(self) -> int | None:
        """The vendor process, while one runs."""
        process = self.attempt.process
        return process.pid if process is not None and process.returncode is None else None

    async def show_queued(self, reason: str) -> None:
        """Store and publish why the run waits in ``queued`` (nothing when it already ended)."""
        try:
            self.run = await in_thread(
                self.services.store.update_run, self.run.id, status=RunStatus.QUEUED, reason=reason
            )
        except ConflictError:  # it ended meanwhile: its final reason stays
            return
        await self.services.hub.emit(
            self.run.id, "run_status", {"status": str(RunStatus.QUEUED), "reason": reason}
        )

    async def notice(self, message: str, **data: Any) -> None:
        """Store and publish a notice on this run."""
        await self.services.hub.emit(self.run.id, "notice", {"message": message, **data})

    # ------------------------------------------------------------------ the end

    async def finish(self) -> None:
        """End the run: cancel pending children, stop and reap the vendor, store the final status.

        The status comes from :func:`~octipusd.runtime.outcome.final_status`. A succeeded root turn
        compacts its session first when the transcript grew past the threshold (under the session's
        lock, so no next turn starts before). Leftover run files (MCP configs) are removed.
        """
        services, run_id = self.services, self.run.id
        await self.delegation.end_children()
        process = self.attempt.process
        if process is not None and process.returncode is None:
            reason = self.stop_reason or self.failure or "run ended"
            self.begin_stop(reason)
            await process.stop(reason)
        if process is not None:
            await process.reap()
        services.admission.release(self)  # its vendor is gone: the next queued run may start
        result = self.attempt.result
        note = await report_unapplied(self)  # guidance never applied is named, never silently lost
        verdict = final_status(
            Happened(
                stop_status=self.stop_status,
                stop_reason=self.stop_reason,
                failure=self.failure,
                result=result,
                exit_code=process.returncode if process else None,
                stderr_tail=process.stderr_tail if process else "",
                review_required=tuple(self.review_required),
            )
        )
        if verdict.status == RunStatus.SUCCEEDED and self.is_root_turn and services.compaction_threshold > 0:
            await self._compact_if_large()
        # one commit: the accounting, the final status and the cancel of pending approvals
        waiting = services.broker.waits_of(run_id)
        accounting, self.accounting = self.accounting, {}
        self.run = await in_thread(
            services.store.finish_run,
            run_id,
            status=verdict.status,
            reason=verdict.reason,
            exit_code=process.returncode if process else None,
            result_text="\n\n".join(t for t in (self.attempt.answer(), note) if t) or None,
            accounting=accounting,
            approvals_reason=f"the run ended ({verdict.status})",
        )
        for event in waiting:
            event.set()
        self.registry.remove(run_id)  # the session may take its next turn from here on
        await services.hub.emit(
            run_id, "run_status", {"status": str(self.run.status), "reason": self.run.reason, "final": True}
        )
        with contextlib.suppress(OSError):
            for leftover in (services.data_dir / "runs" / run_id).glob("*.json"):
                leftover.unlink()

    async def _compact_if_large(self) -> None:
        """Compact after a root turn once the uncovered transcript passes the threshold."""
        services = self.services
        with anyio.CancelScope(shield=True):
            try:
                size = self.uncovered_chars
                if size is None:  # not measured when the session was saved
                    size = await in_thread(uncovered_chars, services.store, self.session_id)
                if size < services.compaction_threshold:
                    return
                report = await services.compact(self.session_id, services.compaction_keep_turns)
                await services.hub.emit(self.run.id, "compaction", dataclasses.asdict(report))
            except OctipusError as exc:  # maintenance never fails a finished turn
                log.warning("compaction of session %s failed: %s", self.session_id, exc.message)


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    exc: BaseException
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            leaf = _first_leaf(exc)
            if leaf is not None:
                return leaf
        else:
            return exc
    return None
