"""Claude's AskUserQuestion answered through the Claude Code adapter's stdio relay (real binary, offline).

The scripted Anthropic server plays a model that calls ``AskUserQuestion`` with two questions (a
single-select one with option descriptions and a multi-select one). The real ``claude`` runs with
the argv, environment and first stdin line the adapter builds (``--permission-prompt-tool stdio``,
no MCP bridge), its stdout goes through the adapter's parser, and the ``can_use_tool`` request is
answered with the adapter's ``encode_permission_response``. The answer the model gets is read from
the next ``POST /v1/messages`` the server recorded.

Observed with claude 2.1.197 (these tests pin it):

* AskUserQuestion is in the model's ``tools`` and ``system/init.tools`` with the adapter's flags,
  and the call is relayed as ``can_use_tool`` in every permission mode, bypassPermissions included;
  the relayed ``input`` holds the questions with every header, label, description and multiSelect.
* Allow with ``updatedInput = {questions..., "answers": {"<question>": "<answer>"}}``: the next
  request holds ``{"type": "tool_result", "tool_use_id": <id>, "content": "Your questions have been
  answered: \\"<q1>\\"=\\"<a1>\\", \\"<q2>\\"=\\"<a2>\\". You can now continue with these answers in
  mind."}`` (no ``is_error``); answers appear verbatim, so ``"Auth, Export"`` stays as is, and a
  free text works like a label. (A JSON list answer would be rendered ``Auth,Export``.)
* Deny with a message: ``{"type": "tool_result", "content": <message>, "is_error": true}`` and the
  call is listed in ``result.permission_denials``.
* A bare allow (the input echoed, no ``answers``) is not an error for Claude: the model is told
  ``The user did not answer the questions.``, which is why Octipus refuses bare allows.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
from octipus_claude_code import ClaudeCodeAdapter

from octipusd.adapter import (
    LaunchRequest,
    PermissionDecision,
    PermissionMode,
    PermissionRequestEvent,
    ResultEvent,
    ToolResultEvent,
    VendorEvent,
)
from octipusd.policy.questionnaire import (
    CANCEL_MESSAGE,
    answered_input,
    is_questionnaire,
    parse_questionnaire,
    validate_answers,
)
from octipusd.testing.anthropic_server import RecordedRequest, ScriptedAnthropicServer

REPO = Path(__file__).resolve().parents[3]
BINARY = Path(os.environ.get("OCTIPUS_CLAUDE_BINARY", REPO / ".vendor/npm/node_modules/.bin/claude"))

pytestmark = [pytest.mark.e2e]

DB = "Which database should the service use?"
FEATURES = "Which features do you want?"
TOOL_USE_ID = "toolu_questionnaire_01"
QUESTIONS: list[dict[str, Any]] = [
    {
        "question": DB,
        "header": "Database",
        "options": [
            {"label": "PostgreSQL", "description": "Relational, strong consistency"},
            {"label": "SQLite", "description": "Embedded single file"},
        ],
        "multiSelect": False,
    },
    {
        "question": FEATURES,
        "header": "Features",
        "options": [
            {"label": "Auth", "description": "Login and sessions"},
            {"label": "Search", "description": "Full-text search"},
            {"label": "Export", "description": "CSV export"},
        ],
        "multiSelect": True,
    },
]
SCRIPT = {
    "steps": [
        {
            "content": [
                {"type": "text", "text": "A few questions first."},
                {
                    "type": "tool_use",
                    "id": TOOL_USE_ID,
                    "name": "AskUserQuestion",
                    "input": {"questions": QUESTIONS},
                },
            ]
        },
        {"content": [{"type": "text", "text": "Thanks, noted."}]},
    ]
}

Answer = Callable[[PermissionRequestEvent], PermissionDecision]


@dataclass
class Run:
    """What one claude process did."""

    events: list[VendorEvent] = field(default_factory=list)
    requests: list[PermissionRequestEvent] = field(default_factory=list)
    sent: list[dict[str, Any]] = field(default_factory=list)
    messages: list[RecordedRequest] = field(default_factory=list)
    returncode: int | None = None

    @property
    def result(self) -> ResultEvent:
        (result,) = [e for e in self.events if isinstance(e, ResultEvent)]
        return result

    def tool_results(self) -> list[ToolResultEvent]:
        return [e for e in self.events if isinstance(e, ToolResultEvent)]


def _pump(stream: IO[bytes], lines: queue.Queue[bytes | None]) -> None:
    for line in stream:
        lines.put(line.rstrip(b"\n"))
    lines.put(None)


def run_claude(tmp_path: Path, mode: PermissionMode, answer: Answer, timeout: float = 45.0) -> Run:
    """Launch claude as the adapter builds it, answer every permission request with ``answer``."""
    adapter = ClaudeCodeAdapter()
    workspace, run_dir, home = tmp_path / "ws", tmp_path / "run", tmp_path / "home"
    for folder in (workspace, run_dir, home):
        folder.mkdir(mode=0o700)
    out = Run()
    with ScriptedAnthropicServer(SCRIPT) as srv:
        spec = adapter.build_launch(
            LaunchRequest(
                binary=str(BINARY),
                cwd=workspace,
                run_dir=run_dir,
                prompt="Set up the service; ask me what you need.",
                vendor_session_id=adapter.new_session_id(),
                model="claude-test-model",
                permission_mode=mode,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
            )
        )
        assert not spec.files  # no bridge, no system prompt file
        env = {
            **spec.env,
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": srv.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-test-0000",
            "CLAUDE_CODE_MAX_RETRIES": "0",
        }
        proc = subprocess.Popen(
            list(spec.argv),
            cwd=spec.cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        lines: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=_pump, args=(proc.stdout, lines), daemon=True).start()
        try:
            for line in spec.initial_input:
                proc.stdin.write(line.encode() + b"\n")
            proc.stdin.flush()
            parser = adapter.new_parser()
            deadline = time.monotonic() + timeout
            while not any(isinstance(e, ResultEvent) for e in out.events):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no result within {timeout} s; events: {out.events}")
                try:
                    raw = lines.get(timeout=remaining)
                except queue.Empty:
                    continue
                if raw is None:
                    proc.wait(timeout=5)
                    raise AssertionError(
                        f"claude exited {proc.returncode} before its result: {proc.stderr.read().decode()}"
                    )
                for event in parser.feed(raw):
                    out.events.append(event)
                    if isinstance(event, PermissionRequestEvent):
                        out.requests.append(event)
                        line = adapter.encode_permission_response(event, answer(event))
                        out.sent.append(json.loads(line))
                        proc.stdin.write(line.encode() + b"\n")
                        proc.stdin.flush()
            proc.stdin.close()  # the CLI exits at EOF (observed.md §1.4)
            out.returncode = proc.wait(timeout=15)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                with contextlib.suppress(OSError):
                    stream.close()
        out.messages = srv.message_requests
    return out


def tool_results_in(request: RecordedRequest, tool_use_id: str) -> list[dict[str, Any]]:
    """The tool_result blocks for ``tool_use_id`` in a recorded request's messages."""
    return [
        block
        for message in request.body["messages"]
        if message.get("role") == "user" and isinstance(message.get("content"), list)
        for block in message["content"]
        if isinstance(block, dict)
        and block.get("type") == "tool_result"
        and block.get("tool_use_id") == tool_use_id
    ]


