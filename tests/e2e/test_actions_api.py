"""The action journal's API and ``octipusctl actions`` against a real octipusd with real SQLite.

Seed 000 (a shell command that appends to a file and then times out is uncertain; the next
mutation of that user and session waits for a recovery review; approving it is never a
permanent permission; session deletion removes the journal) and seed 001 (a call started by
hand is keyed by its request id: a retry returns the stored invocation and runs nothing; an
approved call owes an execution and runs once).
"""

from __future__ import annotations

import getpass
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Env

BIN = Path(sys.executable).parent
CTL = str(BIN / "octipusctl")
ME = getpass.getuser()
TEXT_ONLY = {"steps": [{"content": [{"type": "text", "text": "pong"}]}]}
#: Appends a line, then outlives its 0.5 s timeout: the append happened, the call is uncertain.
SLOW = "printf '%s\\n' >> ledger.txt; sleep 5"


class Api:
    """Raw HTTP on the daemon's socket (status codes matter here)."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self.http = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(env.daemon.socket)),
            base_url="http://octipusd/v1",
            timeout=120.0,
            headers={"X-Octipus-Client": "e2e"},
        )
        self.ledger = env.daemon.workspace / "ledger.txt"

    def lines(self) -> list[str]:
        return self.ledger.read_text().splitlines() if self.ledger.exists() else []

    def call(
        self,
        session: str,
        command: str,
        *,
        request_id: str | None = None,
        timeout: float | None = None,
        wait: float = 0.0,
    ) -> httpx.Response:
        arguments: dict[str, Any] = {"command": command}
        if timeout is not None:
            arguments["timeout"] = timeout
        body: dict[str, Any] = {
            "session_id": session,
            "tool": "shell__run",
            "arguments": arguments,
            "wait_seconds": wait,
        }
        if request_id is not None:
            body["request_id"] = request_id
        return self.http.post("/actions/calls", json=body)

    def uncertain(self, session: str, line: str) -> dict[str, Any]:
        """Run the slow append; return its (uncertain) action."""
        r = self.call(session, SLOW.replace("%s", line, 1), timeout=0.5)
        assert r.status_code == 200, r.text
        invocation = r.json()["invocation"]
        assert invocation["status"] == "uncertain", invocation
        action = self.http.get(f"/actions/{invocation['action_id']}").json()["action"]
        assert action["outcome"] == "uncertain" and action["blocking"], action
        return dict(action)

    def unresolved(self, session: str) -> list[str]:
        r = self.http.get("/actions", params={"session_id": session, "unresolved": "true"})
        assert r.status_code == 200, r.text
        return [a["id"] for a in r.json()["actions"]]


@pytest.fixture
def api(octipus: Callable[..., Env]) -> Iterator[Api]:
    """A daemon where ``shell__run`` is allowed by a stored rule, so only recovery reviews ask."""
    env = octipus(TEXT_ONLY)
    api = Api(env)
    r = api.http.post("/rules", json={"level": "allow", "rule": "shell__run"})
    assert r.status_code == 201, r.text
    yield api
    api.http.close()


def ctl(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CTL, *args], env=env.daemon.env, capture_output=True, text=True, timeout=120)


def test_a_call_waits_for_its_approval_and_runs_once_approved(octipus: Callable[..., Env]) -> None:
    env = octipus(TEXT_ONLY)
    api = Api(env)
    session = env.new_session()
    # the default rules ask for shell__run: the call waits, nothing runs
    r = api.call(session, "printf 'zero\\n' >> ledger.txt", request_id="ask-1")
    assert r.status_code == 202, r.text
    body = r.json()
    invocation, approval = body["invocation"], body["approval"]
    assert invocation["status"] == "awaiting_approval" and body["replayed"] is False
    assert approval["kind"] == "tool" and approval["run_id"] is None and approval["status"] == "pending"
    assert "arguments" not in invocation and "claim_token" not in invocation
    assert api.lines() == []
    # a retry of the same request while it waits is the same invocation
    again = api.call(session, "printf 'zero\\n' >> ledger.txt", request_id="ask-1")
    assert again.status_code == 202 and again.json()["replayed"] is True
    assert again.json()["invocation"]["id"] == invocation["id"]

    answered = api.http.post(f"/approvals/{approval['id']}", json={"decision": "approve"})
    assert answered.status_code == 200, answered.text
    done = api.http.get(f"/actions/calls/{invocation['id']}", params={"wait_seconds": 30})
    assert done.status_code == 200, done.text
    assert done.json()["invocation"]["status"] == "completed", done.json()
    assert api.lines() == ["zero"]
    listed = api.http.get("/actions/calls", params={"session_id": session}).json()["invocations"]
    assert [i["id"] for i in listed] == [invocation["id"]]


def test_replay_uncertain_and_recovery_review_through_approvals(api: Api) -> None:
    env, http = api.env, api.http
    session = env.new_session()

    first = api.call(session, "printf 'one\\n' >> ledger.txt", request_id="req-1")
    assert first.status_code == 200, first.text
    done = first.json()
    assert done["replayed"] is False and done["invocation"]["status"] == "completed", done
    assert api.lines() == ["one"]

    # the client lost the answer and retries: the stored invocation, nothing runs again
    retried = api.call(session, "printf 'one\\n' >> ledger.txt", request_id="req-1")
    assert retried.status_code == 200 and retried.json()["replayed"] is True
    assert retried.json()["invocation"]["id"] == done["invocation"]["id"]
    assert api.lines() == ["one"]
    reused = api.call(session, "printf 'other\\n' >> ledger.txt", request_id="req-1")
    assert reused.status_code == 409 and "use a new request id" in reused.json()["message"]

    # appends, then times out: uncertain (the append did happen)
    action = api.uncertain(session, "two")
    assert api.lines() == ["one", "two"]
    shown = http.get(f"/actions/{action['id']}").json()
    assert [r["kind"] for r in shown["receipts"]] == ["contract", "outcome"]
    assert "partial effects may have occurred" in shown["explanation"]
    assert "blocks later mutations" in shown["explanation"] and ME in shown["explanation"]
    assert api.unresolved(session) == [action["id"]]
    completed = http.get("/actions", params={"session_id": session, "outcome": "completed"}).json()
    assert completed["actions"][0]["outcome"] == "completed" and completed["actions"][0]["blocking"] is False
    assert (
        "not necessarily success"
        in http.get(f"/actions/{completed['actions'][0]['id']}").json()["explanation"]
    )

    # probing: shell__run declares no probe (404), a completed action is not probed (409)
    no_probe = http.post(f"/actions/{action['id']}/probe")
    assert no_probe.status_code == 404 and "declares no verification probe" in no_probe.json()["message"]
    settled = http.post(f"/actions/{completed['actions'][0]['id']}/probe")
    assert settled.status_code == 409 and "only uncertain actions" in settled.json()["message"]

    # the next mutation waits for a recovery review covering exactly that action; nothing runs
    third = api.call(session, "printf 'three\\n' >> ledger.txt")
    assert third.status_code == 202, third.text
    pending = third.json()
    assert pending["invocation"]["status"] == "awaiting_approval"
    review = pending["approval"]
    assert review["kind"] == "action_recovery" and review["action_ids"] == [action["id"]], review
    assert api.lines() == ["one", "two"]

    # a recovery review is never remembered as a permission
    remembered = http.post(
        f"/approvals/{review['id']}", json={"decision": "approve", "remember": {"scope": "session"}}
    )
    assert remembered.status_code == 400, remembered.text
    assert "never remembered as a permission; answer without --remember" in remembered.json()["message"]
    # run now goes only with approving a recovery review (issue 26)
    wrong = http.post(f"/approvals/{review['id']}", json={"decision": "deny", "run_now": True})
    assert wrong.status_code == 400, wrong.text
    assert "run_now goes only with approving a recovery review" in wrong.json()["message"]
    # its action's request was stopped by Octipus at its timeout: nothing can land, so no wait is shown
    assert review["input"]["waits_until"] is None
    shown_ctl = ctl(env, "approvals", "show", review["id"])
    assert shown_ctl.returncode == 0, shown_ctl.stderr
    assert "recovery review" in shown_ctl.stdout and action["id"] in shown_ctl.stdout
    assert "covered actions" in shown_ctl.stdout and "none (not asked by a run)" in shown_ctl.stdout
    listed_ctl = ctl(env, "approvals", "list")
    assert listed_ctl.returncode == 0 and "action_recovery" in listed_ctl.stdout, listed_ctl.stderr

    approved = http.post(f"/approvals/{review['id']}", json={"decision": "approve"})
    assert approved.status_code == 200, approved.text
    ran = http.get(f"/actions/calls/{pending['invocation']['id']}", params={"wait_seconds": 30})
    assert ran.status_code == 200 and ran.json()["invocation"]["status"] == "completed", ran.text
    assert api.lines() == ["one", "two", "three"]
    # acknowledged, not relabelled
    after = http.get(f"/actions/{action['id']}").json()
    assert after["action"]["outcome"] == "uncertain" and after["action"]["review_id"] == review["id"]
    assert after["action"]["blocking"] is False and "does not relabel" in after["explanation"]
    assert [r["kind"] for r in after["receipts"]] == ["contract", "outcome", "reviewed"]
    assert api.unresolved(session) == []
    # no grant came out of it
    assert http.get("/rules").json()["grants"] == []


def test_review_contain_and_session_deletion(api: Api) -> None:
    env, http = api.env, api.http
    session = env.new_session()
    other = env.new_session()
    action = api.uncertain(session, "a")
    # the other session is a separate journal scope
    assert api.call(other, "printf 'b\\n' >> ledger.txt").json()["invocation"]["status"] == "completed"

    nothing = http.post("/actions/review", json={"session_id": other, "decision": "approve"})
    assert nothing.status_code == 409 and "no unresolved actions" in nothing.json()["message"]
    bad = http.post("/actions/review", json={"session_id": session, "decision": "maybe"})
    assert bad.status_code == 400 and "decision" in bad.json()["message"]

    denied = http.post(
        "/actions/review", json={"session_id": session, "decision": "deny", "reason": "checking"}
    )
    assert denied.status_code == 200, denied.text
    assert denied.json()["status"] == "denied" and denied.json()["action_ids"] == [action["id"]]
    assert api.unresolved(session) == [action["id"]]

    done = ctl(env, "actions", "review", "--session", session, "--approve", "--reason", "checked the ledger")
    assert done.returncode == 0, done.stderr
    assert "approved" in done.stdout and action["id"] in done.stdout
    assert api.unresolved(session) == []

    # containment settles another uncertain action; the note is required
    second = api.uncertain(session, "c")
    empty = http.post(f"/actions/{second['id']}/contain", json={"note": "  "})
    assert empty.status_code == 400 and "note" in empty.json()["message"]
    contained = http.post(f"/actions/{second['id']}/contain", json={"note": "removed line c by hand"})
    assert contained.status_code == 200 and contained.json()["action"]["recovery_state"] == "contained"
    again = http.post(f"/actions/{second['id']}/contain", json={"note": "twice"})
    assert again.status_code == 409
    no_compensation = http.post(f"/actions/{second['id']}/compensate")
    assert (
        no_compensation.status_code == 404 and "declares no compensation" in no_compensation.json()["message"]
    )
    assert api.unresolved(session) == []
    show = ctl(env, "actions", "show", second["id"])
    assert show.returncode == 0 and "contained" in show.stdout and "removed line c by hand" in show.stdout

    assert http.delete(f"/sessions/{session}").status_code == 204
    assert http.get("/actions", params={"session_id": session}).status_code == 404  # the session is gone
    assert all(a["session_id"] != session for a in http.get("/actions").json()["actions"])
    assert http.get("/actions/calls", params={"session_id": session}).json() == {"invocations": []}
    assert http.get(f"/actions/{action['id']}").status_code == 404
    gone = http.delete(f"/sessions/{session}")
    assert gone.status_code == 404
    # the other session's journal is untouched, until its user's journal is forgotten
    assert len(http.get("/actions", params={"session_id": other}).json()["actions"]) == 1
    refused = ctl(env, "actions", "forget-user", ME)
    assert refused.returncode == 2 and "--yes" in refused.stderr
    forgot = http.delete(f"/users/{ME}/journal")
    assert forgot.status_code == 200 and forgot.json() == {"deleted": 1}
    assert http.get("/actions", params={"session_id": other}).json() == {"actions": []}


def test_octipusctl_actions_call_list_and_exit_codes(api: Api) -> None:
    env = api.env
    session = env.new_session()
    ok = ctl(env, "actions", "call", "shell__run", "--session", session, "--args", '{"command": "echo hi"}')
    assert ok.returncode == 0, ok.stderr + ok.stdout
    assert "completed" in ok.stdout and '"stdout": "hi\\n"' in ok.stdout

    failed = ctl(
        env, "actions", "call", "shell__run", "--session", session, "--args", '{"command": "exit 3"}'
    )
    assert failed.returncode == 0, "a non-zero shell exit is a completed attempt"

    refused = ctl(env, "actions", "call", "shell__run", "--session", session, "--args", '{"command": "if"}')
    assert refused.returncode == 1 and "not_executed" in refused.stdout, refused.stdout
    assert api.unresolved(session) == [], "a parser refusal needs no review"

    slow = ctl(
        env,
        "actions", "call", "shell__run", "--session", session, "--request-id", "slow-1",
        "--args", '{"command": "printf x >> ledger.txt; sleep 5", "timeout": 0.5}',
    )  # fmt: skip
    assert slow.returncode == 1 and "uncertain" in slow.stdout, slow.stdout
    replay = ctl(
        env,
        "actions", "call", "shell__run", "--session", session, "--request-id", "slow-1",
        "--args", '{"command": "printf x >> ledger.txt; sleep 5", "timeout": 0.5}',
    )  # fmt: skip
    assert replay.returncode == 1 and "replayed" in replay.stdout and "nothing ran again" in replay.stdout
    assert api.ledger.read_text() == "x"

    waiting = ctl(env, "actions", "call", "shell__run", "--session", session, "--args", '{"command": "true"}')
    assert waiting.returncode == 1 and "awaiting a recovery review" in waiting.stdout, waiting.stdout

    listed = ctl(env, "actions", "list", "--session", session, "--unresolved")
    assert (
        listed.returncode == 0
        and "uncertain" in listed.stdout
        and "actions review --session" in listed.stdout
    )
    bad = ctl(env, "actions", "call", "shell__run", "--session", session, "--args", "{nope")
    assert bad.returncode == 2 and "--args is not valid JSON" in bad.stderr
    missing = ctl(env, "actions", "show", "0" * 32)
    assert missing.returncode == 2 and "not found" in missing.stderr
    calls = ctl(env, "actions", "calls", "--session", session)
    assert calls.returncode == 0 and "awaiting_approval" in calls.stdout

    kept = ctl(env, "sessions", "delete", session)
    assert kept.returncode == 2 and "--yes" in kept.stderr
    deleted = ctl(env, "sessions", "delete", session, "--yes")
    assert deleted.returncode == 0, deleted.stderr
    gone = ctl(env, "actions", "list", "--session", session)
    assert gone.returncode == 2 and "not found" in gone.stderr  # a deleted session is named as such


def test_a_session_with_a_live_run_is_not_deleted(octipus: Callable[..., Env]) -> None:
    env = octipus({"steps": [{"content": [{"type": "text", "text": "late"}], "stall_seconds": 60}]})
    session = env.new_session()
    run = env.post(session, "hold on")
    env.wait(lambda: env.run(run)["status"] == "running", 60, f"run {run} to start")
    api = Api(env)
    refused = api.http.delete(f"/sessions/{session}")
    assert refused.status_code == 409, refused.text
    assert run in refused.json()["message"] and f"octipusctl runs stop {run}" in refused.json()["message"]
    by_ctl = ctl(env, "sessions", "delete", session, "--yes")
    assert by_ctl.returncode == 1 and "live run" in by_ctl.stderr
    env.client.request("POST", f"/runs/{run}/stop", json={"reason": "test"})
    env.wait_final(run)
    assert api.http.delete(f"/sessions/{session}").status_code == 204
    assert api.http.get(f"/sessions/{session}").status_code == 404
