"""Codex JSON-RPC answers and the signals Octipus reads (shapes from observed-2.md §1.3-§1.5)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from octipus_codex import (
    CodexAdapter,
    encode_control_error,
    mcp_failure,
    rpc,
    session_missing,
    stderr_session_missing,
    unwrap_shell,
    usage_is_cumulative,
)

from octipusd.adapter import (
    LaunchRequest,
    PermissionDecision,
    PermissionRequestEvent,
    ResultEvent,
    SessionEvent,
)

ALLOW = PermissionDecision(allow=True, message="ok")
DENY = PermissionDecision(allow=False, message="no, said Octipus")


def request(method: str, request_id: Any = 0, params: dict[str, Any] | None = None) -> PermissionRequestEvent:
    raw = {"id": request_id, "method": method, "params": params or {}}
    return PermissionRequestEvent(
        raw=raw, request_id=rpc.request_id_text(request_id), tool_name="x", input={}
    )


def answer(event: PermissionRequestEvent, decision: PermissionDecision) -> Any:
    return json.loads(CodexAdapter().encode_permission_response(event, decision))


@pytest.mark.parametrize(
    "method", ["item/commandExecution/requestApproval", "item/fileChange/requestApproval"]
)
def test_command_and_file_change_decisions(method: str) -> None:
    assert answer(request(method), ALLOW) == {"id": 0, "result": {"decision": "accept"}}
    # decline, never cancel: cancel would end the whole turn (observed-2.md §1.3)
    assert answer(request(method), DENY) == {"id": 0, "result": {"decision": "decline"}}


def test_elicitation_actions() -> None:
    event = request("mcpServer/elicitation/request", 3)
    assert answer(event, ALLOW) == {"id": 3, "result": {"action": "accept", "content": {}, "_meta": None}}
    assert answer(event, DENY) == {"id": 3, "result": {"action": "decline", "content": None, "_meta": None}}


def test_permissions_grant_what_was_requested_for_the_turn() -> None:
    wanted = {"network": {"enabled": True}, "fileSystem": None}
    event = request("item/permissions/requestApproval", 9, {"permissions": wanted})
    assert answer(event, ALLOW)["result"] == {"permissions": {"network": {"enabled": True}}, "scope": "turn"}
    assert answer(event, DENY)["result"] == {"permissions": {}, "scope": "turn"}


def test_v1_review_decisions_carry_the_denial_message() -> None:
    event = request("execCommandApproval", "abc")
    assert answer(event, ALLOW) == {"id": "abc", "result": {"decision": "approved"}}
    assert answer(event, DENY)["result"] == {"decision": {"denied": {"rejection": "no, said Octipus"}}}
    empty = answer(request("applyPatchApproval"), PermissionDecision(False))
    assert empty["result"]["decision"]["denied"]["rejection"] == rpc.DEFAULT_DENY_MESSAGE


def test_answer_keeps_the_id_type_without_raw() -> None:
    for request_id in (0, 41, "0", "req-1"):
        event = PermissionRequestEvent(
            raw=None, request_id=rpc.request_id_text(request_id), tool_name="commandExecution", input={}
        )
        assert answer(event, ALLOW)["id"] == request_id


def test_answer_lines_are_single_line_ascii() -> None:
    event = request("item/commandExecution/requestApproval", "é\n")
    text = CodexAdapter().encode_permission_response(event, DENY)
    assert "\n" not in text and text.isascii()


def test_control_error() -> None:
    assert json.loads(encode_control_error("7", "unsupported")) == {
        "id": 7,
        "error": {"code": -32601, "message": "unsupported"},
    }
    assert json.loads(CodexAdapter().encode_control_error('"x"', "no"))["id"] == "x"
    assert json.loads(encode_control_error("plain", "no"))["id"] == "plain"


@pytest.mark.parametrize(
    ("command", "inner"),
    [
        ("/bin/bash -lc 'echo hi > out.txt'", "echo hi > out.txt"),
        ("bash -c 'git status'", "git status"),
        ("/usr/bin/zsh -lc ls", "ls"),
        ("/bin/bash -lc 'a' extra", "/bin/bash -lc 'a' extra"),
        ("python -c 'print(1)'", "python -c 'print(1)'"),
        ("echo 'unbalanced", "echo 'unbalanced"),
    ],
)
def test_unwrap_shell(command: str, inner: str) -> None:
    assert unwrap_shell(command) == inner


def result(*errors: str, text: str | None = None) -> ResultEvent:
    return ResultEvent(raw=None, is_error=True, errors=errors, text=text)


def test_session_missing() -> None:
    assert session_missing(result("no rollout found for thread id 01a2"))
    assert session_missing(result("invalid session id: invalid character"))
    assert not session_missing(result("error creating thread: required MCP servers failed to initialize"))
    assert not session_missing(ResultEvent(raw=None, is_error=False))


def test_stderr_session_missing() -> None:
    stderr = "Error: thread/resume: thread/resume failed: no rollout found for thread id 01a2 (code -32600)\n"
    assert stderr_session_missing(stderr) and CodexAdapter().stderr_session_missing(stderr)
    assert not stderr_session_missing("Error: something else")


def test_usage_is_cumulative_only_for_resumed_exec(tmp_path: Path) -> None:
    base = LaunchRequest(binary="codex", cwd=tmp_path, run_dir=tmp_path, prompt="p")
    assert not usage_is_cumulative(base)
    assert not usage_is_cumulative(replace(base, resume=True, vendor_session_id="t"))
    assert not usage_is_cumulative(replace(base, options={"transport": "exec"}))
    assert usage_is_cumulative(
        replace(base, resume=True, vendor_session_id="t", options={"transport": "exec"})
    )
    assert CodexAdapter().usage_is_cumulative(base) is False


def test_mcp_failure() -> None:
    def session(servers: dict[str, str]) -> SessionEvent:
        return SessionEvent(raw=None, session_id="t", mcp_servers=servers)

    assert mcp_failure(session({"octipus": "connected"}), "octipus") is None
    assert "'pending'" in (mcp_failure(session({"octipus": "pending"}), "octipus") or "")
    assert "'failed'" in (mcp_failure(session({"octipus": "failed"}), "octipus") or "")
    assert "needs-auth" in (CodexAdapter().mcp_failure(session({"octipus": "needs-auth"}), "octipus") or "")
    assert "did not report" in (mcp_failure(session({}), "octipus") or "")
