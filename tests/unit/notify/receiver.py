"""A loopback HTTP receiver for Apprise ``json://`` URLs: it records what it was sent.

``Receiver(fail_first=N)`` answers 500 to its first N posts (then 200); ``Receiver(hold=True)``
holds every post open until :meth:`Receiver.release` (or its own bound), as a target that stopped
answering would.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: Seconds a held post waits for :meth:`Receiver.release` at most (then it is answered 200).
HOLD_BOUND_S = 300.0


class Receiver:
    """A threaded HTTP server on 127.0.0.1 recording every JSON body posted to it."""

    def __init__(self, fail_first: int = 0, hold: bool = False) -> None:
        self.fail_first = fail_first
        self.posts = 0
        self.received: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._cond = threading.Condition()
        self._release = threading.Event()
        if not hold:
            self._release.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with receiver._cond:
                    receiver.posts += 1
                    failing = receiver.posts <= receiver.fail_first
                    receiver._cond.notify_all()
                receiver._release.wait(HOLD_BOUND_S)
                if not failing:
                    with receiver._cond:
                        receiver.received.append(json.loads(body))
                        receiver.paths.append(self.path)
                        receiver._cond.notify_all()
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def url(self, path: str = "/hook", query: str = "") -> str:
        """The Apprise URL of this receiver (``json://127.0.0.1:PORT/path``)."""
        return f"json://127.0.0.1:{self.port}{path}" + (f"?{query}" if query else "")

    def wait_for(self, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait until ``count`` bodies were received; return them (AssertionError past ``timeout``)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.received) >= count, timeout):
                raise AssertionError(f"the receiver got {len(self.received)} of {count} notification(s)")
            return list(self.received)

    def wait_posts(self, count: int, timeout: float = 60.0) -> None:
        """Wait until ``count`` posts arrived, answered or not."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.posts >= count, timeout):
                raise AssertionError(f"the receiver saw {self.posts} of {count} post(s)")

    def release(self) -> None:
        """Answer the held posts (and every later one) at once."""
        self._release.set()

    def close(self) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
