"""Session reuse over the API and octipusctl (seed 003 "Session reuse" .. "Resuming child sessions
per role and task"): ``/clear``, compaction, stored vendor conversations, the transcript and the
latest checkpoint; the new run fields; the ``octipusctl sessions clear|compact|reuse|messages|
checkpoint`` commands (bad input exit 2, no daemon exit 3, what they send and print against a
recording fake client, and once end to end through the real app over stand-in services).

The store and run manager are stand-ins providing exactly the methods the routes call, with
records shaped like the store's (``dataclasses``, converted by the API's ``out``); the last tests
check that the store's real records carry the fields the API models take, once they exist.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from octipusd.api.app import create_app
from octipusd.api.common import Services
from octipusd.api.models import CheckpointOut, MessageOut, RunOut, SessionOut, VendorSessionOut
from octipusd.ctl import common, main as ctl
from octipusd.ctl.client import _decode
from octipusd.errors import ApiError, ConflictError, NotFoundError
from octipusd.store import records

SESSION = "s" * 32
OTHER = "o" * 32
RUN = "r" * 32
PARENT = "p" * 32
T0 = datetime(2026, 1, 1, tzinfo=UTC)
T1 = datetime(2026, 1, 2, tzinfo=UTC)


# ----------------------------------------------------------------------------- stand-in records


@dataclass(frozen=True)
class SessionRecord:
    id: str
    title: str | None = None
    workspace: str = "/work"
    adapter: str = "claude-code"
    model: str | None = None
    permission_mode: str = "workspace"
    attended: bool = True
    created_at: datetime = T0
    updated_at: datetime = T0
    model_row_id: str | None = None
    options: dict[str, Any] = field(default_factory=dict)
    flow_label: str = ""
    space_id: str | None = None
    clear_generation: int = 0
    cleared_at: datetime | None = None


@dataclass(frozen=True)
class VendorSessionRecord:
    id: int
    session_id: str
    key: str
    vendor_session_id: str
    fingerprint: str
    cwd: str
    clear_generation: int
    created_at: datetime
    updated_at: datetime
    cursor: int
    last_used_at: datetime
    checkpoint_id: int | None


@dataclass(frozen=True)
class MessageRecord:
    id: int
    session_id: str
    seq: int
    role: str
    text: str
    run_id: str | None
    adapter: str | None
    clear_generation: int
    created_at: datetime


@dataclass(frozen=True)
class CheckpointRecord:
    id: int
    session_id: str
    clear_generation: int
    first_seq: int
    through_seq: int
    summary: str
    covered_chars: int
    created_at: datetime


@dataclass(frozen=True)
class Report:
    """Shaped like ``octipusd.runtime.compaction.CompactionReport``."""

    published: bool
    checkpoint_id: int | None
    first_seq: int | None
    through_seq: int | None
    covered_messages: int
    covered_chars: int
    summary_chars: int
    rotated: list[str]
    reason: str | None


PUBLISHED = Report(True, 7, 1, 12, 12, 3400, 800, ["claude-code"], None)
NOTHING = Report(False, None, None, None, 0, 0, 0, [], "nothing to compact")


def vendor(key: str, generation: int, **fields: Any) -> VendorSessionRecord:
    base: dict[str, Any] = {
        "id": 1,
        "session_id": SESSION,
        "key": key,
        "vendor_session_id": f"vendor-{key}",
        "fingerprint": "f" * 64,
        "cwd": "/work",
        "clear_generation": generation,
        "created_at": T0,
        "updated_at": T1,
        "cursor": 4,
        "last_used_at": T1,
        "checkpoint_id": None,
    }
    return VendorSessionRecord(**{**base, **fields})


def message(seq: int, role: str, text: str, generation: int = 1) -> MessageRecord:
    adapter = "claude-code" if role == "assistant" else None
    return MessageRecord(seq, SESSION, seq, role, text, RUN, adapter, generation, T0)


class FakeStore:
    """The store methods the session-reuse routes read (records of one session)."""

    def __init__(self, session: SessionRecord) -> None:
        self.session = session
        self.vendor_sessions: list[VendorSessionRecord] = []
        self.messages: list[MessageRecord] = []
        self.checkpoints: list[CheckpointRecord] = []
        self.runs: dict[str, Any] = {}
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def get_session(self, session_id: str) -> SessionRecord:
        if session_id != self.session.id:
            raise NotFoundError(f"session {session_id} not found")
        return self.session

    def get_run(self, run_id: str) -> Any:
        if run_id not in self.runs:
            raise NotFoundError(f"run {run_id} not found")
        return self.runs[run_id]

    def list_vendor_sessions(self, session_id: str) -> list[VendorSessionRecord]:
        self.calls.append(("list_vendor_sessions", (session_id,), {}))
        return [v for v in self.vendor_sessions if v.session_id == session_id]

    def list_messages(
        self, session_id: str, *, generation: int, after_seq: int = 0, through_seq: int | None = None
    ) -> list[MessageRecord]:
        self.calls.append(
            ("list_messages", (session_id,), {"generation": generation, "after_seq": after_seq})
        )
        return [
            m
            for m in self.messages
            if m.clear_generation == generation
            and m.seq > after_seq
            and (through_seq is None or m.seq <= through_seq)
        ]

    def latest_checkpoint(self, session_id: str, generation: int) -> CheckpointRecord | None:
        self.calls.append(("latest_checkpoint", (session_id, generation), {}))
        found = [c for c in self.checkpoints if c.clear_generation == generation]
        return found[-1] if found else None


class FakeRuns:
    """The run manager's ``clear_session`` and ``compact_session`` (stand-ins until they land)."""

    user = "alice"

    def __init__(self, store: FakeStore) -> None:
        self.store = store
        self.adapters: dict[str, Any] = {}
        self.report: Report = PUBLISHED
        self.compact_error: Exception | None = None
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def live_runs(self) -> list[str]:
        return []

    async def clear_session(self, session_id: str) -> SessionRecord:
        self.calls.append(("clear_session", session_id, {}))
        session = self.store.get_session(session_id)
        cleared = dataclasses.replace(session, clear_generation=session.clear_generation + 1, cleared_at=T1)
        self.store.session = cleared
        return cleared

    async def compact_session(self, session_id: str, *, keep_turns: int = 2) -> Report:
        self.calls.append(("compact_session", session_id, {"keep_turns": keep_turns}))
        self.store.get_session(session_id)
        if self.compact_error is not None:
            raise self.compact_error
        return self.report


