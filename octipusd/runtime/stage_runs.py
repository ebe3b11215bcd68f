"""A pipeline stage attempt as a managed run on the run core (issue 27 "Stage workers are runs").

:class:`StageRuns` starts one stage attempt as a normal run of the pipeline's session: a ``runs`` row
carrying the pipeline, attempt, stage and item (:class:`~octipusd.toolkit.StageTag`, also in its
:class:`~octipusd.toolkit.RunIdentity`, so the journal records ``pipeline_id``/``node_id``), executed by
a :class:`~octipusd.runtime.supervisor.RunSupervisor` with its own bridge, policy, journal and sandbox,
admitted like any run, listed and stoppable like any run. It works in the session's workspace with the
stage's model row and Octipus tools (:func:`~octipusd.runtime.planning.stage_tools`), never takes the
session's turn lock and is never the session's live root run: the owner keeps talking to its agent.

Its vendor session is kept under the attempt (``<adapter>::pipeline:<attempt_id>``,
:func:`~octipusd.runtime.reuse.stage_key`) and continued when the request says ``resume`` (Claude,
Codex); a new attempt starts cold. The caller is handed the worker's text so far at most every
:attr:`StageLimits.text_interval_s` and once when the run ends otherwise than ``succeeded`` (its
INCOMPLETE text), and at the end a :class:`StageOutcome` with the counters the evidence gates read.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from octipusd.adapter_events import TextEvent, ToolUseEvent, VendorEvent
from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError, OctipusError
from octipusd.runtime.planning import stage_tools
from octipusd.runtime.relay import BRIDGE_PREFIX
from octipusd.runtime.reuse import stage_lineage
from octipusd.runtime.services import RunRegistry, RunServices
from octipusd.runtime.supervisor import RunSupervisor
from octipusd.store.aio import in_thread
from octipusd.store.records import ApprovalStatus, Run, RunStatus
from octipusd.store.repository import Store
from octipusd.toolkit import StageTag
from octipusd.tools import SHELL_RUN, SHELL_RUN_BACKGROUND

__all__ = [
    "OnText",
    "StageCounters",
    "StageHandle",
    "StageLimits",
    "StageOutcome",
    "StageRequest",
    "StageRuns",
    "gave_up",
]

log = logging.getLogger("octipusd.runtime.stage_runs")

#: The caller's sink of the worker's text so far (saved as the attempt's INCOMPLETE text).
OnText = Callable[[str], Awaitable[None]]

#: How an approval a worker gave up on ended (expired unanswered, or cancelled as its run ended).
_GAVE_UP = frozenset({ApprovalStatus.EXPIRED, ApprovalStatus.CANCELLED})

#: The Claude native tool a vendor's command tool is aliased to (``Adapter.tool_aliases``).
_COMMAND_TOOL = "Bash"


@dataclass(frozen=True)
class StageLimits:
    """The limits of a stage run, each in its unit.

    Attributes:
        text_interval_s: Seconds between two deliveries of the worker's text so far (at most one
            per interval while it changes; seed 003: "saved ... every 15 seconds").
        git_status_s: Seconds one ``git status`` of the workspace (the changed-files counter) may take;
            past them the counter is unknown.
    """

    text_interval_s: float = 15.0
    git_status_s: float = 30.0


@dataclass(frozen=True)
class StageRequest:
    """One stage attempt to run.

    Attributes:
        pipeline_id: The pipeline.
        session_id: The pipeline's session: workspace, default model row and user come from it.
        node_key: The stage's graph node (``"n2"``).
        stage: The step's name.
        item_id: The plan item (a loop body's stage), or None.
        attempt_id: The attempt, stable across its resumes (its vendor session is kept under it).
        attempt_number: The attempt's number (1-based), for the caller's records.
        prompt: The fully rendered stage prompt (an INCOMPLETE text already appended by the caller).
        model: The step's model row (name or id), or None: the session's.
        tool_ids: The step's ``toolIds`` (:func:`~octipusd.runtime.planning.stage_tools`; empty: the
            defaults, no plan editing nor delegation).
        max_tokens: The step's ``maxTokens``: the run is stopped (failed) once it used more (input,
            output and cache writes, like a child's ``tokenBudget``); None: no cap.
        host_services: The stage's own shell commands share the host's services under the sandbox.
        resume: Continue the attempt's vendor conversation (when its vendor can); else start cold.
    """

    pipeline_id: str
    session_id: str
    node_key: str
    stage: str
    item_id: str | None
    attempt_id: str
    attempt_number: int
    prompt: str
    model: str | None = None
    tool_ids: tuple[str, ...] = ()
    max_tokens: int | None = None
    host_services: bool = False
    resume: bool = False

    @property
    def tag(self) -> StageTag:
        """What the run works for (stored on it, carried in its identity)."""
        return StageTag(
            pipeline_id=self.pipeline_id,
            node_key=self.node_key,
            stage=self.stage,
            item_id=self.item_id,
            attempt_id=self.attempt_id,
        )


@dataclass(frozen=True)
class StageCounters:
    """What the stage did, for the evidence gates; None where it is unknown (the gate then passes).

    Attributes:
        changed_files: Files of the workspace whose git status or content changed during the run
            (None: not a git work tree, or git did not answer).
        commands_run: Shell commands the worker ran: its vendor's command tool (``Bash`` or a tool
            aliased to it) and Octipus's ``shell__run`` and ``shell__run_background``.
        disk_changed: Whether the workspace changed on disk (known with ``changed_files``).
    """

    changed_files: int | None = None
    commands_run: int | None = None
    disk_changed: bool | None = None


@dataclass(frozen=True)
class StageOutcome:
    """How a stage run ended.

    Attributes:
        run_id: The run.
        status: Its final status (``succeeded``, ``failed``, ``cancelled`` when stopped,
            ``interrupted`` by a daemon shutdown).
        text: The worker's final answer (None when it gave none).
        reason: Why it did not succeed, else None.
        tokens: Input plus output tokens it used (the pipeline's token budget).
        counters: What it did (:class:`StageCounters`).
        gave_up: The worker gave up on a person's answer: it failed while one of its approvals
            waited (the approval expired, or its CLI went away or ended meanwhile).
        blocked: The approval it gave up on (the newest of its run's tool approvals left
            unanswered), or None.
    """

    run_id: str
    status: RunStatus
    text: str | None
    reason: str | None
    tokens: int
    counters: StageCounters
    gave_up: bool = False
    blocked: str | None = None

    @property
    def stopped(self) -> bool:
        """The run was stopped (by a person, ``octipusctl runs stop``, or :meth:`StageHandle.stop`)."""
        return self.status == RunStatus.CANCELLED


class _Watch:
    """The run's vendor events a stage needs: its text so far and the commands it ran."""

    def __init__(self, supervisor: RunSupervisor) -> None:
        self._run = supervisor
        self.texts: list[str] = []
        self.commands = 0

    def __call__(self, event: VendorEvent) -> None:
        if isinstance(event, TextEvent) and event.text:
            self.texts.append(event.text)
        elif isinstance(event, ToolUseEvent) and not event.name.startswith(BRIDGE_PREFIX):
            adapter = self._run.adapter  # Octipus's shell is counted from the journal (any vendor)
            aliases = adapter.tool_aliases if adapter is not None else {}
            if aliases.get(event.name, event.name) == _COMMAND_TOOL:
                self.commands += 1

    @property
    def text(self) -> str:
        """The worker's text so far."""
        return "\n\n".join(self.texts)


class StageHandle:
    """A started stage run: its id, its end, its stop."""

    def __init__(
        self,
        runs: StageRuns,
        supervisor: RunSupervisor,
        on_text: OnText,
        workspace: Path,
        before: WorkspaceSnapshot | None,
    ) -> None:
        self._runs = runs
        self._workspace = workspace
        self._supervisor = supervisor
        self._on_text = on_text
        self._before = before
        self._watch = _Watch(supervisor)
        supervisor.observer = self._watch
        self._outcome: StageOutcome | None = None
        self._done = anyio.Event()

    @property
    def run_id(self) -> str:
        """The stage run's id."""
        return self._supervisor.run.id

    async def wait(self) -> StageOutcome:
        """Wait for the run's end; its outcome."""
        await self._done.wait()
        assert self._outcome is not None
        return self._outcome

    async def stop(self, reason: str) -> None:
        """Stop the run (its outcome then says ``stopped``); nothing when it already ended."""
        if not self._done.is_set():
            await self._supervisor.stop(RunStatus.CANCELLED, reason)

    async def drive(self) -> None:
        """Execute the run, hand out its text while it works, and settle its outcome (shielded).

        Never raises but cancellation: a failing ``on_text`` or counter is logged and the outcome
        still set (with the counter unknown).
        """
        supervisor = self._supervisor
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._tick)
                await supervisor.execute()
                tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                try:
                    self._outcome = await self._settle(supervisor.run)
                finally:
                    if self._outcome is None:
                        run = supervisor.run
                        self._outcome = StageOutcome(run.id, run.status, None, run.reason, 0, StageCounters())
                    self._done.set()

    async def _tick(self) -> None:
        """Every interval, hand out the text so far when it changed since the last time."""
        sent = ""
        while True:
            await anyio.sleep(self._runs.limits.text_interval_s)
            text = self._watch.text
            if text and text != sent:
                await self._give(text)
                sent = text

    async def _give(self, text: str) -> None:
        try:
            await self._on_text(text)
        except Exception:  # the caller's store failed: the run goes on, the failure is in the log
            log.exception("stage run %s: handing out its text so far failed", self.run_id)

    async def _settle(self, run: Run) -> StageOutcome:
        """The outcome of the ended run; its text so far handed out once more when it did not succeed."""
        if run.status != RunStatus.SUCCEEDED and self._watch.text:
            await self._give(self._watch.text)
        counters = await self._runs.counters(run, self._watch.commands, self._workspace, self._before)
        gave_up, blocked = await self._runs.gave_up(run)
        return StageOutcome(
            run_id=run.id,
            status=run.status,
            text=run.result_text,
            reason=run.reason,
            tokens=run.input_tokens + run.output_tokens,
            counters=counters,
            gave_up=gave_up,
            blocked=blocked,
        )


