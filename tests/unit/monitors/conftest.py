"""Fixtures of the monitors' tests: the real store, run core, durable engine (both workflows),
pipelines and monitors' services, the vendor's stream replayed and the model's answers scripted
(:class:`tests.unit.pipelines.conftest.Model`).

``monitors`` yields a :class:`MonitorRig`: ``rig.session()`` a session of the owner,
``rig.create(...)`` a monitor of it, ``rig.wait(...)`` polls its status, ``rig.restart()`` stops the
engine (as a daemon's stop does) and starts a new one on the same databases.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.durable.engine import DurableEngine
from octipusd.monitors.delivery import SessionWaker, Waker
from octipusd.monitors.probes import ProbeRegistry
from octipusd.monitors.service import MonitorService
from octipusd.monitors.spec import MonitorLimits
from octipusd.monitors.watch import MONITOR_WATCH, MonitorWatcher, install_watcher
from octipusd.pipelines.runner import DurableRunner
from octipusd.pipelines.service import PipelineCaller, PipelineService
from octipusd.pipelines.stages import StageExecutor
from octipusd.pipelines.template_service import TemplateService
from octipusd.pipelines.walk import PIPELINE_WALK
from octipusd.pipelines.walker import Walker, WalkerLimits, install_walker
from octipusd.runtime.manager import RunManager
from octipusd.runtime.stage_runs import StageRuns
from octipusd.settings import Settings
from octipusd.store.monitor_records import Monitor, MonitorStatus
from octipusd.store.records import Run
from octipusd.store.repository import Store
from octipusd.testing.replay import ReplayLauncher
from tests.unit.pipelines.conftest import (  # noqa: F401 - engine_database is a fixture used here
    ADAPTER,
    USER,
    WAIT_S,
    Model,
    _recording,
    engine_database,
    git_workspace,
)
from tests.unit.replayed_runs import replayed_runs

#: The monitors' limits of the tests: the same rules, shorter times.
FAST = MonitorLimits(
    min_interval_s=0.05,
    default_interval_s=0.1,
    min_deadline_s=0.2,
    default_deadline_s=30.0,
    delivery_retry_s=0.05,
    delivery_tries=100,
)


@dataclass
class MonitorRig:
    """The monitors' machinery of one test (see the module)."""

    store: Store
    runs: RunManager
    pipelines: PipelineService
    service: MonitorService
    model: Model
    workspace: Path
    database: str
    waker: Waker | None = None
    engines: list[DurableEngine] = field(default_factory=list)
    engine: DurableEngine = field(init=False)

    def session(self) -> PipelineCaller:
        session = self.store.create_session(workspace=str(self.workspace), adapter=ADAPTER)
        return PipelineCaller(USER, session_id=session.id, workspace=str(self.workspace))

    async def create(self, owner: PipelineCaller, **arguments: Any) -> Monitor:
        created = await self.service.create(arguments, owner)
        return self.store.get_monitor(created["id"])

    async def wait(self, monitor_id: str, *statuses: MonitorStatus) -> Monitor:
        """Poll (up to ``WAIT_S``) until the monitor is in one of ``statuses``."""
        with anyio.fail_after(WAIT_S):
            while (monitor := self.store.get_monitor(monitor_id)).status not in statuses:  # noqa: ASYNC110
                await anyio.sleep(0.02)
            return monitor

    async def wait_for(self, check: Callable[[], bool]) -> None:
        with anyio.fail_after(WAIT_S):
            while not check():  # noqa: ASYNC110 - polls the store, which signals nothing
                await anyio.sleep(0.02)

    def turns(self, owner: PipelineCaller) -> list[Run]:
        """The owner's session's runs, oldest first."""
        assert owner.session_id is not None
        return list(reversed(self.store.list_runs(session_id=owner.session_id)))

    def wire(self) -> DurableEngine:
        """A new engine on the same databases, with its watcher installed (what a daemon's start does)."""
        engine = DurableEngine(
            self.database,
            workflows=(PIPELINE_WALK, MONITOR_WATCH),
            has_open_work=lambda: self.store.has_open_pipelines() or self.store.has_active_monitors(),
        )
        waker = self.waker or SessionWaker(self.runs, FAST)
        watcher = MonitorWatcher(self.store, engine, self.service.probes, waker, FAST)
        install_watcher(watcher)
        self.service.watcher = watcher
        self.engine = engine
        self.engines.append(engine)
        return engine

    async def restart(self) -> None:
        """Stop the engine (its workflow tasks cancelled, as at a daemon's stop) and start a new one,
        which recovers the pending workflows."""
        await self.engine.shutdown()
        await self.wire().start_if_needed()


@pytest.fixture
async def monitors(store: Store, engine_database: str, tmp_path: Path) -> AsyncIterator[MonitorRig]:  # noqa: F811
    """The monitors' machinery on the test's store (SQLite and PostgreSQL)."""
    model = Model()
    launcher = ReplayLauncher(lambda spec, run_id: _recording(model, store, spec, run_id))
    runs, _gate, _broker = replayed_runs(Settings(), store, tmp_path, launcher)
    pipelines = PipelineService(store)
    service = MonitorService(store, ProbeRegistry(store, pipelines), FAST)
    rig = MonitorRig(store, runs, pipelines, service, model, git_workspace(tmp_path), engine_database)
    engine = rig.wire()
    walker = Walker(store, engine, StageExecutor(StageRuns(runs.services, runs.registry)), WalkerLimits())
    install_walker(walker)
    runner = DurableRunner(store, engine, walker, TemplateService(store), default_adapter=ADAPTER)
    pipelines.runner = runner
    try:
        async with anyio.create_task_group() as tg:
            runs.bind(tg)
            runner.bind(tg)
            yield rig
            await runs.shutdown("the test ended")
            await rig.engine.shutdown()
            tg.cancel_scope.cancel()
    finally:
        for engine in rig.engines:
            await engine.shutdown()
