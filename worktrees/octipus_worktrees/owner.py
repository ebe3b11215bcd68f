"""Whether the process owning a worktree (the pid in ``<root>/<id>.pid``) is still alive."""

from __future__ import annotations

import psutil

__all__ = ["owner_alive"]


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
