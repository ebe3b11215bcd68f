"""Fixtures of the pipeline walker's tests: the real run core, store, approval broker and durable
engine, with the vendor's stream replayed (:mod:`octipusd.testing.replay`) and the model's
decisions scripted by :class:`Model` (a function of the stage's prompt).

Reusable: ``pipelines`` yields a :class:`PipelineRig` (store, runs, engine, walker, runner, service);
``rig.create(...)`` starts a pipeline, ``rig.wait(...)`` polls its status.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from sqlalchemy.engine import make_url

from octipusd.adapter import LaunchSpec
from octipusd.durable.engine import DurableEngine
from octipusd.durable.setup import system_database_url
from octipusd.pipelines.approved_calls import ApprovedCalls
from octipusd.pipelines.gate_commands import GateCommandAllowance
from octipusd.pipelines.runner import DurableRunner
from octipusd.pipelines.service import (
    CreateRequest,
    PipelineCaller,
    PipelineLimits,
    PipelineService,
    ResumeRequest,
)
from octipusd.pipelines.stages import StageExecutor
from octipusd.pipelines.template_service import TemplateService
from octipusd.pipelines.walk import PIPELINE_WALK
from octipusd.pipelines.walker import Walker, WalkerLimits, install_walker
from octipusd.policy.approvals import ApprovalBroker
from octipusd.runtime.manager import RunManager
from octipusd.runtime.stage_runs import StageRuns
from octipusd.settings import Settings
from octipusd.store.pipeline_item_store import ItemDraft
from octipusd.store.pipeline_records import Pipeline, PipelineStatus
from octipusd.store.records import Approval
from octipusd.store.repository import Store
from octipusd.testing.postgres import admin_connect
from octipusd.testing.replay import Recording, ReplayLauncher
from octipusd.testing.stub_cli import session_id_from_argv
from tests.unit.replayed_runs import ADAPTER, replayed_runs

USER = "ann"
#: Seconds a "hanging" answer takes (a stop or the test's end cuts it).
HANG_S = 3600.0
#: Seconds a test waits for a condition at most.
WAIT_S = 60.0
#: Seconds an asking worker's CLI waits for the answer before it ends (its request is raised by then).
GIVE_UP_AFTER_S = 1.0


def handoff(**data: Any) -> str:
    """A worker's answer ending with the handoff block."""
    return f"done.\n```json\n{json.dumps(data)}\n```"


@dataclass
class Answer:
    """What the scripted model answers one stage: ``text``, after ``delay`` seconds; ``partial``
    is streamed first (the attempt's INCOMPLETE text). ``ask``: instead, the worker asks permission
    for a ``Bash`` call with this input and its CLI ends while the request waits (it gave up)."""

    text: str
    delay: float = 0.0
    partial: str = "working"
    ask: dict[str, Any] | None = None


@dataclass
class Model:
    """The model's decisions: ``decide(prompt)`` -> :class:`Answer`; every prompt is kept."""

    decide: Callable[[str], Answer] = field(
        default=lambda prompt: Answer(handoff(status="done", summary="ok"))
    )
    prompts: list[str] = field(default_factory=list)
    argvs: list[list[str]] = field(default_factory=list)


def _recording(model: Model, store: Store, spec: LaunchSpec, run_id: str) -> Recording:
    sid = session_id_from_argv(list(spec.argv))
    assert sid is not None
    prompt = store.get_run(run_id).prompt
    model.prompts.append(prompt)
    model.argvs.append(list(spec.argv))
    answer = model.decide(prompt)
    init = {
        "type": "system",
        "subtype": "init",
        "session_id": sid,
        "tools": ["Bash"],
        "mcp_servers": [{"name": "octipus", "status": "connected"}],
    }
    text = {
        "type": "assistant",
        "message": {"id": "m1", "role": "assistant", "content": [{"type": "text", "text": answer.partial}]},
        "session_id": sid,
    }
    if answer.ask is not None:
        request = {
            "type": "control_request",
            "request_id": "perm-1",
            "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": answer.ask},
        }
        return Recording.of([init, text, request], exit_delay=GIVE_UP_AFTER_S)
    result = {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": answer.text,
        "session_id": sid,
        "usage": {"input_tokens": 5, "output_tokens": 5},
    }
    return Recording.of([init, text, result], delays=[0, 0, answer.delay])


