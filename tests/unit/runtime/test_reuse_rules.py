"""Seed 003 session-reuse rules that need no process: launch prompts, child key scoping, the
in-process key claim, fingerprints of keyed children and the compaction prefix/summary."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from octipusd.runtime.children import ChildScope, KeyClaims, child_scope, is_child_key
from octipusd.runtime.compaction import compaction_prefix, extractive_summary
from octipusd.runtime.sessions import fingerprint
from octipusd.runtime.transcript import render_launch_prompt
from octipusd.store.records import Checkpoint, SessionMessage

NOW = datetime(2026, 11, 30, tzinfo=UTC)


def _msg(seq: int, role: str, text: str, adapter: str | None = None) -> SessionMessage:
    return SessionMessage(
        id=seq,
        session_id="s",
        seq=seq,
        role=role,
        text=text,
        run_id=None,
        adapter=adapter,
        clear_generation=0,
        created_at=NOW,
    )


def test_nothing_unseen_sends_the_turn_text_unchanged() -> None:
    launch = render_launch_prompt("hello", unseen=[])
    assert launch.text == "hello" and launch.carried == () and launch.checkpoint_id is None


def test_unseen_answers_from_another_provider_are_carried_in_order() -> None:
    unseen = [_msg(3, "user", "rename it"), _msg(4, "assistant", "renamed to y", adapter="codex")]
    launch = render_launch_prompt("and now?", unseen=unseen)
    assert launch.carried == (3, 4)
    assert launch.text.index("rename it") < launch.text.index("renamed to y") < launch.text.index("and now?")
    assert "assistant (codex)" in launch.text


def test_a_cold_launch_carries_the_checkpoint_before_the_suffix() -> None:
    checkpoint = Checkpoint(
        id=7,
        session_id="s",
        clear_generation=0,
        first_seq=1,
        through_seq=4,
        summary="SUMMARY",
        covered_chars=999,
        created_at=NOW,
    )
    launch = render_launch_prompt("next", unseen=[_msg(5, "user", "later")], checkpoint=checkpoint)
    assert launch.checkpoint_id == 7
    assert "messages 1-4" in launch.text
    assert launch.text.index("SUMMARY") < launch.text.index("later") < launch.text.index("next")


def _scope(**changes: object) -> ChildScope:
    """:func:`child_scope` of a coding child of the root with key ``task-1``, with ``changes``."""
    arguments: dict[str, object] = {
        "adapter": "claude-code",
        "supports_resume": True,
        "parent_is_root": True,
        "parent_role": "root",
        "parent_lineage": None,
        "role": "coding",
        "resume_key": "task-1",
    }
    arguments.update(changes)
    return child_scope(**arguments)  # type: ignore[arg-type]


def test_root_parent_scopes_by_its_role() -> None:
    scope = _scope()
    assert scope.lineage == "root>coding:task-1"
    assert scope.store_key == "claude-code::root>coding:task-1"
    assert is_child_key(scope.store_key)


def test_keyed_parent_passes_its_lineage_to_grandchildren() -> None:
    scope = _scope(
        adapter="codex",
        parent_is_root=False,
        parent_role="coding",
        parent_lineage="root>coding:task-1",
        role="test",
        resume_key="t2",
    )
    assert scope.lineage == "root>coding:task-1>test:t2"
    assert scope.store_key == "codex::root>coding:task-1>test:t2"


def test_unkeyed_non_root_parent_gives_cold_children_with_a_reason() -> None:
    scope = _scope(adapter="codex", parent_is_root=False, parent_role="coding", role="test", resume_key="t2")
    assert scope.lineage is None and scope.store_key is None
    assert scope.ignored_reason is not None and "without a resumeKey" in scope.ignored_reason


def test_no_key_or_no_resume_support_means_a_fresh_child() -> None:
    fresh = _scope(resume_key=None)
    assert fresh.store_key is None and fresh.ignored_reason is None
    agy = _scope(adapter="antigravity", supports_resume=False, resume_key="k")
    assert agy.store_key is None and agy.ignored_reason is not None


def test_a_key_is_held_by_one_live_agent_at_a_time() -> None:
    claims = KeyClaims()
    assert claims.claim("k", "run-1")
    assert claims.claim("k", "run-1")  # the holder again
    assert not claims.claim("k", "run-2")
    claims.release("k", "run-2")  # not the holder: nothing changes
    assert claims.holds("k", "run-1")
    claims.release("k", "run-1")
    assert claims.claim("k", "run-2")


def _fp(**changes: object) -> str:
    base: dict[str, object] = {
        "adapter": "claude-code",
        "model": "m",
        "permission_mode": "workspace",
        "workspace": Path("/w"),
        "instructions": "role prompt",
        "tools": [{"name": "a"}, {"name": "b"}],
        "provider": None,
        "role": "coding",
    }
    base.update(changes)
    return fingerprint(**base)  # type: ignore[arg-type]


def test_keyed_child_fingerprint_covers_model_mode_cwd_role_tools_and_instructions() -> None:
    reference = _fp()
    for change in (
        {"model": "other"},
        {"permission_mode": "plan"},
        {"workspace": Path("/elsewhere")},
        {"role": "review"},
        {"tools": [{"name": "a"}]},
        {"instructions": "other prompt"},
    ):
        assert _fp(**change) != reference, change
    assert _fp(tools=[{"name": "b"}, {"name": "a"}]) == reference  # the order of tools does not matter


def _turns(n: int) -> list[SessionMessage]:
    out: list[SessionMessage] = []
    for i in range(n):
        out.append(_msg(2 * i + 1, "user", f"question {i}"))
        out.append(_msg(2 * i + 2, "assistant", f"answer {i}", adapter="claude-code"))
    return out


def test_compaction_keeps_the_last_turns_and_takes_a_contiguous_prefix() -> None:
    messages = _turns(5)
    prefix = compaction_prefix(messages, keep_turns=2)
    assert [m.seq for m in prefix] == list(range(1, 7))
    assert compaction_prefix(_turns(2), keep_turns=2) == []
    assert compaction_prefix(messages, keep_turns=0) == messages


@given(st.integers(min_value=0, max_value=12), st.integers(min_value=0, max_value=6))
def test_the_prefix_is_always_a_contiguous_head(turns: int, keep: int) -> None:
    messages = _turns(turns)
    prefix = compaction_prefix(messages, keep)
    assert prefix == messages[: len(prefix)]
    kept_users = sum(1 for m in messages[len(prefix) :] if m.role == "user")
    assert kept_users == (turns if not prefix else keep) or keep == 0


def test_the_summary_names_every_covered_message() -> None:
    messages = _turns(3)
    summary = extractive_summary(None, messages)
    for m in messages:
        assert f"[{m.seq}]" in summary
    long = [_msg(1, "user", "x " * 5000)]
    assert len(extractive_summary(None, long)) < 1000


@pytest.mark.parametrize("key", ["a", "x" * 200, "A.b_c:d-9"])
def test_child_keys_contain_the_separator(key: str) -> None:
    scope = _scope(resume_key=key)
    assert scope.store_key is not None and scope.store_key.startswith("claude-code::root>coding:")
