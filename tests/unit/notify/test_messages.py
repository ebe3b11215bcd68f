"""What is worth a notification and what it says (octipusd.notify.messages), from real store rows."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from octipusd.notify.messages import Notification, PageUrl, compose, wanted
from octipusd.store import Store
from octipusd.store.records import Approval, Run, RunEvent, RunStatus, Session

PAGE = "http://127.0.0.1:8765"
SECRET_CONTENT = "FILE-CONTENTS-NOT-FOR-NOTIFICATIONS"


def page(path: str) -> str | None:
    return PAGE + path


def no_page(path: str) -> str | None:
    return None


def event(run_id: str, kind: str, data: dict[str, Any]) -> RunEvent:
    return RunEvent(id=1, run_id=run_id, seq=1, kind=kind, data=data, created_at=datetime.now(UTC))


def message_of(
    event: RunEvent, run: Run, session: Session, approval: Approval | None = None, page: PageUrl = page
) -> Notification | None:
    return compose(event, run=run, session=session, approval=approval, page=page, finished_after_s=300)


def rows(store: Store, tmp_path: Any, title: str | None = "fix the tests") -> tuple[Session, Run]:
    workspace = tmp_path / "my-project"
    workspace.mkdir(exist_ok=True)
    session = store.create_session(workspace=str(workspace), adapter="claude-code", title=title)
    return session, store.create_run(session_id=session.id, prompt="go", owner="test")


def ask_questions(
    store: Store, session: Session, run: Run, asked: list[Any], stored: bool = True
) -> Approval:
    """A questionnaire approval asking ``asked`` (in its ``questions`` field too when ``stored``)."""
    return store.create_approval(
        run_id=run.id,
        session_id=session.id,
        tool_id="cli-native:AskUserQuestion",
        subject=None,
        reason=None,
        input={"questions": asked},
        explanation=None,
        vendor_request_id=None,
        expires_at=None,
        kind="questionnaire",
        questions={"questions": asked} if stored else None,
    )


def test_a_tool_approval_names_the_tool_subject_and_session_and_links_the_approval(
    store: Store, tmp_path: Any
) -> None:
    session, run = rows(store, tmp_path)
    approval = store.create_approval(
        run_id=run.id,
        session_id=session.id,
        tool_id="cli-native:Write",
        subject="/work/notes.txt",
        reason="default ask",
        input={"file_path": "/work/notes.txt", "content": SECRET_CONTENT},
        explanation="no rule matched: ask",
        vendor_request_id=None,
        expires_at=None,
    )
    data = {
        "approval_id": approval.id,
        "tool_id": "cli-native:Write",
        "kind": "tool",
        "subject": "/work/notes.txt",
    }
    data |= {"reason": "default ask", "explanation": "no rule matched: ask"}
    message = message_of(event(run.id, "approval_requested", data), run, session, approval, page)
    assert message is not None
    assert message.title == "Octipus: approval needed for cli-native:Write"
    assert "session 'fix the tests'" in message.body and run.id in message.body
    assert "Subject: /work/notes.txt" in message.body and "no rule matched: ask" in message.body
    assert message.link == f"{PAGE}/approvals/{approval.id}" and message.body.endswith(message.link)
    assert SECRET_CONTENT not in message.body + message.title


def test_a_questionnaire_lists_its_questions(store: Store, tmp_path: Any) -> None:
    session, run = rows(store, tmp_path, title=None)
    questions = [
        {"question": f"Question {i}?", "header": f"q{i}", "options": [{"label": "a", "description": "A"}]}
        for i in range(6)
    ]
    approval = ask_questions(store, session, run, questions)
    data = {"approval_id": approval.id, "tool_id": "cli-native:AskUserQuestion", "kind": "questionnaire"}
    message = message_of(event(run.id, "approval_requested", data), run, session, approval, no_page)
    assert message is not None and message.title == "Octipus: the agent has questions"
    assert "session 'my-project'" in message.body  # no title: the workspace's folder name
    assert all(f"- Question {i}?" in message.body for i in range(4)), message.body
    assert "Question 4?" not in message.body and "- and 2 more" in message.body
    assert message.link is None and "Open:" not in message.body


def test_a_questionnaire_stored_without_its_questions_field_lists_the_tool_inputs(
    store: Store, tmp_path: Any
) -> None:
    session, run = rows(store, tmp_path)
    asked = [{"question": "Which database?", "options": [{"label": "SQLite"}]}, "not a question"]
    approval = ask_questions(store, session, run, asked, stored=False)
    assert approval.questions is None
    data = {"approval_id": approval.id, "tool_id": "cli-native:AskUserQuestion", "kind": "questionnaire"}
    message = message_of(event(run.id, "approval_requested", data), run, session, approval, page)
    assert message is not None and message.body.splitlines()[1:] == [
        "- Which database?",
        f"Open: {PAGE}/approvals/{approval.id}",
    ], message.body


@pytest.mark.parametrize("status", [RunStatus.FAILED, RunStatus.SUCCEEDED])
def test_a_child_runs_ending_never_notifies(store: Store, tmp_path: Any, status: RunStatus) -> None:
    session, root = rows(store, tmp_path)
    child = store.create_run(
        session_id=session.id, prompt="look", owner="test", parent_run_id=root.id, role="explorer"
    )
    store.update_run(
        child.id, status=RunStatus.RUNNING, started_at=datetime.now(UTC) - timedelta(seconds=400)
    )
    ended = store.finish_run(child.id, status=status, reason="the vendor exited with 1")
    data = {"status": str(status), "reason": ended.reason, "final": True}
    assert wanted(event(child.id, "run_status", data))  # no I/O there: compose reads the row
    assert message_of(event(child.id, "run_status", data), ended, session, None, page) is None


def test_a_review_required_links_the_run(store: Store, tmp_path: Any) -> None:
    session, run = rows(store, tmp_path)
    note = (
        "review required: shell__run (rm -rf build) needs a person's approval, and this session is unattended"
    )
    message = message_of(
        event(
            run.id, "review_required", {"tool_id": "shell__run", "subject": "rm -rf build", "reason": note}
        ),
        run,
        session,
        None,
        page,
    )
    assert message is not None and message.title == "Octipus: review required for shell__run"
    assert note in message.body and message.link == f"{PAGE}/runs/{run.id}"


@pytest.mark.parametrize(
    ("status", "ran_s", "notifies"),
    [
        (RunStatus.FAILED, 1, True),  # a failed run always notifies
        (RunStatus.SUCCEEDED, 1, False),
        (RunStatus.SUCCEEDED, 400, True),
        (RunStatus.CANCELLED, 400, True),
        (RunStatus.INTERRUPTED, 100, False),
    ],
)
def test_a_run_that_ended_notifies_when_it_failed_or_ran_long(
    store: Store, tmp_path: Any, status: RunStatus, ran_s: float, notifies: bool
) -> None:
    session, run = rows(store, tmp_path)
    store.update_run(
        run.id, status=RunStatus.RUNNING, started_at=datetime.now(UTC) - timedelta(seconds=ran_s)
    )
    ended = store.finish_run(
        run.id, status=status, reason="the vendor exited with 1" if status == "failed" else None
    )
    data = {"status": str(status), "reason": ended.reason, "final": True}
    message = message_of(event(run.id, "run_status", data), ended, session, None, page)
    if not notifies:
        assert message is None
        return
    assert message is not None and message.title == f"Octipus: run {status}"
    assert f"{status} after" in message.body and message.link == f"{PAGE}/runs/{run.id}"
    if status is RunStatus.FAILED:
        assert "Reason: the vendor exited with 1" in message.body


def test_a_finished_run_states_its_cost_as_every_client_shows_it(store: Store, tmp_path: Any) -> None:
    """Issue 26 item 4: the cost the vendor reported, by the one rule (``$0.0245``, not ``$0.02``)."""
    session, run = rows(store, tmp_path)
    store.update_run(run.id, status=RunStatus.RUNNING, started_at=datetime.now(UTC) - timedelta(seconds=400))
    ended = store.finish_run(run.id, status=RunStatus.SUCCEEDED, accounting={"cost_usd": Decimal("0.0245")})
    data = {"status": "succeeded", "final": True}
    message = message_of(event(run.id, "run_status", data), ended, session)
    assert message is not None and "Cost: $0.0245" in message.body.splitlines()


def test_wanted_keeps_only_what_may_notify() -> None:
    assert wanted(event("r", "approval_requested", {"approval_id": "a"}))
    assert not wanted(event("root", "approval_requested", {"approval_id": "a", "child_run_id": "r"}))
    assert wanted(event("r", "review_required", {"reason": "x"}))
    assert wanted(event("r", "run_status", {"status": "failed", "final": True}))
    assert not wanted(event("r", "run_status", {"status": "running"}))
    assert not wanted(event("r", "run_status", {"status": "awaiting_approval"}))
    assert not wanted(event("r", "approval_decided", {"approval_id": "a"}))
    assert not wanted(event("r", "text", {"text": "approval_requested"}))


def test_agent_text_in_a_notification_carries_no_control_character(store: Store, tmp_path: Any) -> None:
    """An escape sequence an agent wrote (a command, a session title, a question) is shown as its
    escape in every field: a desktop notifier or a terminal showing the message never acts on it."""
    hostile = "\x1b[2J\x1b]52;c;aGk=\x07\u009b1m\rapproved"
    session, run = rows(store, tmp_path, title=f"title {hostile}")
    approval = ask_questions(store, session, run, [{"question": f"Which? {hostile}", "options": []}])
    asked = {"approval_id": approval.id, "tool_id": "cli-native:AskUserQuestion", "kind": "questionnaire"}
    tool = {
        "approval_id": approval.id,
        "tool_id": f"cli-native:{hostile}",
        "subject": hostile,
        "reason": hostile,
    }
    for data in (asked, tool):
        message = message_of(event(run.id, "approval_requested", data), run, session, approval, page)
        assert message is not None
        text = message.title + message.body
        assert not [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7F <= ord(c) < 0xA0], text
        # every field on one line: the carriage return is white space there
        assert "\\x1b[2J\\x1b]52;c;aGk=\\x07\\x9b1m approved" in message.body, message.body
        assert "in session 'title \\x1b[2J\\x1b]52;" in message.body, message.body