@dataclass
class PipelineRig:
    """The pipeline machinery of one test (see the module)."""

    store: Store
    runs: RunManager
    engine: DurableEngine
    walker: Walker
    runner: DurableRunner
    service: PipelineService
    broker: ApprovalBroker
    model: Model
    workspace: Path
    caller: PipelineCaller = field(default_factory=lambda: PipelineCaller(USER))

    async def create(
        self, template: dict[str, Any], *, items: tuple[str, ...] = (), params: dict[str, Any] | None = None
    ) -> Pipeline:
        request = CreateRequest(
            template=template,
            params=params or {},
            workspace=str(self.workspace),
            description="the test's task",
            items=tuple(ItemDraft(t, f"detail of {t}", f"{t} works") for t in items),
        )
        created = await self.service.create(request, self.caller)
        return self.store.get_pipeline(created["id"])

    async def wait(self, pipeline_id: str, *statuses: PipelineStatus) -> Pipeline:
        """Poll (up to :data:`WAIT_S`) until the pipeline is in one of ``statuses``; its record."""
        with anyio.fail_after(WAIT_S):
            while True:
                pipeline = self.store.get_pipeline(pipeline_id)
                if pipeline.status in statuses:
                    return pipeline
                await anyio.sleep(0.05)

    async def wait_for(self, check: Callable[[], bool]) -> None:
        """Poll (up to :data:`WAIT_S`) until ``check()``."""
        with anyio.fail_after(WAIT_S):
            while not check():  # noqa: ASYNC110 - polls the store, which signals nothing
                await anyio.sleep(0.05)

    def replay_review(self, pipeline_id: str) -> Approval | None:
        """The pending replay review of the pipeline, if one is open."""
        pending = self.store.list_approvals(status="pending", kinds=("pipeline_replay",))
        return next((a for a in pending if a.input.get("pipelineId") == pipeline_id), None)

    async def answer_replay(self, pipeline_id: str, *, approve: bool = True) -> Approval:
        """Wait for the pipeline's replay review and answer it as the person (:data:`USER`)."""
        await self.wait_for(lambda: self.replay_review(pipeline_id) is not None)
        review = self.replay_review(pipeline_id)
        assert review is not None
        return await self.broker.answer(review.id, approve=approve, decided_by=USER)

    async def resume(self, pipeline_id: str, request: ResumeRequest | None = None) -> dict[str, Any]:
        """Resume as the person, approving the replay review the resume asked for (seed 000)."""
        answer = await self.service.resume(pipeline_id, self.caller, request or ResumeRequest())
        if "pendingApproval" in answer:
            await self.broker.answer(answer["pendingApproval"]["requestId"], approve=True, decided_by=USER)
        return answer

    def status(self, pipeline_id: str) -> dict[str, Any]:
        from octipusd.pipelines.status import status_document

        return status_document(self.store.pipeline_snapshot(pipeline_id))


def git_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    return workspace


@pytest.fixture
def engine_database(migrated_store_url: str, request: pytest.FixtureRequest) -> Iterator[str]:
    """The durable engine's system database beside the test's store (dropped after, PostgreSQL)."""
    url = system_database_url(migrated_store_url)
    try:
        yield url
    finally:
        if make_url(url).get_backend_name() == "postgresql":
            with admin_connect(request.getfixturevalue("postgres_url")) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)')


@pytest.fixture
def limits() -> PipelineLimits:
    """The pipelines' limits of the test (override to shorten the watchdog)."""
    return PipelineLimits()


@pytest.fixture
def settings() -> Settings:
    """The daemon's settings of the test (override to bound admission)."""
    return Settings()


@pytest.fixture
async def pipelines(
    store: Store, engine_database: str, tmp_path: Path, limits: PipelineLimits, settings: Settings
) -> AsyncIterator[PipelineRig]:
    """The pipeline machinery on the test's store (SQLite and PostgreSQL)."""
    model = Model()
    launcher = ReplayLauncher(lambda spec, run_id: _recording(model, store, spec, run_id))
    runs, gate, broker = replayed_runs(settings, store, tmp_path, launcher)
    hub = runs.services.hub
    gate.add_allowance(GateCommandAllowance(store))  # as the composition root does (app_pipelines)
    gate.add_allowance(ApprovedCalls(store))
    engine = DurableEngine(
        engine_database, workflows=(PIPELINE_WALK,), has_open_work=store.has_open_pipelines
    )
    executor = StageExecutor(StageRuns(runs.services, runs.registry))
    walker = Walker(store, engine, executor, WalkerLimits(), emit=hub.emit)
    install_walker(walker)
    templates = TemplateService(store)
    runner = DurableRunner(store, engine, walker, templates, default_adapter=ADAPTER, limits=limits)
    broker.add_listener(runner.on_answer)
    service = PipelineService(store, runner, limits)
    rig = PipelineRig(store, runs, engine, walker, runner, service, broker, model, git_workspace(tmp_path))
    try:
        async with anyio.create_task_group() as tg:
            runs.bind(tg)
            runner.bind(tg)
            yield rig
            await runs.shutdown("the test ended")
            await engine.shutdown()
            tg.cancel_scope.cancel()
    finally:
        await engine.shutdown()
