"""The durable execution engine inside the daemon: DBOS Transact's lifecycle and thin, typed wrappers.

This room (with :mod:`~octipusd.durable.setup`) is the only place that imports ``dbos``; everything else speaks to
:class:`DurableEngine`. ``import dbos`` costs about half a second, so the composition root builds the engine without it and the engine loads it on first use
(:meth:`DurableEngine.ensure_started`), or at start-up when durable work is open
(:meth:`DurableEngine.start_if_needed`).

Facts of dbos 3.4 the design rests on (verified by ``tests/unit/pipelines/test_engine.py``):

* DBOS is a process-global singleton (``DBOS(config=...)``, ``DBOS.launch()``, ``DBOS.destroy()``);
  its registry of workflow functions outlives ``destroy`` (unless ``destroy_registry=True``), so a
  workflow is registered once per process (:data:`REGISTERED`) and a relaunch reuses it. One
  engine per process may be started at a time.
* Workflows must be registered before launch: launch recovers the workflows left ``PENDING`` and
  looks their functions up by name. Steps need no registration (``DBOS.run_step_async``).
* Async workflows that DBOS starts by itself (recovered at launch, dequeued, forked) run on the
  event loop that was running in the thread calling ``DBOS.launch()``, else on a private loop in a
  thread of DBOS's own. So the launch itself runs on the daemon's loop (about 15 ms once the system
  database is migrated); the import and the migration (the slow part, which on PostgreSQL also
  creates the database) run in a worker thread first.
* DBOS's synchronous API refuses to run while a loop is running: only the ``*_async`` calls are used.
  DBOS sets the loop's default executor to its own pool; :meth:`DurableEngine.shutdown` gives the
  loop a fresh one after ``destroy``.
* A step's outcome is recorded only when the step ends: a step cut by a crash runs again when its
  workflow is recovered. The restart guard (:meth:`DurableEngine.guarded_step`) turns that
  second run into an "interrupted" answer for paid work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from collections.abc import Callable, Coroutine, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, TypeVar

import anyio
import anyio.to_thread

from octipusd.durable.setup import REGISTERED, config_dict, destroy, display_url, in_memory, prepare
from octipusd.errors import ConfigError, ConflictError, StoreError

if TYPE_CHECKING:
    from dbos import WorkflowHandleAsync

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

#: The application version workflows are recorded under. DBOS recovers only the workflows of the
#: version it runs (by default a hash of the workflows' source, which would strand every pending
#: pipeline at each upgrade); bump it when a workflow's sequence of steps changes incompatibly.
ENGINE_APP_VERSION = "octipus-1"
#: The workflow event a guarded step sets before its work, followed by the step's id.
BEGAN_EVENT_PREFIX = "octipus.began."


@dataclass(frozen=True)
class EngineLimits:
    """Bounds of the engine (durations in seconds).

    Attributes:
        shutdown_seconds: Bound of :meth:`DurableEngine.shutdown` (workflow tasks cancelled, then
            DBOS destroyed); past it the daemon goes on stopping.
        notification_poll_seconds: How often DBOS polls for messages and events where the database
            cannot notify (SQLite): the latency of ``recv``/``get_event`` there.
        connect_timeout_seconds: libpq's ``connect_timeout`` for the PostgreSQL system database.
        scheduler_poll_seconds: How often DBOS's scheduler reads the schedules after its first minute
            (:mod:`~octipusd.durable.schedules`): how soon a new, paused or resumed schedule is seen.
    """

    shutdown_seconds: float = 15.0
    notification_poll_seconds: float = 0.1
    connect_timeout_seconds: int = 10
    scheduler_poll_seconds: float = 5.0


@dataclass(frozen=True)
class WorkflowDef(Generic[P, R]):
    """A workflow function the engine registers with DBOS before launch.

    The module defining it does not import ``dbos``: it builds this plain value and the composition
    root hands it to :class:`DurableEngine`, which applies ``DBOS.workflow`` once per process.

    Attributes:
        name: The stable name workflows are recorded (and recovered) under.
        fn: The async workflow function; it calls the engine's step wrappers.
    """

    name: str
    fn: Callable[P, Coroutine[Any, Any, R]]


@dataclass(frozen=True)
class WorkflowInfo:
    """One workflow as the engine records it.

    Attributes:
        workflow_id: Its id.
        name: Its :attr:`WorkflowDef.name`.
        status: DBOS's status: ``PENDING``, ``ENQUEUED``, ``SUCCESS``, ``ERROR``, ``CANCELLED``,
            ``MAX_RECOVERY_ATTEMPTS_EXCEEDED``, ``DELAYED``.
        forked_from: The workflow it was forked from, if any.
    """

    workflow_id: str
    name: str
    status: str
    forked_from: str | None


@dataclass(frozen=True)
class StepRecord:
    """One recorded operation of a workflow (a step, a ``send``, a ``recv``, an event...).

    Attributes:
        step_id: Its number in the workflow (from 1): what :meth:`DurableEngine.fork_workflow` takes.
        name: The step's name (:meth:`DurableEngine.step`'s ``name``, or DBOS's, e.g. ``DBOS.recv``).
        output: Its recorded output (None while it runs or when it failed).
        error: Its error as text, or None.
    """

    step_id: int
    name: str
    output: object
    error: str | None


@dataclass(frozen=True)
class Ran(Generic[R]):
    """A guarded step that ran its work in this process.

    Attributes:
        value: What the work returned.
    """

    value: R


@dataclass(frozen=True)
class Interrupted:
    """A guarded step whose work had begun in an earlier process (a crash or a stop cut it) and was
    not run again. Recorded as the step's outcome: a replay answers it again.

    Attributes:
        step_id: The step's id in its workflow.
        began_incarnation: The :attr:`DurableEngine.incarnation` of the launch it began under.
        began_pid: The process it began in.
    """

    step_id: int
    began_incarnation: str
    began_pid: int


class WorkflowRun(Generic[R]):
    """A handle on one workflow execution (started, forked or resumed)."""

    def __init__(self, handle: WorkflowHandleAsync[R]) -> None:
        self._handle = handle

    @property
    def workflow_id(self) -> str:
        """The workflow's id."""
        return self._handle.get_workflow_id()

    async def result(self) -> R:
        """Wait for the workflow's end and return its result (its error is raised)."""
        return await self._handle.get_result()

    async def info(self) -> WorkflowInfo:
        """The workflow's current status."""
        return _info(await self._handle.get_status())