@dataclass
class Daemon:
    store: FakeStore
    runs: FakeRuns
    http: TestClient


@pytest.fixture
def daemon() -> Daemon:
    store = FakeStore(SessionRecord(id=SESSION, clear_generation=1, cleared_at=T0))
    runs = FakeRuns(store)
    services = Services(
        store=store,  # type: ignore[arg-type]
        runs=runs,  # type: ignore[arg-type]
        hub=SimpleNamespace(),  # type: ignore[arg-type]
        broker=SimpleNamespace(),  # type: ignore[arg-type]
        resolutions={},
        gate=SimpleNamespace(),  # type: ignore[arg-type]
        adapters={},
        user="alice",
    )
    return Daemon(store, runs, TestClient(create_app(services)))


# ----------------------------------------------------------------------------- routes


def test_clear_answers_the_session_with_its_new_generation(daemon: Daemon) -> None:
    r = daemon.http.post(f"/v1/sessions/{SESSION}/clear")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == SESSION
    assert body["clear_generation"] == 2
    assert body["cleared_at"] == "2026-01-02T00:00:00Z"
    assert daemon.runs.calls == [("clear_session", SESSION, {})]
    SessionOut.model_validate(body)


def test_clear_of_an_unknown_session_is_404(daemon: Daemon) -> None:
    r = daemon.http.post(f"/v1/sessions/{OTHER}/clear")
    assert r.status_code == 404
    assert r.json() == {"code": "not_found", "message": f"session {OTHER} not found"}


