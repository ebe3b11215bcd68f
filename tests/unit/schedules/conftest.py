"""Fixtures of the schedules' tests: the real store (SQLite), run core, durable engine and schedules'
service, composed as the daemon composes them (:func:`octipusd.app_schedules.build_schedules`), with
the vendor's stream replayed (a turn that answers at once)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from octipusd.adapter import LaunchSpec
from octipusd.app_pipelines import build_pipelines
from octipusd.app_schedules import build_schedules
from octipusd.durable.engine import DurableEngine
from octipusd.pipelines.service import PipelineService
from octipusd.pipelines.template_service import TemplateService
from octipusd.runtime.manager import RunManager
from octipusd.schedules.service import ScheduleService
from octipusd.settings import Settings
from octipusd.store.repository import Store
from octipusd.store.schedule_records import Schedule, ScheduleFiring
from octipusd.testing.replay import Recording, ReplayLauncher
from octipusd.testing.stub_cli import session_id_from_argv
from tests.unit.replayed_runs import replayed_runs

USER = "ann"
#: Seconds a test waits for a condition at most.
WAIT_S = 30.0


@dataclass
class Clock:
    """The store's clock: the real time, or a moment the test sets."""

    at: datetime | None = None

    def __call__(self) -> datetime:
        return self.at or datetime.now(UTC)


@dataclass
class ScheduleRig:
    """The schedules' machinery of one test."""

    store: Store
    runs: RunManager
    engine: DurableEngine
    service: ScheduleService
    clock: Clock
    workspace: Path
    failures: list[tuple[Schedule, ScheduleFiring]] = field(default_factory=list)

    async def wait_for(self, check: Callable[[], object]) -> None:
        """Poll (up to :data:`WAIT_S`) until ``check()``."""
        with anyio.fail_after(WAIT_S):
            while not check():  # noqa: ASYNC110 - polls the store, which signals nothing
                await anyio.sleep(0.05)


def _answer(spec: LaunchSpec, run_id: str) -> Recording:
    sid = session_id_from_argv(list(spec.argv))
    assert sid is not None
    init = {"type": "system", "subtype": "init", "session_id": sid, "tools": [], "mcp_servers": []}
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": "checked",
        "session_id": sid,
        "usage": {"input_tokens": 5, "output_tokens": 5},
    }
    return Recording.of([init, result])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A migrated SQLite store whose clock the test may set (the service does not depend on the backend:
    the store's tests cover both)."""
    with Store.open(f"sqlite:///{tmp_path / 'octipus.db'}", clock=Clock()) as opened:
        yield opened


@pytest.fixture
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    """The daemon's settings of the test on its store (indirect parametrisation: more sections)."""
    return Settings(database={"url": f"sqlite:///{tmp_path / 'octipus.db'}"}, **getattr(request, "param", {}))


@pytest.fixture
async def schedules(store: Store, tmp_path: Path, settings: Settings) -> AsyncIterator[ScheduleRig]:
    """The schedules' machinery on the test's store; the engine starts on first use."""
    runs, _gate, broker = replayed_runs(settings, store, tmp_path, ReplayLauncher(_answer))
    pipelines = PipelineService(store)
    templates = TemplateService(store)
    walker, runner = build_pipelines(settings, runs, broker, pipelines, templates)
    engine = walker.engine  # the daemon's: the pipelines' walk and the schedules' firing
    service = build_schedules(settings, engine, runs, pipelines, templates)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    clock = store._clock
    assert isinstance(clock, Clock)
    rig = ScheduleRig(store, runs, engine, service, clock, workspace)
    service.firer.on_failure = lambda schedule, firing: rig.failures.append((schedule, firing))
    try:
        async with anyio.create_task_group() as tg:
            runs.bind(tg)
            runner.bind(tg)
            await tg.start(service.firer.run)
            yield rig
            await runs.shutdown("the test ended")
            await engine.shutdown()
            tg.cancel_scope.cancel()
    finally:
        await engine.shutdown()
