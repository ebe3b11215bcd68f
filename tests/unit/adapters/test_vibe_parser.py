"""Mistral Vibe adapter: parsing recorded ACP transcripts and headless streams into typed events.

The ``fixtures/vibe/*.jsonl`` files are the raw stdout of the real 3.0.2 binaries, recorded by
``fixtures/vibe/record.py`` against the scripted Chat Completions server and a real bridge; the
``*.json`` next to each holds the exit code and the permission decisions the recorder gave.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from octipus_vibe import (
    PROMPT_ID,
    SET_MODE_ID,
    SessionPlan,
    VibeAdapter,
    VibeParser,
    encode_control_error,
    encode_permission_response,
    estimated_usage,
    mcp_statuses,
    session_missing,
    vendor_tool_name,
)

from octipusd.adapter import (
    ErrorEvent,
    PermissionDecision,
    PermissionRequestEvent,
    ResultEvent,
    RunFailureEvent,
    SessionEvent,
    StatusEvent,
    StdinWriteEvent,
    TextEvent,
    ThinkingEvent,
    ToolResultEvent,
    ToolUseEvent,
    UnknownEvent,
    UnparsedLine,
    Usage,
    UsageEvent,
    VendorEvent,
)

FIXTURES = Path(__file__).parent / "fixtures" / "vibe"
ALL_FIXTURES = sorted(p.stem for p in FIXTURES.glob("*.jsonl"))


def lines_of(name: str) -> list[bytes]:
    return [line for line in (FIXTURES / f"{name}.jsonl").read_bytes().split(b"\n") if line]


def meta_of(name: str) -> dict[str, Any]:
    return dict(json.loads((FIXTURES / f"{name}.json").read_text()))


def replay(name: str) -> tuple[VibeParser, list[VendorEvent]]:
    """Feed a recorded stdout to a fresh parser, then ``finish`` with the recorded exit code."""
    parser = VibeParser()
    events = [event for line in lines_of(name) for event in parser.feed(line)]
    events.extend(parser.finish(meta_of(name)["exit_code"]))
    return parser, events


def of(events: list[VendorEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def the_result(events: list[VendorEvent]) -> ResultEvent:
    results = of(events, ResultEvent)
    assert len(results) == 1, results
    return results[0]


def written(events: list[VendorEvent]) -> list[dict[str, Any]]:
    return [json.loads(line) for e in of(events, StdinWriteEvent) for line in e.lines]


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


# ------------------------------------------------------------------------- every fixture


@pytest.mark.parametrize("name", ALL_FIXTURES)
def test_fixture_invariants(name: str) -> None:
    parser, events = replay(name)
    result = the_result(events)
    assert events[-1] is result
    total = Usage()
    for usage_event in of(events, UsageEvent):
        total = total + usage_event.usage
    assert total == parser.total_usage()
    assert result.usage == parser.total_usage() or result.is_error
    assert not of(events, UnparsedLine)
    assert parser.transport == ("acp" if name.startswith("acp_") else "headless")
    decisions = meta_of(name)["decisions"]
    assert len(of(events, PermissionRequestEvent)) == len(decisions)


# ------------------------------------------------------------------------- ACP fixtures


def test_acp_bash_allowed() -> None:
    parser, events = replay("acp_bash_allow")
    sessions = of(events, SessionEvent)
    assert [s.mcp_servers["octipus"] for s in sessions] == ["pending", "connected"]
    session_id = sessions[0].session_id
    assert session_id and all(s.session_id == session_id for s in sessions)
    assert sessions[0].raw and sessions[0].raw["id"] == "octipus/session"  # the plan is not stored
    assert "write out.txt" not in json.dumps(sessions[0].raw)
    # the mode is already accept-edits: no set_mode, straight to the prompt
    sent = written(events)
    assert [m["method"] for m in sent] == ["session/prompt"]
    assert sent[0]["id"] == PROMPT_ID
    assert sent[0]["params"] == {
        "sessionId": session_id,
        "prompt": [{"type": "text", "text": "write out.txt"}],
    }
    (use,) = of(events, ToolUseEvent)
    assert use.name == "bash" and use.input == {"command": "echo hello-from-vibe > out.txt; cat out.txt"}
    (request,) = of(events, PermissionRequestEvent)
    assert (request.request_id, request.tool_name, request.tool_use_id) == ("0", "bash", use.tool_use_id)
    assert request.input == use.input
    (tool_result,) = of(events, ToolResultEvent)
    assert tool_result.content == "hello-from-vibe\n" and not tool_result.is_error
    assert [t.text for t in of(events, TextEvent)] == ["All done: wrote out.txt"]  # chunks merged
    result = the_result(events)
    assert not result.is_error and result.subtype == "end_turn"
    assert result.text == "All done: wrote out.txt" and result.session_id == session_id
    assert parser.total_usage() == Usage(input_tokens=200, output_tokens=40)
    assert result.cost_usd == Decimal("0.00028")


def test_acp_permission_response_shapes() -> None:
    _, events = replay("acp_bash_allow")
    (request,) = of(events, PermissionRequestEvent)
    adapter = VibeAdapter()
    allow = json.loads(adapter.encode_permission_response(request, PermissionDecision(allow=True)))
    assert allow == {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
    }
    deny = json.loads(
        adapter.encode_permission_response(request, PermissionDecision(allow=False, message="no"))
    )
    assert deny == {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {"outcome": {"outcome": "selected", "optionId": "reject_once"}},
    }
    # the id keeps its JSON type (the agent matches int ids), also without the raw message
    bare = PermissionRequestEvent(raw=None, request_id="7", tool_name="bash", input={})
    assert json.loads(encode_permission_response(bare, PermissionDecision(allow=True)))["id"] == 7
    named = PermissionRequestEvent(raw=None, request_id="req-a", tool_name="bash", input={})
    assert json.loads(encode_permission_response(named, PermissionDecision(allow=False)))["id"] == "req-a"


def test_acp_permission_uses_offered_option_ids() -> None:
    raw = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "session/request_permission",
        "params": {
            "toolCall": {"toolCallId": "t"},
            "options": [
                {"optionId": "yes-once", "kind": "allow_once"},
                {"optionId": "no-once", "kind": "reject_once"},
            ],
        },
    }
    request = PermissionRequestEvent(raw=raw, request_id="3", tool_name="bash", input={})
    assert '"optionId":"yes-once"' in encode_permission_response(request, PermissionDecision(allow=True))
    assert '"optionId":"no-once"' in encode_permission_response(request, PermissionDecision(allow=False))


def test_acp_bash_denied() -> None:
    _, events = replay("acp_bash_deny")
    (tool_result,) = of(events, ToolResultEvent)
    assert tool_result.is_error and "denied" in tool_result.content
    assert not the_result(events).is_error  # the model carried on and ended its turn


def test_acp_bridge_call_is_named_like_a_bridge_tool() -> None:
    _, events = replay("acp_bridge")
    (use,) = of(events, ToolUseEvent)
    assert use.name == "mcp__octipus__update_work_plan"
    assert use.input["plan"]["title"] == "fixture plan"
    (request,) = of(events, PermissionRequestEvent)
    assert request.tool_name == "mcp__octipus__update_work_plan"  # the runtime answers it itself
    (tool_result,) = of(events, ToolResultEvent)
    assert '"title": "fixture plan"' in tool_result.content and not tool_result.is_error
    assert of(events, SessionEvent)[-1].mcp_servers == {"octipus": "connected"}


def test_acp_refused_bridge_token_fails_the_bridge() -> None:
    _, events = replay("acp_bad_token")
    statuses = [s.mcp_servers.get("octipus") for s in of(events, SessionEvent)]
    assert statuses == ["pending", "failed"]
    (error,) = of(events, ErrorEvent)
    assert error.fatal and "octipus: authentication was rejected" in error.message
    assert all("MCP servers" not in t.text for t in of(events, TextEvent))  # not model text
    (failure,) = of(events, RunFailureEvent)  # the parser fails the run itself
    assert "Mistral Vibe reported the Octipus MCP bridge 'octipus' as 'failed'" in failure.reason


def test_acp_plan_mode_sets_ask_then_prompts() -> None:
    _, events = replay("acp_plan_mode")
    sent = written(events)
    assert [(m["id"], m["method"]) for m in sent] == [
        (SET_MODE_ID, "session/set_mode"),
        (PROMPT_ID, "session/prompt"),
    ]
    assert sent[0]["params"]["modeId"] == "ask"
    assert not the_result(events).is_error


def test_acp_full_mode_runs_without_requests() -> None:
    _, events = replay("acp_full_mode")
    assert written(events)[0]["params"]["modeId"] == "auto-approve"
    assert not of(events, PermissionRequestEvent)
    assert of(events, ToolResultEvent)[0].content == "hello-from-vibe\n"


def test_acp_resume_replays_history_and_counts_only_this_run() -> None:
    parser, events = replay("acp_resume")
    meta = meta_of("acp_resume")
    (history,) = [e for e in of(events, StatusEvent) if e.status == "history"]
    assert history.raw and history.raw["replayedUpdates"] >= 3  # the load replayed the old conversation
    assert [t.text for t in of(events, TextEvent)] == ["second answer"]  # not "first answer" again
    result = the_result(events)
    assert result.session_id == meta["resumed"]
    assert [m["method"] for m in written(events)] == ["session/prompt"]
    # Vibe's totals are per session (200/40 after the second call); this run made one call
    assert parser.total_usage() == Usage(input_tokens=100, output_tokens=20)
    assert result.cost_usd == Decimal("0.00014")
    # the model saw the whole history: the second request held the first exchange
    requests = [r for r in meta["model_requests"] if not r["side"]]
    assert requests[-1]["roles"] == ["system", "user", "assistant", "user"]


def test_acp_unknown_session() -> None:
    _, events = replay("acp_load_unknown")
    result = the_result(events)
    assert result.is_error and result.subtype == "session_not_found"
    assert result.errors == ("Session not found: 00000000-0000-4000-8000-000000000000",)
    assert session_missing(result) and VibeAdapter().session_missing(result)
    assert not of(events, SessionEvent) and not written(events)


def test_acp_turn_limit_cancels_and_fails() -> None:
    _, events = replay("acp_turn_limit")
    cancels = [m for m in written(events) if m["method"] == "session/cancel"]
    assert len(cancels) == 1 and "id" not in cancels[0]
    result = the_result(events)
    assert result.is_error and result.subtype == "error_max_turns"
    assert "turn limit of 1" in result.errors[0]
    assert not session_missing(result)


def test_acp_cached_tokens_are_split_out() -> None:
    parser, _ = replay("acp_cached_usage")
    assert parser.total_usage() == Usage(input_tokens=70, output_tokens=20, cache_read_input_tokens=30)


# ------------------------------------------------------------------------- headless fixtures


def test_headless_full_run() -> None:
    parser, events = replay("headless_bash_full")
    (launch,) = [e for e in of(events, StatusEvent) if e.status == "launch"]
    assert launch.raw and launch.raw["agent"] == "auto-approve" and launch.raw["notice"] is None
    (session,) = of(events, SessionEvent)
    assert session.mcp_servers == {"octipus": "unknown"}
    (use,) = of(events, ToolUseEvent)
    assert use.name == "bash"  # file_system.bash
    assert of(events, ToolResultEvent)[0].content == "hello-from-vibe\n"
    result = the_result(events)
    assert not result.is_error and result.subtype == "finished"
    assert result.text == "All done: wrote out.txt" and result.session_id == session.session_id
    assert parser.total_usage() == Usage(input_tokens=200, output_tokens=40)  # from export.json
    assert result.cost_usd == Decimal("0.00028")
    (export,) = [e for e in of(events, StatusEvent) if e.status == "export"]
    assert export.raw is not None and "config" not in export.raw


def test_headless_denied_without_relay() -> None:
    _, events = replay("headless_bash_denied")
    assert not of(events, PermissionRequestEvent)
    (tool_result,) = of(events, ToolResultEvent)
    assert tool_result.is_error and "denied" in tool_result.content
    launch = next(e for e in of(events, StatusEvent) if e.status == "launch")
    assert launch.raw and "denied" in launch.raw["notice"]


def test_headless_bridge_call_connects() -> None:
    _, events = replay("headless_bridge_full")
    assert of(events, ToolUseEvent)[0].name == "mcp__octipus__update_work_plan"
    assert [s.mcp_servers["octipus"] for s in of(events, SessionEvent)] == ["unknown", "connected"]


def test_headless_resume_keeps_the_session() -> None:
    _, events = replay("headless_resume")
    meta = meta_of("headless_resume")
    result = the_result(events)
    assert result.session_id == meta["resumed"] and not result.is_error
    assert [t.text for t in of(events, TextEvent)] == ["second answer"]


def test_headless_unknown_session() -> None:
    parser, events = replay("headless_resume_unknown")
    result = the_result(events)
    assert result.is_error and result.subtype == "session_not_found"
    assert result.errors == ("Session not found: 00000000-0000-4000-8000-000000000000",)
    assert session_missing(result)
    assert parser.total_usage() == Usage()  # export without usage: zero, not estimated


def test_headless_turn_limit() -> None:
    _, events = replay("headless_turn_limit")
    result = the_result(events)
    assert result.is_error and result.subtype == "error_max_turns"
    assert "turn limit" in result.errors[0]


# ------------------------------------------------------------------------- hand-made ACP lines


def acp_started(mode: str | None = "accept-edits", bridge: str | None = "octipus", **plan: Any) -> VibeParser:
    """A parser past initialize and session/new (session ``s1``)."""
    parser = VibeParser()
    session_plan = SessionPlan(prompt=[{"type": "text", "text": "hi"}], mode=mode, bridge=bridge, **plan)
    parser.feed(line({"jsonrpc": "2.0", "id": "octipus/initialize", "result": {"protocolVersion": 1}}))
    result = {
        "sessionId": "s1",
        "modes": {"currentModeId": "accept-edits", "availableModes": [{"id": "ask"}, {"id": "accept-edits"}]},
    }
    parser.feed(line({"jsonrpc": "2.0", "id": session_plan.to_id(), "result": result}))
    return parser


def update(session_update: str, **fields: Any) -> bytes:
    return line(
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "s1", "update": {"sessionUpdate": session_update, **fields}},
        }
    )


def usage_update(
    steps: int, prompt: int, completion: int, cached: int = 0, cost: float | None = None
) -> bytes:
    fields: dict[str, Any] = {
        "_meta": {
            "steps": steps,
            "promptTokens": prompt,
            "completionTokens": completion,
            "cachedTokens": cached,
        }
    }
    if cost is not None:
        fields["cost"] = {"amount": cost, "currency": "USD"}
    return update("usage_update", **fields)


def test_unknown_agent_request_is_answered_with_an_error() -> None:
    parser = acp_started()
    events = parser.feed(
        line({"jsonrpc": "2.0", "id": 5, "method": "fs/read_text_file", "params": {"path": "/x"}})
    )
    (answer,) = written(events)
    assert answer == {
        "jsonrpc": "2.0",
        "id": 5,
        "error": {
            "code": -32601,
            "message": "Octipus does not serve fs/read_text_file (no such client capability)",
        },
    }
    assert of(events, UnknownEvent)[0].type == "fs/read_text_file"
    assert json.loads(encode_control_error("abc", "nope"))["id"] == "abc"
    assert json.loads(VibeAdapter().encode_control_error("12", "nope"))["id"] == 12


def test_mode_that_vibe_does_not_offer_fails_before_prompting() -> None:
    parser = VibeParser()
    plan = SessionPlan(prompt=[{"type": "text", "text": "hi"}], mode="auto-approve", bridge=None)
    result = {
        "sessionId": "s1",
        "modes": {"currentModeId": "accept-edits", "availableModes": [{"id": "ask"}]},
    }
    events = parser.feed(line({"jsonrpc": "2.0", "id": plan.to_id(), "result": result}))
    assert not written(events)
    failed = the_result(events)
    assert failed.is_error and "no session mode 'auto-approve'" in failed.errors[0]


def test_set_mode_error_fails_the_run() -> None:
    parser = acp_started(mode="ask")
    events = parser.feed(
        line({"jsonrpc": "2.0", "id": SET_MODE_ID, "error": {"code": -32603, "message": "boom"}})
    )
    failed = the_result(events)
    assert failed.is_error and failed.subtype == "set_mode_error" and "boom" in failed.errors[0]


def test_prompt_error_and_initialize_error() -> None:
    parser = acp_started()
    error = {"code": -32603, "message": "Internal error", "data": {"details": "provider 500"}}
    failed = the_result(parser.feed(line({"jsonrpc": "2.0", "id": PROMPT_ID, "error": error})))
    assert failed.is_error and failed.errors == ("Vibe failed the prompt: Internal error: provider 500",)
    other = VibeParser()
    init = other.feed(
        line({"jsonrpc": "2.0", "id": "octipus/initialize", "error": {"code": 1, "message": "no"}})
    )
    assert the_result(init).subtype == "initialize_error"


def test_non_end_turn_stop_reason_is_an_error() -> None:
    parser = acp_started()
    result = the_result(
        parser.feed(line({"jsonrpc": "2.0", "id": PROMPT_ID, "result": {"stopReason": "refusal"}}))
    )
    assert result.is_error and "refusal" in result.errors[0]


def test_thoughts_and_messages_are_merged_per_id() -> None:
    parser = acp_started()
    events: list[VendorEvent] = []
    for chunk in ("Let me ", "think"):
        events += parser.feed(
            update("agent_thought_chunk", messageId="th-1", content={"type": "text", "text": chunk})
        )
    for chunk in ("Hel", "lo"):
        events += parser.feed(
            update("agent_message_chunk", messageId="assistant-1", content={"type": "text", "text": chunk})
        )
        events += parser.feed(usage_update(1, 10, 2))  # usage updates do not split a message
    events += parser.feed(
        update("agent_message_chunk", messageId="assistant-2", content={"type": "text", "text": "!"})
    )
    events += parser.finish(0)
    assert [t.text for t in of(events, ThinkingEvent)] == ["Let me think"]
    assert [(t.text, t.message_id) for t in of(events, TextEvent)] == [
        ("Hello", "assistant-1"),
        ("!", "assistant-2"),
    ]


def test_mcp_oauth_notice_marks_needs_auth() -> None:
    parser = acp_started()
    text = "MCP OAuth login is required for: octipus, other. Run `/mcp login <alias>` in Vibe."
    events = parser.feed(
        update("agent_message_chunk", messageId="n-1", content={"type": "text", "text": text})
    )
    assert of(events, SessionEvent)[0].mcp_servers == {"octipus": "needs-auth", "other": "needs-auth"}
    assert "'needs-auth'" in of(events, RunFailureEvent)[0].reason
    other = acp_started().feed(
        update(
            "agent_message_chunk",
            messageId="n-1",
            content={
                "type": "text",
                "text": "MCP OAuth login is required for: other. Run `/mcp login <alias>`.",
            },
        )
    )
    assert of(other, SessionEvent) and of(other, RunFailureEvent) == []  # another server: the bridge is fine
    assert mcp_statuses("The following MCP servers failed to connect:\n- a: x\n- b: y") == {
        "a": "failed",
        "b": "failed",
    }
    assert mcp_statuses("hello") == {}


def test_failure_after_connected_still_fails_the_bridge() -> None:
    parser = acp_started()
    first = parser.feed(
        update("agent_message_chunk", messageId="assistant-1", content={"type": "text", "text": "x"})
    )
    assert of(first, SessionEvent)[0].mcp_servers == {"octipus": "connected"}
    notice = "The following MCP servers failed to connect:\n- octipus: mcp_transport_failed"
    late = parser.feed(
        update("agent_message_chunk", messageId="n-2", content={"type": "text", "text": notice})
    )
    assert of(late, SessionEvent)[0].mcp_servers == {"octipus": "failed"}
    assert of(first, RunFailureEvent) == [] and len(of(late, RunFailureEvent)) == 1
    assert of(late, TextEvent) == [
        TextEvent(raw=of(late, TextEvent)[0].raw, text="x", message_id="assistant-1")
    ]


def test_no_bridge_means_no_bridge_status() -> None:
    parser = acp_started(bridge=None)
    events = parser.feed(update("tool_call", toolCallId="t1", title="bash: ls", kind="execute", rawInput={}))
    assert not of(events, SessionEvent)
    assert parser.acp.mcp_servers == {}


def test_token_limit_cancels_once() -> None:
    parser = acp_started(token_limit=100)
    parser.feed(usage_update(0, 0, 0))
    assert not written(parser.feed(usage_update(1, 60, 10)))
    over = written(parser.feed(usage_update(1, 120, 20)))
    assert over == [{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}]
    assert not written(parser.feed(usage_update(2, 200, 30)))
    result = the_result(
        parser.feed(line({"jsonrpc": "2.0", "id": PROMPT_ID, "result": {"stopReason": "cancelled"}}))
    )
    assert (
        result.is_error and result.subtype == "error_max_tokens" and "token limit of 100" in result.errors[0]
    )


def test_usage_baseline_waits_for_steps_zero_even_after_the_session_result() -> None:
    parser = acp_started()
    parser.feed(usage_update(0, 500, 50, cost=0.5))  # a loaded session's past, arriving late
    events = parser.feed(usage_update(1, 600, 60, cached=40, cost=0.6))
    assert of(events, UsageEvent)[0].usage == Usage(
        input_tokens=60, output_tokens=10, cache_read_input_tokens=40
    )
    result = the_result(
        parser.feed(
            line(
                {
                    "jsonrpc": "2.0",
                    "id": PROMPT_ID,
                    "result": {
                        "stopReason": "end_turn",
                        "usage": {"inputTokens": 650, "outputTokens": 70, "cachedReadTokens": 40},
                    },
                }
            )
        )
    )
    assert result.usage == Usage(input_tokens=110, output_tokens=20, cache_read_input_tokens=40)
    assert parser.total_usage() == result.usage
    assert result.cost_usd == Decimal("0.1")  # 0.6 - 0.5 exactly


def test_tool_call_update_for_an_unseen_call_and_failed_status() -> None:
    parser = acp_started()
    events = parser.feed(
        update(
            "tool_call_update",
            toolCallId="t9",
            status="failed",
            rawInput={"path": "x"},
            content=[{"type": "content", "content": {"type": "text", "text": "boom"}}],
            _meta={"tool_name": "write_file"},
        )
    )
    (use,) = of(events, ToolUseEvent)
    assert (use.name, use.input) == ("write_file", {"path": "x"})
    (res,) = of(events, ToolResultEvent)
    assert res.is_error and res.content == "boom"


def test_permission_for_an_unannounced_tool_uses_the_request_fields() -> None:
    parser = acp_started()
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/request_permission",
        "params": {
            "toolCall": {"toolCallId": "t2", "title": "bash: rm -rf x", "rawInput": {"command": "rm -rf x"}}
        },
    }
    (event,) = of(parser.feed(line(request)), PermissionRequestEvent)
    assert (event.tool_name, event.input, event.request_id) == ("bash", {"command": "rm -rf x"}, "1")


# ------------------------------------------------------------------------- hand-made headless lines


def test_headless_without_export_estimates_usage() -> None:
    parser = VibeParser()
    header = {"type": "octipus.vibe.headless", "bridge": "octipus", "agent": "auto-approve", "turnLimit": 5}
    parser.feed(line(header))
    user = {
        "sessionId": "s",
        "type": "message",
        "role": "user",
        "content": [{"type": "text", "text": "x" * 40}],
    }
    assistant = {
        "sessionId": "s",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "y" * 9}],
    }
    parser.feed(line(user))
    parser.feed(line(assistant))
    events = parser.finish(-9)
    usage = parser.total_usage()
    assert usage == Usage(input_tokens=10, output_tokens=3, estimated=True)
    result = the_result(events)
    assert result.is_error and result.errors == ("vibe was killed by signal 9",)
    assert result.usage is not None and result.usage.estimated
    assert of(events, UsageEvent)[0].usage == usage
    assert parser.finish(-9) == []  # once only
    assert estimated_usage(0, 1) == Usage(output_tokens=1, estimated=True)


def test_headless_reasoning_and_exit_code() -> None:
    parser = VibeParser()
    entry = {
        "sessionId": "s",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "reasoning", "text": "hmm"}, {"type": "text", "text": "done"}],
    }
    events = parser.feed(line(entry))
    assert [type(e).__name__ for e in events] == ["SessionEvent", "ThinkingEvent", "TextEvent"]
    result = the_result(parser.finish(2))
    assert result.is_error and result.errors == ("vibe exited with code 2",)


# ------------------------------------------------------------------------- helpers and robustness


@pytest.mark.parametrize(
    ("name", "mapped"),
    [
        ("mcp_octipus.update_work_plan", "mcp__octipus__update_work_plan"),
        ("mcp_lab.echo", "mcp__lab__echo"),
        ("file_system.bash", "bash"),
        ("bash", "bash"),
        ("", ""),
    ],
)
def test_vendor_tool_name(name: str, mapped: str) -> None:
    assert vendor_tool_name(name) == mapped


def test_session_missing_only_for_that_error() -> None:
    assert not session_missing(ResultEvent(raw=None, is_error=True, errors=("boom",)))
    assert session_missing(ResultEvent(raw=None, is_error=True, subtype="session_not_found"))


def test_non_json_and_unknown_first_lines() -> None:
    parser = VibeParser()
    assert isinstance(parser.feed(b"Reading API keys from the system keyring")[0], UnparsedLine)
    assert isinstance(parser.feed(b"\xff\xfe[1, 2]")[0], UnparsedLine)
    assert isinstance(parser.feed(b'{"hello": 1}')[0], UnknownEvent)
    assert parser.transport is None
    assert parser.finish(0) == []


def test_plan_ids_round_trip_and_reject_garbage() -> None:
    plan = SessionPlan(
        prompt=[{"type": "text", "text": "é \n \u2028"}], mode="ask", bridge="b", resume="r", turn_limit=3
    )
    assert SessionPlan.from_id(plan.to_id()) == plan
    for bad in (None, 3, "octipus/session:{", "octipus/session:[]", "other"):
        assert SessionPlan.from_id(bad) is None


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=5)
    ),
    max_leaves=25,
)
KEYS = st.sampled_from(
    ["jsonrpc", "id", "method", "params", "result", "error", "sessionId", "type", "role", "content", "update"]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=200), max_size=8), st.integers(min_value=-20, max_value=300) | st.none())
def test_parser_never_raises_on_bytes(lines: list[bytes], code: int | None) -> None:
    parser = VibeParser()
    for raw in lines:
        parser.feed(raw)
    parser.finish(code)
    parser.total_usage()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(ALL_FIXTURES),
    st.lists(st.tuples(st.integers(min_value=0, max_value=40), KEYS, JSON_VALUES), max_size=6),
)
def test_parser_never_raises_on_mutated_fixtures(name: str, mutations: list[tuple[int, str, Any]]) -> None:
    lines = lines_of(name)
    objects = [json.loads(item) for item in lines]
    for index, key, value in mutations:
        target = objects[index % len(objects)]
        nested = target.get("params", {}).get("update") if isinstance(target.get("params"), dict) else None
        (nested if isinstance(nested, dict) and index % 2 else target)[key] = value
    parser = VibeParser()
    for obj in objects:
        for event in parser.feed(json.dumps(obj).encode()):
            assert isinstance(event, VendorEvent)
    parser.finish(0)
    total = parser.total_usage()
    assert total.input_tokens >= 0 and total.output_tokens >= 0