def test_session_out_defaults_for_a_session_never_cleared(daemon: Daemon) -> None:
    daemon.store.session = SessionRecord(id=SESSION)
    body = daemon.http.get(f"/v1/sessions/{SESSION}").json()
    assert body["clear_generation"] == 0 and body["cleared_at"] is None


@pytest.mark.parametrize(
    ("body", "keep_turns"),
    [(None, 2), ({}, 2), ({"keepTurns": 5}, 5), ({"keep_turns": 0}, 0), ({"keep_turns": 100}, 100)],
)
def test_compact_passes_keep_turns(daemon: Daemon, body: dict[str, Any] | None, keep_turns: int) -> None:
    r = daemon.http.post(f"/v1/sessions/{SESSION}/compact", json=body)
    assert r.status_code == 200, r.text
    assert daemon.runs.calls == [("compact_session", SESSION, {"keep_turns": keep_turns})]
    assert r.json() == {
        "published": True,
        "checkpoint_id": 7,
        "first_seq": 1,
        "through_seq": 12,
        "covered_messages": 12,
        "covered_chars": 3400,
        "summary_chars": 800,
        "rotated": ["claude-code"],
        "reason": None,
    }


def test_compact_that_publishes_nothing_is_still_200_with_the_reason(daemon: Daemon) -> None:
    daemon.runs.report = NOTHING
    r = daemon.http.post(f"/v1/sessions/{SESSION}/compact", json={"keep_turns": 2})
    assert r.status_code == 200
    assert r.json()["published"] is False and r.json()["reason"] == "nothing to compact"
    assert r.json()["rotated"] == [] and r.json()["checkpoint_id"] is None


@pytest.mark.parametrize(
    "body", [{"keep_turns": 101}, {"keepTurns": -1}, {"keep_turns": "many"}, {"keep_turns": 2, "force": True}]
)
def test_compact_refuses_a_bad_body(daemon: Daemon, body: dict[str, Any]) -> None:
    r = daemon.http.post(f"/v1/sessions/{SESSION}/compact", json=body)
    assert r.status_code == 422, r.text
    assert daemon.runs.calls == []


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [(ConflictError("session has a live run; compact it after the turn"), 409, "conflict"),
     (NotFoundError("session gone"), 404, "not_found")],
)  # fmt: skip
def test_compact_errors_use_the_error_mapping(
    daemon: Daemon, error: Exception, status: int, code: str
) -> None:
    daemon.runs.compact_error = error
    r = daemon.http.post(f"/v1/sessions/{SESSION}/compact")
    assert r.status_code == status and r.json()["code"] == code


def test_vendor_sessions_list_root_and_child_records_and_mark_cleared_ones(daemon: Daemon) -> None:
    daemon.store.vendor_sessions = [
        vendor("claude-code", 1, checkpoint_id=7, cursor=12),
        vendor("claude-code::main>coder:task-1", 1),
        vendor("codex", 0),
    ]
    r = daemon.http.get(f"/v1/sessions/{SESSION}/vendor-sessions")
    assert r.status_code == 200, r.text
    root, child, old = r.json()
    assert root == {
        "key": "claude-code",
        "vendor_session_id": "vendor-claude-code",
        "fingerprint": "f" * 64,
        "cwd": "/work",
        "cursor": 12,
        "clear_generation": 1,
        "checkpoint_id": 7,
        "last_used_at": "2026-01-02T00:00:00Z",
        "updated_at": "2026-01-02T00:00:00Z",
        "current": True,
    }
    assert child["key"] == "claude-code::main>coder:task-1" and child["current"] is True
    assert old["current"] is False, "a record of an earlier clear generation is never resumed"


def test_vendor_sessions_of_an_unknown_session_is_404(daemon: Daemon) -> None:
    r = daemon.http.get(f"/v1/sessions/{OTHER}/vendor-sessions")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    assert daemon.store.calls == []


