"""A request a killed daemon left in flight must not be settled "not applied" while it can land (issue 11).

The ledger MCP server runs over streamable HTTP in its own process, as an external server does: it
outlives the daemon. A hand-started ``ledger.append_entry`` (compensatable, idempotency key, probe
``find_entry``, compensation ``remove_entry``) is held by the server, the daemon is SIGKILLed
meanwhile and restarted on the same database, and a person retries with the same key. Exactly
one effect may reach the ledger (seed 004: an unknown result is not a failure; verification must
be trustworthy before a retry). On SQLite and on PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from octipusd.journal.operator import in_flight_time
from octipusd.testing.harness import DaemonHarness
from octipusd.testing.ledger_mcp import count_lines, start_http_server, stop_server, write_fault
from tests.faults.daemon_calls import api, kill_while_posting, wait

#: No model is used: every call is started by hand.
UNUSED_MODEL = "http://127.0.0.1:9"


class Ledger:
    """The ledger MCP server over HTTP in its own process (stopped and started like a real backend)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / "ledger.tsv"
        self.faults = folder / "faults.json"
        self.port_file = folder / "ledger.port"
        self.faults.write_text("{}")
        self.proc, self.url = start_http_server(self.path, self.faults, self.port_file)
        self.port = int(self.port_file.read_text())

        self.received = folder / "received"  # the server touches it when the held call arrives
        self.release = folder / "release"  # the server's hold ends once it exists
        self.cancelled = folder / "cancelled"  # the server touches it when a held call is cancelled

    def fault(self, tool: str, mode: str, seconds: float) -> None:
        write_fault(
            self.faults,
            tool,
            mode,
            seconds,
            received=self.received,
            release=self.release,
            cancelled=self.cancelled,
        )

    def clear(self) -> None:
        self.faults.write_text("{}")

    def stop(self) -> None:
        stop_server(self.proc)

    def start_again(self) -> None:
        self.proc, _ = start_http_server(self.path, self.faults, self.port_file, port=self.port)

    def count(self, key: str) -> int:
        return count_lines(self.path, key)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    served = Ledger(tmp_path)
    try:
        yield served
    finally:
        served.stop()


def _config(root: Path, url: str, *, cancels: bool, call_timeout: float, deadline: float = 3600.0) -> None:
    config = root / "config" / "octipus" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "[mcpServers.ledger]\n"
        'transport = "http"\n'
        f'url = "{url}"\n'
        f"callTimeoutSeconds = {call_timeout}\n"
        f"terminationCancelsCalls = {'true' if cancels else 'false'}\n"
        "[mcpServers.ledger.tools.append_entry]\n"
        'riskClass = "compensatable"\n'
        'idempotencyKey = "key"\n'
        f"deadlineSeconds = {deadline}\n"
        'probe = { tool = "find_entry", arguments = { key = "{idempotencyKey}" } }\n'
        'compensation = { tool = "remove_entry", arguments = { key = "{idempotencyKey}" } }\n'
    )


def _daemon(root: Path, store_url: str, daemons: list[DaemonHarness]) -> DaemonHarness:
    daemon = DaemonHarness(root, UNUSED_MODEL, extra_env={"OCTIPUS_DATABASE_URL": store_url})
    daemons.append(daemon)
    return daemon.start()


def _call(session_id: str, key: str, request_id: str, wait_seconds: float = 0.0) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "tool": "ledger.append_entry",
        "arguments": {"key": key, "text": request_id},
        "request_id": request_id,
        "wait_seconds": wait_seconds,
    }


def _prepare(daemon: DaemonHarness) -> str:
    with api(daemon) as http:
        session = http.post("/sessions", json={"workspace": str(daemon.workspace)})
        assert session.status_code in (200, 201), session.text
        rule = http.post("/rules", json={"level": "allow", "rule": "ledger.append_entry"})
        assert rule.status_code in (200, 201), rule.text
        return str(session.json()["id"])


def _kill_during_call(daemon: DaemonHarness, ledger: Ledger, call: dict[str, Any]) -> None:
    """Post ``call`` and SIGKILL the daemon once the server has received it (and holds it)."""
    kill_while_posting(daemon, "/actions/calls", call, ledger.received.exists)


def _the_action(http: httpx.Client, session_id: str) -> dict[str, Any]:
    listed = http.get("/actions", params={"session_id": session_id})
    assert listed.status_code == 200, listed.text
    (action,) = listed.json()["actions"]
    return dict(action)