#: The started engine of this process (DBOS is a singleton).
_ACTIVE: list[DurableEngine] = []


class DurableEngine:
    """DBOS Transact inside the daemon: lazy launch, bounded shutdown, typed wrappers.

    Built cheaply (no ``dbos`` import). Every wrapper starts the engine if it is not started yet,
    except the in-workflow ones (:meth:`step`, :meth:`guarded_step`, :meth:`recv`,
    :meth:`set_event`), which run only inside a workflow and so after launch.
    """

    def __init__(
        self,
        system_database_url: str,
        *,
        workflows: Sequence[WorkflowDef[Any, Any]] = (),
        has_open_work: Callable[[], bool] = lambda: False,
        limits: EngineLimits = EngineLimits(),
        app_version: str = ENGINE_APP_VERSION,
    ) -> None:
        """Args:
        system_database_url: DBOS's system database (:func:`system_database_url`).
        workflows: The workflow functions to register before launch.
        has_open_work: Whether durable work is open (a blocking store query, run in a thread by
            :meth:`start_if_needed`).
        limits: The engine's bounds.
        app_version: The application version workflows are recorded and recovered under.
        """
        self.system_database_url = system_database_url
        self._workflows = tuple(workflows)
        self._has_open_work = has_open_work
        self.limits = limits
        self._app_version = app_version
        self._lock = anyio.Lock()
        self._started = False
        self._incarnation = ""

    @property
    def started(self) -> bool:
        """Whether DBOS is launched by this engine."""
        return self._started

    @property
    def incarnation(self) -> str:
        """A random id of this launch (new at each :meth:`ensure_started`); empty before."""
        return self._incarnation

    async def start_if_needed(self) -> bool:
        """Start the engine when durable work is open (the daemon's start-up); return whether it started.

        Raises:
            ConfigError, StoreError: as :meth:`ensure_started`.
        """
        if not await anyio.to_thread.run_sync(self._has_open_work):
            return False
        await self.ensure_started()
        return True

    async def ensure_started(self) -> None:
        """Load, configure and launch DBOS once (idempotent; concurrent callers wait for one launch).

        ``import dbos`` and the system database's creation and migration run in a worker thread; the
        launch proper runs on the calling loop, so the workflows DBOS recovers run on it. A failed
        launch leaves nothing behind (DBOS destroyed) and may be retried.

        Raises:
            ConflictError: another engine of this process is started (DBOS is a singleton).
            ConfigError: the PostgreSQL system database does not exist and cannot be created.
            StoreError: the system database cannot be reached or migrated.
        """
        if self._started:
            return
        async with self._lock:
            if self._started:
                return
            if _ACTIVE:
                raise ConflictError("another durable engine is started in this process")
            url = self.system_database_url
            if in_memory(url):
                raise ConfigError("the durable engine needs a database file; the store is in memory")
            config = config_dict(url, self._app_version, self.limits)
            await anyio.to_thread.run_sync(prepare, url, self._workflows, config)
            from dbos import DBOS

            try:
                DBOS.launch()  # on this loop: the workflows DBOS starts by itself run on it
            except Exception as exc:
                await anyio.to_thread.run_sync(destroy)
                raise StoreError(f"the durable engine cannot launch on {display_url(url)}: {exc}") from exc
            self._incarnation = uuid.uuid4().hex
            self._started = True
            _ACTIVE.append(self)
            log.info("durable engine launched on %s", display_url(url))

    async def shutdown(self) -> None:
        """Stop the engine (the daemon's stop): shielded, bounded by ``limits.shutdown_seconds``.

        The workflow tasks running on this loop are cancelled first (their current step is not
        recorded: at the next launch DBOS recovers them and the restart guard answers for the paid
        steps), then DBOS is destroyed in a worker thread. Past the bound the thread is abandoned.
        Nothing here raises.
        """
        with anyio.CancelScope(shield=True), anyio.move_on_after(self.limits.shutdown_seconds):
            async with self._lock:
                if not self._started:
                    return
                self._started = False
                _ACTIVE.remove(self)
                try:
                    await _cancel_workflow_tasks()
                    await anyio.to_thread.run_sync(destroy, abandon_on_cancel=True)
                except Exception:
                    log.exception("durable engine: shutdown failed")
                asyncio.get_running_loop().set_default_executor(
                    ThreadPoolExecutor(thread_name_prefix="asyncio")
                )

    # ----- workflows -----

    async def start_workflow(
        self, workflow: WorkflowDef[P, R], workflow_id: str, *args: P.args, **kwargs: P.kwargs
    ) -> WorkflowRun[R]:
        """Start ``workflow`` under ``workflow_id`` on this loop (idempotent: the same id answers the
        same execution). Use the pipeline id plus a generation suffix as the id.

        Raises:
            ConfigError: ``workflow`` is not among the engine's ``workflows``.
            ConflictError, StoreError: as :meth:`ensure_started`.
        """
        await self.ensure_started()
        from dbos import DBOS, SetWorkflowID

        with SetWorkflowID(workflow_id):
            handle = await DBOS.start_workflow_async(self._registered(workflow), *args, **kwargs)
        return WorkflowRun(handle)

    async def enqueue_workflow(
        self, queue: str, workflow: WorkflowDef[P, R], workflow_id: str, *args: P.args, **kwargs: P.kwargs
    ) -> WorkflowRun[R]:
        """Enqueue ``workflow`` under ``workflow_id`` on ``queue`` (:meth:`register_queue`); DBOS
        starts it on this loop when the queue's concurrency allows."""
        await self.ensure_started()
        from dbos import DBOS, SetWorkflowID

        with SetWorkflowID(workflow_id):
            handle = await DBOS.enqueue_workflow_async(queue, self._registered(workflow), *args, **kwargs)
        return WorkflowRun(handle)

    async def register_queue(self, name: str, *, concurrency: int) -> None:
        """Declare (or update) the queue ``name`` running at most ``concurrency`` workflows at once
        in this process (DBOS's ``worker_concurrency``)."""
        await self.ensure_started()
        from dbos import DBOS

        await DBOS.register_queue_async(name, worker_concurrency=concurrency, polling_interval_sec=0.2)

    async def fork_workflow(
        self, workflow_id: str, start_step: int, new_workflow_id: str
    ) -> WorkflowRun[Any]:
        """Start ``new_workflow_id``, a copy of ``workflow_id`` whose steps before ``start_step`` keep
        their recorded outputs (and events) and whose later steps run again (:class:`StepRecord`'s
        ``step_id`` names them). The fork runs on this loop through DBOS's internal queue."""
        await self.ensure_started()
        from dbos import DBOS, SetWorkflowID

        with SetWorkflowID(new_workflow_id):
            handle = await DBOS.fork_workflow_async(
                workflow_id, start_step, application_version=self._app_version
            )
        return WorkflowRun(handle)

    async def cancel_workflow(self, workflow_id: str) -> None:
        """Mark the workflow ``CANCELLED``: it stops at its next step boundary (a running step ends first)."""
        await self.ensure_started()
        from dbos import DBOS

        await DBOS.cancel_workflow_async(workflow_id)

    async def resume_workflow(self, workflow_id: str) -> WorkflowRun[Any]:
        """Run a cancelled (or failed-by-recovery) workflow again from its first unrecorded step."""
        await self.ensure_started()
        from dbos import DBOS

        return WorkflowRun(await DBOS.resume_workflow_async(workflow_id))

    async def workflow(self, workflow_id: str) -> WorkflowInfo | None:
        """The workflow's status, or None when the engine has no such workflow."""
        await self.ensure_started()
        from dbos import DBOS

        status = await DBOS.get_workflow_status_async(workflow_id)
        return None if status is None else _info(status)

    async def list_pending(
        self, name: str | None = None, *, id_prefix: str | None = None
    ) -> list[WorkflowInfo]:
        """The workflows not finished (``PENDING`` or ``ENQUEUED``), optionally of one workflow ``name``
        and only those whose id starts with ``id_prefix``."""
        await self.ensure_started()
        from dbos import DBOS

        found = await DBOS.list_workflows_async(
            status=["PENDING", "ENQUEUED"], name=name, workflow_id_prefix=id_prefix
        )
        return [_info(status) for status in found]

    async def list_steps(self, workflow_id: str) -> list[StepRecord]:
        """The recorded operations of a workflow, in order."""
        await self.ensure_started()
        from dbos import DBOS

        steps = await DBOS.list_workflow_steps_async(workflow_id)
        return [
            StepRecord(
                step_id=step["function_id"],
                name=step["function_name"],
                output=step["output"],
                error=None if step["error"] is None else str(step["error"]),
            )
            for step in steps
        ]

    async def send(self, workflow_id: str, message: object, topic: str) -> None:
        """Send ``message`` on ``topic`` to a workflow (durable; received once by :meth:`recv`).
        Inside a workflow the send is itself a recorded step."""
        await self.ensure_started()
        from dbos import DBOS

        await DBOS.send_async(workflow_id, message, topic)

    async def get_event(self, workflow_id: str, key: str, timeout_seconds: float = 0.0) -> object:
        """The workflow's event ``key`` (:meth:`set_event`), waiting up to ``timeout_seconds`` for it;
        None when it is not set."""
        await self.ensure_started()
        from dbos import DBOS

        return await DBOS.get_event_async(workflow_id, key, timeout_seconds)

    # ----- inside a workflow -----

    async def step(
        self, name: str, fn: Callable[P, Coroutine[Any, Any, R]], *args: P.args, **kwargs: P.kwargs
    ) -> R:
        """Run ``fn`` as the workflow's next step named ``name``: its output is recorded when it
        returns (or its error when it raises), and a replay returns the recording without running it.
        Outside a workflow, ``fn`` simply runs."""
        from dbos import DBOS

        return await DBOS.run_step_async({"name": name, "retries_allowed": False}, fn, *args, **kwargs)

    async def recv(self, topic: str, timeout_seconds: float) -> object:
        """Inside a workflow: the next message on ``topic`` (durable), waiting up to
        ``timeout_seconds``; None when none came."""
        from dbos import DBOS

        return await DBOS.recv_async(topic, timeout_seconds)

    async def set_event(self, key: str, value: object) -> None:
        """Inside a workflow or a step: set the workflow's event ``key`` to ``value`` (latest wins)."""
        from dbos import DBOS

        await DBOS.set_event_async(key, value)

    @staticmethod
    def own_error(exc: BaseException) -> bool:
        """Whether ``exc`` is the engine's own (a workflow that no longer matches its record, a
        cancelled workflow): a workflow lets it through rather than handling it as a step's failure."""
        from dbos._error import DBOSBaseException, DBOSException

        return isinstance(exc, DBOSException | DBOSBaseException)

    @staticmethod
    def current_step_id() -> int | None:
        """Inside a step: its id in the workflow (what :meth:`fork_workflow` takes); None elsewhere."""
        from dbos import DBOS

        step_id: int | None = DBOS.step_id
        return step_id

    async def guarded_step(
        self, name: str, fn: Callable[P, Coroutine[Any, Any, R]], *args: P.args, **kwargs: P.kwargs
    ) -> Ran[R] | Interrupted:
        """Run paid work ``fn`` as a step that never runs twice across processes (the restart guard).

        Before the work, the step sets the workflow event ``octipus.began.<step id>`` (durable, in the
        system database) to this launch's incarnation. DBOS records a step's outcome only when it
        ends, so after a crash it runs the step again; this run then finds the marker of an earlier
        incarnation and answers :class:`Interrupted` (recorded as the step's outcome) without calling
        ``fn``. A fork from this step's id (:meth:`fork_workflow`) copies no marker of it (DBOS copies
        only the events of earlier steps), so there the work runs again: that is the person's resume.

        Returns:
            :class:`Ran` with ``fn``'s value, or :class:`Interrupted`. ``fn``'s error is raised (and
            recorded).
        """
        return await self.step(name, _guarded, self._incarnation, fn, args, kwargs)

    # ----- durable timers (monitors) -----

    async def sleep(self, seconds: float) -> None:
        """Inside a workflow: a durable sleep. Its wake-up time is recorded when it begins, so a
        workflow recovered after a restart sleeps only what is left (nothing once it passed)."""
        from dbos import DBOS

        await DBOS.sleep_async(max(0.0, seconds))

    async def wait_for_message(self, topic: str, seconds: float) -> object:
        """Inside a workflow: a durable timer that a message ends early. Waits up to ``seconds`` for
        the next message on ``topic`` (:meth:`send`); the timer's end is recorded when the wait
        begins, so after a restart it waits only what is left. Returns the message, or None when the
        timer ran out."""
        return await self.recv(topic, max(0.0, seconds))

    def _registered(self, workflow: WorkflowDef[P, R]) -> Callable[P, Coroutine[Any, Any, R]]:
        if workflow not in self._workflows:
            raise ConfigError(f"workflow {workflow.name!r} is not registered with the durable engine")
        registered: Callable[P, Coroutine[Any, Any, R]] = REGISTERED[workflow.name]
        return registered


