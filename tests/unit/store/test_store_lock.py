"""DatabaseLock: one active octipusd per database, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import octipusd
from octipusd.errors import DatabaseLockedError, StoreError
from octipusd.store import DatabaseLock
from octipusd.store.engine import parse_url, sqlite_path
from octipusd.store.lock import lock_file_path

ADVICE = "stop that daemon or point OCTIPUS_DATABASE_URL elsewhere"

HOLDER = """
import sys
from octipusd.store.lock import DatabaseLock
lock = DatabaseLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.read()
lock.release()
"""


def test_second_lock_fails_naming_the_first(store_url: str) -> None:
    with DatabaseLock(store_url) as first:
        assert first.held
        second = DatabaseLock(store_url)
        with pytest.raises(DatabaseLockedError) as info:
            second.acquire()
        message = str(info.value)
        assert f"octipusd pid {os.getpid()} on host " in message
        assert " since 20" in message
        assert message.startswith(f"database {first.url_for_display} is in use by ")
        assert message.endswith(ADVICE)
        assert info.value.code == "database_locked"
        assert not second.held
    assert not first.held


def test_released_lock_can_be_acquired_again(store_url: str) -> None:
    first = DatabaseLock(store_url)
    first.acquire()
    first.acquire()  # no-op while held
    first.release()
    first.release()  # no-op when not held
    with DatabaseLock(store_url) as second:
        second.verify()
    first.acquire()
    first.verify()
    first.release()
    with pytest.raises(StoreError, match="not held"):
        first.verify()


def test_lock_held_by_another_process_is_detected(store_url: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(octipusd.__file__).resolve().parent.parent)}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, store_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None and child.stdin is not None
        assert child.stdout.readline().strip() == "held"
        with pytest.raises(DatabaseLockedError, match=f"in use by octipusd pid {child.pid} on host "):
            DatabaseLock(store_url).acquire()
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    with DatabaseLock(store_url):
        pass


def test_lock_dies_with_its_process(store_url: str) -> None:
    """A killed daemon leaves no stale lock: the OS / server drops it."""
    env = {**os.environ, "PYTHONPATH": str(Path(octipusd.__file__).resolve().parent.parent)}
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, store_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "held"
    child.kill()
    child.wait()
    # PostgreSQL notices the closed socket asynchronously; retry briefly without sleeping long.
    for attempt in range(200):
        try:
            with DatabaseLock(store_url):
                break
        except DatabaseLockedError:
            if attempt == 199:
                raise
            time.sleep(0.05)


def test_sqlite_lock_file_names_the_holder(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'sub' / 'octipus.db'}"
    path = sqlite_path(parse_url(url))
    assert path is not None
    with DatabaseLock(url):
        info = json.loads(lock_file_path(path).read_text())
        assert info["pid"] == os.getpid()
        assert set(info) == {"pid", "host", "started_at"}
        assert lock_file_path(path).name == "octipus.db.lock"
    assert lock_file_path(path).read_text() == ""


def test_sqlite_lock_message_when_holder_unknown(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'octipus.db'}"
    path = sqlite_path(parse_url(url))
    assert path is not None
    with DatabaseLock(url):
        lock_file_path(path).write_text("")  # holder crashed between lock and write
        with pytest.raises(DatabaseLockedError, match="names no holder"):
            DatabaseLock(url).acquire()


def test_in_memory_sqlite_needs_no_lock() -> None:
    with DatabaseLock("sqlite://") as lock, DatabaseLock("sqlite://") as other:
        assert lock.held and other.held


def test_lock_display_url_has_no_password() -> None:
    lock = DatabaseLock("postgresql+psycopg://u:topsecret@127.0.0.1:1/db")
    assert "topsecret" not in lock.url_for_display
