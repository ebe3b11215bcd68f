"""Claude Code adapter: stdin control lines, bridge-failure and missing-session signals."""

from __future__ import annotations

import json

import pytest
from octipus_claude_code import (
    ClaudeCodeAdapter,
    encode_control_error,
    encode_interrupt,
    encode_permission_response,
    mcp_failure,
    session_missing,
)
from octipus_claude_code.control import DEFAULT_DENY_MESSAGE

from octipusd.adapter import PermissionDecision, PermissionRequestEvent, ResultEvent, SessionEvent

REQUEST = PermissionRequestEvent(
    raw=None,
    request_id="777f96c8-1111-4222-8333-444455556666",
    tool_name="Bash",
    input={"command": "echo perm-test-ran > ran.txt; cat ran.txt", "description": "permission test"},
    tool_use_id="toolu_01",
)


def decoded(text: str) -> object:
    assert "\n" not in text and "\r" not in text
    return json.loads(text)


def test_allow_echoes_input_as_updated_input() -> None:
    text = ClaudeCodeAdapter().encode_permission_response(REQUEST, PermissionDecision(allow=True))
    assert decoded(text) == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": REQUEST.request_id,
            "response": {"behavior": "allow", "updatedInput": REQUEST.input, "toolUseID": "toolu_01"},
        },
    }


def test_allow_with_edited_input() -> None:
    edited = {"command": "echo safer", "description": "edited"}
    text = encode_permission_response(REQUEST, PermissionDecision(allow=True, updated_input=edited))
    body = decoded(text)
    assert isinstance(body, dict)
    assert body["response"]["response"]["updatedInput"] == edited


def test_allow_without_tool_use_id_and_empty_input() -> None:
    request = PermissionRequestEvent(raw=None, request_id="r", tool_name="Write", input={})
    body = decoded(encode_permission_response(request, PermissionDecision(allow=True)))
    assert body == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": "r",
            "response": {"behavior": "allow", "updatedInput": {}},
        },
    }


def test_deny_carries_message() -> None:
    text = ClaudeCodeAdapter().encode_permission_response(
        REQUEST, PermissionDecision(allow=False, message="deny by rule shell(rm -rf /:*)")
    )
    assert decoded(text) == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": REQUEST.request_id,
            "response": {"behavior": "deny", "message": "deny by rule shell(rm -rf /:*)"},
        },
    }


def test_deny_without_message_gets_default() -> None:
    body = decoded(encode_permission_response(REQUEST, PermissionDecision(allow=False)))
    assert isinstance(body, dict)
    assert body["response"]["response"] == {"behavior": "deny", "message": DEFAULT_DENY_MESSAGE}


def test_control_error() -> None:
    text = ClaudeCodeAdapter().encode_control_error("hook-7", "unsupported control request hook_callback")
    assert decoded(text) == {
        "type": "control_response",
        "response": {
            "subtype": "error",
            "request_id": "hook-7",
            "error": "unsupported control request hook_callback",
        },
    }
    assert encode_control_error("a", "b\nc") == text.replace("hook-7", "a").replace(
        "unsupported control request hook_callback", "b\\nc"
    )


def test_interrupt() -> None:
    assert decoded(encode_interrupt("int-1")) == {
        "type": "control_request",
        "request_id": "int-1",
        "request": {"subtype": "interrupt"},
    }
    assert ClaudeCodeAdapter().encode_interrupt("x") == encode_interrupt("x")


def session(servers: dict[str, str]) -> SessionEvent:
    return SessionEvent(raw=None, session_id="s", mcp_servers=servers)


def test_mcp_ok() -> None:
    assert mcp_failure(session({"octipus": "connected"}), "octipus") is None


@pytest.mark.parametrize("status", ["failed", "needs-auth", "pending", "unknown"])
def test_mcp_failed(status: str) -> None:
    # pending: the bridge accepted the connection but never answered (tool calls "still connecting")
    reason = mcp_failure(session({"octipus": status, "other": "connected"}), "octipus")
    assert reason is not None and "'octipus'" in reason and status in reason


def test_mcp_missing_bridge_is_a_failure() -> None:
    reason = mcp_failure(session({"other": "connected"}), "octipus")
    assert reason is not None and "other: connected" in reason
    reason = mcp_failure(session({}), "octipus")
    assert reason is not None and "none" in reason


def test_session_missing() -> None:
    text = "No conversation found with session ID: 99999999-2222-4333-8444-555555555555"
    assert session_missing(ResultEvent(raw=None, is_error=True, errors=(text,)))
    assert session_missing(ResultEvent(raw=None, is_error=True, text=text))
    assert not session_missing(ResultEvent(raw=None, is_error=True, text="API Error: 529"))
    assert not session_missing(ResultEvent(raw=None, is_error=False))
