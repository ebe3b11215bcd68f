"""Fixtures every unit test folder shares: the anyio backend and an open store on each backend."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from octipusd.store import Store


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