def test_messages_are_the_current_generation_after_a_sequence_number(daemon: Daemon) -> None:
    daemon.store.messages = [
        message(1, "user", "old", generation=0),
        message(1, "user", "hello"),
        message(2, "assistant", "hi"),
        message(3, "user", "more"),
    ]
    r = daemon.http.get(f"/v1/sessions/{SESSION}/messages")
    assert r.status_code == 200, r.text
    assert [(m["seq"], m["text"]) for m in r.json()] == [(1, "hello"), (2, "hi"), (3, "more")]
    assert r.json()[1] == {
        "id": 2,
        "session_id": SESSION,
        "seq": 2,
        "role": "assistant",
        "text": "hi",
        "run_id": RUN,
        "adapter": "claude-code",
        "clear_generation": 1,
        "created_at": "2026-01-01T00:00:00Z",
    }
    assert daemon.store.calls[-1] == ("list_messages", (SESSION,), {"generation": 1, "after_seq": 0})
    after = daemon.http.get(f"/v1/sessions/{SESSION}/messages", params={"after": 2})
    assert [m["seq"] for m in after.json()] == [3]
    assert daemon.store.calls[-1][2] == {"generation": 1, "after_seq": 2}


def test_messages_refuse_a_negative_after_and_an_unknown_session(daemon: Daemon) -> None:
    r = daemon.http.get(f"/v1/sessions/{SESSION}/messages", params={"after": -1})
    assert r.status_code == 400 and r.json()["code"] == "invalid_request"
    assert "after" in r.json()["message"]
    assert daemon.http.get(f"/v1/sessions/{OTHER}/messages").status_code == 404


def test_checkpoint_is_the_latest_of_the_current_generation(daemon: Daemon) -> None:
    daemon.store.checkpoints = [
        CheckpointRecord(3, SESSION, 0, 1, 5, "before the clear", 900, T0),
        CheckpointRecord(7, SESSION, 1, 1, 12, "the summary", 3400, T1),
    ]
    r = daemon.http.get(f"/v1/sessions/{SESSION}/checkpoint")
    assert r.status_code == 200, r.text
    assert r.json() == {
        "id": 7,
        "session_id": SESSION,
        "clear_generation": 1,
        "first_seq": 1,
        "through_seq": 12,
        "summary": "the summary",
        "covered_chars": 3400,
        "created_at": "2026-01-02T00:00:00Z",
    }
    assert daemon.store.calls[-1] == ("latest_checkpoint", (SESSION, 1), {})


def test_no_checkpoint_is_404_saying_how_to_make_one(daemon: Daemon) -> None:
    daemon.store.checkpoints = [CheckpointRecord(3, SESSION, 0, 1, 5, "before the clear", 900, T0)]
    r = daemon.http.get(f"/v1/sessions/{SESSION}/checkpoint")
    assert r.status_code == 404 and r.json()["code"] == "not_found"
    message = r.json()["message"]
    assert f"session {SESSION} has no checkpoint in clear generation 1" in message
    assert f"octipusctl sessions compact {SESSION}" in message
    assert daemon.http.get(f"/v1/sessions/{OTHER}/checkpoint").status_code == 404


def _run(**fields: Any) -> records.Run:
    base: dict[str, Any] = {
        "id": RUN,
        "session_id": SESSION,
        "turn_index": 1,
        "status": records.RunStatus.SUCCEEDED,
        "prompt": "do it",
        "reason": None,
        "vendor_session_id": None,
        "resumed": False,
        "pid": None,
        "exit_code": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cost_usd": None,
        "usage_estimated": False,
        "result_text": None,
        "owner": "1-abc",
        "created_at": T0,
        "started_at": None,
        "ended_at": None,
    }
    return records.Run(**{**base, **fields})


