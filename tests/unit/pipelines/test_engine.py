"""The durable engine (DBOS Transact inside the daemon), on SQLite and PostgreSQL.

DBOS is a process-global singleton: each test launches the engine (a launch on a migrated system
database costs about 15 ms) and shuts it down; ``DBOS.destroy`` keeps the registry of workflow
functions, so the test workflows are registered once per process and every relaunch reuses them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import anyio
import pytest
from sqlalchemy.engine import make_url

from octipusd.durable.engine import DurableEngine
from octipusd.durable.setup import system_database_url
from octipusd.errors import ConfigError
from octipusd.testing.harness import DaemonHarness
from octipusd.testing.postgres import admin_connect
from tests.conftest import BACKENDS
from tests.unit.pipelines import engine_workflows as flows

ROOT = Path(__file__).resolve().parents[3]
Launch = Callable[[], Awaitable[DurableEngine]]


@pytest.fixture(params=BACKENDS)
def engine_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The system database URL beside a fresh store (a file, or ``<db>_dbos`` on the test server)."""
    if request.param == "sqlite":
        yield system_database_url(f"sqlite:///{tmp_path / 'octipus.db'}")
        return
    store_url: str = request.getfixturevalue("postgres_database_url")
    url = system_database_url(store_url)
    try:
        yield url
    finally:
        with admin_connect(request.getfixturevalue("postgres_url")) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


@pytest.fixture
async def launch(engine_url: str) -> AsyncIterator[Launch]:
    """``await launch()`` starts a new engine on ``engine_url`` (the previous one shut down first)."""
    started: list[DurableEngine] = []

    async def relaunch() -> DurableEngine:
        if started:
            await started[-1].shutdown()
        engine = DurableEngine(engine_url, workflows=flows.ALL)
        flows.ENGINE.append(engine)
        started.append(engine)
        await engine.ensure_started()
        return engine

    flows.RUNS.clear()
    try:
        yield relaunch
    finally:
        if started:
            await started[-1].shutdown()


def test_the_system_database_sits_beside_the_store() -> None:
    assert (
        system_database_url("sqlite:////data/octipus/octipus.db")
        == "sqlite:////data/octipus/octipus-engine.sqlite"
    )
    pg = system_database_url("postgresql+psycopg://u:pw@/octi?host=/run/pg")
    assert make_url(pg).database == "octi_dbos" and make_url(pg).password == "pw"
    assert make_url(pg).query == {"host": "/run/pg"}


@pytest.mark.anyio
async def test_an_in_memory_store_has_no_engine() -> None:
    engine = DurableEngine(system_database_url("sqlite://"))
    with pytest.raises(ConfigError, match="database file"):
        await engine.ensure_started()


@pytest.mark.anyio
async def test_launch_is_idempotent_and_concurrent_callers_share_it(launch: Launch) -> None:
    engine = await launch()
    incarnation = engine.incarnation
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(engine.ensure_started)
    assert engine.started and engine.incarnation == incarnation
    assert await engine.list_pending() == []


@pytest.mark.anyio
async def test_a_two_step_workflow_result_survives_a_relaunch(launch: Launch) -> None:
    engine = await launch()
    run = await engine.start_workflow(flows.TWO_STEPS, "p1.g1", 20)
    assert await run.result() == 41
    engine = await launch()
    info = await engine.workflow("p1.g1")
    assert info is not None and info.status == "SUCCESS" and info.name == "test.two_steps"
    again = await engine.start_workflow(flows.TWO_STEPS, "p1.g1", 20)  # the same id: the recorded execution
    assert await again.result() == 41
    assert flows.RUNS == {"double": 1, "add_one": 1}
    assert [step.name for step in await engine.list_steps("p1.g1")] == ["double", "add_one"]


@pytest.mark.anyio
async def test_send_and_recv_across_a_relaunch(launch: Launch) -> None:
    engine = await launch()
    await engine.start_workflow(flows.WAITS_FOR_GO, "p2.g1", "resume")
    assert await engine.get_event("p2.g1", "state", timeout_seconds=30) == "waiting"
    engine = await launch()  # the waiting workflow was cut; the launch recovers it
    assert [info.workflow_id for info in await engine.list_pending()] == ["p2.g1"]
    await engine.send("p2.g1", "approved", "go")
    run = await engine.start_workflow(flows.WAITS_FOR_GO, "p2.g1", "resume")
    with anyio.fail_after(30):
        assert await run.result() == "resume:approved"
    assert await engine.get_event("p2.g1", "state") == "done"


