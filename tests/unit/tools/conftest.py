"""Fixtures of the tools tests: the anyio backend and a run identity with a fresh workspace."""

from __future__ import annotations

from pathlib import Path

import pytest

from octipusd.toolkit import RunIdentity


@pytest.fixture
def identity(tmp_path: Path) -> RunIdentity:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    return RunIdentity(
        run_id="run-1",
        session_id="session-1",
        user="alice",
        worker_id="worker-1",
        workspace=workspace,
        attended=False,
    )
