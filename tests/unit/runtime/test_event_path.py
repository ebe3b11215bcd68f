"""The batched event path on a real store (SQLite and PostgreSQL): the group-commit writer, the
in-memory sequence numbers, the followers' buffers, and the SSE frames (issue 13)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from octipusd.api.common import out
from octipusd.api.models import EventOut
from octipusd.api.sse import KEEPALIVE_FRAME, encode_batch, encode_event
from octipusd.errors import NotFoundError, StoreError
from octipusd.runtime.events import EventHub, EventLimits
from octipusd.store.event_store import NewEvent
from octipusd.store.event_writer import MAX_BATCH_EVENTS
from octipusd.store.records import RunEvent, RunStatus
from octipusd.store.repository import Store

pytestmark = pytest.mark.anyio


def _run(store: Store) -> str:
    session = store.create_session(workspace="/w", adapter="claude-code")
    return store.create_run(session_id=session.id, prompt="p", owner="me").id


async def test_concurrent_emitters_get_gap_free_ordered_sequences_committed_before_publication(
    store: Store,
) -> None:
    runs = [_run(store) for _ in range(4)]
    hub = EventHub(store)
    published: list[RunEvent] = []
    stored_when_published: list[bool] = []
    original = hub._publish

    def spy(events: list[RunEvent]) -> None:
        stored = {(e.run_id, e.seq) for r in runs for e in store.list_events(r, limit=10_000)}
        stored_when_published.append(all((e.run_id, e.seq) in stored for e in events))
        published.extend(events)
        original(events)

    hub._writer._published = spy

    async def emitter(run_id: str, n: int) -> None:
        for i in range(25):
            event = await hub.emit(run_id, "text", {"emitter": n, "i": i})
            assert event.data == {"emitter": n, "i": i}

    async with anyio.create_task_group() as tg:
        for n in range(12):
            tg.start_soon(emitter, runs[n % len(runs)], n)
    assert all(stored_when_published)
    for run_id in runs:
        events = store.list_events(run_id, limit=10_000)
        assert [e.seq for e in events] == list(range(1, 76))
        for n in range(12):  # each emitter's events keep their order
            mine = [e.data["i"] for e in events if e.data["emitter"] == n]
            assert mine == sorted(mine)
    assert sorted((e.run_id, e.seq) for e in published) == sorted((r, s) for r in runs for s in range(1, 76))


async def test_more_than_one_batch_queued_without_waiting_is_all_stored_in_order(store: Store) -> None:
    run_id = _run(store)
    hub = EventHub(store)
    pending = [hub.emit_soon(run_id, "text", {"i": i}) for i in range(MAX_BATCH_EVENTS * 2 + 5)]
    with anyio.fail_after(30):
        settled = [await hub.settle(p) for p in pending]
    assert [e.seq for e in settled] == list(range(1, len(pending) + 1))
    assert [e.data["i"] for e in store.list_events(run_id, limit=10_000)] == list(range(len(pending)))


async def test_an_event_of_a_missing_run_fails_alone(store: Store) -> None:
    run_id = _run(store)
    hub = EventHub(store)
    good = hub.emit_soon(run_id, "text", {"n": 1})
    bad = hub.emit_soon("no-such-run", "text", {"n": 2})
    assert (await hub.settle(good)).seq == 1
    with pytest.raises(NotFoundError, match="no-such-run"):
        await hub.settle(bad)


class _FailingOnce:
    """A store whose first batch fails with a bug (not a database error)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.failed = False

    def now(self) -> datetime:
        return self._store.now()

    def append_events(self, batch: list[NewEvent]) -> list[Any]:
        if not self.failed:
            self.failed = True
            raise RuntimeError("injected bug")
        return self._store.append_events(batch)


async def test_a_batch_failing_with_a_bug_fails_its_callers_and_the_next_batch_is_stored(
    store: Store,
) -> None:
    run_id = _run(store)
    hub = EventHub(store)
    hub._writer._store = _FailingOnce(store)  # type: ignore[assignment]
    with anyio.fail_after(10):  # never a caller left waiting for a commit that will not come
        with pytest.raises(StoreError, match="injected bug"):
            await hub.emit(run_id, "text", {"n": 1})
        assert (await hub.emit(run_id, "text", {"n": 2})).seq == 1
    assert [e.data for e in store.list_events(run_id)] == [{"n": 2}]


