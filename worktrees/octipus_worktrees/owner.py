"""The process owning a worktree: ``<root>/<id>.pid`` holds its pid and its start time.

The start time (psutil's ``create_time``, seconds since the epoch) tells the owner from a later
process that got the same pid (a restarted daemon, a container whose daemon is pid 1): a pid whose
process started at another time is not the owner. A file with a pid alone (written by an older
Octipus) is read by its pid.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import psutil

__all__ = ["owner_alive", "read_owner", "write_owner"]

#: How far a process's start time may differ from the recorded one and still be the owner (seconds;
#: the recorded value is rounded to this).
START_TOLERANCE_S: Final = 0.01


def _started(pid: int) -> float | None:
    try:
        return float(psutil.Process(pid).create_time())
    except psutil.Error:
        return None


def write_owner(pid_file: Path, pid: int) -> None:
    """Write ``pid`` and its process's start time (when it can be read) to ``pid_file``.

    Raises:
        OSError: the file could not be written.
    """
    start = _started(pid)
    text = f"{pid}\n" if start is None else f"{pid} {start:.2f}\n"
    pid_file.write_text(text, encoding="utf-8")


def read_owner(pid_file: Path) -> int | None:
    """The owner's pid in ``pid_file``; None when there is none, it is unreadable, or the pid now
    names a process that started at another time than the owner (the owner is gone)."""
    try:
        parts = pid_file.read_text(encoding="utf-8").split()
        pid = int(parts[0])
        recorded = float(parts[1]) if len(parts) > 1 else None
    except (OSError, ValueError, IndexError):
        return None
    if recorded is not None:
        now = _started(pid)
        if now is not None and abs(now - recorded) > START_TOLERANCE_S:
            return None
    return pid


def owner_alive(pid: int | None) -> bool:
    """Whether ``pid`` names a running process (a zombie is dead; one we may not see is alive)."""
    if pid is None or pid <= 0:
        return False
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True
