"""Database timeouts: a statement blocked past ``database.statementTimeoutSeconds`` fails with
DatabaseTimeoutError and leaves nothing of its transaction, on SQLite and on real PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from octipusd.errors import ConfigError, DatabaseTimeoutError
from octipusd.settings import (
    DATABASE_CONNECT_TIMEOUT_SECONDS,
    DATABASE_STATEMENT_TIMEOUT_SECONDS,
    load_settings,
)
from octipusd.store import RunStatus, Store
from octipusd.store.engine import DatabaseTimeouts
from octipusd.testing.postgres import conninfo

#: Short enough to keep the tests fast, long enough to be measured.
STATEMENT_SECONDS = 0.5
#: A blocked call must fail well before this (it would otherwise wait for the lock forever).
GIVE_UP_SECONDS = 10.0

TIMEOUTS = DatabaseTimeouts(connect_seconds=5, statement_seconds=STATEMENT_SECONDS)


def test_settings_name_the_timeouts_once_with_one_default(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "none")}
    settings = load_settings(None, env)
    assert settings.database.connectTimeoutSeconds == DATABASE_CONNECT_TIMEOUT_SECONDS
    assert settings.database.statementTimeoutSeconds == DATABASE_STATEMENT_TIMEOUT_SECONDS
    assert DatabaseTimeouts.from_settings(settings.database) == DatabaseTimeouts()
    config = tmp_path / "config.toml"
    config.write_text("[database]\nconnectTimeoutSeconds = 4\nstatementTimeoutSeconds = 2.5\n")
    tuned = DatabaseTimeouts.from_settings(load_settings(config, env).database)
    assert tuned == DatabaseTimeouts(connect_seconds=4, statement_seconds=2.5)
    assert tuned.statement_ms == 2500
    config.write_text("[database]\nstatementTimeoutSeconds = 0\n")
    with pytest.raises(ConfigError, match=r"database\.statementTimeoutSeconds"):
        load_settings(config, env)


@pytest.fixture
def sqlite_store(tmp_path: Path) -> Iterator[tuple[Store, Path]]:
    path = tmp_path / "octipus.db"
    with Store.open(f"sqlite:///{path}", timeouts=TIMEOUTS) as store:
        yield store, path


def test_sqlite_write_blocked_past_the_statement_timeout_fails_and_writes_nothing(
    sqlite_store: tuple[Store, Path],
) -> None:
    store, path = sqlite_store
    session = store.create_session(workspace="/w", adapter="claude-code")
    run = store.create_run(session_id=session.id, prompt="p", owner="me")
    store.append_event(run.id, "text", {"n": 1})
    other = sqlite3.connect(path, isolation_level=None)  # another process's writer
    try:
        other.execute("BEGIN IMMEDIATE")
        started = time.monotonic()
        with pytest.raises(DatabaseTimeoutError, match=r"statementTimeoutSeconds = 0\.5 s") as info:
            store.append_event(run.id, "text", {"n": 2})
        waited = time.monotonic() - started
        assert STATEMENT_SECONDS <= waited < GIVE_UP_SECONDS
        assert "nothing of it was written" in info.value.message
        assert info.value.code == "database_timeout"
        assert info.value.http_status == 503
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert [e.data for e in store.list_events(run.id)] == [{"n": 1}]
    assert store.append_event(run.id, "text", {"n": 3}).seq == 2  # the store still works


@pytest.fixture
def pg_store(postgres_database_url: str) -> Iterator[tuple[Store, str]]:
    with Store.open(postgres_database_url, timeouts=TIMEOUTS) as store:
        yield store, postgres_database_url


@pytest.mark.postgres
def test_postgres_connections_carry_the_timeouts(pg_store: tuple[Store, str]) -> None:
    store, _ = pg_store
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "500ms"


@pytest.mark.postgres
def test_postgres_statement_blocked_past_the_timeout_fails_and_writes_nothing(
    pg_store: tuple[Store, str],
) -> None:
    store, url = pg_store
    session = store.create_session(workspace="/w", adapter="claude-code")
    run = store.create_run(session_id=session.id, prompt="p", owner="me")
    store.append_event(run.id, "text", {"n": 1})
    store.save_work_plan(session.id, {"steps": ["a"]})
    store.finish_run(run.id, status=RunStatus.SUCCEEDED)
    # Deleting the session deletes its events and plan first, then blocks on the run's row,
    # which another transaction holds: the events and plan must come back with the rollback.
    with psycopg.connect(**conninfo(url)) as other:
        other.execute("SELECT id FROM runs WHERE id = %s FOR UPDATE", (run.id,))
        # without a statement timeout the call would wait forever: let go after a while, so
        # that such a regression fails the test (the delete then succeeds) instead of hanging it
        release = threading.Timer(GIVE_UP_SECONDS, other.rollback)
        release.start()
        started = time.monotonic()
        try:
            with pytest.raises(DatabaseTimeoutError, match=f"deleting session {session.id}") as info:
                store.delete_session(session.id)
        finally:
            waited = time.monotonic() - started
            release.cancel()
        other.rollback()
    assert STATEMENT_SECONDS <= waited < GIVE_UP_SECONDS
    assert "QueryCanceled" in info.value.message
    assert store.get_session(session.id).id == session.id
    assert store.get_run(run.id).status is RunStatus.SUCCEEDED
    assert [e.data for e in store.list_events(run.id)] == [{"n": 1}]
    plan = store.get_work_plan(session.id)
    assert plan is not None and plan.plan == {"steps": ["a"]}
    store.delete_session(session.id)  # unblocked, it goes through


def test_postgres_url_options_are_kept_beside_the_statement_timeout() -> None:
    from sqlalchemy.engine import make_url

    url = make_url("postgresql+psycopg://u@/db?options=-c%20search_path%3Dx")
    args = TIMEOUTS.postgres_connect_args(url)
    assert args == {"connect_timeout": 5, "options": "-c search_path=x -c statement_timeout=500"}