async def _cancel_workflow_tasks() -> None:
    """Cancel the workflow tasks DBOS runs on this loop and wait for them to end."""
    from dbos._dbos import _dbos_global_instance  # DBOS keeps its tasks in a private set

    if _dbos_global_instance is None:
        return
    loop = asyncio.get_running_loop()
    tasks = [task for task in list(_dbos_global_instance._workflow_tasks) if task.get_loop() is loop]
    for task in tasks:
        task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.gather(*tasks, return_exceptions=True)


async def _guarded(
    incarnation: str,
    fn: Callable[..., Coroutine[Any, Any, R]],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Ran[R] | Interrupted:
    """The body of :meth:`DurableEngine.guarded_step`, run as the step."""
    from dbos import DBOS

    workflow_id, step_id = DBOS.workflow_id, DBOS.step_id
    if workflow_id is None or step_id is None:
        raise ConfigError("a guarded step runs only inside a workflow")
    key = f"{BEGAN_EVENT_PREFIX}{step_id}"
    began = await DBOS.get_event_async(workflow_id, key, 0)
    if isinstance(began, dict) and began.get("incarnation") != incarnation:
        log.warning(
            "workflow %s: step %d began in process %s and is not run again",
            workflow_id,
            step_id,
            began.get("pid"),
        )
        return Interrupted(step_id, str(began.get("incarnation")), int(began.get("pid", 0)))
    await DBOS.set_event_async(key, {"incarnation": incarnation, "pid": os.getpid()})
    return Ran(await fn(*args, **kwargs))


def _info(status: Any) -> WorkflowInfo:
    return WorkflowInfo(
        workflow_id=status.workflow_id,
        name=status.name,
        status=str(status.status),
        forked_from=status.forked_from,
    )
