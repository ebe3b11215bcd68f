"""Where Octipus keeps its files: the XDG folders and the daemon's socket.

Kept apart from :mod:`octipusd.settings` (pydantic) so that a client finds the socket without
importing the daemon's settings; :mod:`octipusd.settings` re-exports these names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

__all__ = ["default_socket_path", "xdg_data_dir", "xdg_runtime_dir"]


def xdg_runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return ``$XDG_RUNTIME_DIR`` or ``/tmp/octipus-<uid>`` when unset."""
    env = os.environ if environ is None else environ
    value = env.get("XDG_RUNTIME_DIR")
    return Path(value) if value else Path(f"/tmp/octipus-{os.getuid()}")


def default_socket_path(environ: Mapping[str, str] | None = None) -> Path:
    """Return ``$XDG_RUNTIME_DIR/octipus/octipusd.sock`` (see :func:`xdg_runtime_dir`)."""
    return xdg_runtime_dir(environ) / "octipus" / "octipusd.sock"


def xdg_data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Return ``$XDG_DATA_HOME/octipus`` (``~/.local/share/octipus`` when unset)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "octipus"
