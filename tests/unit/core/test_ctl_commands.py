"""octipusctl without a daemon: argument checks (exit 2), the daemon missing (exit 3), questionnaire
parsing and the interactive questionnaire of ``octipusctl run``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from octipusd.ctl import main as ctl
from octipusd.ctl.common import parse_duration
from octipusd.ctl.questions import ask_questionnaire, interpret_reply, resolve_answers

DB = "Which database should the service use?"
FEATURES = "Which features do you want?"
QUESTIONS: list[dict[str, Any]] = [
    {
        "question": DB,
        "header": "Database",
        "multiSelect": False,
        "options": [
            {"label": "PostgreSQL", "description": "Relational, strong consistency", "preview": None},
            {"label": "SQLite", "description": "Embedded single file", "preview": None},
        ],
    },
    {
        "question": FEATURES,
        "header": "Features",
        "multiSelect": True,
        "options": [
            {"label": "Auth", "description": "Login and sessions", "preview": None},
            {"label": "Search", "description": "Full-text search", "preview": None},
            {"label": "Export", "description": "CSV export", "preview": None},
        ],
    },
]


@pytest.fixture
def runner(tmp_path: Path) -> CliRunner:
    return CliRunner(env={"OCTIPUS_DAEMON__SOCKET": str(tmp_path / "nobody.sock")})


def invoke(runner: CliRunner, *args: str, input: str | None = None) -> Any:
    return runner.invoke(ctl.app, list(args), input=input)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["run", "x", "--space", "team"], "--space needs --model-row"),
        (["run", "x", "--space", "team", "--model-row", "r", "--session", "s"], "--model-row and --option"),
        (["run", "x", "--approve", "maybe"], "--approve takes"),
        (["approvals", "approve", "a1", "--match", "tool"], "go with --remember"),
        (["approvals", "deny", "a1", "--remember", "forever"], "--remember takes"),
        (["approvals", "approve", "a1", "--remember", "session", "--ttl", "soon"], "is not a duration"),
        (["approvals", "approve", "a1", "--remember", "session", "--match", "all"], "--match takes"),
        (["rules", "add", "maybe", "cli-native:Read"], "LEVEL takes"),
        (["rules", "grant", "cli-native:Bash", "--level", "sometimes"], "--level takes"),
        (["rules", "grant", "cli-native:Bash", "--ttl", "0s"], "longer than zero"),
        (["rules", "explain", "cli-native:Bash", "--arg", "novalue"], "is not KEY=JSON"),
        (["spaces", "member", "team", "alice", "king"], "ROLE takes"),
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
        ["rules"],
        ["rules", "explain", "cli-native:Read"],
        ["spaces"],
        ["spaces", "show", "team"],
        ["approvals", "show", "a1"],
        ["approvals", "answer", "a1", "--answer", "1=x"],
    ],
)
def test_no_daemon_exits_3(runner: CliRunner, args: list[str]) -> None:
    result = invoke(runner, *args)
    assert result.exit_code == 3, result.output
    assert "octipusd is not running" in result.output


def test_parse_duration() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("30m") == 1800
    assert parse_duration("1h30m") == 5400
    assert parse_duration("2d") == 172800
    assert parse_duration("45") == 45
    assert parse_duration("1.5h") == 5400
    for bad in ("", "h", "1x", "1h-", "nan", "inf", "-5", "0"):
        with pytest.raises(typer.Exit) as caught:
            parse_duration(bad)
        assert caught.value.exit_code == 2


def test_resolve_answers_by_number_text_and_header() -> None:
    answers = resolve_answers(QUESTIONS, ["1=SQLite", f"{FEATURES}=Auth", "features=Export"])
    assert answers == {DB: "SQLite", FEATURES: ["Auth", "Export"]}
    # a free text, and a comma kept inside one answer
    answers = resolve_answers(QUESTIONS, ["database=DuckDB, embedded", "2=Search"])
    assert answers == {DB: "DuckDB, embedded", FEATURES: ["Search"]}


def test_resolve_answers_takes_question_texts_holding_equals() -> None:
    questions = [{"question": "Is a=b?", "header": None, "multiSelect": False, "options": []}]
    assert resolve_answers(questions, ["Is a=b?=yes"]) == {"Is a=b?": "yes"}


@pytest.mark.parametrize(
    ("items", "needle"),
    [
        (["1=SQLite"], "missing: 2."),
        (["1=SQLite", "1=PostgreSQL", "2=Auth"], "takes a single answer"),
        (["3=x", "1=a", "2=b"], "no question '3'"),
        (["SQLite", "2=b"], "is not QUESTION=ANSWER"),
        (["1= ", "2=b"], "empty answer"),
    ],
)
def test_resolve_answers_refuses(items: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(typer.Exit) as caught:
        resolve_answers(QUESTIONS, items)
    assert caught.value.exit_code == 2
    assert needle in capsys.readouterr().err


def test_interpret_reply() -> None:
    db, features = QUESTIONS
    assert interpret_reply(db, "2") == "SQLite"
    assert interpret_reply(db, " postgresql ") == "PostgreSQL"
    assert interpret_reply(db, "DuckDB please") == "DuckDB please"
    assert interpret_reply(features, "1, 3") == ["Auth", "Export"]
    assert interpret_reply(features, "search,1,1") == ["Search", "Auth"]
    assert interpret_reply(features, "1, audit log, metrics") == ["Auth", "audit log, metrics"]
    with pytest.raises(ValueError, match="no option 7"):
        interpret_reply(db, "7")
    with pytest.raises(ValueError, match="answer is needed"):
        interpret_reply(db, "  ")


def test_ask_questionnaire_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    replies = iter(["9", "2", "1,3"])
    confirms = iter([True])
    monkeypatch.setattr(typer, "prompt", lambda text, **_: next(replies))
    monkeypatch.setattr(typer, "confirm", lambda text, **_: next(confirms))
    assert ask_questionnaire(QUESTIONS) == {DB: "SQLite", FEATURES: ["Auth", "Export"]}
    out = capsys.readouterr()
    assert "[Database] Which database should the service use?" in out.out
    assert "2) SQLite - Embedded single file" in out.out
    assert "multiple selection" in out.out and "3) Export - CSV export" in out.out
    assert "no option 9" in out.err


def test_ask_questionnaire_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    replies = iter(["1", "2"])
    confirms = iter([False, True])
    monkeypatch.setattr(typer, "prompt", lambda text, **_: next(replies))
    monkeypatch.setattr(typer, "confirm", lambda text, **_: next(confirms))
    assert ask_questionnaire(QUESTIONS) is None


class FakeClient:
    """Records requests; answers GET /approvals/ID with a questionnaire."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.sent.append((method, path, kwargs.get("json")))
        if method == "GET":
            return {"id": "a1", "kind": "questionnaire", "questions": {"questions": QUESTIONS}, "input": {}}
        return {"id": "a1", "status": "approved"}


