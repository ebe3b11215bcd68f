"""Runs and turns: one vendor invocation per posted turn, from launch to final status.

Data flow of one run (DESIGN.md "The data flow of one run"): resolve the session's adapter
and binary, decide resume or cold start, open the run's MCP bridge, build the launch, spawn
the vendor, parse its stream into events (stored first, then published), relay permission
requests into Octipus approvals, and at exit account usage, save the vendor session id and
write the final status.

One Octipus session has at most one live root run, so one vendor conversation is never resumed
in two processes at once: a second turn while one is live is refused with a clear message. Turn
execution and maintenance (compaction) of a session are serialized by a per-session lock.

Session reuse (seed 003 "Session reuse" to "Resuming child sessions per role and task"): the
session's messages are kept (``session_messages``); a resumed launch carries the messages after
the vendor record's acknowledged cursor, a cold one the latest checkpoint plus every message
after it. A resume the vendor answers with "session gone" is retried exactly once, cold, with
the full prompt; the replacement id is saved, the failed attempt's never. ``/clear`` starts a
new clear generation: nothing an older turn saves afterwards is kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import getpass
import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from octipusd.adapter import (
    Adapter,
    ControlCancelEvent,
    LaunchRequest,
    PermissionDecision,
    PermissionMode,
    PermissionRequestEvent,
    ResultEvent,
    SessionEvent,
    StatusEvent,
    StdinWriteEvent,
    Steering,
    StreamParser,
    ToolUseEvent,
    UnknownEvent,
    Usage,
    VendorEvent,
)
from octipusd.bridge.host import AuthorizationResult, ChildRequest
from octipusd.bridge.identity import RunIdentity
from octipusd.bridge.server import open_bridge
from octipusd.environment import vendor_environment
from octipusd.errors import (
    ConflictError,
    ExecutableNotFoundError,
    InvalidRequestError,
    NotFoundError,
    OctipusError,
)
from octipusd.journal.executor import ActionJournal, ActionScope, Body, Executed
from octipusd.journal.operator import RecoveryOperator
from octipusd.journal.outcomes import Origin
from octipusd.journal.review import RecoveryGate
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.flowguard import FlowGuardMode
from octipusd.policy.gate import CallContext, GateResult, PermissionGate
from octipusd.policy.spaces import check_space_model, check_space_turn
from octipusd.runner.executables import Resolution, resolve_executable
from octipusd.runner.process import VendorProcess
from octipusd.runtime.children import (
    LAZY_DISCOVERY_TOOLS,
    MAX_CHILD_SESSIONS,
    MAX_DEPTH,
    KeyClaims,
    child_scope,
)
from octipusd.runtime.compaction import CompactionReport, compact, describe_compaction, uncovered_chars
from octipusd.runtime.events import NOT_STORED, EventHub
from octipusd.runtime.prompts import dump_prompt
from octipusd.runtime.sessions import ResumePlan, fingerprint, plan_resume, provider_identity
from octipusd.runtime.transcript import LaunchPrompt, render_launch_prompt
from octipusd.store.aio import in_thread
from octipusd.store.records import ModelRow, Run, RunStatus, Session, VendorSession
from octipusd.store.repository import Store
from octipusd.tools import CHILD_ROLES, DEFAULT_TOOLS, ROOT_ROLE, ToolSpec, child_tools
from octipusd.tools.base import UNDECLARED_CONTRACT
from octipusd.tools.connectors import ConnectorRegistry, ConnectorSet

log = logging.getLogger("octipusd.runtime")

#: Seconds a vendor may take to exit after its result and stdin EOF before it is stopped.
EXIT_AFTER_RESULT = 30.0
#: MCP server name of the bridge as vendors see it.
BRIDGE_NAME = "octipus"
#: Bridge statuses in a vendor's session announcement that fail the run (observed.md §1.5: the
#: binary itself still exits 0 when its MCP server failed).
FAILED_BRIDGE_STATUSES = frozenset({"failed", "needs-auth", "missing"})
#: Tool ids of the bridge, as Claude names them.
BRIDGE_PREFIX = f"mcp__{BRIDGE_NAME}__"
#: The turn text that clears a session (seed 003 "What invalidates a stored session").
CLEAR_COMMAND = "/clear"
#: The turn text that compacts a session now (seed 003 "Compaction"), instead of the vendor's own.
COMPACT_COMMAND = "/compact"


@dataclass
class LiveRun:
    """In-memory state of a run this daemon is executing."""

    run: Run
    session_id: str
    attended: bool
    identity: RunIdentity | None = None
    process: VendorProcess | None = None
    adapter: Adapter | None = None
    result: ResultEvent | None = None
    vendor_session_confirmed: str | None = None
    failure: str | None = None
    stop_status: RunStatus | None = None
    stop_reason: str | None = None
    review_required: list[str] = field(default_factory=list)
    relays: dict[str, anyio.CancelScope] = field(default_factory=dict)
    parser: StreamParser | None = None
    expected_results: int = 1
    results_seen: int = 0
    guidance: list[str] = field(default_factory=list)
    waiting_approvals: int = 0
    space: bool = False
    context: CallContext | None = None
    tools: dict[str, ToolSpec] = field(default_factory=dict)
    done: anyio.Event = field(default_factory=anyio.Event)
    #: the session's clear generation when the turn was posted
    generation: int = 0
    #: seq of this turn's user message (root turns), or None
    user_seq: int | None = None
    #: a vendor signal during the attempt that the resumed session is gone (Codex's other thread)
    session_missing: str | None = None
    # child agents (seed 003 "Plans, feedback and delegation", "Resuming child sessions ...")
    parent: LiveRun | None = None
    depth: int = 0
    role: str = ROOT_ROLE
    lineage: str | None = None
    store_key: str | None = None
    child_request: ChildRequest | None = None
    children: list[LiveRun] = field(default_factory=list)
    budget_exceeded: bool = False
    timeout: float | None = None
    #: delegation waits in progress (excluded from the active-work time, seed 003)
    waiting_children: int = 0
    #: detached children not yet collected, by run id
    detached: dict[str, LiveRun] = field(default_factory=dict)
    #: this child's summary for its parent, once it ended
    summary: dict[str, Any] | None = None
    summary_ready: anyio.Event = field(default_factory=anyio.Event)


class RunManager:
    """Executes turns and owns every live run of this daemon.

    Args:
        store: The store.
        hub: Event persistence and fan-out.
        broker: Approvals.
        policy: Permission rules.
        adapters: Registry name -> adapter.
        resolutions: Registry name -> executable resolution (from start-up).
        data_dir: Octipus data directory (run folders live under ``runs/``).
        owner: This daemon instance's id (stored on runs for orphan detection).
        base_env: The daemon's environment with PATH set to the search PATH; each launch takes
            only its allowlist from it (:func:`octipusd.environment.vendor_environment`).
        prompt_dumps: ``agent.promptDumps``.
        run_timeout: Active-work limit of one run (seconds; approval waits excluded).
        flow_guard: ``agent.flowGuard`` (``ask`` or ``off``).
        journal: The action journal's execution boundary (default: one for ``store`` and
            ``owner``).
        operator: Probes and compensations of uncertain actions (default: Octipus's own tools'
            contracts only).
        connectors: The configured MCP servers (``mcpServers``) whose tools every run's bridge
            exposes; connected afresh for each run (None: none).
        config_notices: Problems of the settings file read during the daemon's life (shown as
            run notices).
        compaction_threshold: Characters of uncovered transcript after which a finished root
            turn compacts the session (seed 003 "Compaction"); 0 turns automatic compaction off.
        compaction_keep_turns: Recent user turns an automatic compaction keeps verbatim.
    """

    def __init__(
        self,
        *,
        store: Store,
        hub: EventHub,
        broker: ApprovalBroker,
        policy: Policy,
        adapters: Mapping[str, Adapter],
        resolutions: Mapping[str, Resolution],
        data_dir: Path,
        owner: str,
        base_env: Mapping[str, str],
        prompt_dumps: bool = True,
        run_timeout: float = 3600.0,
        flow_guard: FlowGuardMode = FlowGuardMode.ASK,
        journal: ActionJournal | None = None,
        operator: RecoveryOperator | None = None,
        connectors: ConnectorRegistry | None = None,
        config_notices: Callable[[], list[str]] | None = None,
        compaction_threshold: int = 200_000,
        compaction_keep_turns: int = 2,
    ) -> None:
        self.store = store
        self.hub = hub
        self.broker = broker
        self.policy = policy
        self.gate = PermissionGate(
            store,
            broker,
            self._emit_to_followers,
            policy,
            flow_guard=flow_guard,
            plan_tools=frozenset(
                t.name for t in DEFAULT_TOOLS if t.read_only or t.name == "update_work_plan"
            ),
        )
        self.connectors = connectors
        self.config_notices = config_notices
        self.journal = journal or ActionJournal(store, owner)
        builtin = {t.tool_id: t.contract for t in DEFAULT_TOOLS}
        self.operator = operator or RecoveryOperator(store, builtin.get, hub.emit_optional)
        self.recovery = RecoveryGate(store, self.journal, self.gate, self.operator, hub.emit)
        self.adapters = adapters
        self.resolutions = resolutions
        self.data_dir = data_dir
        self.owner = owner
        self.base_env = dict(base_env)
        self.prompt_dumps = prompt_dumps
        self.run_timeout = run_timeout
        self.user = getpass.getuser()
        self._live: dict[str, LiveRun] = {}
        self._post_lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None
        self._accepting = True
        self._session_locks: dict[str, anyio.Lock] = {}
        self._claims = KeyClaims()
        self.compaction_threshold = compaction_threshold
        self.compaction_keep_turns = compaction_keep_turns

    # ------------------------------------------------------------------ lifecycle

    async def _emit_to_followers(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        """Store an event of the permission gate; a child's approval events are also published on
        its root run (with ``child_run_id``), where the person following the turn can answer them."""
        await self.hub.emit(run_id, kind, data)
        live = self._live.get(run_id)
        if live is None or live.parent is None or not kind.startswith("approval_"):
            return
        root = live.parent
        while root.parent is not None:
            root = root.parent
        await self.hub.emit(root.run.id, kind, {**data, "child_run_id": run_id})

    def bind(self, task_group: anyio.abc.TaskGroup) -> None:
        """Attach the daemon's task group, in which runs execute."""
        self._tg = task_group

    def live_runs(self) -> list[str]:
        """Ids of the runs executing now."""
        return list(self._live)

    async def shutdown(self, reason: str, grace: float = 15.0) -> None:
        """Stop accepting turns, interrupt every live run and wait (bounded) for them to end.

        Args:
            reason: Stored as each run's reason (status ``interrupted``).
            grace: Seconds to wait for runs to finish their cleanup.
        """
        self._accepting = False
        live = list(self._live.values())
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for item in live:
                    tg.start_soon(self._stop_live, item, RunStatus.INTERRUPTED, reason)
            with anyio.move_on_after(grace):
                for item in live:
                    await item.done.wait()

    # ------------------------------------------------------------------ API entry points

    async def post_turn(
        self, session_id: str, prompt: str, *, plan: bool = False, author: str | None = None
    ) -> Run:
        """Create a run for a new turn of a session and start it in the background.

        Args:
            session_id: The session.
            prompt: The turn's text.
            plan: Run this turn in plan mode: it overrides the row's permission mode for this
                invocation only (seed 003 "Permissions and limits").
            author: Who posts it (a space member's name); None means the daemon's user.

        Raises:
            NotFoundError: no such session, or (in a space) the author is not a member.
            InvalidRequestError: the prompt is empty.
            ForbiddenError: in a space, the author's role may not run the CLI agent.
            ConflictError: the session already has a live run, the daemon is stopping, the
                space is archived, or the session's model may not serve the space.
        """
        if not prompt.strip():
            raise InvalidRequestError("prompt is empty; give the text of the turn")
        if not self._accepting or self._tg is None:
            raise ConflictError("octipusd is shutting down; start it again and repeat the turn")
        command = prompt.strip().split(maxsplit=1)
        if command[0] in (CLEAR_COMMAND, COMPACT_COMMAND):
            return await self._command_turn(
                session_id, author, command[0], command[1] if len(command) > 1 else None
            )
        async with self._post_lock:
            session = await in_thread(self.store.get_session, session_id)
            if session.space_id is not None:
                await self._check_space(session, author or self.user)
            for item in self._live.values():
                if item.session_id == session_id:
                    raise ConflictError(
                        f"session {session_id} already has a live run {item.run.id}; wait for it to finish "
                        f"or stop it (octipusctl runs stop {item.run.id}) before the next turn"
                    )
            run = await in_thread(
                self.store.create_run,
                session_id=session_id,
                prompt=prompt,
                owner=self.owner,
                plan_mode=plan,
                author=author,
            )
            message = await in_thread(
                self.store.append_message,
                session_id,
                role="user",
                text=prompt,
                run_id=run.id,
                adapter=None,
                generation=session.clear_generation,
            )
            live = LiveRun(
                run=run,
                session_id=session_id,
                attended=session.attended,
                generation=session.clear_generation,
                user_seq=message.seq if message is not None else None,
            )
            self._live[run.id] = live
        await self.hub.emit(
            run.id, "run_status", {"status": str(RunStatus.QUEUED), "turn_index": run.turn_index}
        )
        self._tg.start_soon(self._execute, live)
        return run

    async def _command_turn(self, session_id: str, author: str | None, command: str, rest: str | None) -> Run:
        """A ``/clear`` or ``/compact`` turn: Octipus's own command, recorded as a finished run
        without spawning a vendor (a vendor's own ``/compact`` would rewrite a conversation
        Octipus keeps the transcript of)."""
        current = await in_thread(self.store.get_session, session_id)
        if current.space_id is not None:  # the same roles as any other turn in a space
            await self._check_space(current, author or self.user)
        if command == CLEAR_COMMAND:
            session = await self.clear_session(session_id)
            text = (
                f"conversation cleared (generation {session.clear_generation}); the next turn starts a new "
                "vendor conversation without the earlier messages"
            )
        else:
            live = next((item.run.id for item in self._live.values() if item.session_id == session_id), None)
            if live is not None:
                raise ConflictError(
                    f"session {session_id} has a live run {live}; /compact runs between turns: wait for it to "
                    "finish (or use octipusctl sessions compact, which waits)"
                )
            report = await self.compact_session(session_id, keep_turns=self.compaction_keep_turns)
            text = describe_compaction(report)
        if rest:  # the vendor's own /compact would rewrite the conversation Octipus keeps
            text += f" (the words after {command} were not used: Octipus's own {command} takes none)"
        run = await in_thread(
            self.store.create_run,
            session_id=session_id,
            prompt=f"{command} {rest}" if rest else command,
            owner=self.owner,
            author=author,
        )
        await self.hub.emit(run.id, "notice", {"message": text})
        final = await in_thread(
            self.store.finish_run,
            run.id,
            status=RunStatus.SUCCEEDED,
            reason=None,
            exit_code=None,
            result_text=text,
        )
        await self.hub.emit(
            run.id, "run_status", {"status": str(final.status), "reason": None, "final": True}
        )
        self.hub.notify(run.id)
        return final

    async def clear_session(self, session_id: str) -> Session:
        """``/clear``: start a new clear generation of the session (seed 003).

        Every stored vendor record of the session (the root's and every child task key) is
        dropped and the earlier messages leave the transcript, in one transaction. A turn still
        running keeps going, but nothing it saves afterwards is kept (its generation is old).

        Returns:
            The session with its new ``clear_generation``.

        Raises:
            NotFoundError: no such session.
        """
        session = await in_thread(self.store.clear_session, session_id)
        for live in self._live.values():
            if live.session_id == session_id:
                await self.hub.emit(
                    live.run.id,
                    "notice",
                    {
                        "message": "the session was cleared (/clear); this run's vendor session will not be reused"
                    },
                )
        return session

    async def compact_session(self, session_id: str, *, keep_turns: int = 2) -> CompactionReport:
        """Compact the session's transcript into a checkpoint (seed 003 "Compaction").

        Waits for a running turn of the session to end first: turn execution and maintenance are
        serialized within this process.

        Args:
            session_id: The session.
            keep_turns: Recent user turns kept verbatim (>= 0).

        Returns:
            The :class:`~octipusd.runtime.compaction.CompactionReport`.

        Raises:
            NotFoundError: no such session.
            InvalidRequestError: ``keep_turns`` is negative.
        """
        if keep_turns < 0:
            raise InvalidRequestError(f"keep_turns must be 0 or more, got {keep_turns}")
        await in_thread(self.store.get_session, session_id)
        async with self._session_lock(session_id):
            return await self._compact(session_id, keep_turns)

    async def _compact(self, session_id: str, keep_turns: int) -> CompactionReport:
        root_keys = [name for name, adapter in self.adapters.items() if adapter.supports_resume]
        report = await in_thread(
            lambda: compact(self.store, session_id, keep_turns=keep_turns, root_keys=root_keys)
        )
        log.info("compaction of session %s: %s", session_id, report)
        return report

    def _session_lock(self, session_id: str) -> anyio.Lock:
        lock = self._session_locks.get(session_id)
        if lock is None:
            lock = self._session_locks[session_id] = anyio.Lock()
        return lock

    async def steer(self, session_id: str, text: str) -> dict[str, Any]:
        """Deliver user guidance to the session's live run.

        Vendors that take live guidance get it on stdin at once (Claude: a stream-json user
        message; Codex app-server: ``turn/steer``): event ``steering_submitted``. Otherwise it is
        queued: the run context of Octipus tool responses carries it, and event
        ``guidance_pending`` says so (seed 003 "Plans, feedback and delegation").

        Returns:
            ``{"run_id": ..., "delivery": "stdin" | "queued"}``.

        Raises:
            InvalidRequestError: empty text.
            ConflictError: the session has no live run (post a turn instead).
        """
        if not text.strip():
            raise InvalidRequestError("guidance text is empty")
        live = next(
            (item for item in self._live.values() if item.session_id == session_id and item.parent is None),
            None,
        )
        if live is None:
            raise ConflictError(
                f"session {session_id} has no live run to steer; send the guidance as the next turn "
                f"(octipusctl run --session {session_id} ...)"
            )
        steer = getattr(live.parser, "steer", None)
        steering = steer(text) if callable(steer) and live.process is not None else None
        if isinstance(steering, Steering) and live.results_seen < live.expected_results:
            live.expected_results += steering.extra_results
            delivered = True
            for line in steering.lines:
                assert live.process is not None
                delivered = delivered and await live.process.write_line(line)
            if delivered:
                await self.hub.emit(live.run.id, "steering_submitted", {"text": text, "delivery": "stdin"})
                return {"run_id": live.run.id, "delivery": "stdin"}
            live.expected_results -= steering.extra_results
        live.guidance.append(text)
        await self.hub.emit(live.run.id, "guidance_pending", {"text": text, "delivery": "queued"})
        return {"run_id": live.run.id, "delivery": "queued"}

    async def stop(self, run_id: str, reason: str = "stopped by the user") -> Run:
        """Stop a live run (status ``cancelled``); a finished run is returned unchanged.

        Raises:
            NotFoundError: no such run.
        """
        live = self._live.get(run_id)
        if live is None:
            return await in_thread(self.store.get_run, run_id)
        await self._stop_live(live, RunStatus.CANCELLED, reason)
        with anyio.move_on_after(20):
            await live.done.wait()
        return await in_thread(self.store.get_run, run_id)

    async def _stop_live(self, live: LiveRun, status: RunStatus, reason: str) -> None:
        """Stop a run and its children at once.

        The run's own vendor is interrupted first where it takes an interrupt (Claude's
        ``interrupt`` control request ends the current turn at once, sources.md §1.6), so it does
        not act on an answer that arrives while it is being stopped; its process and every child
        are then stopped concurrently (cancellation reaches the children, seed 003).
        """
        if live.stop_status is None:
            live.stop_status = status
            live.stop_reason = reason
        await self.broker.cancel_run(live.run.id, reason)
        process = live.process
        interrupt = getattr(live.adapter, "encode_interrupt", None)
        if process is not None and process.returncode is None and callable(interrupt):
            await process.write_line(interrupt(f"octipus-stop-{live.run.id}"))
        async with anyio.create_task_group() as tg:
            if process is not None:
                tg.start_soon(process.stop, reason)
            for child in list(live.children):
                tg.start_soon(
                    self._stop_live, child, RunStatus.CANCELLED, f"its parent run {live.run.id} was stopped"
                )

    # ------------------------------------------------------------------ ToolHost (bridge)

    async def authorize(
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any]
    ) -> AuthorizationResult:
        """Permission check of an Octipus tool call arriving on the bridge (ToolHost protocol).

        The permission gate decides first; a mutating tool then passes the recovery review gate
        (seed 000) and its contract's unattended rule (seed 004). A refused mutating call is
        recorded in the journal as ``not_executed``.
        """
        live = self._live.get(identity.run_id)
        if live is None:
            return AuthorizationResult(False, "the run is no longer live")
        result = await self._gate(live, tool_id, arguments, action=None, vendor_request_id=None)
        spec = live.tools.get(tool_id)
        if spec is None or not spec.mutating:
            return AuthorizationResult(result.allowed, result.reason)
        scope = self._scope(identity)
        contract = spec.recovery_contract
        if result.allowed:
            result = await self.recovery.check(self._call_context(live), scope, tool_id, arguments, contract)
            if result.expired:
                await self._fail_on_expiry(live, result)
        if not result.allowed:
            await self.journal.refused(scope, tool_id, arguments, contract, result.reason)
        return AuthorizationResult(result.allowed, result.reason)

    async def run_action(
        self,
        identity: RunIdentity,
        tool_id: str,
        arguments: dict[str, Any],
        body: Body,
        timeout_seconds: float | None,
    ) -> Executed:
        """Run a mutating call's body inside the journal's execution boundary (ToolHost protocol)."""
        live = self._live.get(identity.run_id)
        spec = live.tools.get(tool_id) if live is not None else None
        contract = spec.recovery_contract if spec is not None else UNDECLARED_CONTRACT
        return await self.journal.execute(
            self._scope(identity),
            tool_id,
            arguments,
            contract,
            body,
            timeout_seconds=timeout_seconds,
            dispatch=spec.dispatch() if spec is not None else None,
        )

    @staticmethod
    def _scope(identity: RunIdentity) -> ActionScope:
        return ActionScope(
            user=identity.user,
            session_id=identity.session_id,
            run_id=identity.run_id,
            agent=identity.worker_id,
            origin=Origin.AGENT,
        )

    async def get_work_plan(self, identity: RunIdentity) -> dict[str, Any] | None:
        """The session's durable work plan, or None (ToolHost protocol)."""
        plan = await in_thread(self.store.get_work_plan, identity.session_id)
        return None if plan is None else dict(plan.plan)

    async def save_work_plan(self, identity: RunIdentity, plan: dict[str, Any]) -> dict[str, Any]:
        """Save the session's work plan and publish it (ToolHost protocol)."""
        saved = await in_thread(self.store.save_work_plan, identity.session_id, plan)
        await self.hub.emit(identity.run_id, "notice", {"message": "work plan updated", "plan": saved.plan})
        return dict(saved.plan)

    async def run_context(self, identity: RunIdentity) -> dict[str, Any]:
        """Plan, feedback history and queued guidance of the run (ToolHost protocol)."""
        plan = await self.get_work_plan(identity)
        live = self._live.get(identity.run_id)
        guidance = list(live.guidance) if live is not None else []
        pending = (
            [{"childRunId": c.run.id, "role": c.role, "status": str(c.run.status)} for c in live.children]
            if live is not None
            else []
        )
        return {"plan": plan, "feedback": [], "guidance": guidance, "pendingChildren": pending}

    async def spawn_child(self, identity: RunIdentity, request: ChildRequest) -> dict[str, Any]:
        """Run one child agent to its end (ToolHost protocol; seed 003 "Plans, feedback and
        delegation", "Resuming child sessions per role and task").

        The child is a run of its own (``parent_run_id``, ``role``, ``resume_key``) on the session's
        adapter and model, in the parent's permission and plan mode, with its own bridge and the
        child tool set. It starts cold unless its scoped resume key holds a matching record.
        Stopping the parent stops the child.

        Returns:
            ``{"childRunId", "role", "status", "resumed", "vendorSessionId", "resumeKey",
            "result", "reason"}``.

        Raises:
            ConflictError: the parent run is not live or is stopping.
            InvalidRequestError: the depth limit is reached.
        """
        parent = self._live.get(identity.run_id)
        if parent is None or parent.stop_status is not None:
            raise ConflictError(f"run {identity.run_id} is not live; a child needs a running parent")
        if parent.depth >= MAX_DEPTH:
            raise InvalidRequestError(
                f"a child at depth {parent.depth} may not spawn children (the depth limit is {MAX_DEPTH})"
            )
        session = await in_thread(self.store.get_session, parent.session_id)
        run = await in_thread(
            lambda: self.store.create_run(
                session_id=session.id,
                prompt=request.brief,
                owner=self.owner,
                plan_mode=parent.run.plan_mode,
                parent_run_id=parent.run.id,
                role=request.role,
            )
        )
        child = LiveRun(
            run=run,
            session_id=session.id,
            attended=parent.attended,
            generation=session.clear_generation,
            parent=parent,
            depth=parent.depth + 1,
            role=request.role,
            child_request=request,
            timeout=request.timeout_seconds,
        )
        self._live[run.id] = child
        parent.children.append(child)
        await self.hub.emit(
            parent.run.id,
            "child_spawned",
            {
                "child_run_id": run.id,
                "role": request.role,
                "resume_key": request.resume_key,
                "detach": request.detach,
            },
        )
        if request.detach:
            assert self._tg is not None
            parent.detached[run.id] = child
            self._tg.start_soon(self._run_child, parent, child)
            return {"childRunId": run.id, "role": request.role, "status": "running", "detached": True}
        parent.waiting_children += 1
        try:
            summary = await self._run_child(parent, child)
        finally:
            parent.waiting_children -= 1
        _refuse_if_stopping(parent)
        return summary

    async def _run_child(self, parent: LiveRun, child: LiveRun) -> dict[str, Any]:
        """Execute a child to its end and publish its summary to the parent."""
        try:
            await self._execute(child)
        finally:
            with contextlib.suppress(ValueError):
                parent.children.remove(child)
            final = child.run
            child.summary = {
                "childRunId": final.id,
                "role": child.role,
                "status": str(final.status),
                "resumed": final.resumed,
                "vendorSessionId": final.vendor_session_id,
                "resumeKey": child.lineage,
                "result": final.result_text,
                "reason": final.reason,
            }
            child.summary_ready.set()
            with anyio.CancelScope(shield=True):
                await self.hub.emit(
                    parent.run.id, "child_finished", {"child_run_id": final.id, **child.summary}
                )
        return child.summary

    async def collect_children(
        self, identity: RunIdentity, child_run_ids: Sequence[str] | None, timeout_seconds: float
    ) -> dict[str, Any]:
        """Wait for the run's detached children and hand out their summaries (ToolHost protocol).

        The wait counts as a delegation wait (excluded from the active-work time). Each summary is
        handed out once; children still running at the deadline are listed as pending.

        Raises:
            ConflictError: the run is not live.
            InvalidRequestError: an id that is not an uncollected detached child of this run.
        """
        parent = self._live.get(identity.run_id)
        if parent is None:
            raise ConflictError(f"run {identity.run_id} is not live")
        targets = list(child_run_ids) if child_run_ids is not None else list(parent.detached)
        unknown = [cid for cid in targets if cid not in parent.detached]
        if unknown:
            raise InvalidRequestError(
                f"childRunIds: {', '.join(unknown)} is not an uncollected detached child of this run "
                f"(uncollected: {', '.join(parent.detached) or 'none'})"
            )
        parent.waiting_children += 1
        try:
            with anyio.move_on_after(timeout_seconds):
                for cid in targets:
                    await parent.detached[cid].summary_ready.wait()
        finally:
            parent.waiting_children -= 1
        _refuse_if_stopping(parent)
        children: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        for cid in targets:
            child = parent.detached[cid]
            if child.summary is not None:
                children.append(child.summary)
                del parent.detached[cid]
            else:
                pending.append({"childRunId": cid, "role": child.role, "status": str(child.run.status)})
        return {"children": children, "pending": pending}

    async def record(self, identity: RunIdentity, kind: str, data: dict[str, Any]) -> None:
        """Store a bridge event on the run (ToolHost protocol)."""
        await self.hub.emit(identity.run_id, "bridge_call", {"event": kind, **data})

    async def _check_space(self, session: Session, author: str) -> None:
        """Refuse a turn the space's roles or its model row do not allow (read fresh each time)."""
        assert session.space_id is not None
        space = await in_thread(self.store.get_space, session.space_id)
        check_space_turn(space, author)
        check_space_model(space, await self._model_row(session), self.adapters.get(session.adapter))

    # ------------------------------------------------------------------ execution

    async def _execute(self, live: LiveRun) -> None:
        if live.parent is not None:  # a child runs inside its parent's turn
            await self._execute_run(live)
            return
        async with self._session_lock(live.session_id):
            await self._execute_run(live)

    async def _compact_if_large(self, live: LiveRun) -> None:
        """Compact after a root turn once the uncovered transcript passes the threshold."""
        with anyio.CancelScope(shield=True):
            try:
                size = await in_thread(uncovered_chars, self.store, live.session_id)
                if size < self.compaction_threshold:
                    return
                report = await self._compact(live.session_id, self.compaction_keep_turns)
                await self.hub.emit(live.run.id, "compaction", dataclasses.asdict(report))
            except OctipusError as exc:  # maintenance never fails a finished turn
                log.warning("compaction of session %s failed: %s", live.session_id, exc.message)

    async def _execute_run(self, live: LiveRun) -> None:
        run_id = live.run.id
        try:
            await self._run_turn(live)
        except anyio.get_cancelled_exc_class():
            if live.stop_status is None:  # a child whose parent's call went away
                live.stop_status = RunStatus.CANCELLED
                live.stop_reason = "its parent run ended"
            raise
        except OctipusError as exc:
            live.failure = live.failure or exc.message
        except ExceptionGroup as group:  # raised through a task group: keep a clear message
            matched, _rest = group.split(OctipusError)
            first = _first_leaf(matched) if matched is not None else None
            if first is None:
                log.exception("run %s crashed", run_id)
            live.failure = live.failure or (
                first.message if isinstance(first, OctipusError) else f"internal error: {group!r}"
            )
        except Exception as exc:  # a bug must still end the run cleanly
            log.exception("run %s crashed", run_id)
            live.failure = live.failure or f"internal error: {exc!r}"
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    await self._finish(live)
                finally:
                    self._live.pop(run_id, None)
                    live.done.set()
                    self.hub.notify(run_id)

    async def _run_turn(self, live: LiveRun) -> None:
        run = live.run
        session = await in_thread(self.store.get_session, live.session_id)
        adapter = self.adapters.get(session.adapter)
        if adapter is None:
            raise ConflictError(f"session uses adapter {session.adapter!r}, which is not installed")
        live.adapter = adapter
        row = await self._model_row(session)
        options: dict[str, Any] = {**(row.cli_agent if row else {}), **session.options}
        flags: tuple[str, ...] = tuple(row.additive_flags) if row else ()
        resolution = self.resolutions.get(adapter.name)
        if resolution is None:
            raise ExecutableNotFoundError(f"no executable resolution for adapter {adapter.name}")
        if row is not None and row.binary:  # the row's own binary overrides cliModels.<cli>.binaryPath
            resolution = await anyio.to_thread.run_sync(
                resolve_executable, adapter.name, row.binary, resolution.searched_path
            )
        binary = resolution.require()
        workspace = Path(session.workspace)
        if not await anyio.Path(workspace).is_dir():
            raise ConflictError(f"workspace {workspace} does not exist; create it or start a new session")
        # plan mode overrides the row's vendor permission mode for this invocation (seed 003)
        mode = PermissionMode.PLAN if run.plan_mode else PermissionMode(session.permission_mode)
        in_space = session.space_id is not None
        live.space = in_space
        if session.space_id is not None:  # the row may have lost sharedUse, the adapter its space mode
            space = await in_thread(self.store.get_space, session.space_id)
            check_space_model(space, row, adapter)
        async with self._connect(run.id) as connected:
            await self._run_with_tools(
                live, session, adapter, row, options, flags, binary, workspace, mode, connected
            )

    @contextlib.asynccontextmanager
    async def _connect(self, run_id: str) -> AsyncIterator[ConnectorSet]:
        """The run's connector tools (``mcpServers``), connected for the run's lifetime."""
        if self.connectors is None:
            yield ConnectorSet(tools=(), notices=())
            return
        async with self.connectors.connect_all() as connected:
            extra = self.config_notices() if self.config_notices is not None else []
            for message in (*extra, *connected.notices):
                await self.hub.emit(run_id, "notice", {"message": message})
            yield connected

    async def _run_with_tools(
        self,
        live: LiveRun,
        session: Session,
        adapter: Adapter,
        row: ModelRow | None,
        options: dict[str, Any],
        flags: tuple[str, ...],
        binary: str,
        workspace: Path,
        mode: PermissionMode,
        connected: ConnectorSet,
    ) -> None:
        run = live.run
        in_space = live.space
        is_child = live.parent is not None
        tools = (*(child_tools(live.depth < MAX_DEPTH) if is_child else DEFAULT_TOOLS), *connected.tools)
        tool_names = [t.name for t in tools if not (is_child and t.name in LAZY_DISCOVERY_TOOLS)]
        instructions = CHILD_ROLES.get(live.role) if is_child else None
        # Claude's resume is scoped to the real working directory (observed.md §1.7): a workspace
        # path whose target moved is a different conversation scope, detected before spawning
        real = await anyio.to_thread.run_sync(workspace.resolve)
        fp = fingerprint(
            adapter=adapter.name,
            model=session.model,
            # a space changes what the vendor may do natively: a conversation made outside one
            # is never resumed inside it, nor the reverse
            permission_mode=f"{mode}:space" if in_space else str(mode),
            workspace=real,
            instructions=instructions,
            tool_names=tool_names,
            provider=provider_identity(options),
            role=live.role if is_child else None,
        )
        key = await self._reuse_key(live, adapter, options)
        try:
            stored = await in_thread(self.store.get_vendor_session, session.id, key) if key else None
            plan = plan_resume(stored, fp, real, adapter.new_session_id())
            if plan.notice:
                await self.hub.emit(run.id, "notice", {"message": plan.notice})
            run_dir = self.data_dir / "runs" / run.id
            run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            identity = RunIdentity(
                run_id=run.id,
                session_id=session.id,
                user=self.user,
                worker_id=f"child:{run.id}" if is_child else f"root:{session.id}",
                workspace=workspace,
                attended=session.attended,
            )
            live.identity = identity
            live.tools = {t.tool_id: t for t in tools}
            # Octipus's native denials go to the vendor's own deny list too: the vendor approves
            # some calls itself and never relays them (seed 003: "a denial under either identity
            # wins"). Read at launch: a DENY added during the run holds at once for relayed calls,
            # and for the calls the vendor approves itself from the next turn on.
            policy = await self.gate.current_policy()
            denied_native = tuple(policy.native_denials(session_id=session.id, workspace=str(workspace)))
            launch = await self._launch_prompt(live, plan, stored)
            # the record this run may replace: a child saves only if no retry took the key since
            expected = stored.vendor_session_id if stored is not None else None
            try:
                async with open_bridge(identity, self, tools) as bridge:
                    for attempt in (1, 2):
                        request = LaunchRequest(
                            binary=binary,
                            cwd=workspace,
                            run_dir=run_dir,
                            prompt=launch.text,
                            vendor_session_id=plan.vendor_session_id,
                            resume=plan.resume,
                            model=session.model,
                            permission_mode=mode,
                            bridge=bridge.endpoint,
                            env=vendor_environment(self.base_env, adapter, options),
                            additive_flags=adapter.check_additive_flags(flags),
                            options=options,
                            turn_limit=self._turn_limit(live, options),
                            token_limit=_positive_int(options.get("maxTokens")),
                            space=in_space,
                            denied_native=denied_native,
                            system_prompt=instructions,
                        )
                        await self._attempt(live, adapter, request, plan)
                        signal = self._resumed_session_missing(adapter, live) if plan.resume else None
                        if signal is None:
                            break
                        assert key is not None and plan.vendor_session_id is not None
                        stale = plan.vendor_session_id
                        await in_thread(
                            functools.partial(
                                self.store.drop_vendor_session, session.id, key, vendor_session_id=stale
                            )
                        )
                        expected = None
                        if attempt == 2 or live.stop_status is not None:
                            live.vendor_session_confirmed = None  # a failed attempt's id is never kept
                            break
                        # seed 003 "Cold fallback": drop the stale id, retry this turn exactly once, cold,
                        # with the full prompt; the failed attempt's id is never kept
                        await self.hub.emit(
                            run.id,
                            "notice",
                            {
                                "message": (
                                    f"the vendor no longer has session {plan.vendor_session_id} ({signal}); the stored "
                                    "id was dropped and this turn is retried once as a new vendor conversation with "
                                    "the full prompt"
                                ),
                                "cold_fallback": True,
                            },
                        )
                        _reset_attempt(live)
                        plan = ResumePlan(adapter.new_session_id(), False)
                        stored = None
                        launch = await self._launch_prompt(live, plan, None)
            finally:
                # also when the run is cancelled mid-attempt (a child whose parent was stopped): the
                # vendor process is stopped first, then the confirmed session is saved by the rules
                with anyio.CancelScope(shield=True):
                    if live.process is not None and live.process.returncode is None:
                        await live.process.stop(live.stop_reason or "the run was cancelled")
                    await self._save_session(
                        live, session, adapter, key, fp, real, plan, launch, stored, expected
                    )
        finally:
            if key is not None and is_child:
                self._claims.release(key, run.id)

    async def _reuse_key(self, live: LiveRun, adapter: Adapter, options: Mapping[str, Any]) -> str | None:
        """The reuse record key of this run: the adapter name for a root, a claimed child key for a
        keyed child, None when the run neither resumes nor saves (seed 003)."""
        resumable = _resumable(adapter, options)
        if live.parent is None:
            return adapter.name if resumable else None
        parent = live.parent
        request = live.child_request
        scope = child_scope(
            adapter=adapter.name,
            supports_resume=resumable,
            parent_is_root=parent.parent is None,
            parent_role=parent.role,
            parent_lineage=parent.lineage,
            role=live.role,
            resume_key=request.resume_key if request is not None else None,
        )
        if scope.ignored_reason is not None:
            log.info("run %s: resumeKey ignored: %s", live.run.id, scope.ignored_reason)
            await self.hub.emit(
                live.run.id, "notice", {"message": f"resumeKey ignored: {scope.ignored_reason}"}
            )
        live.lineage = scope.lineage
        if scope.lineage is not None:
            live.run = await in_thread(self.store.update_run, live.run.id, resume_key=scope.lineage)
        if scope.store_key is None:
            return None
        if not self._claims.claim(scope.store_key, live.run.id):
            # two concurrent children with one key never share a vendor conversation
            await self.hub.emit(
                live.run.id,
                "notice",
                {
                    "message": (
                        f"another live agent holds resume key {scope.lineage}; this child starts a new vendor "
                        "conversation and does not save it under the key"
                    )
                },
            )
            return None
        live.store_key = scope.store_key
        return scope.store_key

    def _turn_limit(self, live: LiveRun, options: Mapping[str, Any]) -> int | None:
        request = live.child_request
        if request is not None and request.max_turns is not None:
            return request.max_turns
        return _positive_int(options.get("maxTurns"))

    async def _launch_prompt(
        self, live: LiveRun, plan: ResumePlan, stored: VendorSession | None
    ) -> LaunchPrompt:
        """What this launch sends (seed 003 "What resume actually saves")."""
        run = live.run
        if live.parent is not None:
            # the role prompt is a stable instruction (the system prompt, in the fingerprint); the
            # brief follows the volatile marker and is sent on every run, resumed or not (seed 003)
            launch = LaunchPrompt(run.prompt)
        else:
            checkpoint = None
            if plan.resume and stored is not None:
                after = stored.cursor
            else:
                checkpoint = await in_thread(self.store.latest_checkpoint, run.session_id, live.generation)
                after = checkpoint.through_seq if checkpoint is not None else 0
            through = (live.user_seq - 1) if live.user_seq is not None else None
            unseen = await in_thread(
                lambda: self.store.list_messages(
                    run.session_id, generation=live.generation, after_seq=after, through_seq=through
                )
            )
            if live.user_seq is None:  # posted in a generation cleared meanwhile: nothing to carry
                unseen, checkpoint = [], None
            launch = render_launch_prompt(run.prompt, unseen=unseen, checkpoint=checkpoint)
            if launch.carried or launch.checkpoint_id is not None:
                await self.hub.emit(
                    run.id,
                    "notice",
                    {
                        "message": _carried_text(launch),
                        "carried": list(launch.carried),
                        "checkpoint_id": launch.checkpoint_id,
                    },
                )
        if self.prompt_dumps:
            await anyio.to_thread.run_sync(dump_prompt, run.id, launch.text)
        return launch

    async def _attempt(
        self, live: LiveRun, adapter: Adapter, request: LaunchRequest, plan: ResumePlan
    ) -> None:
        """One vendor invocation of the run: launch, stream, reap, account usage."""
        run = live.run
        spec = adapter.build_launch(request)  # AdapterError surfaces with its own message
        for message in spec.notices:
            await self.hub.emit(run.id, "notice", {"message": message})
        if live.stop_status is not None:
            return
        async with anyio.create_task_group() as tg:
            try:
                process = await VendorProcess.start(spec, run.id)
            except OSError as exc:
                raise ExecutableNotFoundError(f"could not start {request.binary}: {exc}") from exc
            live.process = process
            run = await in_thread(
                self.store.update_run,
                run.id,
                status=RunStatus.RUNNING,
                pid=process.pid,
                vendor_session_id=plan.vendor_session_id,
                resumed=plan.resume,
                started_at=_now(),
            )
            live.run = run
            await self.hub.emit(
                run.id,
                "run_status",
                {
                    "status": str(RunStatus.RUNNING),
                    "pid": process.pid,
                    "argv": [a for a in spec.argv if all(s not in a for s in spec.secrets)],
                    "vendor_session_id": plan.vendor_session_id,
                    "resumed": plan.resume,
                },
            )
            if live.stop_status is not None:  # stopped while starting
                await process.stop(live.stop_reason or "stopped")
            tg.start_soon(process.pump_stderr)
            tg.start_soon(self._watch_active_time, live)
            parser = adapter.new_parser(request)
            live.parser = parser
            async for line in process.lines():
                for event in parser.feed(line):
                    await self._handle(live, event, tg)
            with anyio.move_on_after(EXIT_AFTER_RESULT):
                await process.wait()
            if process.returncode is None:
                await process.stop("did not exit after its output ended")
            await process.reap()
            for event in parser.finish(process.returncode):
                await self._handle(live, event, tg)
            usage = await self._turn_usage(adapter, request, parser.total_usage(), run.session_id, run.id)
            live.run = await in_thread(
                self.store.update_run,
                run.id,
                exit_code=process.returncode,
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                cache_read_input_tokens=usage.cache_read_input_tokens,
                usage_estimated=usage.estimated,
                cost_usd=live.result.cost_usd if live.result else None,
                result_text=live.result.text if live.result else None,
            )
            tg.cancel_scope.cancel()

    async def _save_session(
        self,
        live: LiveRun,
        session: Session,
        adapter: Adapter,
        key: str | None,
        fp: str,
        workspace: Path,
        plan: ResumePlan,
        launch: LaunchPrompt,
        stored: VendorSession | None,
        expected: str | None,
    ) -> None:
        """Keep the transcript and the vendor session for the next turn (seed 003)."""
        run = live.run
        result = live.result
        answered = result is not None and bool(result.text) and not _result_failed(result)
        if live.parent is None:
            assistant = None
            if answered:
                assert result is not None and result.text is not None
                assistant = await in_thread(
                    self.store.append_message,
                    session.id,
                    role="assistant",
                    text=result.text,
                    run_id=run.id,
                    adapter=adapter.name,
                    generation=live.generation,
                )
            if key is None or not live.vendor_session_confirmed:
                return
            # saved whenever the vendor confirmed its session in this run, even when the turn then
            # failed or was interrupted: the vendor holds that conversation and can continue it
            cursor = (
                assistant.seq
                if assistant is not None
                else (live.user_seq or (stored.cursor if stored else 0))
            )
            checkpoint_id = (
                stored.checkpoint_id if plan.resume and stored is not None else launch.checkpoint_id
            )
            extra: dict[str, Any] = {"cursor": cursor, "checkpoint_id": checkpoint_id}
        else:
            if key is None:
                return
            if live.budget_exceeded:  # the next run on the task starts cold, not from spent context
                await in_thread(self.store.drop_vendor_session, session.id, key)
                await self.hub.emit(
                    run.id, "notice", {"message": f"token budget exceeded: resume key {live.lineage} dropped"}
                )
                return
            if not live.vendor_session_confirmed:
                return
            # a child stopped by a cancel, a timeout or a turn limit still saves, but only if the
            # vendor confirmed the session in this run and no retry has taken the key since
            extra = {"expect_vendor_session_id": expected, "max_children": MAX_CHILD_SESSIONS}
        confirmed = live.vendor_session_confirmed
        saved = await in_thread(
            lambda: self.store.save_vendor_session(
                session_id=session.id,
                key=key,
                vendor_session_id=confirmed,
                fingerprint=fp,
                cwd=str(workspace),
                generation=live.generation,
                **extra,
            )
        )
        if saved is None:
            await self.hub.emit(
                run.id,
                "notice",
                {
                    "message": (
                        "the vendor session of this run is not kept: the session was cleared (/clear) while it ran"
                        if live.parent is None
                        else f"the vendor session of this child is not kept under {live.lineage}: the session was "
                        "cleared (/clear) or another run saved the key meanwhile"
                    )
                },
            )

    async def _handle(self, live: LiveRun, event: VendorEvent, tg: anyio.abc.TaskGroup) -> None:
        if event.kind not in NOT_STORED:
            await self.hub.emit_vendor(live.run.id, event)
        process = live.process
        adapter = live.adapter
        assert process is not None and adapter is not None
        if isinstance(event, SessionEvent):
            if event.session_id:
                live.vendor_session_confirmed = event.session_id
                if (
                    live.run.vendor_session_id != event.session_id
                ):  # vendor-assigned (Codex, Vibe) or replaced
                    live.run = await in_thread(
                        self.store.update_run, live.run.id, vendor_session_id=event.session_id
                    )
            status = event.mcp_servers.get(BRIDGE_NAME, "missing")
            if status in FAILED_BRIDGE_STATUSES and live.failure is None:
                live.failure = (
                    f"the vendor reports the Octipus bridge as {status} (system/init mcp_servers); "
                    "the run cannot use Octipus tools"
                )
                tg.start_soon(process.stop, live.failure)
        elif isinstance(event, PermissionRequestEvent):
            tg.start_soon(self._relay_permission, live, event)
        elif isinstance(event, ToolUseEvent) and not event.name.startswith(BRIDGE_PREFIX):
            # the flow guard watches the tool-use stream, so auto-allowed reads count too (seed 003)
            await self.gate.observe(self._call_context(live), f"cli-native:{event.name}", event.input)
        elif isinstance(event, ControlCancelEvent):
            # the vendor abandoned the request: stop waiting, answer nothing (sources.md §1.6)
            scope = live.relays.pop(event.request_id, None)
            if scope is not None:
                scope.cancel()
        elif isinstance(event, UnknownEvent) and event.type == "control_request" and event.raw:
            request_id = str(event.raw.get("request_id", ""))
            subtype = (event.raw.get("request") or {}).get("subtype")
            await process.write_line(
                adapter.encode_control_error(request_id, f"unsupported control request {subtype}")
            )
        elif isinstance(event, StatusEvent) and event.status.startswith("cold_start:") and live.run.resumed:
            # the vendor answered the resume with another conversation: the stored one is gone
            # (seed 003 "Cold fallback"); stop before the turn runs there, the turn is retried cold
            live.session_missing = event.status
            tg.start_soon(process.stop, "the resumed vendor session is gone; retrying the turn cold")
        elif isinstance(event, StdinWriteEvent):
            if live.session_missing is None:
                for line in event.lines:
                    await process.write_line(line)
        elif isinstance(event, ResultEvent):
            live.result = event
            live.results_seen += 1
            if event.session_id and not event.is_error:
                live.vendor_session_confirmed = event.session_id
            if live.results_seen >= live.expected_results:  # guidance sent meanwhile adds results
                await process.close_stdin()
        await self._check_token_budget(live, tg)

    async def _check_token_budget(self, live: LiveRun, tg: anyio.abc.TaskGroup) -> None:
        """Stop a child that used more tokens than its ``tokenBudget`` (seed 003: the key is then
        dropped). Counted: input, output and cache tokens the vendor reported so far."""
        request = live.child_request
        if request is None or request.token_budget is None or live.budget_exceeded or live.parser is None:
            return
        usage = live.parser.total_usage()
        used = (
            usage.input_tokens
            + usage.output_tokens
            + usage.cache_creation_input_tokens
            + usage.cache_read_input_tokens
        )
        if used > request.token_budget:
            live.budget_exceeded = True
            live.failure = live.failure or (
                f"the child exceeded its token budget ({used} tokens used, budget {request.token_budget})"
            )
            if live.process is not None:
                tg.start_soon(live.process.stop, live.failure)

    async def _relay_permission(self, live: LiveRun, event: PermissionRequestEvent) -> None:
        """Answer a vendor permission request through Octipus policy (``cli-native:<Tool>``).

        A ``control_cancel_request`` for the same request id cancels the wait (its approval is
        marked cancelled) and nothing is answered.
        """
        with anyio.CancelScope() as scope:
            live.relays[event.request_id] = scope
            try:
                await self._answer_permission(live, event)
            finally:
                live.relays.pop(event.request_id, None)

    async def _answer_permission(self, live: LiveRun, event: PermissionRequestEvent) -> None:
        process, adapter = live.process, live.adapter
        assert process is not None and adapter is not None
        tool_id = f"cli-native:{event.tool_name}"
        updated_input: dict[str, Any] | None = None
        if event.tool_name.startswith(BRIDGE_PREFIX):
            name = event.tool_name.removeprefix(BRIDGE_PREFIX)
            registered = any(t.name == name for t in live.tools.values())
            allowed = registered and live.stop_status is None
            reason = (
                f"allow: {event.tool_name} is an Octipus tool of this run (Octipus policy applies on the bridge)"
                if allowed
                else f"deny: {event.tool_name} is not registered for this run"
            )
        else:
            result = await self._gate(
                live, tool_id, event.input, action=event.tool_name, vendor_request_id=event.request_id
            )
            allowed, reason, updated_input = result.allowed, result.reason, result.updated_input
        await self.hub.emit(
            live.run.id,
            "permission_decision",
            {"tool_id": tool_id, "request_id": event.request_id, "allowed": allowed, "reason": reason},
        )
        decision = PermissionDecision(
            allow=allowed, message=reason, updated_input=(updated_input or event.input) if allowed else None
        )
        await process.write_line(adapter.encode_permission_response(event, decision))

    async def _gate(
        self,
        live: LiveRun,
        tool_id: str,
        arguments: Mapping[str, Any],
        *,
        action: str | None,
        vendor_request_id: str | None,
    ) -> GateResult:
        """Decide one call through the permission gate; an expired approval fails the run."""
        result = await self.gate.decide(
            self._call_context(live), tool_id, arguments, action=action, vendor_request_id=vendor_request_id
        )
        if result.expired:
            await self._fail_on_expiry(live, result)
        return result

    async def _fail_on_expiry(self, live: LiveRun, result: GateResult) -> None:
        """An approval of a managed run expired: the run fails (seed 003)."""
        if live.failure is None:
            live.failure = result.reason
        await self.broker.cancel_run(live.run.id, "the run failed: an approval expired")
        if live.process is not None:
            assert self._tg is not None
            self._tg.start_soon(live.process.stop, result.reason)

    def _call_context(self, live: LiveRun) -> CallContext:
        """The gate's view of a live run (created once per run)."""
        if live.context is None:
            workspace = str(live.identity.workspace) if live.identity is not None else ""

            async def on_waiting(delta: int) -> None:
                await self._set_waiting(live, delta)

            live.context = CallContext(
                run_id=live.run.id,
                session_id=live.session_id,
                workspace=workspace,
                attended=live.attended,
                on_waiting=on_waiting,
                review_required=live.review_required,
                space=live.space,
                plan=live.run.plan_mode,
            )
        return live.context

    async def _turn_usage(
        self, adapter: Adapter, request: LaunchRequest, usage: Usage, session_id: str, run_id: str
    ) -> Usage:
        """This turn's usage (tokens), when the vendor reports a thread total instead.

        ``codex exec`` reports usage cumulative per thread across resumes (observed.md §2.3); the
        adapter says so (``usage_is_cumulative``). Every earlier run of the same vendor session
        is stored with its own turn's usage, so the turn's figure is the reported total minus
        their sum.
        """
        cumulative = getattr(adapter, "usage_is_cumulative", None)
        if not (callable(cumulative) and cumulative(request) and request.vendor_session_id):
            return usage
        runs = await in_thread(self.store.list_runs, session_id=session_id, limit=10_000)
        prior = Usage()
        for earlier in runs:
            if earlier.id != run_id and earlier.vendor_session_id == request.vendor_session_id:
                prior = prior + Usage(
                    earlier.input_tokens,
                    earlier.output_tokens,
                    earlier.cache_creation_input_tokens,
                    earlier.cache_read_input_tokens,
                )
        return Usage(
            max(0, usage.input_tokens - prior.input_tokens),
            max(0, usage.output_tokens - prior.output_tokens),
            max(0, usage.cache_creation_input_tokens - prior.cache_creation_input_tokens),
            max(0, usage.cache_read_input_tokens - prior.cache_read_input_tokens),
            usage.estimated,
        )

    @staticmethod
    def _resumed_session_missing(adapter: Adapter, live: LiveRun) -> str | None:
        """How the vendor said the resumed session is gone, or None.

        Signals (seed 003 "Cold fallback", observed.md): Claude's result ``No conversation
        found``; Codex's ``no rollout found`` (in the result, or on stderr for ``codex exec``,
        which prints nothing on stdout then, observed.md §2.6); a Codex thread other than the one
        requested (the adapter's ``cold_start`` status); Vibe's ``Session not found``.
        """
        if live.session_missing is not None:
            return live.session_missing
        if live.result is not None:
            return result_failure(live.result) if adapter.session_missing(live.result) else None
        on_stderr = getattr(adapter, "stderr_session_missing", None)
        if live.process is None or not callable(on_stderr):
            return None
        tail = live.process.stderr_tail
        return f"stderr: {tail.strip()[-300:]}" if on_stderr(tail) else None

    async def _model_row(self, session: Session) -> ModelRow | None:
        """The session's model row, or None (no row, or deleted meanwhile: the session keeps a copy)."""
        if session.model_row_id is None:
            return None
        try:
            return await in_thread(self.store.get_model_row, session.model_row_id)
        except NotFoundError:
            return None

    async def _watch_active_time(self, live: LiveRun) -> None:
        """Fail the run once its active-work time exceeds the limit.

        Time spent waiting for an approval does not count (seed 003 "Permissions and limits":
        the active-work timeout excludes approval and delegation waits). A vendor that keeps
        retrying an API error therefore cannot hold a run past the limit.
        """
        active = 0.0
        tick = 1.0
        while True:
            await anyio.sleep(tick)
            if live.waiting_approvals == 0 and live.waiting_children == 0:
                active += tick
            limit = live.timeout if live.timeout is not None else self.run_timeout
            if active >= limit and live.failure is None and live.stop_status is None:
                live.failure = f"the run exceeded its active-work limit of {limit:g} s and was stopped"
                if live.process is not None:
                    await live.process.stop(live.failure)
                return

    async def _set_waiting(self, live: LiveRun, delta: int) -> None:
        live.waiting_approvals += delta
        if live.stop_status is not None or live.failure is not None:
            return
        status = RunStatus.AWAITING_APPROVAL if live.waiting_approvals > 0 else RunStatus.RUNNING
        if live.run.status != status:
            live.run = await in_thread(self.store.update_run, live.run.id, status=status)
            await self.hub.emit(live.run.id, "run_status", {"status": str(status)})

    async def _finish(self, live: LiveRun) -> None:
        run_id = live.run.id
        if live.children:  # seed 003: children still pending when the parent ends are cancelled
            pending = list(live.children)
            for child in pending:
                await self._stop_live(
                    child, RunStatus.CANCELLED, f"its parent run {run_id} ended before collecting it"
                )
            with anyio.move_on_after(30):
                for child in pending:
                    await child.summary_ready.wait()
        uncollected = [c.summary for c in live.detached.values() if c.summary is not None]
        if uncollected:
            await self.hub.emit(run_id, "children_uncollected", {"children": uncollected})
        process = live.process
        if process is not None and process.returncode is None:
            await process.stop(live.stop_reason or live.failure or "run ended")
        if process is not None:
            await process.reap()
        result = live.result
        status: RunStatus
        reason: str | None
        if live.stop_status is not None:
            status, reason = live.stop_status, live.stop_reason
        elif live.failure is not None:
            status, reason = RunStatus.FAILED, live.failure
        elif result is None:
            rc = process.returncode if process else None
            tail = process.stderr_tail.strip()[-500:] if process else ""
            status, reason = (
                RunStatus.FAILED,
                f"the vendor CLI exited ({rc}) without a result" + (f"; stderr: {tail}" if tail else ""),
            )
        elif _result_failed(result):
            # check the subtype, not only is_error: error_max_turns was seen with is_error false
            status, reason = RunStatus.FAILED, result_failure(result)
        else:
            status = RunStatus.SUCCEEDED
            reason = "; ".join(live.review_required) if live.review_required else None
        if status == RunStatus.SUCCEEDED and live.parent is None and self.compaction_threshold > 0:
            # maintenance runs before the final status, under the session's lock: the turn's
            # followers see the compaction event, and no next turn starts before it is done
            await self._compact_if_large(live)
        await self.broker.cancel_run(run_id, f"the run ended ({status})")
        final = await in_thread(
            self.store.finish_run,
            run_id,
            status=status,
            reason=reason,
            exit_code=process.returncode if process else None,
            result_text=result.text if result else None,
        )
        live.run = final
        self._live.pop(run_id, None)  # the session may take its next turn from here on
        await self.hub.emit(
            run_id, "run_status", {"status": str(final.status), "reason": final.reason, "final": True}
        )
        with contextlib.suppress(OSError):
            for leftover in (self.data_dir / "runs" / run_id).glob("*.json"):
                leftover.unlink()


