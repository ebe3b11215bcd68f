"""The schedules' service (issue 28 item 8) over the real store, run core and durable engine: every
field checked once with an error naming it; the engine's timers follow add, pause, resume and remove;
the start-up fires the latest missed slot once (not with ``schedules.catchUpMissed`` off), as an
unattended turn, and a firing that cannot start is recorded and notified."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from octipusd.durable.schedules import latest_slot
from octipusd.errors import InvalidRequestError, NotFoundError
from octipusd.schedules.service import ScheduleRequest
from octipusd.store.schedule_records import FiringStatus, ScheduleStatus
from tests.unit.schedules.conftest import USER, ScheduleRig

pytestmark = pytest.mark.anyio

#: How a firing ends.
SETTLED = frozenset({FiringStatus.STARTED, FiringStatus.FAILED, FiringStatus.SKIPPED})
#: Every day at 07:00 UTC: no slot comes during a test, so only the start-up fires.
DAILY = "0 7 * * *"


def _request(rig: ScheduleRig, **fields: Any) -> ScheduleRequest:
    base: dict[str, Any] = {"cron": DAILY, "workspace": str(rig.workspace), "prompt": "the nightly check"}
    return ScheduleRequest(**{**base, **fields})


#: Requests with one wrong field (over a good one) and what the error says.
WRONG: list[tuple[dict[str, Any], str]] = [
    ({"cron": "0 7 * *"}, "cron: '0 7 * *' is not a cron expression; give 5 fields"),
    ({"cron": "61 * * * *"}, "cron:"),
    ({"cron": "* * * * * * *"}, "cron:"),
    ({"session_id": "s" * 32}, "session_id, workspace: give exactly one"),
    ({"workspace": None}, "session_id, workspace: give exactly one"),
    ({"pipeline": "nightly"}, "prompt, pipeline: give exactly one"),
    ({"prompt": None}, "prompt, pipeline: give exactly one"),
    ({"prompt": "   "}, "prompt: give the turn's text"),
    ({"prompt": None, "pipeline": " "}, "pipeline: give a template's name"),
    ({"params": {"goal": "x"}}, "params: only a --pipeline schedule"),
    ({"workspace": "relative/dir"}, "workspace: 'relative/dir' is not an absolute path"),
    ({"workspace": "/nonexistent/octipus"}, "workspace: '/nonexistent/octipus' is not a directory here"),
    ({"cron": "0 7 30 2 *"}, "cron: '0 7 30 2 *' never fires (no such date"),
    ({"prompt": None, "pipeline": "review-branch"}, "parameters.branch: required by template"),
    (
        {"prompt": None, "pipeline": "review branch", "params": {"branch": "x"}},
        "pipeline: no template is named",
    ),
    ({"prompt": None, "pipeline": "review-branch", "params": {"branhc": "x"}}, "parameters.branhc:"),
]


async def test_add_names_the_wrong_field_and_keeps_nothing(schedules: ScheduleRig) -> None:
    for fields, named in WRONG:
        with pytest.raises(InvalidRequestError) as raised:
            await schedules.service.add(_request(schedules, **fields), USER)
        assert named in raised.value.message, (fields, raised.value.message)
    assert schedules.store.list_schedules() == []
    assert not schedules.engine.started  # nothing reached the engine


async def test_a_pipeline_schedule_of_an_unknown_template_is_not_found_and_keeps_nothing(
    schedules: ScheduleRig,
) -> None:
    with pytest.raises(NotFoundError, match="pipeline template 'no-such-template' not found"):
        await schedules.service.add(_request(schedules, prompt=None, pipeline="no-such-template"), USER)
    assert schedules.store.list_schedules() == []


async def test_a_schedule_on_a_space_session_is_refused_and_an_unknown_session_is_not_found(
    schedules: ScheduleRig,
) -> None:
    space = schedules.store.create_space(name="team", created_by=USER)
    shared = schedules.store.create_session(
        workspace=str(schedules.workspace), adapter="claude-code", space_id=space.id
    )
    with pytest.raises(
        InvalidRequestError, match=r"session_id: session \w+ is in a shared space, and spaces refuse"
    ):
        await schedules.service.add(_request(schedules, workspace=None, session_id=shared.id), USER)
    with pytest.raises(NotFoundError):
        await schedules.service.add(_request(schedules, workspace=None, session_id="0" * 32), USER)
    assert schedules.store.list_schedules() == []


async def test_the_engine_timer_follows_add_pause_resume_and_remove(schedules: ScheduleRig) -> None:
    service = schedules.service
    added = await service.add(_request(schedules), USER)
    sid = added["id"]
    assert added["status"] == "active" and added["nextSlotAt"].endswith("07:00:00+00:00")
    assert await service.durable.known() == {sid: "ACTIVE"}
    assert (await service.pause(sid, USER))["status"] == "paused"
    assert await service.durable.known() == {sid: "PAUSED"}
    assert (await service.resume(sid, USER))["status"] == "active"
    assert await service.durable.known() == {sid: "ACTIVE"}
    listed = await service.list_schedules(USER)
    assert [s["id"] for s in listed] == [sid] and listed[0]["firings"] == []
    assert await service.list_schedules("bob") == []
    assert (await service.remove(sid, USER))["status"] == "removed"
    assert await service.durable.known() == {}
    with pytest.raises(NotFoundError):
        await service.show(sid, USER)


async def test_start_up_fires_the_latest_missed_slot_once_as_an_unattended_turn(
    schedules: ScheduleRig,
) -> None:
    rig, now = schedules, datetime.now(UTC)
    rig.clock.at = now - timedelta(days=3)  # created three days ago: three daily slots passed since
    sid = (await rig.service.add(_request(rig), USER))["id"]
    rig.clock.at = None
    await rig.service.durable.delete(sid)  # as if the engine lost it: the start-up puts it back

    await rig.service.start_up()
    await rig.wait_for(lambda: [f for f in rig.store.list_firings(sid) if f.status is FiringStatus.STARTED])
    (firing,) = rig.store.list_firings(sid)
    assert firing.caught_up and firing.slot_at == latest_slot(DAILY, now) and firing.delivery == "turn"
    assert firing.session_id is not None and firing.run_id is not None
    session = rig.store.get_session(firing.session_id)
    assert not session.attended and session.workspace == str(rig.workspace)
    assert rig.store.get_run(firing.run_id).prompt == "the nightly check"
    assert await rig.service.durable.known() == {sid: "ACTIVE"}

    await rig.service.start_up()  # a second start-up: that slot was fired
    assert len(rig.store.list_firings(sid)) == 1


@pytest.mark.parametrize("settings", [{"schedules": {"catchUpMissed": False}}], indirect=True)
async def test_start_up_fires_no_missed_slot_with_catch_up_off(schedules: ScheduleRig) -> None:
    rig = schedules
    rig.clock.at = datetime.now(UTC) - timedelta(days=3)
    sid = (await rig.service.add(_request(rig), USER))["id"]
    rig.clock.at = None
    await rig.service.start_up()
    assert rig.store.list_firings(sid) == []


async def test_a_firing_that_cannot_start_is_recorded_and_notified(schedules: ScheduleRig) -> None:
    rig = schedules
    gone = rig.workspace / "gone"
    gone.mkdir()
    rig.clock.at = datetime.now(UTC) - timedelta(days=1, hours=1)
    sid = (await rig.service.add(_request(rig, workspace=str(gone)), USER))["id"]
    rig.clock.at = None
    gone.rmdir()
    await rig.service.start_up()
    await rig.wait_for(lambda: rig.failures)
    ((schedule, firing),) = rig.failures
    assert schedule.id == sid and firing.status is FiringStatus.FAILED and firing.caught_up
    assert firing.error is not None and "is not a directory any more" in firing.error
    assert rig.store.get_schedule(sid).status is ScheduleStatus.ACTIVE


async def test_a_pipeline_schedule_starts_the_template_as_its_user_in_a_new_unattended_session(
    schedules: ScheduleRig,
) -> None:
    rig = schedules
    rig.clock.at = datetime.now(UTC) - timedelta(days=1, hours=1)
    request = _request(rig, prompt=None, pipeline="review-branch", params={"branch": "main"})
    sid = (await rig.service.add(request, USER))["id"]
    rig.clock.at = None
    await rig.service.start_up()
    await rig.wait_for(lambda: [f for f in rig.store.list_firings(sid) if f.status in SETTLED])
    (firing,) = rig.store.list_firings(sid)
    assert firing.status is FiringStatus.STARTED and firing.pipeline_id is not None, firing
    pipeline = rig.store.get_pipeline(firing.pipeline_id)
    assert (pipeline.user, pipeline.name, pipeline.params["branch"]) == (USER, "review-branch", "main")
    assert pipeline.session_id == firing.session_id
    assert not rig.store.get_session(pipeline.session_id).attended
