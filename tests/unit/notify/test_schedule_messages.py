"""The notification of a schedule's slot that did not start (issue 28 item 8): what the schedule does,
the slot, the reason (inert) and the schedules' page."""

from __future__ import annotations

from datetime import UTC, datetime

from octipusd.notify.messages import SCHEDULE_KIND, compose_schedule_failure
from octipusd.store.schedule_records import FiringStatus, Schedule, ScheduleFiring, ScheduleKind

SLOT = datetime(2026, 12, 8, 7, 0, tzinfo=UTC)


def test_a_failed_firing_names_the_schedule_its_slot_and_the_reason_inertly() -> None:
    schedule = Schedule(
        id="c" * 32,
        user="ann",
        cron="0 7 * * 1-5",
        kind=ScheduleKind.PROMPT,
        session_id=None,
        workspace="/home/ann/shop",
        prompt="run the \x1b[31mtests",
        pipeline=None,
    )
    firing = ScheduleFiring(
        id="f" * 32,
        schedule_id=schedule.id,
        slot_at=SLOT,
        status=FiringStatus.FAILED,
        error="workspace gone\x07",
    )
    message = compose_schedule_failure(schedule, firing, page=lambda path: f"https://octipus.example{path}")
    assert message.kind == SCHEDULE_KIND and message.title == "Octipus: a scheduled run did not start"
    assert (
        f"Schedule {'c' * 32} (0 7 * * 1-5:" in message.body
        and "2026-12-08T07:00:00+00:00 slot" in message.body
    )
    assert "workspace '/home/ann/shop'" in message.body
    assert (
        "\x1b" not in message.body and "\x07" not in message.body and "Reason: workspace gone" in message.body
    )
    assert message.link == "https://octipus.example/schedules" and message.link in message.body
    offline = compose_schedule_failure(schedule, firing, page=lambda path: None)
    assert offline.link is None and "Open:" not in offline.body
