"""The versioned HTTP API on the Unix socket (`app`, `models`, `server`).

:data:`API_VERSION` lives here, not only in :mod:`octipusd.api.models`, so that a client reaches
it without importing pydantic.
"""

from __future__ import annotations

__all__ = ["API_VERSION"]

#: The path prefix of every route (``/v1/...``).
API_VERSION = "v1"
