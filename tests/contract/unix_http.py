"""A ``requests`` session that speaks HTTP over the daemon's Unix socket.

schemathesis sends its cases with ``requests``, which has no Unix-socket transport: this adapter
gives it one, so the fuzz talks to a real ``octipusd`` exactly as ``octipusctl`` does (the same
socket, the same peer-credential check), whatever host the URL names.
"""

from __future__ import annotations

import socket
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection
from urllib3.connectionpool import HTTPConnectionPool

#: The host part of every URL sent through the adapter (a name only: the socket is the address).
BASE_URL = "http://octipusd"
#: Seconds a request may wait to connect to or hear from the daemon.
TIMEOUT_SECONDS = 30.0


class _UnixConnection(HTTPConnection):
    def __init__(self, *args: Any, socket_path: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.socket_path = socket_path

    def _new_conn(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout if isinstance(self.timeout, (int, float)) else TIMEOUT_SECONDS)
        sock.connect(self.socket_path)
        return sock


class _UnixPool(HTTPConnectionPool):
    ConnectionCls = _UnixConnection


class UnixSocketAdapter(HTTPAdapter):
    """Sends every request of a session to one Unix socket."""

    def __init__(self, socket_path: str) -> None:
        super().__init__()
        self._pool = _UnixPool("octipusd", timeout=TIMEOUT_SECONDS, socket_path=socket_path)

    def get_connection_with_tls_context(self, *args: Any, **kwargs: Any) -> HTTPConnectionPool:
        return self._pool

    def close(self) -> None:
        self._pool.close()
        super().close()


def unix_session(socket_path: str) -> requests.Session:
    """A session whose requests to :data:`BASE_URL` go to ``socket_path``."""
    session = requests.Session()
    session.mount(BASE_URL, UnixSocketAdapter(socket_path))
    return session