def _resumable(adapter: Adapter, options: Mapping[str, Any]) -> bool:
    """Whether this launch of ``adapter`` takes part in session reuse (seed 003): the adapter
    supports it and, where the adapter decides per transport (``resumable``), this one does."""
    if not adapter.supports_resume:
        return False
    per_transport = getattr(adapter, "resumable", None)
    return bool(per_transport(options)) if callable(per_transport) else True


def _carried_text(launch: LaunchPrompt) -> str:
    """The notice of what a launch carries besides the turn's own text."""
    parts = []
    if launch.checkpoint_id is not None:
        parts.append(f"the summary of checkpoint {launch.checkpoint_id}")
    if launch.carried:
        count = len(launch.carried)
        parts.append(f"{count} earlier message{'s' if count != 1 else ''} the vendor has not seen")
    return "the launch carries " + " and ".join(parts)


def _refuse_if_stopping(parent: LiveRun) -> None:
    """A parent being stopped gets no child result to act on (its children were stopped too)."""
    if parent.stop_status is not None:
        raise ConflictError(
            f"run {parent.run.id} is being stopped ({parent.stop_reason}); its children were stopped with it"
        )


def _reset_attempt(live: LiveRun) -> None:
    """Forget a failed attempt before the cold retry (its id, result and failure)."""
    live.result = None
    live.vendor_session_confirmed = None
    live.failure = None
    live.session_missing = None
    live.process = None
    live.parser = None
    live.results_seen = 0
    live.expected_results = 1


def _result_failed(result: ResultEvent) -> bool:
    """A result that ends the turn as failed (``is_error``, or an ``error*`` subtype)."""
    return result.is_error or (result.subtype or "").startswith("error")


def _positive_int(value: Any) -> int | None:
    """``metadata.cliAgent.maxTurns`` / ``maxTokens`` as a positive int, else None (vendor default)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


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


#: Reasons for the vendor result subtypes that end a turn early (sources.md §1.7).
SUBTYPE_REASONS = {
    "error_max_turns": "the vendor stopped at its turn limit (error_max_turns)",
    "error_max_budget_usd": "the vendor stopped at its budget limit (error_max_budget_usd)",
    "error_max_structured_output_retries": "the vendor gave up on structured output (error_max_structured_output_retries)",
    "error_during_execution": "the vendor failed during execution",
}


def result_failure(result: ResultEvent) -> str:
    """A run's failure reason from a vendor result: the subtype's meaning plus the vendor's words."""
    detail = "; ".join(result.errors) or (result.text or "")
    head = SUBTYPE_REASONS.get(result.subtype or "", "the vendor reported an error")
    return f"{head}: {detail}" if detail else head


def _now() -> datetime:
    return datetime.now(UTC)
