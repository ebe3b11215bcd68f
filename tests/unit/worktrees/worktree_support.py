"""Running git as the project's owner would in the worktree tests (their hooks included)."""

from __future__ import annotations

import subprocess
from pathlib import Path

#: The test's own commits (the project's owner, not Octipus).
USER = ("-c", "user.name=Test User", "-c", "user.email=user@example.invalid", "-c", "commit.gpgsign=false")


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run git as the project's owner would (their hooks included)."""
    return subprocess.run(["git", *USER, *args], cwd=cwd, capture_output=True, text=True, check=check)


def out(cwd: Path, *args: str) -> str:
    return git(cwd, *args).stdout.strip()
