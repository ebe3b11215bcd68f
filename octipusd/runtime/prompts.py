"""Prompt dumps (seed 003 "Permissions and limits", setting ``agent.promptDumps``).

The prompt handed to every CLI is written to ``~/.octipus/prompts`` as an owner-only file,
swept after seven days. With ``agent.promptDumps = false`` nothing is written. The dump is the
whole prompt of the invocation: the system instructions Octipus passes with it (under
:data:`SYSTEM_HEADER`), then the turn's prompt (under :data:`PROMPT_HEADER`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from octipusd.runner.process import write_private_file

#: Seconds a prompt dump is kept.
RETENTION = 7 * 24 * 3600

#: The line before the system instructions in a dump, and the line before the turn's prompt.
SYSTEM_HEADER = "----- system instructions (passed with the invocation) -----"
PROMPT_HEADER = "----- prompt -----"
#: The line before a later invocation's prompt in the same run's dump (a cold retry, a follow-up).
INVOCATION_HEADER = "===== invocation {n} of this run ====="


def dump_text(prompt: str, system_prompt: str | None) -> str:
    """The text of a dump: ``system_prompt`` (if any) under :data:`SYSTEM_HEADER`, then ``prompt``
    under :data:`PROMPT_HEADER` (a prompt without system instructions is dumped as it is)."""
    if not system_prompt:
        return prompt
    return f"{SYSTEM_HEADER}\n{system_prompt}\n{PROMPT_HEADER}\n{prompt}"


def prompts_dir() -> Path:
    """Return ``~/.octipus/prompts``."""
    return Path.home() / ".octipus" / "prompts"


def dump_prompt(run_id: str, prompt: str, folder: Path | None = None, *, invocation: int = 1) -> Path:
    """Write a run's prompt to ``<folder>/<run_id>.txt`` (mode 0600) and sweep old dumps.

    A run's later invocations (a cold retry, a follow-up) append their prompt under a
    ``=== invocation N ===`` line: the dump holds every prompt the CLI received.

    Args:
        run_id: The run.
        prompt: The full prompt text.
        folder: Target folder (default :func:`prompts_dir`), created 0700.
        invocation: Which of the run's invocations this is (1: the first, which starts the file).

    Returns:
        The written path.

    Raises:
        OSError: the folder or file cannot be written.
    """
    folder = folder or prompts_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{run_id}.txt"
    if invocation == 1:
        write_private_file(path, prompt)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:
            fh.write(f"\n{INVOCATION_HEADER.format(n=invocation)}\n{prompt}")
    cutoff = time.time() - RETENTION
    for old in folder.glob("*.txt"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            continue
    return path
