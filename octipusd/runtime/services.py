"""What every run of this daemon shares: its collaborators, the registry of live runs, the locks.

:class:`RunServices` is built once by the composition root (``octipusd.app``) and handed to
:class:`~octipusd.runtime.manager.RunManager` and every
:class:`~octipusd.runtime.supervisor.RunSupervisor`; :class:`RunRegistry` is the one table of
the runs executing now (root runs and children), with the per-session locks that serialize a
session's turns and its maintenance.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
from octipus_worktrees import WorktreeManager, default_root

from octipusd.adapter import Adapter
from octipusd.connectors import ConnectorRegistry
from octipusd.errors import ConflictError
from octipusd.journal.executor import ActionJournal
from octipusd.journal.operator import RecoveryOperator
from octipusd.journal.review import RecoveryGate
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.gate import PermissionGate
from octipusd.runner.containment import Containment
from octipusd.runner.executables import Resolution
from octipusd.runner.transport import Launcher, VendorLauncher
from octipusd.runtime.admission import Admission, limits_from_settings
from octipusd.runtime.children import KeyClaims
from octipusd.runtime.compaction import CompactionReport, compact
from octipusd.runtime.events import EventHub
from octipusd.settings import MAX_FOLLOW_UPS, AgentSettings
from octipusd.settings_swarm import SwarmSettings
from octipusd.store.aio import in_thread
from octipusd.store.repository import Store
from octipusd.toolkit import NO_SANDBOX, MonitorOps, PipelineOps, ShellSandbox
from octipusd.toolkit.secrets import SecretResolver

if TYPE_CHECKING:
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = ["RunLimits", "RunRegistry", "RunServices", "followers_emitter", "report"]

log = logging.getLogger("octipusd.runtime")


@dataclass(frozen=True)
class RunLimits:
    """The limits of one run, each in its unit (the operator's settings give the tunable ones).

    Attributes:
        run_timeout_s: Active-work limit of a run (seconds; approval and delegation waits excluded).
        result_grace_s: Seconds a vendor has, from its turn's final result (the result after which no
            guidance waits), to exit and close its output: past them its process tree is stopped and
            the run ends with that result, whatever the vendor still does or prints.
        exit_after_output_s: Seconds a vendor may take to exit once its stdout ended before its
            turn did (no final result).
        children_end_s: Seconds a finishing parent waits for its cancelled children's summaries.
        stop_wait_s: Seconds ``stop`` waits for the run to be finished before answering.
        shutdown_grace_s: Seconds a daemon shutdown waits for the live runs' cleanup.
        watchdog_tick_s: Granularity of the active-work clock (seconds).
        bridge_connect_grace_s: Seconds a vendor that announced its bridge as still connecting
            (Claude's ``pending``) has to list the bridge's tools before the run fails.
        follow_ups: Follow-up invocations a run makes at most when guidance remains after its vendor
            finished (``agent.maxFollowUps``).
        guidance_ack_s: Seconds after a result that guidance written to the vendor may stay
            unacknowledged before the vendor's input ends (the guidance then goes to a follow-up).
    """

    run_timeout_s: float = 3600.0
    result_grace_s: float = 5.0
    exit_after_output_s: float = 30.0
    children_end_s: float = 30.0
    stop_wait_s: float = 20.0
    shutdown_grace_s: float = 15.0
    watchdog_tick_s: float = 1.0
    bridge_connect_grace_s: float = 15.0
    follow_ups: int = MAX_FOLLOW_UPS
    guidance_ack_s: float = 30.0


@dataclass(frozen=True)
class RunServices:
    """The collaborators of every run (built by the composition root).

    Attributes:
        store: The store.
        hub: Event persistence and fan-out.
        broker: Approvals.
        gate: The permission gate (rules, grants, flow guard, approvals).
        journal: The action journal's execution boundary.
        operator: Probes and compensations of uncertain actions.
        recovery: The recovery review gate of mutating calls (seed 000).
        adapters: Registry name -> adapter.
        resolutions: Registry name -> executable resolution (from start-up).
        data_dir: Octipus data directory (run folders live under ``runs/``).
        owner: This daemon instance's id (stored on runs for orphan detection).
        user: The daemon's user (the identity of the runs it executes).
        base_env: The daemon's environment (PATH set to the search PATH); each launch takes only its
            allowlist from it (:func:`octipusd.environment.vendor_environment`).
        limits: The run limits.
        prompt_dumps: ``agent.promptDumps``.
        connectors: The configured MCP servers whose tools every run's bridge exposes (None: none).
        config_notices: Problems of the settings file, shown as run notices.
        launcher: Starts vendor processes (a fake replays recorded streams in tests).
        compaction_threshold: Uncovered transcript characters after which a finished root turn
            compacts its session (0: never automatically).
        compaction_keep_turns: Recent user turns an automatic compaction keeps verbatim.
        claims: The in-process claims on child reuse keys.
        admission: Admission control: the runs admitted now and the queue (``agent.maxConcurrentRuns``,
            ``agent.minFreeMemoryMiB``).
        swarm: The ``swarm`` settings (worktrees, limits per level, contract retries).
        worktrees: The child worktrees under ``~/.octipus/worktrees`` (``OCTIPUS_WORKTREES_DIR``).
        vault: Resolves vault placeholders (None: the daemon has no vault).
        sandbox: The shell sandbox (``security.shellSandbox`` and the runner found at start-up).
        pipelines: The pipelines' service the bridge tools call (None: the pipeline tools refuse).
        monitors: The monitors' service the bridge tools call (None: the monitor tools refuse); set
            by the composition root once the monitors are built (they deliver through the runs).
        containment: The daemon's process containment, which cages each background command of a run
            (None: this process's ``auto`` choice).
    """

    store: Store
    hub: EventHub
    broker: ApprovalBroker
    gate: PermissionGate
    journal: ActionJournal
    operator: RecoveryOperator
    recovery: RecoveryGate
    adapters: Mapping[str, Adapter]
    resolutions: Mapping[str, Resolution]
    data_dir: Path
    owner: str
    user: str
    base_env: Mapping[str, str]
    limits: RunLimits = RunLimits()
    prompt_dumps: bool = True
    connectors: ConnectorRegistry | None = None
    config_notices: Callable[[], list[str]] | None = None
    launcher: Launcher = field(default_factory=VendorLauncher)
    compaction_threshold: int = 200_000
    compaction_keep_turns: int = 2
    claims: KeyClaims = field(default_factory=KeyClaims)
    admission: Admission = field(default_factory=lambda: Admission(limits_from_settings(AgentSettings())))
    swarm: SwarmSettings = field(default_factory=SwarmSettings)
    worktrees: WorktreeManager = field(default_factory=lambda: WorktreeManager(default_root()))
    vault: SecretResolver | None = None
    sandbox: ShellSandbox = NO_SANDBOX
    pipelines: PipelineOps | None = None
    monitors: MonitorOps | None = None
    containment: Containment | None = None

    async def compact(self, session_id: str, keep_turns: int) -> CompactionReport:
        """Compact a session's transcript now (the caller holds the session's lock)."""
        root_keys = [name for name, adapter in self.adapters.items() if adapter.supports_resume]
        report = await in_thread(
            lambda: compact(self.store, session_id, keep_turns=keep_turns, root_keys=root_keys)
        )
        log.info("compaction of session %s: %s", session_id, report)
        return report


class RunRegistry:
    """The runs this daemon executes now, the session locks, and the task group runs live in."""

    def __init__(self) -> None:
        self._live: dict[str, RunSupervisor] = {}
        self._session_locks: dict[str, anyio.Lock] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    def bind(self, task_group: anyio.abc.TaskGroup) -> None:
        """Attach the daemon's task group, in which runs execute."""
        self._tg = task_group

    @property
    def bound(self) -> bool:
        """Whether a task group is attached (runs can start)."""
        return self._tg is not None

    def start_soon(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        """Start a task in the daemon's task group.

        Raises:
            ConflictError: no task group is attached (the daemon is not serving).
        """
        if self._tg is None:
            raise ConflictError("octipusd is not serving runs now; start it again and repeat the request")
        self._tg.start_soon(fn, *args)

    def add(self, supervisor: RunSupervisor) -> None:
        """Register a live run."""
        self._live[supervisor.run.id] = supervisor

    def remove(self, run_id: str) -> None:
        """Forget a run (it ended); idempotent."""
        self._live.pop(run_id, None)

    def get(self, run_id: str) -> RunSupervisor | None:
        """The live run with this id, or None."""
        return self._live.get(run_id)

    def ids(self) -> list[str]:
        """Ids of the runs executing now."""
        return list(self._live)

    def __iter__(self) -> Iterator[RunSupervisor]:
        return iter(list(self._live.values()))

    def of_session(self, session_id: str, *, roots_only: bool = False) -> RunSupervisor | None:
        """The (first) live run of a session, or None; a pipeline stage worker is never one (it runs
        beside the session's turns)."""
        return next(
            (
                s
                for s in self._live.values()
                if s.session_id == session_id and not s.in_stage and not (roots_only and s.parent is not None)
            ),
            None,
        )

    def session_lock(self, session_id: str) -> anyio.Lock:
        """The lock that serializes a session's turns and its maintenance."""
        lock = self._session_locks.get(session_id)
        if lock is None:
            lock = self._session_locks[session_id] = anyio.Lock()
        return lock


async def report(hub: EventHub, registry: RunRegistry, run_id: str, kind: str, data: dict[str, Any]) -> None:
    """Store and publish an event that only reports (a bridge call's progress, a policy decision)
    without waiting for its commit.

    It is queued ahead of whatever is stored next (the order of events holds) and settled in a task
    of the daemon's, which logs a failure to store it; with no daemon task group (a bare test
    composition) this waits for the commit instead.

    Raises:
        InvalidRequestError: ``data`` is not a JSON-serialisable dict.
    """
    pending = hub.emit_soon(run_id, kind, data)
    if registry.bound:
        registry.start_soon(hub.settle_logged, pending)
    else:
        await hub.settle(pending)


def followers_emitter(
    hub: EventHub, registry: RunRegistry
) -> Callable[[str, str, dict[str, Any]], Awaitable[None]]:
    """The permission gate's event sink: store the event on its run (:func:`report`: a decision does
    not wait for its event's commit); a child's approval events are also published on its root run
    (with ``child_run_id``), where the person following the turn can answer them."""

    async def emit(run_id: str, kind: str, data: dict[str, Any]) -> None:
        await report(hub, registry, run_id, kind, data)
        live = registry.get(run_id)
        if live is None or live.parent is None or not kind.startswith("approval_"):
            return
        root = live.parent
        while root.parent is not None:
            root = root.parent
        await report(hub, registry, root.run.id, kind, {**data, "child_run_id": run_id})

    return emit
