"""Prompt dumps (seed 003 "Permissions and limits", setting ``agent.promptDumps``).

The prompt handed to every CLI is written to ``~/.octipus/prompts`` as an owner-only file,
swept after seven days. With ``agent.promptDumps = false`` nothing is written.
"""

from __future__ import annotations

import time
from pathlib import Path

from octipusd.runner.process import write_private_file

#: Seconds a prompt dump is kept.
RETENTION = 7 * 24 * 3600


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