class StageRuns:
    """Starts pipeline stage attempts as runs (built by the composition root).

    Args:
        services: The collaborators every run shares.
        registry: The live runs (the daemon's task group runs them).
        limits: The stage runs' limits.
    """

    def __init__(
        self, services: RunServices, registry: RunRegistry, limits: StageLimits | None = None
    ) -> None:
        self.services = services
        self.registry = registry
        self.limits = limits or StageLimits()

    async def start(self, request: StageRequest, on_text: OnText) -> StageHandle:
        """Store the stage's run (``queued``) and start it in the daemon's task group.

        Args:
            request: The stage attempt.
            on_text: Called with the worker's text so far, at most every
                :attr:`StageLimits.text_interval_s` while it changes and once when the run ends
                otherwise than ``succeeded``; a failure of it is logged, the run goes on.

        Returns:
            The handle: the run's id, its outcome (:meth:`StageHandle.wait`), its stop.

        Raises:
            InvalidRequestError: the prompt is empty, or no model row is named ``request.model``.
            NotFoundError: no such session.
            ConflictError: the daemon is not serving runs (shutting down).
        """
        if not request.prompt.strip():
            raise InvalidRequestError(f"stage {request.stage!r}: prompt is empty")
        if not self.registry.bound:
            raise ConflictError("octipusd is not serving runs now; start it again and resume the pipeline")
        store = self.services.store
        session = await in_thread(store.get_session, request.session_id)
        if request.model is not None:
            try:
                await in_thread(store.get_model_row, request.model)
            except NotFoundError:
                raise InvalidRequestError(
                    f"stage {request.stage!r}: model: no model row named {request.model!r}"
                ) from None
        before = await self.snapshot(Path(session.workspace))
        run = await in_thread(
            lambda: store.create_run(
                session_id=session.id,
                prompt=request.prompt,
                owner=self.services.owner,
                host_services=request.host_services,
                resume_key=stage_lineage(request.attempt_id),
                stage=request.tag,
            )
        )
        supervisor = RunSupervisor(
            self.services,
            self.registry,
            run,
            attended=session.attended,
            generation=session.clear_generation,
            stage=request,
        )
        handle = StageHandle(self, supervisor, on_text, Path(session.workspace), before)
        self.registry.add(supervisor)
        try:
            await self._announce(supervisor, request)
            self.registry.start_soon(handle.drive)
        except BaseException:  # it never started: it must not stay listed as live
            await supervisor.abandon("the stage run could not be started")
            raise
        return handle

    async def _announce(self, supervisor: RunSupervisor, request: StageRequest) -> None:
        """Publish the queued run (with what it works for) and the step's tool ids it cannot have."""
        hub, run_id = self.services.hub, supervisor.run.id
        queued: dict[str, object] = {"status": str(RunStatus.QUEUED), "pipeline": request.tag.to_dict()}
        if request.host_services:
            queued["host_services"] = True
        await hub.emit(run_id, "run_status", queued)
        _tools, unknown = stage_tools(request.tool_ids, self.services.swarm.levelDefaults)
        if unknown:
            await supervisor.notice(
                f"the stage's toolIds {', '.join(unknown)} name no Octipus tool; its bridge does not publish them",
                unknown_tool_ids=list(unknown),
            )

    async def snapshot(self, workspace: Path, root: Path | None = None) -> WorkspaceSnapshot | None:
        """The workspace's changed files as git sees them, only under the workspace itself, or None
        when it is not a git work tree, git ignores it (a workspace inside another repository's
        ignored folder: its changes are invisible), or git did not answer in time. ``root``: the
        repository's root found by the snapshot taken at the run's start (those checks are not
        made again)."""
        with anyio.move_on_after(self.limits.git_status_s):
            if root is None:
                top = await self._git(workspace, "rev-parse", "--show-toplevel")
                if top is None or await self._git(workspace, "check-ignore", "-q", ".") is not None:
                    return None
                root = Path(os.fsdecode(top.strip()))
            status = await self._git(
                workspace, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--", "."
            )
            if status is not None:
                entries = await anyio.to_thread.run_sync(_stat_entries, root, status)
                return WorkspaceSnapshot(root, entries)
        return None

    async def _git(self, workspace: Path, *args: str) -> bytes | None:
        """``git -C workspace args``'s output, or None when it failed or could not start."""
        with contextlib.suppress(OSError):
            done = await anyio.run_process(
                ["git", "-C", str(workspace), *args],
                check=False,
                env={**self.services.base_env, "GIT_OPTIONAL_LOCKS": "0"},
            )
            if done.returncode == 0:
                return bytes(done.stdout)
        return None

    async def gave_up(self, run: Run) -> tuple[bool, str | None]:
        """Whether the ended ``run`` gave up on a person's answer (:func:`gave_up`); a store failure
        is logged and answers "did not give up" (the stage then fails as before)."""
        try:
            return await in_thread(gave_up, self.services.store, run)
        except OctipusError as exc:
            log.warning("stage run %s: reading its approvals failed: %s", run.id, exc.message)
            return False, None

    async def counters(
        self, run: Run, native_commands: int, workspace: Path, before: WorkspaceSnapshot | None
    ) -> StageCounters:
        """The counters of an ended stage run (``before``: the workspace's :meth:`snapshot` at its
        start; ``native_commands``: its vendor's command tool uses); a store failure leaves the
        commands unknown."""
        changed: int | None = None
        if before is not None:
            after = await self.snapshot(workspace, before.root)
            if after is not None:
                old, new = before.entries, after.entries
                changed = sum(1 for path in old.keys() | new.keys() if old.get(path) != new.get(path))
        shell: int | None = None
        try:
            shell = 0
            for tool in (SHELL_RUN.tool_id, SHELL_RUN_BACKGROUND.tool_id):  # a background start is a command
                actions = await in_thread(
                    functools.partial(
                        self.services.store.list_actions, run_id=run.id, tool=tool, limit=10_000
                    )
                )
                shell += len(actions)
        except OctipusError as exc:  # the counter is unknown; the gate then passes
            log.warning("stage run %s: counting its shell calls failed: %s", run.id, exc.message)
        return StageCounters(
            changed_files=changed,
            commands_run=native_commands + shell if shell is not None else None,
            disk_changed=changed > 0 if changed is not None else None,
        )


