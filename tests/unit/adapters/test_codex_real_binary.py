"""The adapter against the real Codex CLI 0.171.0: its generated protocol schema and the argv it accepts.

Fast (a few seconds), offline: the model is the scripted Responses server on 127.0.0.1 (a closed
port would not do: Codex 0.171.0 answers a refused connection with "Reconnecting... waiting for
network" forever, whatever the retry settings). Fails (never skips) when the binary is missing:
run scripts/install-codex.sh.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from octipus_codex import CodexAdapter, parse_version

from octipusd.adapter import (
    LaunchRequest,
    PermissionMode,
    ResultEvent,
    SessionEvent,
    StatusEvent,
    StdinWriteEvent,
)
from octipusd.testing.kit_codex import require_codex, write_codex_config
from octipusd.testing.responses_server import ScriptedResponsesServer

pytestmark = [pytest.mark.e2e]

PINNED = "0.171.0"


@pytest.fixture(scope="module")
def codex() -> Path:
    return require_codex()


@pytest.fixture(scope="module")
def schema(codex: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("schema")
    subprocess.run(
        [str(codex), "app-server", "generate-json-schema", "--out", str(out)], check=True, timeout=60
    )
    return out


def methods(schema: Path, name: str) -> set[str]:
    data = json.loads((schema / f"{name}.json").read_text())
    found: set[str] = set()
    for variant in data.get("oneOf", []):
        found.update(variant.get("properties", {}).get("method", {}).get("enum", []))
    return found


def definition(schema: Path, file: str, name: str) -> dict[str, Any]:
    data = json.loads((schema / f"{file}.json").read_text())
    return dict(data.get("definitions", {}).get(name) or data)


def test_pinned_version(codex: Path) -> None:
    out = subprocess.run(CodexAdapter().version_argv(str(codex)), capture_output=True, text=True, timeout=30)
    assert parse_version(out.stdout) == PINNED, out.stdout


def test_methods_exist_in_the_generated_schema(schema: Path) -> None:
    client = methods(schema, "ClientRequest")
    assert {"initialize", "config/read", "thread/start", "thread/resume", "turn/start"} <= client
    server_requests = methods(schema, "ServerRequest")
    assert {
        "item/commandExecution/requestApproval",
        "item/fileChange/requestApproval",
        "item/permissions/requestApproval",
        "mcpServer/elicitation/request",
        "execCommandApproval",
        "applyPatchApproval",
    } <= server_requests
    notifications = methods(schema, "ServerNotification")
    assert {
        "mcpServer/startupStatus/updated",
        "thread/started",
        "turn/started",
        "turn/completed",
        "item/started",
        "item/completed",
        "thread/tokenUsage/updated",
        "serverRequest/resolved",
        "error",
        "warning",
        "configWarning",
    } <= notifications
    assert "initialized" in methods(schema, "ClientNotification")


def test_decisions_exist_in_the_generated_schema(schema: Path) -> None:
    command = json.dumps(json.loads((schema / "CommandExecutionRequestApprovalResponse.json").read_text()))
    assert '"accept"' in command and '"decline"' in command
    elicitation = json.dumps(json.loads((schema / "McpServerElicitationRequestResponse.json").read_text()))
    assert '"accept"' in elicitation and '"decline"' in elicitation
    v2 = json.loads((schema / "codex_app_server_protocol.v2.schemas.json").read_text())["definitions"]
    start = set(v2["ThreadStartParams"]["properties"])
    assert {
        "cwd",
        "approvalPolicy",
        "approvalsReviewer",
        "sandbox",
        "config",
        "model",
        "developerInstructions",
    } <= start
    assert {"threadId", "excludeTurns"} <= set(v2["ThreadResumeParams"]["properties"])
    assert {"threadId", "input"} <= set(v2["TurnStartParams"]["properties"])
    assert {"inputTokens", "cachedInputTokens", "cacheWriteInputTokens", "outputTokens"} <= set(
        v2["TokenUsageBreakdown"]["properties"]
    )


def environment(root: Path, base_url: str = "http://127.0.0.1:9/v1") -> dict[str, str]:
    write_codex_config(root / "codex_home", base_url)
    (root / "home").mkdir(exist_ok=True)
    (root / "ws").mkdir(exist_ok=True)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root / "home"),
        "CODEX_HOME": str(root / "codex_home"),
    }


def test_app_server_accepts_the_argv_and_the_pipelined_start(codex: Path, tmp_path: Path) -> None:
    request = LaunchRequest(
        binary=str(codex),
        cwd=tmp_path / "ws",
        run_dir=tmp_path,
        prompt="é " * 5000,
        env=environment(tmp_path),
        additive_flags=("--strict-config", "--color=never"),
        permission_mode=PermissionMode.DEFAULT,
    )
    spec = CodexAdapter().build_launch(request)
    proc = subprocess.Popen(
        spec.argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=dict(spec.env),
        cwd=spec.cwd,
    )
    watchdog = threading.Timer(60.0, proc.kill)  # a hang must fail the test, not stall the suite
    watchdog.start()
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(line + "\n" for line in spec.initial_input).encode())
    proc.stdin.flush()
    parser = CodexAdapter().new_parser(request)
    events = []
    sent: list[str] = []
    try:
        for raw in proc.stdout:
            for event in parser.feed(raw.rstrip(b"\n")):
                events.append(event)
                if isinstance(event, StdinWriteEvent):  # the thread request: write it, then read its answer
                    for line in event.lines:
                        sent.append(line)
                        if "thread/start" in line:
                            proc.stdin.write(line.encode() + b"\n")
                            proc.stdin.flush()
                if isinstance(event, SessionEvent):
                    proc.stdin.close()
    finally:
        proc.wait(timeout=30)
        watchdog.cancel()
    # the plan came back in the config/read answer's id, then in the thread answer's id
    turn = json.loads(sent[-1])
    assert turn["method"] == "turn/start" and turn["params"]["input"][0]["text"] == "é " * 5000
    assert json.loads(sent[0])["params"]["approvalPolicy"] == "untrusted"
    assert any(isinstance(e, StatusEvent) and e.status == "initialized" for e in events), events
    (session,) = [e for e in events if isinstance(e, SessionEvent)]
    assert session.session_id and session.model == "mock-model"
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""


def test_exec_accepts_the_argv(codex: Path, tmp_path: Path) -> None:
    server = ScriptedResponsesServer([{"content": [{"type": "text", "text": "pong"}]}]).start()
    request = LaunchRequest(
        binary=str(codex),
        cwd=tmp_path / "ws",
        run_dir=tmp_path,
        prompt="-hi",
        env=environment(tmp_path, server.base_url),
        model="mock-model",
        system_prompt='say "hi"\n',
        additive_flags=("--strict-config", "--color=never"),
        options={"transport": "exec"},
    )
    try:
        for mode in PermissionMode:
            spec = CodexAdapter().build_launch(replace(request, permission_mode=mode))
            out = subprocess.run(
                spec.argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                env=dict(spec.env),
                cwd=spec.cwd,
                timeout=60,
            )
            parser = CodexAdapter().new_parser(replace(request, permission_mode=mode))
            events = [e for raw in out.stdout.splitlines() for e in parser.feed(raw)]
            assert any(isinstance(e, SessionEvent) and e.session_id for e in events), out.stderr.decode()[
                -2000:
            ]
            (result,) = [e for e in events if isinstance(e, ResultEvent)]
            assert not result.is_error and result.text == "pong" and out.returncode == 0
        bodies = [r.body for r in server.message_requests]
        assert len(bodies) == len(PermissionMode)
        assert all('say \\"hi\\"' in json.dumps(b["input"]) for b in bodies)  # developer instructions
        assert all("-hi" in json.dumps(b["input"][-1]) for b in bodies)  # the prompt, not a flag
    finally:
        server.close()
