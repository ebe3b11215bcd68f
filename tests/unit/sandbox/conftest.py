"""Fixtures of the sandbox tests: folders outside ``/tmp`` (so the private ``/tmp`` does not hide them
by itself), listening Unix sockets standing for the daemon's and Docker's, a loopback HTTP server, and
the sandbox this machine's bubblewrap gives over them."""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from octipusd.sandbox import RunnerSearch
from octipusd.settings_security import ShellSandboxMode
from octipusd.toolkit import RunIdentity, ShellSandbox

#: Reads a URL with the system's Python; prints the body, or the error and exits 7.
FETCH = (
    "python3 -c 'import sys, urllib.request as u\n"
    "try: print(u.urlopen(sys.argv[1], timeout=5).read().decode())\n"
    "except Exception as e: print(type(e).__name__, e); sys.exit(7)' "
)
#: Connects to a Unix socket; exits 0 when it accepted.
CONNECT = "python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "


@pytest.fixture
def outside() -> Iterator[Path]:
    """A folder outside /tmp (so the private /tmp does not hide it by itself)."""
    path = Path(tempfile.mkdtemp(prefix="octipus-sandbox-test-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def listening(outside: Path) -> Iterator[dict[str, Path]]:
    """Two listening Unix sockets outside the workspace: the daemon's (in its folder) and a Docker
    socket stand-in."""
    made: dict[str, Path] = {}
    sockets = []
    for name in ("run/octipusd.sock", "docker.sock"):
        path = outside / name
        path.parent.mkdir(exist_ok=True)
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.listen()
        sockets.append(server)
        made[name.split("/")[-1].split(".")[0]] = path
    yield made
    for server in sockets:
        server.close()


@pytest.fixture
def web() -> Iterator[str]:
    """A loopback HTTP server outside any sandbox; its URL."""

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b"hello from the host"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def workspace(outside: Path) -> Path:
    path = outside / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def me(identity: RunIdentity, workspace: Path) -> RunIdentity:
    from dataclasses import replace

    return replace(identity, workspace=workspace)


def sandbox_of(listening: dict[str, Path], outside: Path) -> ShellSandbox:
    search = RunnerSearch(
        hidden=(listening["octipusd"].parent, listening["octipusd"], outside / "data"),
        docker_sockets=(listening["docker"],),
    )
    found = search.find(ShellSandboxMode.REQUIRED)
    assert found.in_force, found.unavailable
    return found