QUESTIONNAIRE_EVENT = {
    "kind": "approval_requested",
    "data": {"approval_id": "a1", "tool_id": "cli-native:AskUserQuestion", "kind": "questionnaire"},
}


def test_run_with_approve_yes_leaves_a_questionnaire_pending(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient()
    ctl._answer_inline(client, QUESTIONNAIRE_EVENT, "yes")  # type: ignore[arg-type]
    assert client.sent == []
    err = capsys.readouterr().err
    assert "questionnaire" in err and "stays pending" in err
    assert "octipusctl approvals answer a1 --answer" in err


def test_run_with_approve_no_cancels_a_questionnaire() -> None:
    client = FakeClient()
    ctl._answer_inline(client, QUESTIONNAIRE_EVENT, "no")  # type: ignore[arg-type]
    assert client.sent == [("POST", "/approvals/a1", {"decision": "deny"})]


def test_run_asks_a_questionnaire_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    replies = iter(["postgresql", "2, 3"])
    monkeypatch.setattr(typer, "prompt", lambda text, **_: next(replies))
    monkeypatch.setattr(typer, "confirm", lambda text, **_: True)
    monkeypatch.setattr(ctl.sys.stdin, "isatty", lambda: True)
    client = FakeClient()
    ctl._answer_inline(client, QUESTIONNAIRE_EVENT, "ask")  # type: ignore[arg-type]
    assert client.sent[-1] == (
        "POST",
        "/approvals/a1",
        {"decision": "approve", "answers": {DB: "PostgreSQL", FEATURES: ["Search", "Export"]}},
    )


def test_render_policy_events(capsys: pytest.CaptureFixture[str]) -> None:
    ctl._render(
        {
            "kind": "policy_decision",
            "data": {
                "tool_id": "cli-native:Read",
                "subject": "/w/a.txt",
                "level": "deny",
                "explanation": "stored rule deny cli-native:Read [x]",
                "rule": "cli-native:Read",
                "tier": "new",
                "grant_id": None,
            },
        }
    )
    ctl._render(
        {
            "kind": "flow_guard",
            "data": {"tool_id": "cli-native:WebFetch", "subject": None, "reason": "secrets read"},
        }
    )
    ctl._render(
        {
            "kind": "flow_label",
            "data": {
                "tool_id": "cli-native:Read",
                "added": ["secret"],
                "label": "secret",
                "reasons": ["a .env"],
            },
        }
    )
    out = capsys.readouterr().out
    assert "policy cli-native:Read /w/a.txt: deny (new: stored rule deny cli-native:Read [x])" in out
    assert "flow guard cli-native:WebFetch: secrets read" in out
    assert "flow label +secret -> session secret (after cli-native:Read: a .env)" in out


def test_run_output_shows_compaction_and_child_events(capsys: pytest.CaptureFixture[str]) -> None:
    ctl._render(
        {
            "kind": "compaction",
            "data": {"published": True, "checkpoint_id": 3, "first_seq": 1, "through_seq": 6},
        }
    )
    ctl._render(
        {
            "kind": "compaction",
            "data": {"published": False, "reason": "nothing to compact: fewer than 3 turns"},
        }
    )
    ctl._render(
        {"kind": "child_spawned", "data": {"child_run_id": "c1", "role": "coding", "resume_key": "t1"}}
    )
    ctl._render(
        {"kind": "child_finished", "data": {"child_run_id": "c1", "status": "succeeded", "resumed": True}}
    )
    out = capsys.readouterr().out
    assert "checkpoint 3 covers messages 1-6" in out
    assert "nothing published (nothing to compact: fewer than 3 turns)" in out
    assert "child c1 (coding key t1) started" in out and "child c1 succeeded (resumed)" in out
