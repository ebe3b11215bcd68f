"""Shared pytest fixtures: the test PostgreSQL server and per-test databases.

* ``postgres_url`` (session scope): a private PostgreSQL server started by
  :func:`tests.pg.start_postgres`, on a Unix socket, for the whole test session; its URL
  points at the database ``octipus_test``.
* ``store_url``: parametrised over ``sqlite`` and ``postgresql``; a fresh, empty database
  for each test (a file under ``tmp_path``, or a database created for the test and dropped
  after it). The PostgreSQL variant carries the ``postgres`` marker, so
  ``-m "not postgres"`` runs SQLite only.

If PostgreSQL is not installed, PostgreSQL tests fail (they do not skip) with a message
telling to run ``scripts/install-test-deps.sh``.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

try:
    from tests.pg import PostgresUnavailable, admin_connect, start_postgres
except ImportError:  # pragma: no cover - rootdir not importable; conftest's folder is on sys.path
    from pg import PostgresUnavailable, admin_connect, start_postgres  # type: ignore[no-redef,import-not-found]

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
]


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """Start the test PostgreSQL server once per session; yield the ``octipus_test`` URL."""
    problem = ""
    try:
        url, stop = start_postgres()
    except PostgresUnavailable as exc:
        problem = str(exc)
    if problem:
        pytest.fail(f"cannot start the test PostgreSQL: {problem}", pytrace=False)
    try:
        yield url
    finally:
        stop()


def _create_database(server_url: str) -> tuple[str, str]:
    name = f"t_{uuid.uuid4().hex}"
    with admin_connect(server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    return name, url


def _drop_database(server_url: str, name: str) -> None:
    with admin_connect(server_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_database_url(postgres_url: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test (dropped afterwards); yields its URL."""
    name, url = _create_database(postgres_url)
    try:
        yield url
    finally:
        _drop_database(postgres_url, name)


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database URL for one test, on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'octipus.db'}"
    url: str = request.getfixturevalue("postgres_database_url")
    return url