def test_a_terminated_session_ends_the_orphaned_request_and_the_retry_runs_once(
    tmp_path: Path, store_url: str, ledger: Ledger, daemons: list[DaemonHarness]
) -> None:
    root = tmp_path / "octipus"
    first = _daemon(root, store_url, daemons)
    _config(root, ledger.url, cancels=True, call_timeout=120)
    session_id = _prepare(first)
    key = f"order-{uuid.uuid4().hex[:8]}"
    ledger.fault("append_entry", "hang_before", 60)  # held until released (or its session ends)
    _kill_during_call(first, ledger, _call(session_id, key, "r1"))

    again = _daemon(root, store_url, daemons)
    ledger.clear()
    with api(again) as http:
        action = _the_action(http, session_id)
        assert action["outcome"] == "uncertain" and action["dispatch"]["kind"] == "mcp_http"
        assert action["dispatch"]["session_id"], action  # recorded with started
        # the restarted daemon terminates the dead daemon's MCP session before anyone probes
        ended = wait(
            lambda: http.get(f"/actions/{action['id']}").json()["action"]["dispatch_ended_at"],
            "the orphaned session to be terminated",
            again,
        )
        assert ended
        receipts = http.get(f"/actions/{action['id']}").json()["receipts"]
        (end,) = [r for r in receipts if r["kind"] == "dispatch_ended"]
        assert "ended session" in end["data"]["evidence"], end

        # the retry with the same key: the probe's "not applied" now settles the first action
        retried = http.post("/actions/calls", json=_call(session_id, key, "r2", wait_seconds=30))
        assert retried.status_code == 200, retried.text
        assert retried.json()["invocation"]["status"] == "completed", retried.json()
        settled = http.get(f"/actions/{action['id']}").json()
        assert settled["action"]["recovery_state"] == "verified", settled
        (probe,) = [r for r in settled["receipts"] if r["kind"] == "probe" and r["state"] == "verified"]
        assert probe["data"]["status"] == "not_applied"
        # the retry itself checked again first (query before retrying): still nothing there
        assert settled["receipts"][-1]["data"] == {
            "status": "not_applied",
            "detail": probe["data"]["detail"],
            "recheck": True,
        }
    # the held request was cancelled with its session: it never lands
    wait(ledger.cancelled.exists, "the server to cancel the held request", again)
    ledger.release.touch()
    assert ledger.count(key) == 1


def test_a_request_that_can_still_land_keeps_the_action_blocking_until_its_deadline(
    tmp_path: Path, store_url: str, ledger: Ledger, daemons: list[DaemonHarness]
) -> None:
    root = tmp_path / "octipus"
    first = _daemon(root, store_url, daemons)
    # the server does not declare that ending a session cancels its calls (the default), and this
    # one indeed goes on: the held request lands once the test releases it, inside its 30 s deadline
    _config(root, ledger.url, cancels=False, call_timeout=30)
    session_id = _prepare(first)
    key = f"order-{uuid.uuid4().hex[:8]}"
    ledger.fault("append_entry", "hold_before", 120)
    _kill_during_call(first, ledger, _call(session_id, key, "r1"))

    again = _daemon(root, store_url, daemons)
    ledger.clear()
    with api(again) as http:
        action = _the_action(http, session_id)
        exact = datetime.fromisoformat(action["in_flight_until"])
        started = datetime.fromisoformat(action["started_at"])
        assert (exact - started).total_seconds() == pytest.approx(35.0)  # its call deadline + the margin
        until = in_flight_time(exact)  # as people are shown it: never before the real bound
        wait(
            lambda: any(
                r["kind"] == "dispatch" for r in http.get(f"/actions/{action['id']}").json()["receipts"]
            ),
            "the restart to try ending the session",
            again,
        )
        # a probe now finds nothing, but that settles nothing: the request may still land
        probed = http.post(f"/actions/{action['id']}/probe")
        assert probed.status_code == 200, probed.text
        assert probed.json()["status"] == "not_applied" and probed.json()["settled"] is False
        assert probed.json()["in_flight_until"] == until
        shown = http.get(f"/actions/{action['id']}").json()
        assert (
            shown["action"]["blocking"] is True and shown["action"]["recovery_state"] == "effect_unconfirmed"
        )
        assert "may still land" in shown["explanation"], shown["explanation"]

        # the retry with the same key waits for a recovery review, whose prompt shows until when
        retried = http.post("/actions/calls", json=_call(session_id, key, "r2"))
        assert retried.status_code == 202, retried.text
        review = retried.json()["approval"]
        assert review["kind"] == "action_recovery" and review["action_ids"] == [action["id"]]
        (shown_action,) = review["input"]["actions"]
        assert shown_action["in_flight_until"] == until
        assert shown_action["note"].startswith("a request may still be in flight until ")
        assert "refused until then" in review["input"]["note"]

        # a person approves before the request landed: the same-key retry is still refused
        answered = http.post(f"/approvals/{review['id']}", json={"decision": "approve"})
        assert answered.status_code == 200, answered.text
        invocation = retried.json()["invocation"]["id"]
        ended = wait(
            lambda: (
                (i := http.get(f"/actions/calls/{invocation}").json()["invocation"])["status"]
                in ("not_executed", "completed")
                and i
            ),
            "the reviewed retry to end",
            again,
        )
        assert ended["status"] == "not_executed", ended
        assert "may still take effect" in ended["result"], ended
        assert ledger.count(key) == 0

        # the held request lands; the probe finds it, and the next retry is refused as a duplicate
        ledger.release.touch()
        wait(lambda: ledger.count(key) == 1, "the held request to land", again)
        third = http.post("/actions/calls", json=_call(session_id, key, "r3", wait_seconds=30))
        assert third.status_code == 200, third.text
        assert third.json()["invocation"]["status"] == "not_executed", third.json()
        assert "retrying would duplicate it" in third.json()["invocation"]["result"]
        after = http.get(f"/actions/{action['id']}").json()
        assert after["action"]["recovery_state"] == "verified"
        assert [r["data"]["status"] for r in after["receipts"] if r["kind"] == "probe"][-1] == "applied"
    assert ledger.count(key) == 1