def result_text(block: dict[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    assert isinstance(content, str)
    return content


def the_request(run: Run) -> PermissionRequestEvent:
    (request,) = run.requests
    assert request.tool_name == "AskUserQuestion" and is_questionnaire(request.tool_name)
    assert request.tool_use_id == TOOL_USE_ID
    return request


def answered(run: Run) -> dict[str, Any]:
    """The tool_result the model received in the request after the AskUserQuestion call."""
    assert len(run.messages) == 2, [m.step for m in run.messages]
    first, second = run.messages
    assert "AskUserQuestion" in [tool.get("name") for tool in first.body.get("tools", [])]
    assert tool_results_in(first, TOOL_USE_ID) == []
    (block,) = tool_results_in(second, TOOL_USE_ID)
    return block


def expected_text(pairs: list[tuple[str, str]]) -> str:
    # Observed with claude 2.1.197: the exact tool_result text of an answered AskUserQuestion.
    rendered = ", ".join(f'"{question}"="{answer}"' for question, answer in pairs)
    return f"Your questions have been answered: {rendered}. You can now continue with these answers in mind."


@pytest.mark.parametrize("mode", list(PermissionMode), ids=[m.value for m in PermissionMode])
def test_answers_reach_the_model(tmp_path: Path, mode: PermissionMode) -> None:
    def answer(request: PermissionRequestEvent) -> PermissionDecision:
        questionnaire = parse_questionnaire(request.input)
        answers = validate_answers(questionnaire, {DB: "SQLite", FEATURES: ["Auth", "Export"]})
        return PermissionDecision(allow=True, updated_input=answered_input(request.input, answers))

    run = run_claude(tmp_path, mode, answer)

    request = the_request(run)
    # Claude relays every question, header, option label and description and the multiSelect flags.
    assert parse_questionnaire(request.input).to_dict() == {
        "questions": [{**q, "options": [{**o, "preview": None} for o in q["options"]]} for q in QUESTIONS]
    }
    (sent,) = run.sent
    assert sent["response"]["response"] == {
        "behavior": "allow",
        "updatedInput": {"questions": QUESTIONS, "answers": {DB: "SQLite", FEATURES: "Auth, Export"}},
        "toolUseID": TOOL_USE_ID,
    }
    block = answered(run)
    assert result_text(block) == expected_text([(DB, "SQLite"), (FEATURES, "Auth, Export")])
    assert block.get("is_error") is not True
    (event,) = run.tool_results()
    assert event.tool_use_id == TOOL_USE_ID and not event.is_error
    assert event.content == result_text(block)
    assert not run.result.is_error and run.result.raw is not None
    assert run.result.raw["permission_denials"] == []
    assert run.returncode == 0


def test_free_text_answers_reach_the_model(tmp_path: Path) -> None:
    def answer(request: PermissionRequestEvent) -> PermissionDecision:
        answers: dict[str, str | list[str]] = {
            DB: 'Use "DuckDB" instead',
            FEATURES: ["search", "An audit log"],
        }
        return PermissionDecision(allow=True, updated_input=answered_input(request.input, answers))

    run = run_claude(tmp_path, PermissionMode.WORKSPACE, answer)

    the_request(run)
    block = answered(run)
    # Verbatim, quotes not escaped; the label matched case-insensitively is sent as "Search".
    assert result_text(block) == expected_text(
        [(DB, 'Use "DuckDB" instead'), (FEATURES, "Search, An audit log")]
    )
    assert block.get("is_error") is not True


def test_cancel_is_a_denial(tmp_path: Path) -> None:
    run = run_claude(tmp_path, PermissionMode.WORKSPACE, lambda _: PermissionDecision(False, CANCEL_MESSAGE))

    the_request(run)
    (sent,) = run.sent
    assert sent["response"]["response"] == {"behavior": "deny", "message": CANCEL_MESSAGE}
    block = answered(run)
    assert result_text(block) == CANCEL_MESSAGE
    assert block.get("is_error") is True
    (event,) = run.tool_results()
    assert event.is_error and event.content == CANCEL_MESSAGE
    assert run.result.raw is not None
    denials = run.result.raw["permission_denials"]
    assert [(d["tool_name"], d["tool_use_id"]) for d in denials] == [("AskUserQuestion", TOOL_USE_ID)]
    assert not run.result.is_error and run.returncode == 0  # the run itself goes on and succeeds


def test_bare_allow_silently_answers_nothing(tmp_path: Path) -> None:
    """Why Octipus refuses a bare allow (BARE_ALLOW_ERROR): Claude takes it as "no answers"."""
    run = run_claude(tmp_path, PermissionMode.WORKSPACE, lambda _: PermissionDecision(allow=True))

    the_request(run)
    (sent,) = run.sent
    assert "answers" not in sent["response"]["response"]["updatedInput"]
    block = answered(run)
    # Observed with claude 2.1.197: no error, just this text.
    assert result_text(block) == "The user did not answer the questions."
    assert block.get("is_error") is not True
