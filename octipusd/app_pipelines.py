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
from octipusd.notify import Notifier
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
from octipusd.settings import Settings
from octipusd.store.aio import in_thread
from octipusd.store.engine import default_sqlite_url
from octipusd.store.pipeline_records import Pipeline
from octipusd.store.repository import Store

__all__ = ["build_pipelines", "notify_end", "pause_interrupted_pipelines", "start_engine_if_needed"]

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
) -> tuple[Walker, DurableRunner]:
    """Compose the pipelines' walker on the durable engine (not launched: it starts when a pipeline is
    open at start-up or created) and wire its runner into ``service`` and the approvals' answers."""
    store = runs.services.store
    engine = DurableEngine(
        system_database_url(settings.database.url or default_sqlite_url()),
        workflows=(PIPELINE_WALK,),
        has_open_work=store.has_open_pipelines,
    )
    executor = StageExecutor(StageRuns(runs.services, runs.registry))
    walker = Walker(store, engine, executor, WalkerLimits(token_budget=settings.agent.pipelineTokenBudget))
    install_walker(walker)
    adapter = str(SessionCreate.model_fields["adapter"].default)  # the API's default, as a person's session
    runner = DurableRunner(store, engine, walker, templates, default_adapter=adapter, limits=service.limits)
    service.runner = runner
    broker.add_listener(runner.on_answer)
    runs.services.gate.add_allowance(GateCommandAllowance(store))
    return walker, runner


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