def test_runs_carry_parent_role_and_resume_key(daemon: Daemon) -> None:
    names = {f.name for f in dataclasses.fields(records.Run)}
    child_fields = {"parent_run_id": PARENT, "role": "coder", "resume_key": "main>coder:task-1"}
    if names >= set(child_fields):
        child: Any = _run(**child_fields)
    else:  # the store has not added the fields yet: the same record with them
        extended = dataclasses.make_dataclass(
            "RunWithChild", [(k, str | None, None) for k in child_fields], bases=(records.Run,), frozen=True
        )
        child = extended(**dataclasses.asdict(_run()), **child_fields)
    daemon.store.runs = {RUN: child}
    body = daemon.http.get(f"/v1/runs/{RUN}").json()
    assert {k: body[k] for k in child_fields} == child_fields
    RunOut.model_validate(body)


# ----------------------------------------------------------------------------- the store's records


def _record_fields(name: str) -> set[str] | None:
    cls = getattr(records, name, None)
    return {f.name for f in dataclasses.fields(cls)} if cls is not None else None


@pytest.mark.parametrize(
    ("record", "model", "new", "computed"),
    [
        ("Session", SessionOut, {"clear_generation", "cleared_at"}, set()),
        ("Run", RunOut, {"parent_run_id", "role", "resume_key"}, set()),
        ("VendorSession", VendorSessionOut, {"cursor", "last_used_at", "checkpoint_id"}, {"current"}),
        ("SessionMessage", MessageOut, set(), set()),
        ("Checkpoint", CheckpointOut, set(), set()),
    ],
)
def test_the_store_records_carry_what_the_api_models_take(
    record: str, model: type[Any], new: set[str], computed: set[str]
) -> None:
    """Every field an API model takes is on the store's record (the session-reuse fields included)."""
    names = _record_fields(record)
    assert names is not None, f"octipusd.store.records has no {record}"
    assert new <= names, f"records.{record} lacks {sorted(new - names)}"
    missing = set(model.model_fields) - computed - names
    assert not missing, f"records.{record} lacks {sorted(missing)} that {model.__name__} takes"


# ----------------------------------------------------------------------------- octipusctl


@pytest.fixture
def runner(tmp_path: Path) -> CliRunner:
    return CliRunner(env={"OCTIPUS_DAEMON__SOCKET": str(tmp_path / "nobody.sock")})


def invoke(runner: CliRunner, *args: str) -> Any:
    return runner.invoke(ctl.app, list(args))


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["sessions", "compact", SESSION, "--keep-turns", "101"], "--keep-turns must be between 0 and 100"),
        (["sessions", "compact", SESSION, "--keep-turns", "-1"], "--keep-turns must be between 0 and 100"),
        (["sessions", "messages", SESSION, "--after", "-3"], "--after must be 0"),
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
        ["sessions", "clear", SESSION],
        ["sessions", "compact", SESSION],
        ["sessions", "reuse", SESSION],
        ["sessions", "messages", SESSION, "--json"],
        ["sessions", "checkpoint", SESSION],
    ],
)
def test_no_daemon_exits_3(runner: CliRunner, args: list[str]) -> None:
    result = invoke(runner, *args)
    assert result.exit_code == 3, result.output
    assert "octipusd is not running" in result.output


class FakeClient:
    """Records every request and answers from ``replies`` (keyed by ``METHOD path``)."""

    def __init__(self, replies: dict[str, Any]) -> None:
        self.replies = replies
        self.sent: list[tuple[str, str, dict[str, Any]]] = []

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        self.sent.append((method, path, kwargs))
        reply = self.replies[f"{method} {path}"]
        if isinstance(reply, Exception):
            raise reply
        return reply


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Any:
    def install(replies: dict[str, Any]) -> FakeClient:
        client = FakeClient(replies)
        monkeypatch.setattr(common, "new_client", lambda: client)
        monkeypatch.setattr(ctl, "new_client", lambda: client)
        return client

    return install


COMPACTED = {
    "published": True,
    "checkpoint_id": 7,
    "first_seq": 1,
    "through_seq": 12,
    "covered_messages": 12,
    "covered_chars": 3400,
    "summary_chars": 800,
    "rotated": ["claude-code", "codex"],
    "reason": None,
}
SKIPPED = {**COMPACTED, "published": False, "checkpoint_id": None, "first_seq": None, "through_seq": None,
           "covered_messages": 0, "covered_chars": 0, "summary_chars": 0, "rotated": [],
           "reason": "the summary would not be shorter"}  # fmt: skip
