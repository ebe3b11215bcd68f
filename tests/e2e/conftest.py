"""Fixtures driving a real octipusd with the real claude binary against scripted models."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from octipusd.ctl.client import Client
from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.harness import DaemonHarness, claude_binary

TERMINAL = {"succeeded", "failed", "interrupted", "cancelled"}


@pytest.fixture(scope="session")
def claude() -> Path:
    """The real Claude Code binary (installed by scripts/bootstrap.sh)."""
    path = claude_binary()
    assert path.exists(), f"{path} missing: run `make test` (scripts/bootstrap.sh installs the pinned claude)"
    return path


class Env:
    """One scripted model plus one daemon."""

    def __init__(self, model: ScriptedAnthropicServer, daemon: DaemonHarness) -> None:
        self.model = model
        self.daemon = daemon
        self.client: Client = daemon.client()

    def new_session(self, **fields: Any) -> str:
        body = {"workspace": str(self.daemon.workspace), **fields}
        return str(self.client.request("POST", "/sessions", json=body)["id"])

    def post(self, session_id: str, prompt: str) -> str:
        return str(
            self.client.request("POST", f"/sessions/{session_id}/turns", json={"prompt": prompt})["id"]
        )

    def run(self, run_id: str) -> dict[str, Any]:
        return dict(self.client.request("GET", f"/runs/{run_id}"))

    def events(self, run_id: str) -> list[dict[str, Any]]:
        return list(self.client.request("GET", f"/runs/{run_id}/events", params={"limit": 100000}))

    def wait(self, predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
        return self.daemon.wait_until(predicate, timeout, what)

    def wait_final(self, run_id: str, timeout: float = 90.0) -> dict[str, Any]:
        return dict(
            self.wait(
                lambda: (r := self.run(run_id))["status"] in TERMINAL and r, timeout, f"run {run_id} to end"
            )
        )

    def wait_approval(self, run_id: str, timeout: float = 60.0) -> dict[str, Any]:
        def pending() -> Any:
            items = self.client.request("GET", "/approvals", params={"status": "pending", "run_id": run_id})
            return items[0] if items else None

        return dict(self.wait(pending, timeout, f"a pending approval of run {run_id}"))

    def answer(self, approval_id: str, decision: str, reason: str | None = None) -> dict[str, Any]:
        return dict(
            self.client.request(
                "POST", f"/approvals/{approval_id}", json={"decision": decision, "reason": reason}
            )
        )


@pytest.fixture
def octipus(tmp_path: Path, claude: Path) -> Iterator[Callable[..., Env]]:
    """Factory: ``octipus(script, extra_env={...}, binary=None)`` -> a started :class:`Env`."""
    started: list[tuple[ScriptedAnthropicServer, DaemonHarness]] = []

    def make(script: Any, extra_env: Mapping[str, str] | None = None, binary: Path | None = None) -> Env:
        model = ScriptedAnthropicServer(script).start()
        daemon = DaemonHarness(tmp_path / f"d{len(started)}", model.base_url, binary or claude, extra_env)
        started.append((model, daemon))
        daemon.start()
        return Env(model, daemon)

    yield make
    for model, daemon in started:
        daemon.stop()
        model.close()


#: What :func:`hello_server` answers.
HELLO = "hello from the host"


@contextlib.contextmanager
def hello_server() -> Iterator[str]:
    """A loopback HTTP server outside every sandbox answering :data:`HELLO`; its URL."""

    class Hello(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(HELLO)))
            self.end_headers()
            self.wfile.write(HELLO.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