async def test_a_sequence_taken_behind_the_store_s_back_is_read_again(store_url: str) -> None:
    first, second = Store.open(store_url), Store.open(store_url)
    try:
        run_id = _run(first)
        assert first.append_event(run_id, "text", {"by": "first"}).seq == 1
        assert second.append_event(run_id, "text", {"by": "second"}).seq == 2  # first still remembers 1
        assert first.append_event(run_id, "text", {"by": "first"}).seq == 3  # refused, re-read, stored
        assert [e.seq for e in first.list_events(run_id)] == [1, 2, 3]
    finally:
        first.close()
        second.close()


async def test_a_slow_follower_whose_buffer_overflowed_catches_up_from_the_store(store: Store) -> None:
    run_id = _run(store)
    hub = EventHub(store, EventLimits(follower_buffer_events=2))
    stream = hub.follow(run_id)
    got: list[int] = []
    for i in range(3):
        await hub.emit(run_id, "text", {"i": i})
    got += [e.seq for e in await stream.__anext__()]  # the catch-up read at start
    for i in range(3, 10):  # the follower reads nothing meanwhile: its buffer of 2 overflows
        await hub.emit(run_id, "text", {"i": i})
    store.finish_run(run_id, status=RunStatus.SUCCEEDED)
    await hub.emit(run_id, "run_status", {"status": "succeeded", "final": True})
    hub.notify(run_id)
    with anyio.fail_after(10):
        async for batch in stream:
            got += [e.seq for e in batch]
    assert got == list(range(1, 12))


async def test_a_follower_gets_keep_alive_ticks_and_waits_for_the_final_status_event(store: Store) -> None:
    run_id = _run(store)
    hub = EventHub(store, EventLimits(keepalive_s=0.05, final_event_wait_s=5.0))
    batches: list[list[RunEvent]] = []

    async def follow() -> None:
        async for batch in hub.follow(run_id):
            batches.append(batch)

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(follow)
            while not batches:  # noqa: ASYNC110 - polling what the follower yielded
                await anyio.sleep(0.01)
            assert batches[0] == []  # a keep-alive tick: nothing happened
            store.finish_run(run_id, status=RunStatus.SUCCEEDED)
            hub.notify(run_id)  # the row is terminal; its final event comes a moment later
            await anyio.sleep(0.2)
            await hub.emit(run_id, "run_status", {"status": "succeeded", "final": True})
    kinds = [e.kind for batch in batches for e in batch]
    assert kinds == ["run_status"]


@pytest.mark.parametrize(
    "moment",
    [datetime(2026, 12, 1, 20, 0, 0, tzinfo=UTC), datetime(2026, 12, 1, 20, 0, 0, 123456, tzinfo=UTC)],
)
def test_an_sse_frame_carries_exactly_the_event_out_model(moment: datetime) -> None:
    event = RunEvent(
        id=7,
        run_id="r1",
        seq=3,
        kind="text",
        data={"text": 'héllo ✓ \u2028 "q"\n', "n": [1, 2]},
        created_at=moment,
    )
    frame = encode_event(event)
    lines = frame.split("\n")
    assert lines[:2] == ["id: 3", "event: text"] and frame.endswith("\n\n")
    assert lines[2].startswith("data: ") and len([line for line in lines if line]) == 3
    assert json.loads(lines[2][len("data: ") :]) == out(EventOut, event).model_dump(mode="json")
    assert encode_batch([]) == KEEPALIVE_FRAME
    assert encode_batch([event, event]) == (frame * 2).encode()


async def test_listeners_hear_every_committed_batch_and_a_failing_listener_harms_nothing(
    store: Store,
) -> None:
    run_id = _run(store)
    hub = EventHub(store)
    heard: list[tuple[str, int, bool]] = []

    def listener(events: list[RunEvent]) -> None:
        stored = {e.seq for e in store.list_events(run_id, limit=100)}
        heard.extend((e.kind, e.seq, e.seq in stored) for e in events)

    def broken(events: list[RunEvent]) -> None:
        raise RuntimeError("listener bug")

    hub.add_listener(broken)
    remove = hub.add_listener(listener)
    await hub.emit(run_id, "text", {"i": 1})
    await hub.emit(run_id, "notice", {"i": 2})
    remove()
    await hub.emit(run_id, "text", {"i": 3})
    assert heard == [("text", 1, True), ("notice", 2, True)]
    assert [e.seq for e in store.list_events(run_id, limit=10)] == [1, 2, 3]