VENDOR_ROWS = [
    {"key": "claude-code", "vendor_session_id": "11111111-2222-3333-4444-555555555555", "fingerprint": "f",
     "cwd": "/work", "cursor": 12, "clear_generation": 1, "checkpoint_id": 7,
     "last_used_at": "2026-01-02T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z", "current": True},
    {"key": "codex::main>coder:task-1", "vendor_session_id": "thread-9", "fingerprint": "f", "cwd": "/work",
     "cursor": 3, "clear_generation": 0, "checkpoint_id": None, "last_used_at": "2026-01-01T00:00:00Z",
     "updated_at": "2026-01-01T00:00:00Z", "current": False},
]  # fmt: skip


def test_clear_prints_the_new_generation(runner: CliRunner, fake: Any) -> None:
    cleared = {"id": SESSION, "clear_generation": 3, "cleared_at": "2026-01-02T00:00:00Z"}
    client = fake({f"POST /sessions/{SESSION}/clear": cleared})
    out = invoke(runner, "sessions", "clear", SESSION)
    assert out.exit_code == 0, out.output
    assert client.sent == [("POST", f"/sessions/{SESSION}/clear", {})]
    assert f"cleared session {SESSION}: clear generation 3" in out.output
    assert "next turn starts a new vendor conversation" in out.output
    raw = invoke(runner, "sessions", "clear", SESSION, "--json")
    assert json.loads(raw.output) == cleared


def test_compact_prints_what_the_checkpoint_covers(runner: CliRunner, fake: Any) -> None:
    client = fake({f"POST /sessions/{SESSION}/compact": COMPACTED})
    out = invoke(runner, "sessions", "compact", SESSION, "--keep-turns", "4")
    assert out.exit_code == 0, out.output
    sent = client.sent[-1][2]
    assert sent["json"] == {"keep_turns": 4}
    assert sent["timeout"].read is None, "the daemon first waits for a running turn to end"
    assert "published checkpoint 7" in out.output
    assert "messages 1..12 (12 messages, 3400 characters) summarized in 800 characters" in out.output
    assert "rotated vendor conversations: claude-code, codex" in out.output
    invoke(runner, "sessions", "compact", SESSION)
    assert client.sent[-1][2]["json"] == {"keep_turns": 2}, "the default keeps 2 turns"


def test_compact_that_published_nothing_says_why_and_exits_0(runner: CliRunner, fake: Any) -> None:
    fake({f"POST /sessions/{SESSION}/compact": SKIPPED})
    out = invoke(runner, "sessions", "compact", SESSION)
    assert out.exit_code == 0, out.output
    assert "nothing published" in out.output and "the summary would not be shorter" in out.output
    assert "rotated" not in out.output  # nothing was published, so nothing rotated
    raw = invoke(runner, "sessions", "compact", SESSION, "--json")
    assert raw.exit_code == 0 and json.loads(raw.output) == SKIPPED


def test_reuse_shows_the_vendor_records(runner: CliRunner, fake: Any) -> None:
    fake({f"GET /sessions/{SESSION}/vendor-sessions": VENDOR_ROWS})
    out = invoke(runner, "sessions", "reuse", SESSION)
    assert out.exit_code == 0, out.output
    for header in ("key", "vendor id", "cursor", "checkpoint", "last used"):
        assert header in out.output
    root = next(line for line in out.output.splitlines() if "11111111-2222-3333-4444-555555555555" in line)
    assert "claude-code" in root and "12" in root and "7" in root and "2026-01-02" in root
    child = next(line for line in out.output.splitlines() if "thread-9" in line)
    assert "codex::main>coder:task-1" in child and "none" in child and "cleared" in child
    raw = invoke(runner, "sessions", "reuse", SESSION, "--json")
    assert json.loads(raw.output) == VENDOR_ROWS


