"""The composition root's schedules part: the firer and the service on the pipelines' durable engine,
and the start-up of durable work (the engine when work is open, then the schedules' catch-up)
(split from :mod:`octipusd.app`, which composes them)."""

from __future__ import annotations

import logging

from octipusd.api.models import SessionCreate
from octipusd.app_pipelines import start_engine_if_needed
from octipusd.durable.engine import DurableEngine
from octipusd.durable.schedules import DurableSchedules
from octipusd.pipelines.service import PipelineService
from octipusd.pipelines.template_service import TemplateService
from octipusd.runtime.manager import RunManager
from octipusd.schedules.firing import SCHEDULE_FIRE, ScheduleFirer, install_firer
from octipusd.schedules.service import ScheduleService
from octipusd.settings import Settings

__all__ = ["build_schedules", "start_durable_work"]

log = logging.getLogger("octipusd")


def build_schedules(
    settings: Settings,
    engine: DurableEngine,
    runs: RunManager,
    pipelines: PipelineService,
    templates: TemplateService,
) -> ScheduleService:
    """Compose the schedules on ``engine`` (which registers :data:`SCHEDULE_FIRE`): the firer the
    workflows reach and the service the API calls. The firer's dispatcher runs in the daemon's task
    group (``service.firer.run``), started before the engine."""
    adapter = str(SessionCreate.model_fields["adapter"].default)  # the API's default, as a person's session
    firer = ScheduleFirer(runs.services.store, engine, runs, pipelines, default_adapter=adapter)
    install_firer(firer)
    return ScheduleService(
        runs.services.store,
        DurableSchedules(engine, SCHEDULE_FIRE),
        firer,
        catch_up_missed=settings.schedules.catchUpMissed,
        templates=templates,
    )


async def start_durable_work(engine: DurableEngine, schedules: ScheduleService) -> None:
    """Start the durable engine when durable work is open (a pipeline, an active schedule), then the
    schedules' start-up (:meth:`ScheduleService.start_up`: a missed slot fires once). Failures are
    logged; the daemon serves on."""
    await start_engine_if_needed(engine)
    await schedules.start_up()
