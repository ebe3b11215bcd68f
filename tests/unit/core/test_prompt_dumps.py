"""Prompt dumps (seed 003): owner-only files under ~/.octipus/prompts, swept after seven days."""

from __future__ import annotations

import os
import time
from pathlib import Path

from octipusd.runtime.prompts import RETENTION, dump_prompt


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