def test_the_owner_compensates_an_escalated_action_once_the_backend_is_back(
    tmp_path: Path, store_url: str, ledger: Ledger, daemons: list[DaemonHarness]
) -> None:
    root = tmp_path / "octipus"
    daemon = _daemon(root, store_url, daemons)
    _config(root, ledger.url, cancels=True, call_timeout=2, deadline=3)
    session_id = _prepare(daemon)
    key = f"order-{uuid.uuid4().hex[:8]}"
    ledger.fault("append_entry", "hang_after", 6)  # the effect happens, the answer does not come
    with api(daemon) as http:
        done = http.post("/actions/calls", json=_call(session_id, key, "r1", wait_seconds=30))
        assert done.status_code == 200, done.text
        assert done.json()["invocation"]["status"] == "uncertain", done.json()
        action_id = done.json()["invocation"]["action_id"]
        assert ledger.count(key) == 1
        # the server still holds the answer: an offset made now would not cover what may still land
        early = http.post(f"/actions/{action_id}/compensate")
        assert early.status_code == 409 and "may still be in flight until" in early.json()["message"], (
            early.text
        )
        until = datetime.fromisoformat(http.get(f"/actions/{action_id}").json()["action"]["in_flight_until"])
        ledger.stop()  # the backend goes down: probes and compensations cannot reach it

        escalated = wait(
            lambda: (
                (a := http.get(f"/actions/{action_id}").json()["action"])["recovery_state"]
                == "needs_operator"
                and a
            ),
            "the unconfirmed action to go to its owner at its deadline",
            daemon,
        )
        assert escalated["blocking"] is True
        wait(lambda: datetime.now(UTC) >= until, "the call's in-flight bound to pass", daemon)
        failed = http.post(f"/actions/{action_id}/compensate")
        assert failed.status_code >= 400, failed.text
        assert "needs an operator" in failed.json()["message"], failed.text
        probed = http.post(f"/actions/{action_id}/probe")  # still allowed: escalation keeps remedies
        assert probed.status_code == 200, probed.text
        assert probed.json()["status"] == "unknown" and probed.json()["settled"] is False

        ledger.start_again()  # the backend is back
        compensated = http.post(f"/actions/{action_id}/compensate")
        assert compensated.status_code == 200, compensated.text
        after = http.get(f"/actions/{action_id}").json()
        assert after["action"]["recovery_state"] == "compensated" and after["action"]["blocking"] is False
        kinds = [r["kind"] for r in after["receipts"]]
        assert kinds.count("compensation") >= 3 and "escalated" in kinds, kinds
    assert ledger.count(key) == 0
