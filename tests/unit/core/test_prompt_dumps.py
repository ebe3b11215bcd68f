"""Prompt dumps (seed 003): owner-only files under ~/.octipus/prompts, swept after seven days."""

from __future__ import annotations

import os
import time
from pathlib import Path

from octipusd.runtime.prompts import PROMPT_HEADER, RETENTION, SYSTEM_HEADER, dump_prompt, dump_text


def test_dump_is_owner_only_and_old_dumps_are_swept(tmp_path: Path) -> None:
    folder = tmp_path / "prompts"
    old = dump_prompt("old-run", "old prompt", folder)
    week_ago = time.time() - RETENTION - 60
    os.utime(old, (week_ago, week_ago))
    fresh = dump_prompt("new-run", "the prompt", folder)
    assert fresh.read_text() == "the prompt"
    assert fresh.stat().st_mode & 0o777 == 0o600
    assert folder.stat().st_mode & 0o777 == 0o700
    assert not old.exists()


def test_a_dump_holds_the_system_instructions_then_the_prompt(tmp_path: Path) -> None:
    """Issue 14 item 1: the whole prompt the CLI received, the system part included."""
    text = dump_text("the task", "You are managed by Octipus.")
    assert text == f"{SYSTEM_HEADER}\nYou are managed by Octipus.\n{PROMPT_HEADER}\nthe task"
    assert dump_prompt("run-1", text, tmp_path).read_text() == text
    assert dump_text("the task", None) == "the task"
