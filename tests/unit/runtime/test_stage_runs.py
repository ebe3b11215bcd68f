"""A pipeline stage attempt as a managed run (issue 27 "Stage workers are runs", "Attempts").

Real store (SQLite and PostgreSQL), event hub, gate, journal and bridge; the vendor is a replay of
Claude's stream (:mod:`octipusd.testing.replay`), as in ``test_supervisor``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.errors import InvalidRequestError
from octipusd.runtime.host import action_scope
from octipusd.runtime.manager import RunManager
from octipusd.runtime.planning import stage_tools
from octipusd.runtime.stage_runs import StageLimits, StageRequest, StageRuns
from octipusd.settings_swarm import SwarmSettings
from octipusd.store.records import RunStatus
from octipusd.store.repository import Store
from octipusd.testing.replay import Recording
from tests.unit.runtime.test_supervisor import ADAPTER, _daemon, _init, _kinds, _new_session, _result, _text

pytestmark = pytest.mark.anyio


def _request(session_id: str, attempt: str = "a" * 32, **changes: Any) -> StageRequest:
    request = StageRequest(
        pipeline_id="p" * 32,
        session_id=session_id,
        node_key="n1",
        stage="implement",
        item_id="i" * 32,
        attempt_id=attempt,
        attempt_number=1,
        prompt="implement the item",
    )
    return dataclasses.replace(request, **changes)


def _bash(sid: str) -> dict[str, Any]:
    use = {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}
    return {
        "type": "assistant",
        "message": {"id": "m0", "role": "assistant", "content": [use]},
        "session_id": sid,
    }


class _Texts:
    def __init__(self, then: Any = None) -> None:
        self.seen: list[str] = []
        self.then = then

    async def __call__(self, text: str) -> None:
        self.seen.append(text)
        if self.then is not None:
            self.then()
            self.then = None


def _stage_runs(runs: RunManager, interval: float = 15.0) -> StageRuns:
    return StageRuns(runs.services, runs.registry, StageLimits(text_interval_s=interval))


async def test_a_stage_run_succeeds_with_its_text_model_tools_tokens_and_counters(
    store: Store, tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    await anyio.run_process(["git", "init", "-q", str(workspace)])

    def script(sid: str) -> Recording:
        lines = [_init(sid), _bash(sid), _text(sid, "working"), _result(sid, "all done", tokens=5)]
        return Recording.of(lines, delays=[0, 0, 0, 3.0])

    async with _daemon(store, tmp_path, [script]) as (runs, launcher):
        session = store.create_session(workspace=str(workspace), adapter=ADAPTER).id
        store.create_model_row(name="stage-opus", adapter=ADAPTER, model="opus")
        texts = _Texts(then=lambda: (workspace / "made.txt").write_text("x"))  # the worker "changes" a file
        request = _request(session, model="stage-opus", tool_ids=("shell", "nothing_such"))
        handle = await _stage_runs(runs, interval=0.05).start(request, texts)
        with anyio.fail_after(30):
            while (live := runs.registry.get(handle.run_id)) is None or not live.tools:  # noqa: ASYNC110 - polls the run's plan
                await anyio.sleep(0.02)
        assert list(live.tools) == ["shell__run", *BACKGROUND]
        assert live.identity is not None and live.identity.stage == request.tag
        scope = action_scope(live.identity)  # the journal's correlation columns
        assert (scope.pipeline_id, scope.node_id) == (request.pipeline_id, "n1")
        with anyio.fail_after(30):
            outcome = await handle.wait()
    assert outcome.status == RunStatus.SUCCEEDED and not outcome.stopped, outcome.reason
    assert outcome.text == "all done" and outcome.tokens == 10
    assert (outcome.counters.changed_files, outcome.counters.disk_changed) == (1, True)
    assert outcome.counters.commands_run == 1
    assert texts.seen == ["working"]  # handed out while it worked; nothing again after it succeeded
    assert "--model=opus" in launcher.launches[0][0].argv  # the stage's model row
    run = store.get_run(handle.run_id)
    assert (run.pipeline_id, run.pipeline_attempt_id, run.stage, run.item_id) == (
        request.pipeline_id,
        request.attempt_id,
        "implement",
        request.item_id,
    )
    assert run.resume_key == f"pipeline:{request.attempt_id}" and run.parent_run_id is None
    notices = [d["message"] for k, d in _kinds(store, run.id) if k == "notice"]
    assert any("nothing_such" in m for m in notices)
    assert store.list_messages(session, generation=0) == []  # a stage is no turn of the transcript


async def test_a_live_stage_run_does_not_block_a_root_turn_and_its_stop_says_stopped(
    store: Store, tmp_path: Path
) -> None:
    def stage(sid: str) -> Recording:
        return Recording.of([_init(sid), _text(sid, "half way"), _result(sid, "never")], delays=[0, 0, 60.0])

    def turn(sid: str) -> Recording:
        return Recording.of([_init(sid), _result(sid, "root answer")])

    async with _daemon(store, tmp_path, [stage, turn]) as (runs, _launcher):
        session = _new_session(store, tmp_path)
        texts = _Texts()
        handle = await _stage_runs(runs).start(_request(session), texts)
        with anyio.fail_after(30):
            while not any(d.get("text") == "half way" for _k, d in _kinds(store, handle.run_id)):  # noqa: ASYNC110 - polls the store
                await anyio.sleep(0.02)
        assert runs.registry.of_session(session) is None  # not the session's live root run
        root = await runs.post_turn(session, "hello")  # the owner keeps talking to its agent
        live = runs.registry.get(root.id)
        assert live is not None
        with anyio.fail_after(30):
            await live.done.wait()
        assert store.get_run(root.id).status == RunStatus.SUCCEEDED
        assert store.get_run(handle.run_id).status == RunStatus.RUNNING
        await runs.stop(handle.run_id, "stopped by the person")  # the runs stop API
        with anyio.fail_after(30):
            outcome = await handle.wait()
    assert outcome.stopped and outcome.status == RunStatus.CANCELLED
    assert outcome.reason == "stopped by the person" and outcome.text is None
    assert texts.seen == ["half way"]  # its text so far, once it ended without succeeding
    assert [r.id for r in store.list_runs(session_id=session)].count(handle.run_id) == 1


async def test_a_resumed_attempt_continues_its_vendor_session_and_a_new_attempt_starts_cold(
    store: Store, tmp_path: Path
) -> None:
    def answer(sid: str) -> Recording:
        return Recording.of([_init(sid), _result(sid, "ok")])

    async with _daemon(store, tmp_path, [answer, answer, answer]) as (runs, launcher):
        session = _new_session(store, tmp_path)
        stages = _stage_runs(runs)
        first = await (await stages.start(_request(session), _Texts())).wait()
        again = await (await stages.start(_request(session, resume=True), _Texts())).wait()
        other = await (await stages.start(_request(session, "b" * 32, resume=True), _Texts())).wait()
    assert [o.status for o in (first, again, other)] == [RunStatus.SUCCEEDED] * 3
    key = f"{ADAPTER}::pipeline:{'a' * 32}"
    record = store.get_vendor_session(session, key)
    assert record is not None
    resumed = [[a for a in spec.argv if a.startswith("--resume")] for spec, _ in launcher.launches]
    assert [bool(r) for r in resumed] == [False, True, False]
    assert (
        store.get_run(again.run_id).resumed
        and store.get_run(again.run_id).vendor_session_id == record.vendor_session_id
    )
    assert store.get_vendor_session(session, ADAPTER) is None  # the root's own record is untouched


async def test_a_failed_stage_hands_out_its_text_so_far(store: Store, tmp_path: Path) -> None:
    def script(sid: str) -> Recording:
        return Recording.of(
            [_init(sid), _text(sid, "partial work"), _result(sid, "", error="the API failed")]
        )

    async with _daemon(store, tmp_path, [script]) as (runs, _launcher):
        texts = _Texts()
        outcome = await (await _stage_runs(runs).start(_request(_new_session(store, tmp_path)), texts)).wait()
    assert outcome.status == RunStatus.FAILED and not outcome.stopped
    assert texts.seen == ["partial work"]
    assert outcome.counters.changed_files is None  # not a git work tree: unknown, the gate passes
    record = store.get_vendor_session(
        store.get_run(outcome.run_id).session_id, f"{ADAPTER}::pipeline:{'a' * 32}"
    )
    assert record is not None  # a resume of the failed attempt continues its conversation


async def test_an_unknown_model_row_is_refused_naming_it(store: Store, tmp_path: Path) -> None:
    async with _daemon(store, tmp_path, []) as (runs, _launcher):
        session = _new_session(store, tmp_path)
        with pytest.raises(InvalidRequestError, match="no-such-row"):
            await _stage_runs(runs).start(_request(session, model="no-such-row"), _Texts())
    assert store.list_runs(session_id=session) == []


#: The background command tools: the ``shell`` family with ``shell__run``.
BACKGROUND = ("shell__run_background", "shell__read_background", "shell__stop_background")


def test_a_stage_gets_the_tools_its_step_names() -> None:
    levels = SwarmSettings().levelDefaults
    default, unknown = stage_tools((), levels)
    assert [t.name for t in default] == [
        "get_cli_run_context",
        "get_work_plan",
        "shell__run",
        *BACKGROUND,
        "plan__add_items",  # a producesPlan stage puts its items on the plan with it
    ] and not unknown
    everything, _ = stage_tools(("*",), levels)
    assert {"spawn_child", "plan__add_items"} <= {t.name for t in everything}
    pipeline_tools = {"create_pipeline", "get_pipeline_status", "resume_pipeline", "stop_pipeline"}
    assert not pipeline_tools & {t.name for t in everything}  # a root run's only
    named, unknown = stage_tools(("create_pipeline", "stop_pipeline", "update_pipeline_items"), levels)
    assert named == () and len(unknown) == 3
    named, unknown = stage_tools(("plan",), levels)
    assert [t.name for t in named] == ["plan__add_items"] and not unknown
    chosen, unknown = stage_tools(("get_work_plan", "shell", "file_read"), levels)
    assert [t.name for t in chosen] == ["get_work_plan", "shell__run", *BACKGROUND] and unknown == (
        "file_read",
    )


async def test_a_stage_stopped_before_answering_keeps_its_vendor_session_for_the_attempts_resume(
    store: Store, tmp_path: Path
) -> None:
    def hangs(sid: str) -> Recording:  # the vendor announced its session, then works without answering
        return Recording.of([_init(sid), _result(sid, "never")], delays=[0, 3600.0])

    def answer(sid: str) -> Recording:
        return Recording.of([_init(sid), _result(sid, "ok")])

    key = f"{ADAPTER}::pipeline:{'a' * 32}"
    async with _daemon(store, tmp_path, [hangs, answer]) as (runs, launcher):
        session = _new_session(store, tmp_path)
        stages = _stage_runs(runs)
        handle = await stages.start(_request(session), _Texts())
        with anyio.fail_after(30):  # kept as soon as the vendor reported it (a daemon killed now keeps it)
            while store.get_vendor_session(session, key) is None:  # noqa: ASYNC110 - polls the store
                await anyio.sleep(0.02)
        await handle.stop("stop_pipeline")
        with anyio.fail_after(30):
            stopped = await handle.wait()
        assert stopped.stopped
        record = store.get_vendor_session(session, key)
        assert (
            record is not None and record.vendor_session_id == store.get_run(stopped.run_id).vendor_session_id
        )
        again = await (await stages.start(_request(session, resume=True), _Texts())).wait()
    assert again.status == RunStatus.SUCCEEDED, again.reason
    resumed = launcher.launches[1][0].argv
    assert f"--resume={record.vendor_session_id}" in resumed or record.vendor_session_id in resumed
    assert any(a.startswith("--resume") for a in resumed)
    assert store.get_run(again.run_id).resumed


async def test_the_changed_files_counter_sees_only_the_workspace_and_nothing_in_an_ignored_one(
    store: Store, tmp_path: Path
) -> None:
    outer = tmp_path / "outer"
    workspace, ignored = outer / "ws", outer / "ign" / "ws"
    for folder in (workspace, ignored):
        folder.mkdir(parents=True)
    await anyio.run_process(["git", "init", "-q", str(outer)])
    (outer / ".gitignore").write_text("ign/\n")
    async with _daemon(store, tmp_path, []) as (runs, _launcher):
        stages = _stage_runs(runs)
        before = await stages.snapshot(workspace)
        assert before is not None and before.entries == {}
        (outer / "elsewhere.txt").write_text("the daemon's own files, outside the workspace")
        (workspace / "made.txt").write_text("x")
        after = await stages.snapshot(workspace, before.root)
        assert after is not None and list(after.entries) == ["ws/made.txt"]
        assert await stages.snapshot(ignored) is None  # git cannot see it: unknown, the gate passes
