"""The composition root's pipelines part: the walker on the durable engine, its runner wired into the
service and the approvals' answers, the approved gate commands as an allowance of the permission
gate, the start-up pause of interrupted pipelines, the engine's start
when durable work is open, the end notification (split from :mod:`octipusd.app`, which composes them).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from octipusd.api.models import SessionCreate
from octipusd.durable.engine import DurableEngine
from octipusd.durable.setup import system_database_url
from octipusd.errors import OctipusError
from octipusd.monitors.delivery import SessionWaker
from octipusd.monitors.service import MonitorService
from octipusd.monitors.watch import MONITOR_WATCH, MonitorWatcher, install_watcher
from octipusd.notify import Notifier
from octipusd.pipelines.approved_calls import ApprovedCalls
from octipusd.pipelines.gate_commands import GateCommandAllowance
from octipusd.pipelines.runner import DurableRunner
from octipusd.pipelines.service import PipelineService
from octipusd.pipelines.stages import StageExecutor
from octipusd.pipelines.template_service import TemplateService
from octipusd.pipelines.walk import PIPELINE_WALK
from octipusd.pipelines.walker import Walker, WalkerLimits, install_walker
from octipusd.policy.approvals import ApprovalBroker
from octipusd.runtime.manager import RunManager
from octipusd.runtime.stage_runs import StageRuns
from octipusd.schedules.firing import SCHEDULE_FIRE
from octipusd.settings import Settings
from octipusd.store.aio import in_thread
from octipusd.store.engine import default_sqlite_url
from octipusd.store.pipeline_records import Pipeline
from octipusd.store.repository import Store

__all__ = [
    "build_pipelines",
    "notify_end",
    "notify_pipelines",
    "pause_interrupted_pipelines",
    "start_engine_if_needed",
    "wire_monitors",
]

log = logging.getLogger("octipusd")


async def pause_interrupted_pipelines(store: Store) -> None:
    """Pause the pipelines a stopped daemon left walking (FACTS.md §6 ``reconcileInterrupted``), before
    the engine recovers their workflows (which then park through the restart guard) and before any
    request can create one. A failure is logged (those pipelines stay as they are)."""
    try:
        paused = await in_thread(store.reconcile_interrupted_pipelines)
    except OctipusError:
        log.exception("the interrupted pipelines were not paused")
        return
    if paused:
        log.info("paused %d pipeline(s) the previous daemon left walking", len(paused))


def build_pipelines(
    settings: Settings,
    runs: RunManager,
    broker: ApprovalBroker,
    service: PipelineService,
    templates: TemplateService,
    monitors: MonitorService | None = None,
) -> tuple[Walker, DurableRunner]:
    """Compose the pipelines' walker on the durable engine (not launched: it starts when a pipeline is
    open, or a monitor active, at start-up, or when one is created) and wire its runner into
    ``service`` and the approvals' answers, and the monitors' watcher into ``monitors``."""
    store = runs.services.store
    engine = DurableEngine(
        system_database_url(settings.database.url or default_sqlite_url()),
        workflows=(PIPELINE_WALK, MONITOR_WATCH, SCHEDULE_FIRE),
        has_open_work=lambda: (
            store.has_open_pipelines() or store.has_active_monitors() or store.has_active_schedules()
        ),
    )
    if monitors is not None:
        wire_monitors(monitors, engine, runs)
    executor = StageExecutor(StageRuns(runs.services, runs.registry))
    walker = Walker(
        store,
        engine,
        executor,
        WalkerLimits(token_budget=settings.agent.pipelineTokenBudget),
        emit=runs.services.hub.emit,
    )
    runs.services.gate.add_allowance(ApprovedCalls(store))
    install_walker(walker)
    adapter = str(SessionCreate.model_fields["adapter"].default)  # the API's default, as a person's session
    runner = DurableRunner(store, engine, walker, templates, default_adapter=adapter, limits=service.limits)
    service.runner = runner
    service.answers.announce = runs.services.hub.emit
    broker.add_listener(runner.on_answer)
    broker.add_listener(service.answers.on_decided)
    runs.services.gate.add_allowance(GateCommandAllowance(store))
    return walker, runner


def wire_monitors(monitors: MonitorService, engine: DurableEngine, runs: RunManager) -> MonitorWatcher:
    """Give ``monitors`` its watcher on ``engine`` (the workflows' steps, delivering through ``runs``)."""
    watcher = MonitorWatcher(
        runs.services.store, engine, monitors.probes, SessionWaker(runs, monitors.limits), monitors.limits
    )
    install_watcher(watcher)
    monitors.watcher = watcher
    return watcher


async def start_engine_if_needed(engine: DurableEngine) -> None:
    """Start the durable engine at start-up when a pipeline is open; a failure is logged (the
    daemon serves on; the pipelines wait for the engine's next start)."""
    try:
        await engine.start_if_needed()
    except OctipusError:
        log.exception("the durable engine did not start")


def notify_end(notifier: Notifier) -> Callable[[Pipeline], Awaitable[None]]:
    async def ended(pipeline: Pipeline) -> None:
        notifier.pipeline_ended(pipeline)

    return ended


def notify_pipelines(walker: Walker, runner: DurableRunner, notifier: Notifier) -> None:
    """The pipelines tell ``notifier`` their ends and every approval they ask with no run of their
    own (a stage or plan approval, a question, a replay review: seed 003's push notification; a
    worker's blocked call raised again is announced on its run, which notifies already)."""
    walker.on_end = notify_end(notifier)
    walker.questions.notice = notifier.pipeline_approval
    runner.replays.notice = notifier.pipeline_approval
