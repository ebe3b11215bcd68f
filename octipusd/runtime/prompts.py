"""Prompt dumps (seed 003 "Permissions and limits", setting ``agent.promptDumps``).

The prompt handed to every CLI is written to ``~/.octipus/prompts`` as an owner-only file,
swept after seven days. With ``agent.promptDumps = false`` nothing is written. The dump is the
whole prompt of the invocation: the system instructions Octipus passes with it (under
:data:`SYSTEM_HEADER`), then the turn's prompt (under :data:`PROMPT_HEADER`).
"""

from __future__ import annotations

import time
from pathlib import Path

from octipusd.runner.process import write_private_file

#: Seconds a prompt dump is kept.
RETENTION = 7 * 24 * 3600

#: The line before the system instructions in a dump, and the line before the turn's prompt.
SYSTEM_HEADER = "----- system instructions (passed with the invocation) -----"
PROMPT_HEADER = "----- prompt -----"


def dump_text(prompt: str, system_prompt: str | None) -> str:
    """The text of a dump: ``system_prompt`` (if any) under :data:`SYSTEM_HEADER`, then ``prompt``
    under :data:`PROMPT_HEADER` (a prompt without system instructions is dumped as it is)."""
    if not system_prompt:
        return prompt
    return f"{SYSTEM_HEADER}\n{system_prompt}\n{PROMPT_HEADER}\n{prompt}"


def prompts_dir() -> Path:
    """Return ``~/.octipus/prompts``."""
    return Path.home() / ".octipus" / "prompts"


def dump_prompt(run_id: str, prompt: str, folder: Path | None = None) -> Path:
    """Write a run's prompt to ``<folder>/<run_id>.txt`` (mode 0600) and sweep old dumps.

    Args:
        run_id: The run.
        prompt: The full prompt text.
        folder: Target folder (default :func:`prompts_dir`), created 0700.

    Returns:
        The written path.

    Raises:
        OSError: the folder or file cannot be written.
    """
    folder = folder or prompts_dir()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = folder / f"{run_id}.txt"
    write_private_file(path, prompt)
    cutoff = time.time() - RETENTION
    for old in folder.glob("*.txt"):
        try:
            if old.stat().st_mtime < cutoff:
                old.unlink()
        except OSError:
            continue
    return path
