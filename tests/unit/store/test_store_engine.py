"""Engine creation: URL validation, SQLite pragmas and file modes, the default location."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from sqlalchemy import text

from octipusd.errors import StoreError
from octipusd.store import default_sqlite_url, display_url, make_engine
from octipusd.store.engine import DatabaseTimeouts


def test_default_url_uses_xdg_data_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert default_sqlite_url() == f"sqlite:///{tmp_path}/data/octipus/octipus.db"


@pytest.mark.parametrize("value", [None, "", "relative/dir"])
def test_default_url_falls_back_to_local_share(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, value: str | None
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    if value is None:
        monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    else:
        monkeypatch.setenv("XDG_DATA_HOME", value)
    assert default_sqlite_url() == f"sqlite:///{tmp_path}/.local/share/octipus/octipus.db"


@pytest.mark.parametrize(
    "url", ["mysql://u:hunter2@h/db", "postgresql://u:hunter2@h/db", "postgresql+psycopg2://u:hunter2@h/db"]
)
def test_other_schemes_are_rejected_naming_the_accepted_ones(url: str) -> None:
    with pytest.raises(StoreError) as info:
        make_engine(url)
    message = str(info.value)
    assert "sqlite://" in message and "postgresql+psycopg://" in message
    assert "hunter2" not in message


def test_malformed_url_is_a_store_error() -> None:
    with pytest.raises(StoreError, match="malformed"):
        make_engine("not a url")


def test_display_url_drops_the_password() -> None:
    shown = display_url("postgresql+psycopg://alice:s3cret@db.example:5432/octipus")
    assert "s3cret" not in shown
    assert shown == "postgresql+psycopg://alice@db.example:5432/octipus"


def test_sqlite_engine_settings_and_file_modes(tmp_path: Path) -> None:
    db = tmp_path / "new" / "dir" / "octipus.db"
    engine = make_engine(f"sqlite:///{db}", timeouts=DatabaseTimeouts(statement_seconds=1.234))
    try:
        assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(db.stat().st_mode) == 0o600
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == 1234
    finally:
        engine.dispose()


def test_sqlite_connection_is_usable_from_other_threads(tmp_path: Path) -> None:
    import threading

    engine = make_engine(f"sqlite:///{tmp_path / 'x.db'}")
    results: list[int] = []
    try:
        with engine.connect() as conn:

            def use() -> None:
                results.append(int(conn.execute(text("SELECT 41 + 1")).scalar_one()))

            thread = threading.Thread(target=use)
            thread.start()
            thread.join()
        assert results == [42]
    finally:
        engine.dispose()


def test_engine_connects_on_each_backend(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1
    finally:
        engine.dispose()


def test_only_event_transactions_skip_the_disk_sync_and_the_journal_stays_full(tmp_path: Path) -> None:
    """DESIGN.md "Persistence": run events commit with synchronous=NORMAL, every other write
    (the journal first of all) with FULL, also on a pooled connection an event batch used before."""
    from octipusd.store.repository import Store

    store = Store.open(f"sqlite:///{tmp_path / 'sync.db'}")
    try:
        session = store.create_session(workspace="/w", adapter="claude-code")
        run = store.create_run(session_id=session.id, prompt="p", owner="me")
        for _ in range(3):
            store.append_event(run.id, "text", {"n": 1})
            with store._core("checking an event batch", write=True, transcript=True) as conn:
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 1  # NORMAL
            with store._core("checking a journal write", write=True) as conn:
                assert conn.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
            with store._tx("checking an ORM write", write=True) as db:
                assert db.connection().exec_driver_sql("PRAGMA synchronous").scalar() == 2
    finally:
        store.close()
