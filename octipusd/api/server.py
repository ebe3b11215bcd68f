"""Serving the API on a Unix socket with a peer-credential check on every connection.

The socket folder is created 0700 and the socket 0600; in addition every accepted
connection's peer uid is read with ``SO_PEERCRED`` and a connection from another user is
closed before any byte of HTTP is read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
from collections.abc import Generator
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from octipusd.errors import ConflictError

log = logging.getLogger("octipusd.api")

#: Seconds a connection attempt to an existing socket file may take before the file is judged
#: stale (nobody listens) and replaced.
STALE_PROBE_TIMEOUT_SECONDS = 1.0
#: Pending connections the API socket queues (``listen`` backlog).
LISTEN_BACKLOG = 128
#: uvicorn's bound on in-flight requests at shutdown (whole seconds); SSE streams end with
#: their runs, which the daemon stops first.
GRACEFUL_SHUTDOWN_SECONDS = 5


def peer_uid(sock: Any) -> int | None:
    """Return the uid of a Unix-socket peer (``SO_PEERCRED``), or None when unavailable."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    _pid, uid, _gid = struct.unpack("3i", raw)
    return int(uid)


class PeerCheckedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol that refuses peers whose uid is not the daemon's."""

    def connection_made(self, transport: Any) -> None:
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family == socket.AF_UNIX:
            uid = peer_uid(sock)
            if uid != os.getuid():
                log.warning("refused a connection from uid %s (octipusd runs as uid %s)", uid, os.getuid())
                transport.close()
                return
        super().connection_made(transport)


def bind_unix_socket(path: Path) -> socket.socket:
    """Create the API socket: folder 0700, socket 0600, stale socket replaced.

    Raises:
        ConflictError: a live daemon already answers on ``path``.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path.parent, 0o700)
    if path.exists():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(STALE_PROBE_TIMEOUT_SECONDS)
            probe.connect(str(path))
        except OSError:
            path.unlink()  # stale: nobody listens
        else:
            raise ConflictError(f"another octipusd is listening on {path}; stop it first (octipusctl health)")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        sock.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    sock.listen(LISTEN_BACKLOG)
    sock.setblocking(False)
    return sock


class QuietServer(uvicorn.Server):
    """uvicorn server whose signals are handled by octipusd, not by uvicorn."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


def make_server(app: Any) -> QuietServer:
    """Build the uvicorn server for ``app`` (no access log, peer-checked h11)."""
    config = uvicorn.Config(
        app,
        http=PeerCheckedH11Protocol,
        lifespan="off",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    return QuietServer(config)