@pytest.mark.anyio
async def test_fork_from_a_step_reuses_earlier_outputs_and_runs_the_rest(launch: Launch) -> None:
    engine = await launch()
    assert await (await engine.start_workflow(flows.TWO_STEPS, "p3.g1", 5)).result() == 11
    steps = {step.name: step.step_id for step in await engine.list_steps("p3.g1")}
    fork = await engine.fork_workflow("p3.g1", steps["add_one"], "p3.g2")
    with anyio.fail_after(30):
        assert await fork.result() == 11
    assert flows.RUNS == {"double": 1, "add_one": 2}
    info = await fork.info()
    assert info.workflow_id == "p3.g2" and info.forked_from == "p3.g1"


@pytest.mark.anyio
async def test_a_guarded_step_runs_once_and_its_result_is_recorded(launch: Launch, tmp_path: Path) -> None:
    engine = await launch()
    run = await engine.start_workflow(flows.GUARDED_QUICK, "p4.g1", str(tmp_path))
    assert await run.result() == "ran:paid"
    engine = await launch()
    assert (
        await (await engine.start_workflow(flows.GUARDED_QUICK, "p4.g1", str(tmp_path))).result()
        == "ran:paid"
    )
    assert (tmp_path / "runs").read_text() == "ran\n"


@pytest.mark.anyio
async def test_queues_are_registered_after_launch_and_run_their_workflows(launch: Launch) -> None:
    engine = await launch()
    await engine.register_queue("pipelines", concurrency=2)
    runs = [await engine.enqueue_workflow("pipelines", flows.TWO_STEPS, f"q{i}.g1", i) for i in range(3)]
    with anyio.fail_after(30):
        assert [await run.result() for run in runs] == [1, 3, 5]


def _wait_for(path: Path, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_a_step_cut_by_sigkill_is_interrupted_and_never_runs_twice(engine_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = [sys.executable, "-m", "tests.unit.pipelines.engine_child", engine_url, str(tmp_path)]
    first = subprocess.Popen(
        [*child, "start"], cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        _wait_for(tmp_path / "began", first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.communicate()
    second = subprocess.run(
        [*child, "recover"], cwd=ROOT, env=env, text=True, capture_output=True, timeout=120
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "interrupted", second.stderr
    assert (tmp_path / "runs").read_text() == "ran\n"  # the paid body ran once, in the killed process


LAZY_DAEMON = textwrap.dedent(
    """
    import os, signal, sys, threading, time
    import httpx
    from octipusd.app import main
    socket = sys.argv[1]

    def stop_when_serving():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                with httpx.Client(transport=httpx.HTTPTransport(uds=socket)) as client:
                    if client.get("http://octipusd/v1/health").status_code == 200:
                        break
            except httpx.HTTPError:
                time.sleep(0.02)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_when_serving, daemon=True).start()
    code = main([])
    print("dbos" in sys.modules, code)
    """
)


def test_the_daemon_with_no_pipeline_never_imports_dbos(tmp_path: Path) -> None:
    daemon = DaemonHarness(tmp_path / "octipus", "http://127.0.0.1:9")
    done = subprocess.run(
        [sys.executable, "-c", LAZY_DAEMON, str(daemon.socket)],
        cwd=ROOT,
        env=daemon.env,
        text=True,
        capture_output=True,
        timeout=120,
    )
    assert done.stdout.splitlines()[-1].split() == ["False", "0"], done.stderr[-3000:]


def test_start_if_needed_launches_only_when_work_is_open(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, anyio
        from octipusd.durable.engine import DurableEngine
        async def main(url):
            idle = DurableEngine(url, has_open_work=lambda: False)
            print(await idle.start_if_needed(), "dbos" in sys.modules)
            busy = DurableEngine(url, has_open_work=lambda: True)
            print(await busy.start_if_needed(), "dbos" in sys.modules)
            await busy.shutdown()
        anyio.run(main, sys.argv[1])
        """
    )
    url = system_database_url(f"sqlite:///{tmp_path / 'octipus.db'}")
    done = subprocess.run(
        [sys.executable, "-c", script, url], cwd=ROOT, text=True, capture_output=True, timeout=120
    )
    assert done.stdout.split() == ["False", "False", "True", "True"], done.stderr[-3000:]
