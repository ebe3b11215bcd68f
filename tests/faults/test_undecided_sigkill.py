"""SIGKILL of octipusd while a hand-started call is recorded but not yet decided (issue 26 item 5).

The daemon records a call started by hand (``POST /v1/actions/calls``) ``awaiting_approval``
before deciding it; here its decision is an ALLOW resting on a one-use grant, and the daemon is
held while it counts the grant's use and SIGKILLed there. Before the fix the restarted daemon left
the call undecided for ever (no approval, never expired, never run) and answered every retry of
its request id with it. Now start-up recovery decides it again under the current policy: the
grant's use was not committed without the decision, so the call runs once, on that grant, and the
retry gets the real answer.

The hold: on PostgreSQL the test locks the grant's row (``SELECT ... FOR UPDATE``) and waits until
the daemon's ``UPDATE permission_grants`` waits on it; SQLite has no table locks, so a trigger on
that update keeps the daemon's statement running (a cross join) until it is killed. The second
test is the narrower gap: the ledger MCP server (HTTP, its own process) holds a request of a tool
without an idempotency key while the daemon is killed; the repeat a person approves after the
recovery review waits until that request can no longer land (the review says until when), so the
person sees it land first and cancels the repeat. On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from octipusd.journal.operator import in_flight_time
from octipusd.testing.harness import DaemonHarness
from octipusd.testing.postgres import conninfo
from tests.faults.daemon_calls import api, kill_while_posting, wait
from tests.faults.test_journal_in_flight import Ledger

#: No model is used: every call is started by hand.
UNUSED_MODEL = "http://127.0.0.1:9"
LEDGER = "ledger.txt"
#: Rows of the SQLite hold's table: the trigger's cross join of three copies runs for minutes.
HOLD_ROWS = 2000


@pytest.fixture
def ledger_server(tmp_path: Path) -> Iterator[Ledger]:
    """The ledger MCP server over HTTP in its own process: it outlives a killed daemon."""
    served = Ledger(tmp_path)
    try:
        yield served
    finally:
        served.stop()


def _daemon(root: Path, store_url: str, daemons: list[DaemonHarness]) -> DaemonHarness:
    daemon = DaemonHarness(root, UNUSED_MODEL, extra_env={"OCTIPUS_DATABASE_URL": store_url})
    daemons.append(daemon)
    return daemon.start()


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _session(daemon: DaemonHarness) -> str:
    with api(daemon) as http:
        session = http.post("/sessions", json={"workspace": str(daemon.workspace)})
        assert session.status_code in (200, 201), session.text
        return str(session.json()["id"])


@contextmanager
def _held_grant_use(store_url: str, grant_id: str) -> Iterator[Callable[[], bool]]:
    """Hold the daemon inside the count of ``grant_id``'s use; yields "the daemon is held there".

    Raises:
        AssertionError: the hold could not be set up.
    """
    if make_url(store_url).get_backend_name() == "sqlite":
        yield from _sqlite_hold(str(make_url(store_url).database))
    else:
        yield from _postgres_hold(store_url, grant_id)


def _sqlite_hold(path: str) -> Iterator[Callable[[], bool]]:
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        db.execute("CREATE TABLE hold_rows (n INTEGER)")
        db.executemany("INSERT INTO hold_rows VALUES (?)", [(i,) for i in range(HOLD_ROWS)])
        db.execute(
            "CREATE TRIGGER hold_grant_use BEFORE UPDATE ON permission_grants BEGIN "
            "SELECT count(*) FROM hold_rows a, hold_rows b, hold_rows c; END"
        )

        def held() -> bool:  # recorded (committed) and then held in the grant's update
            return db.execute("SELECT count(*) FROM tool_invocations").fetchone()[0] == 1

        yield held
    finally:  # the daemon is dead: its write lock is gone
        db.execute("DROP TRIGGER IF EXISTS hold_grant_use")
        db.execute("DROP TABLE IF EXISTS hold_rows")
        db.close()


def _postgres_hold(store_url: str, grant_id: str) -> Iterator[Callable[[], bool]]:
    lock = psycopg.connect(**conninfo(store_url))
    look = psycopg.connect(**conninfo(store_url), autocommit=True)
    try:
        lock.execute("SELECT id FROM permission_grants WHERE id = %s FOR UPDATE", (grant_id,))

        def held() -> bool:
            row = look.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query ILIKE 'UPDATE permission_grants%%'"
            ).fetchone()
            return bool(row and row[0])

        yield held
        lock.close()  # the lock ends with its connection
        # the killed daemon's backends end once they notice the closed socket (the one that waited
        # on the lock, after its statement): then the next daemon can take the database
        wait_for(
            lambda: (
                look.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
                ).fetchone()
                == (0,)
            ),
            "the killed daemon's connections to end",
        )
    finally:
        lock.close()
        look.close()


def _grant_uses(store_url: str, grant_id: str) -> int:
    """The grant's counted uses, read from the database (the API lists only usable grants)."""
    query = "SELECT uses FROM permission_grants WHERE id = {}"
    if make_url(store_url).get_backend_name() == "sqlite":
        with sqlite3.connect(str(make_url(store_url).database)) as db:
            return int(db.execute(query.format("?"), (grant_id,)).fetchone()[0])
    with psycopg.connect(**conninfo(store_url)) as conn:
        row = conn.execute(query.format("%s"), (grant_id,)).fetchone()
        assert row is not None
        return int(row[0])


