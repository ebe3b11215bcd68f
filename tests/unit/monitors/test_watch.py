"""A monitor's durable workflow (FACTS.md §7) on the real engine, store and run core (SQLite and
PostgreSQL), the vendor's stream replayed: it wakes the owner once with a fresh observation, keeps its
deadline while paused, times out with the last observation, survives a restart, and a delivery cut
off by a stop is ``blocked`` and never delivered again."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from octipusd.durable.engine import DurableEngine
from octipusd.errors import ConfigError, ConflictError, ForbiddenError
from octipusd.monitors.watch import MONITOR_WATCH
from octipusd.pipelines.service import CreateRequest
from octipusd.pipelines.walk import PIPELINE_WALK
from octipusd.store.monitor_records import MonitorStatus
from tests.unit.monitors.conftest import MonitorRig
from tests.unit.pipelines.conftest import Answer, handoff

pytestmark = pytest.mark.anyio
#: Where the backend does not matter (the store's own tests and the restart tests here cover both).
SQLITE_ONLY = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)

ONE_STAGE = {"name": "one", "steps": [{"name": "work", "topic": "coding", "promptTemplate": "WORK-STAGE"}]}


def wake_ups(rig: MonitorRig, session_id: str) -> list[str]:
    """The prompts of the session's turns (its stage workers' runs left out)."""
    return [r.prompt for r in reversed(rig.store.list_runs(session_id=session_id)) if r.pipeline_id is None]


async def test_a_pipeline_status_monitor_wakes_the_owner_once_with_a_fresh_observation(
    monitors: MonitorRig,
) -> None:
    owner = monitors.session()
    assert owner.session_id is not None
    monitors.model.decide = lambda prompt: Answer(handoff(status="done", summary="ok"), delay=0.5)
    request = CreateRequest(template=ONE_STAGE, params={}, session_id=owner.session_id)
    pipeline = await monitors.pipelines.create(request, owner)
    monitor = await monitors.create(
        owner,
        source={"kind": "tool", "name": "get_pipeline_status", "args": {"id": pipeline["id"]}},
        condition={"path": "status", "operator": "in", "value": ["completed", "failed"]},
        intervalSeconds=0.05,
        continuation="collect the results",
    )
    assert monitor.source["args"] == {"id": pipeline["id"], "includeHistory": False}
    done = await monitors.wait(monitor.id, MonitorStatus.COMPLETED, MonitorStatus.BLOCKED)
    assert done.status is MonitorStatus.COMPLETED, done.error
    assert done.checks >= 1  # it saw the pipeline running first
    assert done.match is not None and done.match["observed"] == "completed"
    assert "history" not in done.match["value"]  # includeHistory: false
    assert done.delivery is not None and done.delivery["mode"] == "turn"
    await monitors.wait_for(lambda: len(wake_ups(monitors, owner.session_id or "")) == 1)
    (text,) = wake_ups(monitors, owner.session_id)
    assert "matched" in text and "Original match" in text and "Fresh observation" in text
    assert '"status": "completed"' in text.split("Fresh observation")[1]
    assert "collect the results" in text
    turn = monitors.store.get_run(done.delivery["runId"])
    await anyio.sleep(0.3)  # a window for a second delivery (there must be none)
    assert len(wake_ups(monitors, owner.session_id)) == 1 and turn.prompt == text
    with pytest.raises(ConflictError, match="is completed"):
        await monitors.service.cancel(monitor.id, owner)


@SQLITE_ONLY
async def test_pausing_keeps_the_deadline_and_the_timeout_wakes_with_the_last_observation(
    monitors: MonitorRig,
) -> None:
    owner = monitors.session()
    assert owner.session_id is not None
    monitors.store.save_work_plan(owner.session_id, {"goal": "first"})
    monitor = await monitors.create(
        owner,
        source={"kind": "tool", "name": "get_work_plan", "args": {}},
        condition={"path": "plan.goal", "operator": "equals", "value": "never"},
        intervalSeconds=0.05,
        deadlineSeconds=1.0,
    )
    await monitors.wait_for(lambda: monitors.store.get_monitor(monitor.id).checks >= 1)
    paused = await monitors.service.pause(monitor.id, owner)
    assert paused["status"] == "paused" and paused["deadline"] == monitor.deadline_at.isoformat()
    ended = await monitors.wait(monitor.id, MonitorStatus.TIMED_OUT, MonitorStatus.BLOCKED)
    assert ended.status is MonitorStatus.TIMED_OUT and ended.fired == "timeout", ended.error
    assert ended.deadline_at == monitor.deadline_at
    assert ended.last_observation is not None and ended.last_observation["observed"] == "first"
    await monitors.wait_for(lambda: len(wake_ups(monitors, owner.session_id or "")) == 1)
    (text,) = wake_ups(monitors, owner.session_id)
    assert "timed out" in text and "Last observation" in text and '"first"' in text


async def test_changed_survives_a_restart_and_a_missing_field_is_no_change(monitors: MonitorRig) -> None:
    owner = monitors.session()
    assert owner.session_id is not None
    monitor = await monitors.create(
        owner,
        source={"kind": "tool", "name": "get_work_plan", "args": {}},
        condition={"path": "plan.goal", "operator": "changed"},
        intervalSeconds=0.05,
    )
    await monitors.wait_for(lambda: monitors.store.get_monitor(monitor.id).checks >= 2)
    first = monitors.store.get_monitor(monitor.id)
    assert first.status is MonitorStatus.ARMED and first.baseline is None  # no plan: unavailable
    assert first.last_observation is not None and first.last_observation["state"] == "unavailable"
    monitors.store.save_work_plan(owner.session_id, {"goal": "a"})
    await monitors.wait_for(lambda: monitors.store.get_monitor(monitor.id).baseline == {"value": "a"})
    await monitors.restart()
    monitors.store.save_work_plan(owner.session_id, {"goal": "b"})
    done = await monitors.wait(monitor.id, MonitorStatus.COMPLETED, MonitorStatus.BLOCKED)
    assert done.status is MonitorStatus.COMPLETED and done.match is not None and done.match["observed"] == "b"
    await monitors.wait_for(lambda: len(wake_ups(monitors, owner.session_id or "")) == 1)


class Hanging:
    """A delivery that never ends (a daemon's stop cuts it); counts its calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def wake(self, session_id: str, text: str) -> dict[str, Any]:
        self.calls.append(text)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_a_delivery_cut_off_by_a_stop_is_blocked_and_never_delivered_again(
    monitors: MonitorRig,
) -> None:
    hanging = Hanging()
    monitors.waker = hanging
    await monitors.restart()
    owner = monitors.session()
    at = (datetime.now(UTC) + timedelta(seconds=0.2)).isoformat()
    monitor = await monitors.create(owner, source={"kind": "time", "at": at})
    await monitors.wait(monitor.id, MonitorStatus.DELIVERING)
    await monitors.wait_for(lambda: len(hanging.calls) == 1)
    await monitors.restart()  # the engine stops mid-delivery; the next one recovers the workflow
    blocked = await monitors.wait(monitor.id, MonitorStatus.BLOCKED)
    assert blocked.error is not None and "cut off" in blocked.error and blocked.fired == "match"
    await anyio.sleep(0.2)
    assert len(hanging.calls) == 1
    with pytest.raises(ConflictError):
        await monitors.service.resume(monitor.id, owner)


@SQLITE_ONLY
async def test_cancel_ends_the_workflow_and_monitors_are_refused_in_a_shared_space(
    monitors: MonitorRig,
) -> None:
    owner = monitors.session()
    monitor = await monitors.create(
        owner,
        source={"kind": "event", "type": "run_finished"},
        condition={"path": "status", "operator": "equals", "value": "failed"},
        intervalSeconds=0.05,
    )
    assert (await monitors.service.cancel(monitor.id, owner))["status"] == "cancelled"
    with pytest.raises(ConflictError, match="is cancelled"):
        await monitors.service.resume(monitor.id, owner)
    await monitors.wait_for(lambda: not monitors.store.has_active_monitors())
    other = monitors.session()
    with pytest.raises(ForbiddenError, match="another session"):
        await monitors.service.pause(monitor.id, other)
    space = monitors.store.create_space(name="team", created_by="ann")
    shared = monitors.store.create_session(
        workspace=str(monitors.workspace), adapter="claude-code", space_id=space.id
    )
    caller = type(owner)(owner.user, session_id=shared.id, workspace=owner.workspace)
    with pytest.raises(ForbiddenError, match="refused in a shared space"):
        await monitors.create(caller, source={"kind": "time", "at": datetime.now(UTC).isoformat()})


@SQLITE_ONLY
async def test_an_event_source_fires_on_its_own_sessions_pipeline_change_only(monitors: MonitorRig) -> None:
    owner, stranger = monitors.session(), monitors.session()
    assert owner.session_id is not None and stranger.session_id is not None
    monitor = await monitors.create(
        owner,
        source={"kind": "event", "type": "pipeline_status"},
        condition={"path": "to", "operator": "equals", "value": "completed"},
        intervalSeconds=0.05,
    )
    theirs = await monitors.pipelines.create(
        CreateRequest(template=ONE_STAGE, params={}, session_id=stranger.session_id), stranger
    )
    await monitors.wait_for(lambda: monitors.store.get_pipeline(theirs["id"]).status.value == "completed")
    assert monitors.store.get_monitor(monitor.id).status is MonitorStatus.ARMED  # another session's event
    mine = await monitors.pipelines.create(
        CreateRequest(template=ONE_STAGE, params={}, session_id=owner.session_id), owner
    )
    done = await monitors.wait(monitor.id, MonitorStatus.COMPLETED, MonitorStatus.BLOCKED)
    assert done.match is not None and done.match["value"]["pipelineId"] == mine["id"], done
    assert done.match["value"]["to"] == "completed"
    await monitors.wait_for(lambda: len(wake_ups(monitors, owner.session_id or "")) == 1)
    assert wake_ups(monitors, stranger.session_id) == []


async def test_a_long_watch_continues_in_fresh_workflows_and_hears_a_pause_and_resume(
    monitors: MonitorRig,
) -> None:
    owner = monitors.session()
    assert owner.session_id is not None and monitors.service.watcher is not None
    monitors.service.watcher.limits = replace(monitors.service.watcher.limits, looks_per_workflow=3)
    monitors.store.save_work_plan(owner.session_id, {"goal": "first"})
    monitor = await monitors.create(
        owner,
        source={"kind": "tool", "name": "get_work_plan", "args": {}},
        condition={"path": "plan.goal", "operator": "equals", "value": "done"},
        intervalSeconds=0.05,
        deadlineSeconds=600.0,  # a lost wake-up of the resume would wait for it
    )
    await monitors.wait_for(lambda: monitors.store.get_monitor(monitor.id).checks >= 8)
    first = await monitors.engine.workflow(monitor.id)
    assert first is not None and first.status == "SUCCESS"
    assert len(await monitors.engine.list_steps(monitor.id)) <= 3 * 3 + 2  # 3 looks and the hand-over
    await monitors.restart()  # the current generation is recovered
    await monitors.service.pause(monitor.id, owner)
    pending = await monitors.engine.list_pending(MONITOR_WATCH.name, id_prefix=monitor.id)
    assert pending and all(w.workflow_id.startswith(f"{monitor.id}.") for w in pending)
    await monitors.service.resume(monitor.id, owner)
    monitors.store.save_work_plan(owner.session_id, {"goal": "done"})
    done = await monitors.wait(monitor.id, MonitorStatus.COMPLETED, MonitorStatus.BLOCKED)
    assert done.status is MonitorStatus.COMPLETED, done.error
    await monitors.wait_for(lambda: len(wake_ups(monitors, owner.session_id or "")) == 1)


@SQLITE_ONLY
async def test_a_refresh_that_fails_is_delivered_beside_the_match(
    monitors: MonitorRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = monitors.session()
    assert owner.session_id is not None
    monitors.store.save_work_plan(owner.session_id, {"goal": "done"})
    probes, reads = monitors.service.probes, []
    first_read = probes.read

    async def failing_refresh(name: str, args: dict[str, Any], caller: Any) -> Any:
        reads.append(name)  # the check reads; the delivery's refresh breaks (a bug of the probed tool)
        if len(reads) > 1:
            raise RuntimeError("the probed tool broke")
        return await first_read(name, args, caller)

    monkeypatch.setattr(probes, "read", failing_refresh)
    monitor = await monitors.create(
        owner,
        source={"kind": "tool", "name": "get_work_plan", "args": {}},
        condition={"path": "plan.goal", "operator": "equals", "value": "done"},
        intervalSeconds=0.05,
    )
    done = await monitors.wait(monitor.id, MonitorStatus.COMPLETED, MonitorStatus.BLOCKED)
    assert done.status is MonitorStatus.COMPLETED, done.error
    await monitors.wait_for(lambda: len(wake_ups(monitors, owner.session_id or "")) == 1)
    (text,) = wake_ups(monitors, owner.session_id)
    assert "the refresh failed: RuntimeError: the probed tool broke" in text


@SQLITE_ONLY
async def test_a_cut_off_delivery_whose_end_was_recorded_keeps_it(monitors: MonitorRig) -> None:
    owner = monitors.session()
    at = (datetime.now(UTC) + timedelta(seconds=0.1)).isoformat()
    monitor = await monitors.create(owner, source={"kind": "time", "at": at})
    await monitors.wait(monitor.id, MonitorStatus.COMPLETED)
    assert monitors.service.watcher is not None
    # the restart guard's answer when the stop came after the end was recorded, before the step was
    assert await monitors.service.watcher.block(monitor.id) == "completed"
    assert monitors.store.get_monitor(monitor.id).status is MonitorStatus.COMPLETED


@SQLITE_ONLY
async def test_a_monitor_whose_workflow_cannot_start_is_not_left_armed(monitors: MonitorRig) -> None:
    owner = monitors.session()
    await monitors.engine.shutdown()
    broken = DurableEngine(monitors.database, workflows=(PIPELINE_WALK,))  # the watch not registered
    monitors.engines.append(broken)
    assert monitors.service.watcher is not None
    monitors.service.watcher.engine = broken
    with pytest.raises(ConfigError, match="not registered"):
        await monitors.create(owner, source={"kind": "event", "type": "run_finished"})
    (left,) = monitors.store.list_monitors(user=owner.user, session_id=owner.session_id)
    assert (
        left.status is MonitorStatus.CANCELLED and left.error is not None and "could not start" in left.error
    )
    assert not monitors.store.has_active_monitors()


@SQLITE_ONLY
async def test_a_wake_up_steers_the_owners_busy_root_run_and_posts_no_turn(monitors: MonitorRig) -> None:
    owner = monitors.session()
    assert owner.session_id is not None
    monitors.model.decide = lambda prompt: Answer("still busy", delay=3.0)
    busy = await monitors.runs.post_turn(owner.session_id, "a long turn")
    at = (datetime.now(UTC) + timedelta(seconds=0.2)).isoformat()
    monitor = await monitors.create(owner, source={"kind": "time", "at": at})
    done = await monitors.wait(monitor.id, MonitorStatus.COMPLETED, MonitorStatus.BLOCKED)
    assert done.delivery is not None and done.delivery["mode"] == "steer", done
    assert done.delivery["runId"] == busy.id
    assert wake_ups(monitors, owner.session_id) == ["a long turn"]  # never queued behind the turn
