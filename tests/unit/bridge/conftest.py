"""Fixtures of the bridge tests: the anyio backend, run identities, an in-memory host.

Everything in these tests is real: bridges are uvicorn servers on 127.0.0.1, clients are the
``mcp`` SDK's streamable HTTP client over real HTTP (helpers in ``bridge_support.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.toolkit import RunIdentity


@pytest.fixture
def make_identity(tmp_path: Path) -> Callable[..., RunIdentity]:
    """Build a :class:`RunIdentity` whose workspace is a fresh folder under ``tmp_path``."""

    def make(
        worker_id: str = "worker-1", run_id: str = "run-1", session_id: str = "session-1"
    ) -> RunIdentity:
        workspace = tmp_path / f"ws-{run_id}"
        workspace.mkdir(exist_ok=True)
        return RunIdentity(
            run_id=run_id,
            session_id=session_id,
            user="alice",
            worker_id=worker_id,
            workspace=workspace,
            attended=True,
        )

    return make


@pytest.fixture
def identity(make_identity: Callable[..., RunIdentity]) -> RunIdentity:
    return make_identity()


@pytest.fixture
def host() -> FakeToolHost:
    return FakeToolHost()
