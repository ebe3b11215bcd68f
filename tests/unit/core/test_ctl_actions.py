"""``octipusctl actions`` and ``sessions delete`` without a daemon: argument checks (exit 2), the
daemon missing (exit 3), what each command sends and prints against a recording fake client, the
exit codes of ``actions call``; ``approvals show/list`` of a recovery review of no run; and the
action routes' own checks (400 bodies, 503 without an action service, the explanation text)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from octipusd.api.action_routes import explain_action
from octipusd.api.app import create_app
from octipusd.api.common import Services
from octipusd.ctl import common, main as ctl
from octipusd.ctl.action_cmds import call_exit_code
from octipusd.store.journal_store import ToolAction

SESSION = "s" * 32
ACTION = "a" * 32
INVOCATION = "i" * 32
APPROVAL = "p" * 32
NOW = "2026-01-01T00:00:00+00:00"


@pytest.fixture
def runner(tmp_path: Path) -> CliRunner:
    return CliRunner(env={"OCTIPUS_DAEMON__SOCKET": str(tmp_path / "nobody.sock")})


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(ctl.app, list(args))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["actions", "call", "shell__run", "--session", "s", "--args", "{nope"], "--args is not valid JSON"),
        (["actions", "call", "shell__run", "--session", "s", "--args", "[1, 2]"], "must be a JSON object"),
        (["actions", "call", "shell__run", "--session", "s", "--wait", "301"], "--wait must be between 0"),
        (["actions", "call", "shell__run", "--session", "s", "--wait", "-1"], "--wait must be between 0"),
        (["actions", "call", "shell__run", "--session", "s", "--request-id", "x" * 201], "1 to 200"),
        (["actions", "call-show", "i1", "--wait", "1000"], "--wait must be between 0"),
        (["actions", "review", "--session", "s"], "exactly one"),
        (["actions", "review", "--session", "s", "--approve", "--deny"], "exactly one"),
        (["actions", "list", "--outcome", "failed"], "--outcome takes"),
        (["actions", "list", "--limit", "0"], "--limit must be between 1 and 1000"),
        (["actions", "calls", "--limit", "5000"], "--limit must be between 1 and 1000"),
        (["actions", "contain", "a1", "--note", "  "], "--note must say how"),
        (["actions", "forget-user", "alice"], "add --yes"),
        (["sessions", "delete", "s1"], "add --yes"),
    ],
)
def test_bad_input_exits_2_before_asking_the_daemon(runner: CliRunner, args: list[str], needle: str) -> None:
    result = invoke(runner, *args)
    assert result.exit_code == 2, result.output
    assert needle in result.output
    assert "not running" not in result.output


@pytest.mark.parametrize(
    "args",
    [
        ["actions"],
        ["actions", "list", "--unresolved"],
        ["actions", "show", "a1"],
        ["actions", "probe", "a1"],
        ["actions", "call", "shell__run", "--session", "s", "--args", '{"command": "ls"}'],
        ["actions", "forget-user", "alice", "--yes"],
        ["sessions", "delete", "s1", "--yes"],
    ],
)
def test_no_daemon_exits_3(runner: CliRunner, args: list[str]) -> None:
    result = invoke(runner, *args)
    assert result.exit_code == 3, result.output
    assert "octipusd is not running" in result.output


# ----------------------------------------------------------------------------- fake daemon


def action(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": ACTION,
        "user": "alice",
        "session_id": SESSION,
        "run_id": None,
        "agent": "manual:alice",
        "pipeline_id": None,
        "node_id": None,
        "origin": "manual",
        "invocation_id": INVOCATION,
        "tool": "shell__run",
        "args_hash": "0" * 64,
        "risk_class": "containable",
        "idempotency_key": None,
        "recovery_owner": None,
        "deadline_seconds": 3600.0,
        "owner": "1-abc",
        "outcome": "uncertain",
        "detail": "timed out after 0.5 s",
        "recovery_state": "effect_unconfirmed",
        "deadline_at": NOW,
        "review_id": None,
        "reviewed_by": None,
        "reviewed_at": None,
        "started_at": NOW,
        "finished_at": NOW,
        "in_flight_until": NOW,
        "dispatch": None,
        "dispatch_ended_at": None,
        "blocking": True,
    }
    return {**base, **fields}


def invocation(status: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": INVOCATION,
        "request_id": None,
        "user": "alice",
        "session_id": SESSION,
        "tool": "shell__run",
        "args_hash": "0" * 64,
        "status": status,
        "approval_id": None,
        "claimed_at": None,
        "claimed_by": None,
        "action_id": ACTION,
        "result": None,
        "is_error": False,
        "error": None,
        "created_at": NOW,
        "updated_at": NOW,
        "finished_at": None,
    }
    return {**base, **fields}


REVIEW_APPROVAL: dict[str, Any] = {
    "id": APPROVAL,
    "run_id": None,
    "session_id": SESSION,
    "tool_id": "shell__run",
    "subject": "Check earlier",
    "reason": "action_recovery · retry",
    "input": {
        "proposed": {"tool": "shell__run"},
        "actions": [
            {
                "action_id": ACTION,
                "tool": "shell__run",
                "outcome": "uncertain",
                "detail": "timed out after 0.5 s",
                "risk_class": "containable",
                "recovery_state": "effect_unconfirmed",
                "idempotency_key": None,
                "started_at": NOW,
                "run_id": None,
            }
        ],
        "note": "Check whether these actions already took effect before allowing further changes.",
    },
    "explanation": "1 earlier action(s) have uncertain effects",
    "status": "pending",
    "decided_by": None,
    "decision_reason": None,
    "created_at": NOW,
    "expires_at": NOW,
    "decided_at": None,
    "kind": "action_recovery",
    "questions": None,
    "answers": None,
    "grant_id": None,
    "vendor_request_id": None,
    "action_ids": [ACTION],
}


class FakeClient:
    """Records every request and answers from ``replies`` (keyed by ``METHOD path``)."""

    def __init__(self, replies: dict[str, Any]) -> None:
        self.replies = replies
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.sent.append((method, path, kwargs))
        return self.replies[f"{method} {path}"]


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(replies: dict[str, Any]) -> FakeClient:
        client = FakeClient(replies)
        monkeypatch.setattr(common, "new_client", lambda: client)
        monkeypatch.setattr(ctl, "new_client", lambda: client)
        return client

    return install


def test_call_sends_the_request_and_exits_0_when_completed(runner: CliRunner, fake: Any) -> None:
    result_text = '{"exit_code": 3, "stdout": "hi\\n"}'
    client = fake({"POST /actions/calls": {"invocation": invocation("completed", result=result_text), "replayed": False, "approval": None}})  # fmt: skip
    out = invoke(
        runner, "actions", "call", "shell__run", "--session", SESSION,
        "--args", '{"command": "echo hi; exit 3"}', "--request-id", "r1", "--wait", "5",
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    method, path, kwargs = client.sent[0]
    assert (method, path) == ("POST", "/actions/calls")
    assert kwargs["json"] == {
        "session_id": SESSION,
        "tool": "shell__run",
        "arguments": {"command": "echo hi; exit 3"},
        "wait_seconds": 5.0,
        "request_id": "r1",
    }
    assert kwargs["timeout"].read is None, "the daemon bounds the call, not the client's 30 s"
    assert "completed" in out.output and '"exit_code": 3' in out.output


def test_call_replayed_says_nothing_ran_again(runner: CliRunner, fake: Any) -> None:
    fake({"POST /actions/calls": {"invocation": invocation("uncertain", request_id="r1"), "replayed": True, "approval": None}})  # fmt: skip
    out = invoke(runner, "actions", "call", "shell__run", "--session", SESSION, "--request-id", "r1")
    assert out.exit_code == 1
    assert "replayed" in out.output and "nothing ran again" in out.output
    assert f"actions review --session {SESSION} --approve" in out.output


def test_call_awaiting_a_recovery_review_exits_1_and_says_how_to_answer(runner: CliRunner, fake: Any) -> None:
    waiting = invocation("awaiting_approval", approval_id=APPROVAL, action_id=None)
    fake({"POST /actions/calls": {"invocation": waiting, "replayed": False, "approval": REVIEW_APPROVAL}})
    out = invoke(runner, "actions", "call", "shell__run", "--session", SESSION)
    assert out.exit_code == 1
    assert "awaiting a recovery review" in out.output and ACTION in out.output
    assert f"octipusctl approvals approve|deny {APPROVAL}" in out.output
    assert f"octipusctl actions call-show {INVOCATION} --wait 60" in out.output


def test_call_exit_codes() -> None:
    assert call_exit_code("completed") == 0
    for status in ("not_executed", "uncertain", "denied", "expired", "cancelled", "awaiting_approval"):
        assert call_exit_code(status) == 1


def test_list_show_review_contain_forget(runner: CliRunner, fake: Any) -> None:
    receipts = [
        {"id": 7, "action_id": ACTION, "kind": "contract", "state": None, "data": {}, "created_at": NOW},
        {"id": 9, "action_id": ACTION, "kind": "outcome", "state": "effect_unconfirmed", "data": {"outcome": "uncertain"}, "created_at": NOW},
    ]  # fmt: skip
    decided = {**REVIEW_APPROVAL, "status": "approved", "decided_by": "alice via octipusctl"}
    client = fake(
        {
            "GET /actions": {"actions": [action()]},
            f"GET /actions/{ACTION}": {"action": action(), "receipts": receipts, "explanation": "EXPLAINED"},
            "POST /actions/review": decided,
            f"POST /actions/{ACTION}/contain": {"action": action(recovery_state="contained", blocking=False)},
            "DELETE /users/alice/journal": {"deleted": 4},
            f"DELETE /sessions/{SESSION}": None,
        }
    )
    listed = invoke(runner, "actions", "list", "--session", SESSION, "--unresolved", "--outcome", "uncertain")
    assert listed.exit_code == 0, listed.output
    assert client.sent[-1][2]["params"] == {
        "limit": 200,
        "session_id": SESSION,
        "outcome": "uncertain",
        "unresolved": "true",
    }
    assert (
        ACTION in listed.output
        and f"octipusctl actions review --session {SESSION} --approve" in listed.output
    )

    shown = invoke(runner, "actions", "show", ACTION)
    assert shown.exit_code == 0, shown.output
    assert "EXPLAINED" in shown.output and "none (started by hand)" in shown.output
    lines = shown.output.splitlines()
    contract = next(i for i, line in enumerate(lines) if "contract" in line)
    outcome = next(i for i, line in enumerate(lines) if "│ outcome" in line)
    assert contract < outcome, "receipt entries in order"

    reviewed = invoke(runner, "actions", "review", "--session", SESSION, "--approve", "--reason", "checked")
    assert reviewed.exit_code == 0, reviewed.output
    assert client.sent[-1][2]["json"] == {"session_id": SESSION, "decision": "approve", "reason": "checked"}
    assert "acknowledged 1 action(s)" in reviewed.output and "outcome is unchanged" in reviewed.output

    contained = invoke(runner, "actions", "contain", ACTION, "--note", "reverted by hand")
    assert contained.exit_code == 0 and "contained" in contained.output
    assert client.sent[-1][2]["json"] == {"note": "reverted by hand"}

    forgot = invoke(runner, "actions", "forget-user", "alice", "--yes")
    assert forgot.exit_code == 0 and "deleted 4 journal record(s) of alice" in forgot.output

    deleted = invoke(runner, "sessions", "delete", SESSION, "--yes")
    assert deleted.exit_code == 0 and f"deleted session {SESSION}" in deleted.output
    assert client.sent[-1][:2] == ("DELETE", f"/sessions/{SESSION}")


def test_approvals_show_and_list_a_recovery_review_of_no_run(runner: CliRunner, fake: Any) -> None:
    fake({f"GET /approvals/{APPROVAL}": REVIEW_APPROVAL, "GET /approvals": [REVIEW_APPROVAL]})
    shown = invoke(runner, "approvals", "show", APPROVAL)
    assert shown.exit_code == 0, shown.output
    assert "recovery review (Check earlier), pending" in shown.output
    assert f"none (not asked by a run) (session {SESSION})" in shown.output
    assert "proposed call:  shell__run" in shown.output
    assert (
        "covered actions" in shown.output and ACTION in shown.output and "effect_unconfirmed" in shown.output
    )
    assert "never remembered" in shown.output and "--remember session" not in shown.output
    assert "None" not in shown.output

    listed = invoke(runner, "approvals", "list")
    assert listed.exit_code == 0, listed.output
    assert "action_recovery" in listed.output and "none" in listed.output and "None" not in listed.output


def test_a_review_that_holds_its_call_back_says_until_when_and_approve_takes_run_now(
    runner: CliRunner, fake: Any
) -> None:
    """Issue 26: the review shows until when a covered request may still land; approving without
    --run-now says the call waits until then; --run-now sends run_now."""
    until = "2026-01-01T00:01:05+00:00"
    review = {**REVIEW_APPROVAL, "input": {**REVIEW_APPROVAL["input"], "waits_until": until}}
    approved = {**review, "status": "approved", "decided_by": "alice via octipusctl", "decision": "approve"}
    client = fake({f"GET /approvals/{APPROVAL}": review, f"POST /approvals/{APPROVAL}": approved})
    shown = invoke(runner, "approvals", "show", APPROVAL)
    assert shown.exit_code == 0, shown.output
    assert "runs after:" in shown.output and until in shown.output
    assert f"approvals approve {APPROVAL} [--run-now]" in shown.output

    waits = invoke(runner, "approvals", "approve", APPROVAL)
    assert waits.exit_code == 0, waits.output
    assert "run_now" not in client.sent[-1][2]["json"]
    assert f"the reviewed call waits until {until}" in " ".join(waits.output.split())

    client.replies[f"POST /approvals/{APPROVAL}"] = {**approved, "answers": {"run_now": True}}
    now = invoke(runner, "approvals", "approve", APPROVAL, "--run-now")
    assert now.exit_code == 0, now.output
    assert client.sent[-1][2]["json"]["run_now"] is True
    assert "waits until" not in now.output


# ----------------------------------------------------------------------------- the API's own checks


def _app(actions: Any = None) -> TestClient:
    runs = SimpleNamespace(user="alice", live_runs=list)
    services = Services(
        store=SimpleNamespace(),  # type: ignore[arg-type]
        runs=runs,  # type: ignore[arg-type]
        hub=SimpleNamespace(),  # type: ignore[arg-type]
        broker=SimpleNamespace(),  # type: ignore[arg-type]
        resolutions={},
        gate=SimpleNamespace(),  # type: ignore[arg-type]
        adapters={},
        user="alice",
        actions=actions,
    )
    return TestClient(create_app(services))


def test_routes_answer_503_without_an_action_service() -> None:
    client = _app()
    r = client.post("/v1/actions/calls", json={"session_id": SESSION, "tool": "shell__run"})
    assert r.status_code == 503 and r.json()["code"] == "actions_unavailable"
    assert "restart octipusd" in r.json()["message"]
    r = client.post("/v1/actions/review", json={"session_id": SESSION, "decision": "deny"})
    assert r.status_code == 503


@pytest.mark.parametrize(
    ("path", "body", "needle"),
    [
        ("/v1/actions/calls", b"{not json", "not valid JSON"),
        ("/v1/actions/calls", b"[1]", "must be a JSON object"),
        (
            "/v1/actions/calls",
            b'{"session_id": "s", "tool": "shell__run", "wait_seconds": 301}',
            "wait_seconds",
        ),
        ("/v1/actions/calls", b'{"session_id": "s", "tool": "shell__run", "arguments": [1]}', "arguments"),
        ("/v1/actions/calls", b'{"session_id": "s", "tool": "shell__run", "request_id": ""}', "request_id"),
        ("/v1/actions/calls", b'{"tool": "shell__run"}', "session_id: Field required"),
        ("/v1/actions/calls", b'{"session_id": "s", "tool": "x", "extra": 1}', "extra"),
        ("/v1/actions/review", b'{"session_id": "s", "decision": "maybe"}', "decision"),
        ("/v1/actions/review", b"", "must be a JSON object"),
        (f"/v1/actions/{ACTION}/contain", b"{}", "note: Field required"),
    ],
)
def test_bad_bodies_are_400_naming_the_field_and_the_shape(path: str, body: bytes, needle: str) -> None:
    r = _app().post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code == 400, r.text
    assert r.json()["code"] == "invalid_request"
    assert needle in r.json()["message"] and "send {" in r.json()["message"]


def _record(**fields: Any) -> ToolAction:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    base: dict[str, Any] = {
        "id": ACTION,
        "user": "alice",
        "session_id": SESSION,
        "run_id": None,
        "agent": "manual:alice",
        "pipeline_id": None,
        "node_id": None,
        "origin": "manual",
        "invocation_id": None,
        "tool": "shell__run",
        "args_hash": "0" * 64,
        "risk_class": "containable",
        "idempotency_key": None,
        "recovery_owner": None,
        "deadline_seconds": 3600.0,
        "owner": "1-abc",
        "outcome": "uncertain",
        "detail": "timed out",
        "recovery_state": "effect_unconfirmed",
        "deadline_at": now + timedelta(hours=1),
        "review_id": None,
        "reviewed_by": None,
        "reviewed_at": None,
        "started_at": now,
        "finished_at": now,
        "in_flight_until": now,
        "dispatch": None,
        "dispatch_ended_at": None,
    }
    return ToolAction(**{**base, **fields})


def test_explanations_use_the_seed_wording() -> None:
    uncertain = explain_action(_record())
    assert "partial effects may have occurred" in uncertain
    assert f"blocks later mutations of user alice in session {SESSION} until a person reviews it" in uncertain
    assert "Recovery owner: alice (the user it ran for)" in uncertain and "goes to its owner" in uncertain

    completed = explain_action(_record(outcome="completed", recovery_state=None, deadline_at=None))
    assert "a finished attempt, not necessarily success" in completed and "blocks" not in completed
    assert "escalation deadline 3600 s" in completed

    refused = explain_action(_record(outcome="not_executed", recovery_state=None, deadline_at=None))
    assert "trusted evidence shows nothing ran" in refused

    reviewed = explain_action(
        _record(review_id=APPROVAL, reviewed_by="bob via octipusctl", recovery_owner="ops", run_id="r" * 32)
    )
    assert f"Recovery review {APPROVAL} by bob via octipusctl" in reviewed
    assert "does not relabel the outcome" in reviewed and "no longer blocks" in reviewed
    assert "Recovery owner: ops" in reviewed and f"in run {'r' * 32}" in reviewed

    running = explain_action(_record(outcome="started", recovery_state=None, deadline_at=None), live=True)
    assert "running in this daemon now" in running
    orphan = explain_action(_record(outcome="started", recovery_state=None, deadline_at=None))
    assert "counts as uncertain" in orphan and "blocks later mutations" in orphan

    contained = explain_action(_record(recovery_state="contained"))
    assert "this settles it" in contained and "no longer blocks" in contained


def test_the_explanation_names_what_the_last_probe_found() -> None:
    from datetime import UTC, datetime

    from octipusd.store.journal_store import ActionReceipt

    probe = ActionReceipt(1, "a", "probe", "verified", {"status": "applied"}, datetime.now(UTC))
    text = explain_action(_record(recovery_state="verified"), receipts=[probe])
    assert "the last probe found the effect applied" in text


def test_a_request_that_may_still_land_is_shown_with_until_when(runner: CliRunner, fake: Any) -> None:
    until = "2026-01-01T00:05:05+00:00"
    dispatch = {"kind": "mcp_http", "server": "ledger", "session_id": "f" * 32}
    in_flight = action(tool="ledger.append_entry", in_flight_until=until, dispatch=dispatch)
    note = f"a request may still be in flight until {until}"
    review = {**REVIEW_APPROVAL, "input": {**REVIEW_APPROVAL["input"]}}
    review["input"]["actions"] = [
        {**REVIEW_APPROVAL["input"]["actions"][0], "in_flight_until": until, "note": note}
    ]
    fake(
        {
            f"GET /actions/{ACTION}": {"action": in_flight, "receipts": [], "explanation": "EXPLAINED"},
            f"POST /actions/{ACTION}/probe": {
                "action_id": ACTION,
                "status": "not_applied",
                "detail": "probe ledger.find_entry: not applied",
                "settled": False,
                "in_flight_until": until,
                "correction": False,
                "action": in_flight,
            },
            f"GET /approvals/{APPROVAL}": review,
        }
    )
    shown = invoke(runner, "actions", "show", ACTION)
    assert shown.exit_code == 0, shown.output
    assert f"in flight until: {until}" in shown.output
    assert f"MCP server ledger over HTTP, session {'f' * 32}" in shown.output
    probed = invoke(runner, "actions", "probe", ACTION)
    assert probed.exit_code == 0, probed.output
    assert "the probe says not_applied" in probed.output
    assert f"not settled: a request of it may still land until {until}" in " ".join(probed.output.split())
    asked = invoke(runner, "approvals", "show", APPROVAL)
    assert asked.exit_code == 0, asked.output
    assert f"{ACTION}: {note}" in " ".join(asked.output.split())
    assert "refused until its time" in " ".join(asked.output.split())


def test_the_explanation_says_until_when_a_request_may_still_land() -> None:
    from octipusd.store.journal_store import ActionReceipt

    later = datetime.now(UTC) + timedelta(minutes=5)
    pending = explain_action(_record(in_flight_until=later))
    assert "A dispatched request of it may still land: a request may still be in flight until" in pending
    assert "a retry with the same idempotency key is refused" in pending
    ended = explain_action(_record(in_flight_until=later, dispatch_ended_at=datetime.now(UTC)))
    assert "No request of it can land any more" in ended and "may still land" not in ended
    settled = ActionReceipt(1, ACTION, "probe", "verified", {"status": "not_applied"}, datetime.now(UTC))
    correction = ActionReceipt(
        2, ACTION, "correction", "needs_operator", {"earlier": {"at": "EARLIER"}}, datetime.now(UTC)
    )
    reopened = explain_action(_record(recovery_state="needs_operator"), receipts=[settled, correction])
    assert "verified as not applied at EARLIER, but a later probe found the effect applied" in reopened
    assert "went to its owner for review" in reopened and "ambiguous past the deadline" not in reopened
    assert "the last probe found the effect not applied" not in reopened
    compensated = explain_action(_record(recovery_state="compensated"), receipts=[settled])
    assert "offset the effect (this settles it)" in compensated and "last probe" not in compensated
    noted = ActionReceipt(3, ACTION, "probe", None, {"status": "applied", "note": "NOTE"}, datetime.now(UTC))
    assert "the last probe found the effect applied (NOTE)" in explain_action(
        _record(recovery_state="verified"), receipts=[settled, noted]
    )
