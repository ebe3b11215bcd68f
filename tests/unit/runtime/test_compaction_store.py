"""Compaction against a real SQLite store (seed 003 "Compaction"): a checkpoint with exact
coverage, rotation of existing root records only, and nothing rotated when the summary failed,
was incomplete or ineffective."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from octipusd.runtime.compaction import CompactionReport, compact, describe_compaction, uncovered_chars
from octipusd.store.records import Checkpoint, SessionMessage
from octipusd.store.repository import Store

ROOT_KEYS = ["claude-code", "codex", "vibe"]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    opened = Store.open(f"sqlite:///{tmp_path / 'c.db'}")
    yield opened
    opened.close()


def _session(store: Store, tmp_path: Path, turns: int, size: int = 600) -> str:
    session = store.create_session(workspace=str(tmp_path), adapter="claude-code")
    for n in range(turns):
        store.append_message(session.id, role="user", text=f"question {n} " + "q" * size)
        store.append_message(
            session.id, role="assistant", text=f"answer {n} " + "a" * size, adapter="claude-code"
        )
    store.save_vendor_session(
        session_id=session.id, key="claude-code", vendor_session_id="v1", fingerprint="f", cwd=str(tmp_path)
    )
    store.save_vendor_session(
        session_id=session.id,
        key="claude-code::root>coding:t1",
        vendor_session_id="c1",
        fingerprint="f",
        cwd="/",
    )
    return session.id


def _keys(store: Store, session_id: str) -> set[str]:
    return {r.key for r in store.list_vendor_sessions(session_id)}


def test_a_checkpoint_covers_the_prefix_and_rotates_only_existing_root_records(
    store: Store, tmp_path: Path
) -> None:
    session = _session(store, tmp_path, turns=4)
    report = compact(store, session, keep_turns=1, root_keys=ROOT_KEYS)
    assert report.published and (report.first_seq, report.through_seq) == (1, 6)
    assert report.covered_messages == 6 and report.summary_chars < report.covered_chars
    assert report.rotated == ["claude-code"]  # codex and vibe held no record
    assert _keys(store, session) == {"claude-code::root>coding:t1"}  # the child task session is kept
    checkpoint = store.latest_checkpoint(session, 0)
    assert checkpoint is not None and checkpoint.id == report.checkpoint_id
    assert "checkpoint" in describe_compaction(report) and "1-6" in describe_compaction(report)
    # the next compaction extends the checkpoint from the first message on
    for n in range(2):
        store.append_message(session, role="user", text=f"later {n} " + "l" * 600)
        store.append_message(session, role="assistant", text="ok " + "o" * 600, adapter="codex")
    again = compact(store, session, keep_turns=1, root_keys=ROOT_KEYS)
    assert again.published and (again.first_seq, again.through_seq) == (1, 10) and again.rotated == []


def _failing(previous: Checkpoint | None, messages: Sequence[SessionMessage]) -> str:
    raise RuntimeError("model unavailable")


def _dropping(previous: Checkpoint | None, messages: Sequence[SessionMessage]) -> str:
    return ""


@pytest.mark.parametrize(
    ("summarizer", "reason"),
    [(_failing, "the summary failed: model unavailable"), (_dropping, "the summary is incomplete")],
)
def test_a_failed_or_incomplete_summary_rotates_nothing(
    store: Store, tmp_path: Path, summarizer: object, reason: str
) -> None:
    session = _session(store, tmp_path, turns=4)
    report = compact(store, session, keep_turns=1, root_keys=ROOT_KEYS, summarizer=summarizer)  # type: ignore[arg-type]
    assert not report.published and (report.reason or "").startswith(reason)
    assert _keys(store, session) == {"claude-code", "claude-code::root>coding:t1"}
    assert store.latest_checkpoint(session, 0) is None


def test_an_ineffective_summary_rotates_nothing(store: Store, tmp_path: Path) -> None:
    session = _session(store, tmp_path, turns=3, size=5)
    report = compact(store, session, keep_turns=1, root_keys=ROOT_KEYS)
    assert not report.published and "would not be shorter" in (report.reason or "")
    assert "claude-code" in _keys(store, session)
    assert describe_compaction(report).startswith("no checkpoint published: ")


def test_nothing_to_compact_says_how_many_turns_are_needed(store: Store, tmp_path: Path) -> None:
    session = _session(store, tmp_path, turns=2)
    report: CompactionReport = compact(store, session, keep_turns=2, root_keys=ROOT_KEYS)
    assert not report.published
    assert (
        report.reason
        == "nothing to compact: fewer than 3 turns in this conversation (a compaction keeps the last 2 verbatim)"
    )
    assert compact(store, session, keep_turns=0, root_keys=ROOT_KEYS).published
    again = compact(store, session, keep_turns=0, root_keys=ROOT_KEYS)
    assert (
        again.reason
        == "nothing to compact: no turn since the last checkpoint (a compaction keeps the last 0 verbatim)"
    )


def test_the_uncovered_size_counts_the_current_generation_after_the_latest_checkpoint(
    store: Store, tmp_path: Path
) -> None:
    def by_hand(session_id: str) -> int:
        generation = store.get_session(session_id).clear_generation
        previous = store.latest_checkpoint(session_id, generation)
        after = previous.through_seq if previous is not None else 0
        messages = store.list_messages(session_id, generation=generation, after_seq=after)
        return sum(len(m.text) for m in messages)

    session = _session(store, tmp_path, turns=4)
    store.append_message(session, role="user", text="déjà vu ✓ 🐙")  # characters, not bytes
    assert uncovered_chars(store, session) == by_hand(session) > 8 * 600
    assert compact(store, session, keep_turns=1, root_keys=ROOT_KEYS).published
    assert uncovered_chars(store, session) == by_hand(session) == len("déjà vu ✓ 🐙")
    store.clear_session(session)  # a new generation: nothing of the old one counts
    assert uncovered_chars(store, session) == 0
    store.append_message(session, role="user", text="again")
    assert uncovered_chars(store, session) == by_hand(session) == 5
    assert uncovered_chars(store, "no-such-session") == 0
