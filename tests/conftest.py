"""Shared pytest fixtures: the test PostgreSQL server and per-test databases.

* ``postgres_url`` (session scope): a private PostgreSQL server started by
  :func:`octipusd.testing.postgres.start_postgres`, on a Unix socket, for the whole test session; its URL
  points at the database ``octipus_test``.
* ``store_url``: parametrised over ``sqlite`` and ``postgresql``; a fresh, empty database
  for each test (a file under ``tmp_path``, or a database created for the test and dropped
  after it). The PostgreSQL variant carries the ``postgres`` marker, so
  ``-m "not postgres"`` runs SQLite only.
* ``migrated_store_url``: the same database as ``store_url``, already at the newest schema:
  a copy of a template migrated once per session (per xdist worker) and backend, so the
  hundreds of tests that only need a migrated store do not each run every migration. The
  migrations themselves are tested on ``store_url``'s empty databases.

Under pytest-xdist every worker is its own session: it starts its own PostgreSQL (a private
socket folder, so servers never meet) and migrates its own templates.

If PostgreSQL is not installed, PostgreSQL tests fail (they do not skip) with a message
telling to run ``scripts/install-test-deps.sh``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from octipusd.store.migrate import upgrade
from octipusd.testing.postgres import PostgresUnavailable, admin_connect, start_postgres

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


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a SQLite database migrated to the newest schema (once per session)."""
    path = tmp_path_factory.mktemp("sqlite-template") / "octipus.db"
    upgrade(f"sqlite:///{path}")  # the engine is disposed: the WAL is checkpointed into the file
    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    return path.read_bytes()


@pytest.fixture(scope="session")
def postgres_template(postgres_url: str) -> str:
    """The name of a PostgreSQL database migrated to the newest schema (once per session)."""
    name, url = _create_database(postgres_url)
    upgrade(url)  # disposes its engine: no connection is left, so the database can be a template
    return name


@pytest.fixture
def migrated_store_url(request: pytest.FixtureRequest, store_url: str) -> str:
    """``store_url``'s database (file or PostgreSQL database), already migrated to the newest schema."""
    url = make_url(store_url)
    if url.get_backend_name() == "sqlite":
        template: bytes = request.getfixturevalue("sqlite_template")
        path = Path(str(url.database))
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # as make_engine creates it
        with os.fdopen(fd, "wb") as out:
            out.write(template)
        return store_url
    server_url: str = request.getfixturevalue("postgres_url")
    source: str = request.getfixturevalue("postgres_template")
    with admin_connect(server_url) as conn:  # same name, so the test's drop still removes it
        conn.execute(f'DROP DATABASE "{url.database}"')
        conn.execute(f'CREATE DATABASE "{url.database}" TEMPLATE "{source}"')
    return store_url
