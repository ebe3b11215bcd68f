"""The turn's final result ends the run within a grace, whatever the vendor does afterwards (issue 26
item 1).

Real store (SQLite and PostgreSQL), event hub and bridge; the vendor is a replay of Claude's
stream-json (:mod:`octipusd.testing.replay`) that does not exit after its result: it stays silent with
its output open, or keeps printing. The run still ends with that result, holds nothing of what came
after it, and the session's next turn runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from octipusd.runtime.services import RunLimits
from octipusd.store.records import RunStatus
from octipusd.store.repository import Store
from octipusd.testing.replay import Recording
from tests.unit.runtime.test_supervisor import _daemon, _init, _kinds, _new_session, _result, _text, _turn

pytestmark = pytest.mark.anyio

#: A grace short enough for a unit test (the daemon's is a few seconds).
LIMITS = RunLimits(result_grace_s=0.3)
#: How long a vendor that outlives its result goes on (seconds): far past the test's bounded wait.
FOREVER = 3600.0


def _after_result(kinds: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [d for k, d in kinds if k == "notice" and "after_result" in d]


def _well_behaved(sid: str) -> Recording:
    return Recording.of([_init(sid), _result(sid, "again")])


async def test_a_vendor_silent_after_its_result_ends_its_run_with_that_result(
    store: Store, tmp_path: Path
) -> None:
    def lingering(sid: str) -> Recording:
        return Recording.of(
            [_init(sid), _text(sid, "hello"), _result(sid, "hello", tokens=7)], exit_delay=FOREVER
        )

    async with _daemon(store, tmp_path, [lingering, _well_behaved], LIMITS) as (runs, launcher):
        session = _new_session(store, tmp_path)
        final = await _turn(runs, session)
        assert final.status == RunStatus.SUCCEEDED, final.reason
        assert final.result_text == "hello" and final.input_tokens == 7 and final.output_tokens == 7
        first = launcher.transports[0]
        assert first.stdin_closed and first.reaped and first.returncode is not None
        assert [(d["lingered"], d["after_result"]) for d in _after_result(_kinds(store, final.id))] == [
            (True, 0)
        ]
        # the slot and the session are free at once: the next turn runs
        again = await _turn(runs, session, "again")
    assert again.status == RunStatus.SUCCEEDED and again.result_text == "again"


async def test_what_a_vendor_prints_after_its_result_is_not_part_of_the_run(
    store: Store, tmp_path: Path
) -> None:
    def chatty(sid: str) -> Recording:
        tool = {
            "type": "assistant",
            "message": {
                "id": "m2",
                "role": "assistant",
                "content": [
                    {"type": "tool_use", "id": "toolu_late", "name": "Bash", "input": {"command": "id"}}
                ],
                "usage": {"input_tokens": 500, "output_tokens": 500},
            },
            "session_id": sid,
        }
        late = [tool, _text(sid, "late text"), _result(sid, "late answer", tokens=999)]
        lines = [_init(sid), _text(sid, "hello"), _result(sid, "hello", tokens=7), *late * 200]
        return Recording.of(lines, delays=[0.0] * 3 + [0.05] * (len(lines) - 3))

    async with _daemon(store, tmp_path, [chatty], LIMITS) as (runs, _launcher):
        session = _new_session(store, tmp_path)
        final = await _turn(runs, session)
    assert final.status == RunStatus.SUCCEEDED, final.reason
    assert final.result_text == "hello" and final.input_tokens == 7 and final.output_tokens == 7
    kinds = _kinds(store, final.id)
    assert not [d for _k, d in kinds if "late" in str(d)]
    assert [k for k, _d in kinds].count("result") == 1 and "tool_use" not in [k for k, _d in kinds]
    (note,) = _after_result(kinds)
    assert note["lingered"] and note["after_result"] >= 3, note
    assert [m.text for m in store.list_messages(session, generation=0) if m.role == "assistant"] == ["hello"]


async def test_a_vendor_taking_its_prompt_after_an_earlier_result_goes_on_with_the_turn(
    store: Store, tmp_path: Path
) -> None:
    """A resumed Claude first answers the notification of a background task its earlier process left
    (a result of no turn), then replays the launch prompt and answers it; then it stays (its own
    background task). The run's result is the prompt's answer, and it ends within the grace after it."""

    def resumed(sid: str) -> Recording:
        notification = {
            "type": "system",
            "subtype": "task_notification",
            "task_id": "b1",
            "status": "stopped",
        }
        background = {**_result(sid, "the notification's answer", tokens=0), "num_turns": 0}
        replay = {
            "type": "user",
            "message": {"role": "user", "content": "go"},
            "session_id": sid,
            "isReplay": True,
        }
        lines = [notification, _init(sid), background, _init(sid), replay, _text(sid, "the answer")]
        return Recording.of([*lines, _result(sid, "the answer", tokens=5)], exit_delay=FOREVER)

    async with _daemon(store, tmp_path, [resumed], LIMITS) as (runs, _launcher):
        final = await _turn(runs, _new_session(store, tmp_path))
    assert final.status == RunStatus.SUCCEEDED, final.reason
    assert final.result_text == "the answer" and final.output_tokens == 5
    kinds = _kinds(store, final.id)
    assert [d["text"] for k, d in kinds if k == "result"] == ["the notification's answer", "the answer"]
    assert [(d["lingered"], d["after_result"]) for d in _after_result(kinds)] == [(True, 0)]
