"""Fixtures every unit test folder shares: the anyio backend, an open store on each backend, and
a run identity with a fresh workspace (the tools and connectors tests; the bridge tests bind
their own)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from octipusd.store import Store
from octipusd.toolkit import RunIdentity


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(migrated_store_url: str) -> Iterator[Store]:
    """A migrated store on a fresh database (SQLite and PostgreSQL): ``store_url``'s, from the template."""
    opened = Store.open(migrated_store_url)
    try:
        yield opened
    finally:
        opened.close()


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