def gave_up(store: Store, run: Run) -> tuple[bool, str | None]:
    """Whether the ended ``run`` gave up on a person's answer, and the approval it gave up on (blocking).

    A worker gave up when its run failed while one of its approvals waited: the approval then
    ended ``expired`` (no answer within ``daemon.approvalTimeoutSeconds``) or ``cancelled`` (its
    CLI went away or ended while it waited; seed 003). The newest such approval of a tool call is
    the blocked one (a questionnaire gave up too, but is no call to approve ahead).

    Raises:
        StoreError: The database failed.
    """
    if run.status != RunStatus.FAILED:
        return False, None
    unanswered = [a for a in store.list_approvals(run_id=run.id) if a.status in _GAVE_UP]  # newest first
    if not unanswered:
        return False, None
    return True, next((a.id for a in unanswered if a.kind == "tool"), None)


@dataclass(frozen=True)
class WorkspaceSnapshot:
    """What git saw of a workspace: its repository's ``root`` and the changed files under the
    workspace (path from the root -> status, size, mtime in ns)."""

    root: Path
    entries: dict[str, object]


def _stat_entries(root: Path, porcelain: bytes) -> dict[str, object]:
    """``git status -z`` entries (paths relative to the repository's ``root``) -> path -> (status,
    size, mtime in ns) (None when it is gone)."""
    entries: dict[str, object] = {}
    fields = porcelain.split(b"\0")
    index = 0
    while index < len(fields):
        entry = fields[index]
        index += 1
        if len(entry) < 4:
            continue
        status, path = entry[:2].decode("ascii", "replace"), os.fsdecode(entry[3:])
        if status[0] in "RC":  # a rename or copy: the next field is its source
            index += 1
        try:
            info = (root / path).lstat()
            entries[path] = (status, info.st_size, info.st_mtime_ns)
        except OSError:
            entries[path] = (status, None, None)
    return entries