def test_reuse_without_records_says_so(runner: CliRunner, fake: Any) -> None:
    fake({f"GET /sessions/{SESSION}/vendor-sessions": []})
    out = invoke(runner, "sessions", "reuse", SESSION)
    assert out.exit_code == 0 and "no stored vendor conversations" in out.output


def test_messages_lists_the_transcript(runner: CliRunner, fake: Any) -> None:
    items = [
        {"id": 1, "session_id": SESSION, "seq": 5, "role": "user", "text": "fix [the] bug", "run_id": RUN,
         "adapter": None, "clear_generation": 1, "created_at": "2026-01-01T00:00:00Z"},
        {"id": 2, "session_id": SESSION, "seq": 6, "role": "assistant", "text": "done", "run_id": RUN,
         "adapter": "codex", "clear_generation": 1, "created_at": "2026-01-01T00:00:00Z"},
    ]  # fmt: skip
    client = fake({f"GET /sessions/{SESSION}/messages": items})
    out = invoke(runner, "sessions", "messages", SESSION, "--after", "4")
    assert out.exit_code == 0, out.output
    assert client.sent[-1][2] == {"params": {"after": 4}}
    assert "fix [the] bug" in out.output, "markup in the text is shown as is"
    assert any("6" in line and "codex" in line and "done" in line for line in out.output.splitlines())
    raw = invoke(runner, "sessions", "messages", SESSION, "--json")
    assert json.loads(raw.output) == items and client.sent[-1][2] == {"params": {"after": 0}}


def test_unknown_session_and_missing_checkpoint_exit_2(runner: CliRunner, fake: Any) -> None:
    fake({
        f"POST /sessions/{OTHER}/clear": ApiError("not_found", f"session {OTHER} not found", 404),
        f"GET /sessions/{SESSION}/checkpoint": ApiError("not_found", "no checkpoint in clear generation 1", 404),
    })  # fmt: skip
    out = invoke(runner, "sessions", "clear", OTHER)
    assert out.exit_code == 2 and f"session {OTHER} not found" in out.output
    out = invoke(runner, "sessions", "checkpoint", SESSION)
    assert out.exit_code == 2 and "no checkpoint in clear generation 1" in out.output


def test_a_conflict_exits_1(runner: CliRunner, fake: Any) -> None:
    fake({f"POST /sessions/{SESSION}/compact": ApiError("conflict", "a turn is running", 409)})
    out = invoke(runner, "sessions", "compact", SESSION)
    assert out.exit_code == 1 and "a turn is running" in out.output


# ----------------------------------------------------------------------------- end to end (app stand-ins)


class AppClient:
    """octipusctl's client over the real app (TestClient), decoding answers as the real client does."""

    def __init__(self, http: TestClient) -> None:
        self.http = http

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        kwargs.pop("timeout", None)  # the TestClient runs the app in-process: no deadline to set
        response: Any = self.http.request(method, f"/v1{path}", **kwargs)  # httpx's interface
        return _decode(response)


