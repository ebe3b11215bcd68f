"""SIGKILL of octipusd while a call started by hand runs: uncertain after the restart, never replayed.

Seed 000 (a started record whose daemon stopped counts as uncertain; the next mutation needs a
recovery review) and seed 001 (a claimed invocation whose action started is quarantined as
uncertain and never dispatched again). The real daemon on SQLite; the command's side effects
are counted in a ledger file it appends to.
"""

from __future__ import annotations

from pathlib import Path

from octipusd.testing.harness import DaemonHarness
from tests.faults.daemon_calls import api, in_workspace, kill_while_posting, wait

#: No model is used: the call is started by hand, no run talks to a vendor.
UNUSED_MODEL = "http://127.0.0.1:9"
LEDGER = "ledger.txt"


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_sigkill_during_a_call_leaves_it_uncertain_and_it_is_not_run_again(
    tmp_path: Path, daemons: list[DaemonHarness]
) -> None:
    root = tmp_path / "octipus"
    first = DaemonHarness(root, UNUSED_MODEL)
    daemons.append(first)
    first.start()
    ledger = first.workspace / LEDGER
    with api(first) as http:
        session = http.post("/sessions", json={"workspace": str(first.workspace)})
        assert session.status_code in (200, 201), session.text
        session_id = session.json()["id"]
        rule = http.post("/rules", json={"level": "allow", "rule": "shell__run"})
        assert rule.status_code in (200, 201), rule.text

    call = {
        "session_id": session_id,
        "tool": "shell__run",
        "arguments": {"command": f"echo x >> {LEDGER}; sleep 30; echo late >> {LEDGER}"},
        "request_id": "r1",
    }
    kill_while_posting(first, "/actions/calls", call, lambda: lines(ledger) == 1)
    assert in_workspace(first.workspace), "the killed daemon's job outlives it until the restart"

    again = DaemonHarness(root, UNUSED_MODEL)
    daemons.append(again)
    again.start()
    # the restarted daemon stops the orphaned job before anyone can review its action: it cannot
    # go on acting (its "late" line never comes)
    wait(lambda: not in_workspace(first.workspace), "the orphaned job to be stopped", again, timeout=10)
    with api(again) as http:
        listed = http.get("/actions", params={"session_id": session_id})
        assert listed.status_code == 200, listed.text
        (action,) = listed.json()["actions"]
        assert action["outcome"] == "uncertain", action
        assert action["tool"] == "shell__run" and action["origin"] == "manual"
        assert action["blocking"] is True and action["review_id"] is None
        assert action["detail"] and "orphaned" in action["detail"], action
        receipt = http.get(f"/actions/{action['id']}").json()["receipts"]
        assert any(r["kind"] == "note" and "killed at restart" in r["data"]["note"] for r in receipt), receipt

        calls = http.get("/actions/calls", params={"session_id": session_id})
        assert calls.status_code == 200, calls.text
        (invocation,) = calls.json()["invocations"]
        assert invocation["status"] == "uncertain", invocation
        assert invocation["action_id"] == action["id"]

        # the job was stopped above, so its "late" line can no longer come; an uncertain call is never
        # owed, so start-up recovery does not dispatch it
        assert lines(ledger) == 1
        assert http.get(f"/actions/calls/{invocation['id']}").json()["invocation"]["status"] == "uncertain"

        # the client retries after the lost answer: the stored invocation comes back, nothing runs
        retried = http.post("/actions/calls", json=call)
        assert retried.status_code == 200, retried.text
        assert retried.json()["replayed"] is True
        assert retried.json()["invocation"]["id"] == invocation["id"]
        assert lines(ledger) == 1

        # the next mutation of the session waits for a recovery review of exactly that record
        following = http.post(
            "/actions/calls",
            json={
                "session_id": session_id,
                "tool": "shell__run",
                "arguments": {"command": f"echo y >> {LEDGER}"},
                "request_id": "r2",
            },
        )
        assert following.status_code == 202, following.text
        body = following.json()
        assert body["replayed"] is False
        assert body["invocation"]["status"] == "awaiting_approval", body
        assert body["approval"] is not None and body["approval"]["kind"] == "action_recovery", body
        assert body["approval"]["action_ids"] == [action["id"]]
        assert body["approval"]["status"] == "pending"

        # denying it refuses that call and keeps the evidence
        denied = http.post(f"/approvals/{body['approval']['id']}", json={"decision": "deny", "reason": "ran"})
        assert denied.status_code == 200, denied.text
        wait(
            lambda: (
                http.get(f"/actions/calls/{body['invocation']['id']}").json()["invocation"]["status"]
                == "denied"
            ),
            "the denied call to end",
            again,
        )
        assert lines(ledger) == 1
        kept = http.get(f"/actions/{action['id']}").json()["action"]
        assert kept["outcome"] == "uncertain" and kept["blocking"] is True
        final = http.get(f"/actions/calls/{body['invocation']['id']}").json()["invocation"]
        assert final["status"] == "denied", final
    assert lines(ledger) == 1