def wait_for(predicate: Callable[[], Any], what: str, timeout: float = 30.0) -> None:
    """Poll ``predicate`` (no daemon to ask: it was killed) until it holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_call_killed_while_its_grant_use_is_counted_is_decided_again_and_runs_once(
    tmp_path: Path, store_url: str, daemons: list[DaemonHarness]
) -> None:
    root = tmp_path / "octipus"
    first = _daemon(root, store_url, daemons)
    ledger_file = first.workspace / LEDGER
    session_id = _session(first)
    with api(first) as http:
        grant = http.post("/grants", json={"tool_id": "shell__run", "level": "allow", "max_uses": 1})
        assert grant.status_code == 201, grant.text
        grant_id = grant.json()["id"]
    call = {
        "session_id": session_id,
        "tool": "shell__run",
        "arguments": {"command": f"printf 'x\\n' >> {LEDGER}"},
        "request_id": "r1",
    }
    with _held_grant_use(store_url, grant_id) as held:
        kill_while_posting(first, "/actions/calls", call, held)
    assert _lines(ledger_file) == 0

    again = _daemon(root, store_url, daemons)
    with api(again) as http:
        ended = wait(
            lambda: (
                (i := http.get("/actions/calls", params={"session_id": session_id}).json()["invocations"])
                and i[0]["status"] not in ("awaiting_approval", "approved", "executing")
                and i[0]
            ),
            "the undecided call to be decided again and to run",
            again,
        )
        assert ended["status"] == "completed", ended
        assert ended["request_id"] == "r1"
        # the client's retry after the lost answer gets the real answer; nothing runs again
        retried = http.post("/actions/calls", json={**call, "wait_seconds": 30})
        assert retried.status_code == 200, retried.text
        assert retried.json()["replayed"] is True
        assert retried.json()["invocation"]["id"] == ended["id"]
        assert retried.json()["invocation"]["status"] == "completed"
        # the one use, counted once: with the decision that ran the call
        assert _grant_uses(store_url, grant_id) == 1
        assert http.get("/approvals", params={"status": "pending"}).json() == []
    assert _lines(ledger_file) == 1


def _ledger_config(root: Path, url: str) -> None:
    """The ledger server as a tool without an idempotency key (nothing tells two calls apart)."""
    config = root / "config" / "octipus" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        f'[mcpServers.ledger]\ntransport = "http"\nurl = "{url}"\ncallTimeoutSeconds = 60\n'
        "terminationCancelsCalls = false\n"
    )


def test_an_approved_repeat_waits_while_the_first_request_can_still_land(
    tmp_path: Path, store_url: str, ledger_server: Ledger, daemons: list[DaemonHarness]
) -> None:
    root = tmp_path / "octipus"
    ledger = ledger_server
    first = _daemon(root, store_url, daemons)
    _ledger_config(root, ledger.url)
    session_id = _session(first)
    with api(first) as http:
        rule = http.post("/rules", json={"level": "allow", "rule": "ledger.append_entry"})
        assert rule.status_code in (200, 201), rule.text
    key = f"order-{uuid.uuid4().hex[:8]}"

    def call(request_id: str) -> dict[str, Any]:
        return {
            "session_id": session_id,
            "tool": "ledger.append_entry",
            "arguments": {"key": key, "text": "the order"},
            "request_id": request_id,
        }

    ledger.fault("append_entry", "hold_before", 300)  # lands when the test releases it
    kill_while_posting(first, "/actions/calls", call("r1"), ledger.received.exists)

    again = _daemon(root, store_url, daemons)
    ledger.clear()
    with api(again) as http:
        (action,) = http.get("/actions", params={"session_id": session_id}).json()["actions"]
        wait(
            lambda: any(
                r["kind"] == "dispatch" for r in http.get(f"/actions/{action['id']}").json()["receipts"]
            ),
            "the restart to try ending the first request's session",
            again,
        )
        until = in_flight_time(
            datetime.fromisoformat(http.get(f"/actions/{action['id']}").json()["action"]["in_flight_until"])
        )

        repeat = http.post("/actions/calls", json=call("r2"))
        assert repeat.status_code == 202, repeat.text
        review = repeat.json()["approval"]
        assert review["kind"] == "action_recovery" and review["action_ids"] == [action["id"]]
        assert review["input"]["waits_until"] == until  # the review says until when
        assert f"only after {until}" in review["input"]["note"]

        answered = http.post(f"/approvals/{review['id']}", json={"decision": "approve"})
        assert answered.status_code == 200, answered.text
        invocation = repeat.json()["invocation"]["id"]
        held = wait(
            lambda: (
                (i := http.get(f"/actions/calls/{invocation}").json()["invocation"])["status"] == "approved"
                and f"waits until {until}" in (i["error"] or "")
                and i
            ),
            "the approved repeat to wait",
            again,
        )
        assert held["action_id"] is None
        assert ledger.count(key) == 0

        ledger.release.touch()  # the first request lands after all, inside its bound
        wait(lambda: ledger.count(key) == 1, "the first request to land", again)
        cancelled = http.post(f"/actions/calls/{invocation}/cancel")  # so the person drops the repeat
        assert cancelled.status_code == 200, cancelled.text
        assert cancelled.json()["invocation"]["status"] == "cancelled"
    assert ledger.count(key) == 1