def test_commands_through_the_app(runner: CliRunner, daemon: Daemon, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(common, "new_client", lambda: AppClient(daemon.http))
    daemon.store.messages = [message(1, "user", "hello"), message(2, "assistant", "hi")]
    daemon.store.checkpoints = [CheckpointRecord(7, SESSION, 1, 1, 2, "they greeted", 7, T1)]
    daemon.store.vendor_sessions = [vendor("claude-code", 1, checkpoint_id=7)]

    reuse = invoke(runner, "sessions", "reuse", SESSION, "--json")
    assert reuse.exit_code == 0, reuse.output
    assert json.loads(reuse.output)[0]["checkpoint_id"] == 7
    messages = invoke(runner, "sessions", "messages", SESSION, "--after", "1", "--json")
    assert [m["text"] for m in json.loads(messages.output)] == ["hi"]
    checkpoint = invoke(runner, "sessions", "checkpoint", SESSION)
    assert checkpoint.exit_code == 0 and "they greeted" in checkpoint.output

    daemon.runs.report = NOTHING
    compact = invoke(runner, "sessions", "compact", SESSION, "--keep-turns", "0")
    assert compact.exit_code == 0 and "nothing to compact" in compact.output
    assert daemon.runs.calls[-1] == ("compact_session", SESSION, {"keep_turns": 0})

    clear = invoke(runner, "sessions", "clear", SESSION)
    assert clear.exit_code == 0 and "clear generation 2" in clear.output
    stale = invoke(runner, "sessions", "reuse", SESSION)
    assert "cleared" in stale.output, "after /clear the stored record is of an earlier generation"
    gone = invoke(runner, "sessions", "checkpoint", SESSION)
    assert gone.exit_code == 2 and "no checkpoint in clear generation 2" in gone.output
    unknown = invoke(runner, "sessions", "messages", OTHER)
    assert unknown.exit_code == 2 and "not found" in unknown.output


# ----------------------------------------------------------------------------- over the real store


def test_the_read_routes_over_the_real_store(tmp_path: Path) -> None:
    """The routes' store calls and record conversion against a real (SQLite) store."""
    from octipusd.store import Store

    with Store.open(f"sqlite:///{tmp_path / 'octipus.db'}") as store:
        session = store.create_session(workspace=str(tmp_path), adapter="claude-code")
        sid = session.id
        for role, text in [("user", "hello"), ("assistant", "hi"), ("user", "more"), ("assistant", "ok")]:
            store.append_message(
                sid, role=role, text=text, adapter="claude-code" if role == "assistant" else None
            )
        checkpoint = store.publish_checkpoint(
            sid,
            generation=0,
            first_seq=1,
            through_seq=2,
            summary="they greeted",
            covered_chars=7,
            rotate_keys=[],
        )
        assert checkpoint is not None
        store.save_vendor_session(
            session_id=sid, key="claude-code", vendor_session_id="v-1", fingerprint="f", cwd=str(tmp_path),
            cursor=4, checkpoint_id=checkpoint.id,
        )  # fmt: skip

        class Runs:
            user = "alice"
            adapters: dict[str, Any] = {}  # noqa: RUF012

            def live_runs(self) -> list[str]:
                return []

            async def clear_session(self, session_id: str) -> Any:
                return store.clear_session(session_id)

        services = Services(
            store=store,
            runs=Runs(),  # type: ignore[arg-type]
            hub=SimpleNamespace(),  # type: ignore[arg-type]
            broker=SimpleNamespace(),  # type: ignore[arg-type]
            resolutions={},
            gate=SimpleNamespace(),  # type: ignore[arg-type]
            adapters={},
            user="alice",
        )
        http = TestClient(create_app(services))

        records_ = http.get(f"/v1/sessions/{sid}/vendor-sessions").json()
        assert [(r["key"], r["cursor"], r["checkpoint_id"], r["current"]) for r in records_] == [
            ("claude-code", 4, checkpoint.id, True)
        ]
        messages = http.get(f"/v1/sessions/{sid}/messages", params={"after": 1}).json()
        assert [(m["seq"], m["role"], m["text"]) for m in messages] == [
            (2, "assistant", "hi"), (3, "user", "more"), (4, "assistant", "ok")
        ]  # fmt: skip
        shown = http.get(f"/v1/sessions/{sid}/checkpoint").json()
        assert (shown["id"], shown["first_seq"], shown["through_seq"]) == (checkpoint.id, 1, 2)

        cleared = http.post(f"/v1/sessions/{sid}/clear").json()
        assert cleared["clear_generation"] == 1 and cleared["cleared_at"] is not None
        assert http.get(f"/v1/sessions/{sid}").json()["clear_generation"] == 1
        assert http.get(f"/v1/sessions/{sid}/vendor-sessions").json() == []
        assert http.get(f"/v1/sessions/{sid}/messages").json() == []
        gone = http.get(f"/v1/sessions/{sid}/checkpoint")
        assert gone.status_code == 404 and "clear generation 1" in gone.json()["message"]
        assert http.get(f"/v1/sessions/{'x' * 32}/messages").status_code == 404
