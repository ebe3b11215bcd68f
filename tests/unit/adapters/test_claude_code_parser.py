"""Claude Code adapter: parsing recorded and hand-made stream-json lines into typed events."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from octipus_claude_code import (
    ClaudeCodeAdapter,
    ClaudeStreamParser,
    flatten_tool_result,
    mcp_failure,
    session_missing,
)

from octipusd.adapter import (
    BridgeEndpoint,
    ControlCancelEvent,
    ErrorEvent,
    LaunchRequest,
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

FIXTURES = Path(__file__).parent / "fixtures" / "claude_code"


def lines_of(name: str) -> list[bytes]:
    return [line for line in (FIXTURES / name).read_bytes().split(b"\n") if line]


def parse_all(lines: list[bytes], parser: ClaudeStreamParser | None = None) -> list[VendorEvent]:
    parser = parser or ClaudeStreamParser()
    return [event for line in lines for event in parser.feed(line)]


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


def assistant(message_id: str | None, blocks: list[dict[str, Any]], usage: dict[str, int] | None) -> bytes:
    message: dict[str, Any] = {"type": "message", "role": "assistant", "model": "m", "content": blocks}
    if message_id is not None:
        message["id"] = message_id
    if usage is not None:
        message["usage"] = usage
    return line({"type": "assistant", "message": message, "parent_tool_use_id": None, "session_id": "s"})


def usage_sum(events: list[VendorEvent]) -> Usage:
    total = Usage()
    for event in events:
        if isinstance(event, UsageEvent):
            total = total + event.usage
    return total


# ------------------------------------------------------------------ recorded streams


def test_recorded_allow_turn() -> None:
    parser = ClaudeStreamParser()
    events = parse_all(lines_of("permission_allow_turn.jsonl"), parser)
    kinds = [type(e).__name__ for e in events]
    assert kinds == [
        "SessionEvent",
        "StatusEvent",  # system/thinking_tokens
        "ThinkingEvent",
        "UsageEvent",  # msg_mock1 counted on its first line only
        "TextEvent",
        "ToolUseEvent",
        "PermissionRequestEvent",
        "ToolResultEvent",
        "TextEvent",
        "UsageEvent",  # msg_mock2
        "UsageEvent",  # the result's reconciliation (real output tokens)
        "ResultEvent",
    ]
    session = events[0]
    assert isinstance(session, SessionEvent)
    assert session.session_id == "11111111-2222-4333-8444-555555555555"
    assert session.model == "claude-mock"
    assert "Bash" in session.tools and "Read" in session.tools
    assert session.mcp_servers == {}
    assert session.raw is not None and session.raw["permissionMode"] == "default"
    status = events[1]
    assert isinstance(status, StatusEvent) and status.status == "thinking_tokens"
    thinking = events[2]
    assert isinstance(thinking, ThinkingEvent)
    assert (thinking.text, thinking.message_id) == ("I should run echo.", "msg_mock1")
    text = events[4]
    assert (
        isinstance(text, TextEvent) and text.text == "Running a command." and text.message_id == "msg_mock1"
    )
    tool = events[5]
    assert isinstance(tool, ToolUseEvent)
    assert tool.tool_use_id == "toolu_mock01" and tool.name == "Bash"
    assert tool.input == {
        "command": "echo perm-test-ran > ran.txt; cat ran.txt",
        "description": "permission test",
    }
    perm = events[6]
    assert isinstance(perm, PermissionRequestEvent)
    assert perm.request_id == "a9abfb35-9350-40b6-b2d2-7b8f5a5c8d02"
    assert perm.tool_name == "Bash"
    assert perm.input == tool.input
    assert perm.tool_use_id == "toolu_mock01"
    result_of_tool = events[7]
    assert isinstance(result_of_tool, ToolResultEvent)
    assert (result_of_tool.tool_use_id, result_of_tool.content, result_of_tool.is_error) == (
        "toolu_mock01",
        "perm-test-ran",
        False,
    )
    result = events[-1]
    assert isinstance(result, ResultEvent)
    assert not result.is_error and result.subtype == "success" and result.text == "All done."
    assert result.session_id == session.session_id
    assert result.usage == Usage(201, 35, 14, 6)
    assert result.cost_usd == Decimal("0.0019705")
    assert result.errors == ()
    assert not session_missing(result)
    # assistant usage: msg_mock1 (100 in, 1 out placeholder) + msg_mock2 (101 in, 1 out) -> the
    # result's authoritative 201/35 after reconciliation
    assert parser.total_usage() == Usage(201, 35, 14, 6)
    assert usage_sum(events) == parser.total_usage()
    assert [e.usage for e in events if isinstance(e, UsageEvent)] == [
        Usage(100, 1, 7, 3),
        Usage(101, 1, 7, 3),
        Usage(0, 33, 0, 0),
    ]


def test_recorded_deny_turn_with_failed_bridge() -> None:
    events = parse_all(lines_of("permission_deny_turn.jsonl"))
    session = events[0]
    assert isinstance(session, SessionEvent)
    assert session.mcp_servers == {"octipus": "failed"}
    reason = mcp_failure(session, "octipus")
    assert reason is not None and "octipus" in reason and "failed" in reason
    assert ClaudeCodeAdapter().mcp_failure(session, "octipus") == reason
    denied = [e for e in events if isinstance(e, ToolResultEvent)]
    assert len(denied) == 1
    assert denied[0].is_error and denied[0].content == "denied by octipus rule"
    result = events[-1]
    assert isinstance(result, ResultEvent) and not result.is_error  # the binary itself does not fail
    assert result.raw is not None and result.raw["permission_denials"][0]["tool_name"] == "Bash"


def test_recorded_unknown_resume_id() -> None:
    parser = ClaudeStreamParser()
    events = parse_all(lines_of("resume_unknown_session.jsonl"), parser)
    assert len(events) == 1
    result = events[0]
    assert isinstance(result, ResultEvent)
    assert result.is_error and result.subtype == "error_during_execution"
    assert result.errors == ("No conversation found with session ID: 99999999-2222-4333-8444-555555555555",)
    assert session_missing(result)
    assert ClaudeCodeAdapter().session_missing(result)
    assert parser.total_usage() == Usage()


def test_recorded_api_connection_refused() -> None:
    parser = ClaudeStreamParser()
    events = parse_all(lines_of("api_connection_refused.jsonl"), parser)
    assert [type(e).__name__ for e in events] == ["SessionEvent", "TextEvent", "ErrorEvent", "ResultEvent"]
    assert isinstance(events[0], SessionEvent) and events[0].mcp_servers == {"octipus": "failed"}
    assert isinstance(events[1], TextEvent)
    assert events[1].text == "API Error: Unable to connect to API (ConnectionRefused)"
    error = events[2]
    assert isinstance(error, ErrorEvent) and error.message == "server_error" and not error.fatal
    result = events[3]
    assert isinstance(result, ResultEvent)
    assert result.is_error and result.subtype == "success"  # sic: API failures end as success + is_error
    assert result.text == "API Error: Unable to connect to API (ConnectionRefused)"
    assert result.cost_usd == 0
    assert not session_missing(result)
    assert parser.total_usage() == Usage()


def _init(servers: list[dict[str, str]]) -> bytes:
    return line({"type": "system", "subtype": "init", "session_id": "s-1", "mcp_servers": servers})


def _bridged_parser(tmp_path: Path) -> ClaudeStreamParser:
    request = LaunchRequest(
        binary="claude",
        cwd=tmp_path,
        run_dir=tmp_path,
        prompt="hi",
        bridge=BridgeEndpoint(url="http://127.0.0.1:9/mcp", token="t"),
    )
    parser = ClaudeCodeAdapter().new_parser(request)
    assert isinstance(parser, ClaudeStreamParser)
    return parser


@pytest.mark.parametrize("status", ["pending", "failed", "needs-auth", "unknown"])
def test_init_with_the_bridge_not_connected_fails_the_run(tmp_path: Path, status: str) -> None:
    # pending: a bridge that accepted Claude's connection and never answered (claude 2.1.197 lists it so
    # after ~2.5 s, then reports "still connecting" to the model and exits 0)
    session, failure = _bridged_parser(tmp_path).feed(
        _init([{"name": "other", "status": "connected"}, {"name": "octipus", "status": status}])
    )
    assert isinstance(session, SessionEvent) and session.mcp_servers["octipus"] == status
    assert isinstance(failure, RunFailureEvent) and failure.raw == session.raw
    assert f"as {status!r} in system/init" in failure.reason and "'octipus'" in failure.reason


def test_init_without_the_bridge_fails_the_run_and_a_connected_one_does_not(tmp_path: Path) -> None:
    session, failure = _bridged_parser(tmp_path).feed(_init([{"name": "other", "status": "connected"}]))
    assert isinstance(failure, RunFailureEvent) and "other: connected" in failure.reason
    (session,) = _bridged_parser(tmp_path).feed(_init([{"name": "octipus", "status": "connected"}]))
    assert isinstance(session, SessionEvent)
    # no bridge in the launch (or a recorded stream parsed without one): nothing to check
    (session,) = ClaudeStreamParser().feed(_init([{"name": "octipus", "status": "pending"}]))
    assert isinstance(session, SessionEvent)


def test_misc_lines() -> None:
    events = parse_all(lines_of("stream_misc.jsonl"))
    (
        retry,
        status,
        stream,
        hook,
        hook_answer,
        cancel,
        ack,
        interrupted,
        interrupt_result,
        rate,
        replay,
        max_turns,
    ) = events
    assert isinstance(retry, StatusEvent) and retry.status == "api_retry"
    assert retry.raw is not None and retry.raw["error_status"] == 401
    assert isinstance(status, StatusEvent) and status.status == "status"
    assert isinstance(stream, StatusEvent) and stream.status == "stream_event"
    assert stream.raw is not None and stream.raw["event"]["delta"]["text"] == "Hel"
    assert isinstance(hook, UnknownEvent) and hook.type == "control_request"
    assert hook.raw is not None and hook.raw["request_id"] == "hook-7"
    # the parser answers the control request Octipus does not support itself (the runtime writes it)
    assert isinstance(hook_answer, StdinWriteEvent) and hook_answer.raw == hook.raw
    assert [json.loads(x) for x in hook_answer.lines] == [
        {
            "type": "control_response",
            "response": {
                "subtype": "error",
                "request_id": "hook-7",
                "error": f"unsupported control request {hook.raw['request']['subtype']}",
            },
        }
    ]
    assert (
        isinstance(cancel, ControlCancelEvent) and cancel.request_id == "777f96c8-0000-4000-8000-000000000001"
    )
    assert isinstance(ack, StatusEvent) and ack.status == "control_response"
    assert isinstance(interrupted, StatusEvent) and interrupted.status == "user_message"
    assert isinstance(interrupt_result, ResultEvent) and interrupt_result.is_error
    assert interrupt_result.cost_usd == Decimal("0.003")
    assert isinstance(rate, UnknownEvent) and rate.type == "rate_limit_event"
    assert isinstance(replay, StatusEvent) and replay.status == "user_replay"
    assert isinstance(max_turns, ResultEvent)
    assert max_turns.is_error  # subtype error_* counts even when is_error is false
    assert max_turns.usage is None and max_turns.cost_usd is None and max_turns.text is None


# ------------------------------------------------------------------ usage


def test_usage_dedup_by_message_id() -> None:
    parser = ClaudeStreamParser()
    u = {
        "input_tokens": 100,
        "output_tokens": 3,
        "cache_creation_input_tokens": 5,
        "cache_read_input_tokens": 7,
    }
    e1 = parser.feed(assistant("msg_1", [{"type": "text", "text": "a"}], u))
    e2 = parser.feed(assistant("msg_1", [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}], u))
    assert [type(e) for e in e1] == [TextEvent, UsageEvent]
    assert [type(e) for e in e2] == [ToolUseEvent]
    assert parser.total_usage() == Usage(100, 3, 5, 7)
    parser.feed(assistant("msg_2", [{"type": "text", "text": "b"}], u))
    assert parser.total_usage() == Usage(200, 6, 10, 14)


def test_usage_without_message_id_counts_each_line() -> None:
    parser = ClaudeStreamParser()
    u = {"input_tokens": 1, "output_tokens": 1}
    parser.feed(assistant(None, [{"type": "text", "text": "a"}], u))
    parser.feed(assistant(None, [{"type": "text", "text": "a"}], u))
    assert parser.total_usage() == Usage(2, 2)


def test_result_usage_is_authoritative_per_turn_and_summed() -> None:
    parser = ClaudeStreamParser()
    events: list[VendorEvent] = []
    events += parser.feed(
        assistant("m1", [{"type": "text", "text": "a"}], {"input_tokens": 50, "output_tokens": 1})
    )
    assert parser.total_usage() == Usage(50, 1)
    events += parser.feed(
        line(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "usage": {"input_tokens": 50, "output_tokens": 40},
            }
        )
    )
    assert parser.total_usage() == Usage(50, 40)
    # second turn in the same process: in progress, then its result
    events += parser.feed(
        assistant("m2", [{"type": "text", "text": "b"}], {"input_tokens": 70, "output_tokens": 1})
    )
    assert parser.total_usage() == Usage(120, 41)
    events += parser.feed(
        line(
            {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "usage": {"input_tokens": 70, "output_tokens": 9},
            }
        )
    )
    assert parser.total_usage() == Usage(120, 49)
    assert usage_sum(events) == parser.total_usage()


def test_each_result_costs_the_increase_of_the_process_total() -> None:
    """``total_cost_usd`` is cumulative per process (observed.md §1.3): a process serving three
    turns at 0.01/0.03/0.06 cumulative costs 0.01, 0.02 and 0.03 exactly (issue 26: not the binary
    float ``0.019999999999999997``); a result without a figure costs nothing known, and the next one
    is still measured from the last figure."""
    parser = ClaudeStreamParser()
    costs = []
    for total in (0.01, 0.03, None, 0.06):
        result = {"type": "result", "subtype": "success", "is_error": False}
        if total is not None:
            result["total_cost_usd"] = total
        (event,) = parser.feed(line(result))
        assert isinstance(event, ResultEvent)
        costs.append(event.cost_usd)
    assert costs == [Decimal("0.01"), Decimal("0.02"), None, Decimal("0.03")]
    assert all(isinstance(cost, Decimal) for cost in costs if cost is not None)


def test_zeroed_result_after_crash_keeps_observed_usage() -> None:
    parser = ClaudeStreamParser()
    parser.feed(assistant("m1", [{"type": "text", "text": "a"}], {"input_tokens": 80, "output_tokens": 2}))
    events = parser.feed(
        line(
            {
                "type": "result",
                "subtype": "error_during_execution",
                "is_error": True,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
        )
    )
    assert [type(e) for e in events] == [ResultEvent]
    assert parser.total_usage() == Usage(80, 2)


def test_result_without_usage() -> None:
    parser = ClaudeStreamParser()
    parser.feed(assistant("m1", [{"type": "text", "text": "a"}], {"input_tokens": 8, "output_tokens": 2}))
    (result,) = parser.feed(line({"type": "result", "subtype": "success", "is_error": False}))
    assert isinstance(result, ResultEvent) and result.usage is None
    assert parser.total_usage() == Usage(8, 2)


def test_zero_usage_and_odd_token_values() -> None:
    parser = ClaudeStreamParser()
    events = parser.feed(
        assistant("m1", [{"type": "text", "text": "a"}], {"input_tokens": 0, "output_tokens": 0})
    )
    assert not any(isinstance(e, UsageEvent) for e in events)
    odd = {"input_tokens": True, "output_tokens": -5, "cache_read_input_tokens": 3.9}
    parser.feed(assistant("m2", [{"type": "text", "text": "a"}], odd))  # type: ignore[arg-type]
    assert parser.total_usage() == Usage(0, 0, 0, 3)


# ------------------------------------------------------------------ shapes


def test_three_mib_line_parses() -> None:
    text = "x" * (3 * 1024 * 1024)
    events = ClaudeStreamParser().feed(assistant("big", [{"type": "text", "text": text}], None))
    assert len(events) == 1
    assert isinstance(events[0], TextEvent) and events[0].text == text


@pytest.mark.parametrize(
    "raw",
    [
        b"not json at all",
        b"[SandboxDebug] something",
        b"",
        b"   ",
        b"[1, 2, 3]",
        b'"just a string"',
        b"42",
        b"null",
        b'{"type": "assistant"',
        b"\xff\xfe\x00garbage",
        b"[" * 100_000,
    ],
)
def test_malformed_lines_become_unparsed(raw: bytes) -> None:
    events = ClaudeStreamParser().feed(raw)
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, UnparsedLine)
    assert event.raw is None
    assert event.text == raw.decode("utf-8", errors="replace")


def test_undecodable_bytes_keep_replacement_text() -> None:
    (event,) = ClaudeStreamParser().feed(b"caf\xe9 \xff")
    assert isinstance(event, UnparsedLine) and event.text == "caf\ufffd \ufffd"


def test_json_with_invalid_utf8_inside_still_parses() -> None:
    (event,) = ClaudeStreamParser().feed(b'{"type":"mystery","v":"\xff"}')
    assert isinstance(event, UnknownEvent) and event.type == "mystery"
    assert event.raw == {"type": "mystery", "v": "\ufffd"}


@pytest.mark.parametrize(
    ("obj", "vendor_type"),
    [
        ({"type": "prompt_suggestion", "suggestion": "x"}, "prompt_suggestion"),
        ({"no_type": True}, None),
        ({"type": 5}, None),
    ],
)
def test_unknown_types_keep_raw(obj: dict[str, Any], vendor_type: str | None) -> None:
    (event,) = ClaudeStreamParser().feed(line(obj))
    assert isinstance(event, UnknownEvent)
    assert event.type == vendor_type
    assert event.raw == obj


def test_assistant_with_unknown_block_keeps_an_unknown_event() -> None:
    blocks = [{"type": "text", "text": "a"}, {"type": "server_tool_use", "id": "s1", "name": "web_search"}]
    events = ClaudeStreamParser().feed(assistant("m", blocks, None))
    assert [type(e) for e in events] == [TextEvent, UnknownEvent]
    (empty,) = ClaudeStreamParser().feed(assistant("m", [], None))
    assert isinstance(empty, UnknownEvent) and empty.type == "assistant"


def test_permission_request_needs_id_and_tool() -> None:
    parser = ClaudeStreamParser()
    no_id = {
        "type": "control_request",
        "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {}},
    }
    (event,) = parser.feed(line(no_id))
    assert isinstance(event, UnknownEvent) and event.type == "control_request"
    no_tool = {"type": "control_request", "request_id": "r1", "request": {"subtype": "can_use_tool"}}
    event, answer = parser.feed(line(no_tool))
    assert isinstance(event, UnknownEvent)
    assert isinstance(answer, StdinWriteEvent) and '"request_id":"r1"' in answer.lines[0]
    assert '"subtype":"error"' in answer.lines[0]
    ok = {
        "type": "control_request",
        "request_id": "r2",
        "request": {"subtype": "can_use_tool", "tool_name": "mcp__octipus__get_work_plan", "input": "oops"},
    }
    (event,) = parser.feed(line(ok))
    assert isinstance(event, PermissionRequestEvent)
    assert (
        event.input == {} and event.tool_use_id is None and event.tool_name == "mcp__octipus__get_work_plan"
    )


def test_control_cancel_without_id_is_unknown() -> None:
    (event,) = ClaudeStreamParser().feed(line({"type": "control_cancel_request"}))
    assert isinstance(event, UnknownEvent) and event.type == "control_cancel_request"


def test_system_without_subtype_and_init_without_fields() -> None:
    parser = ClaudeStreamParser()
    (event,) = parser.feed(line({"type": "system"}))
    assert isinstance(event, StatusEvent) and event.status == "system"
    (init,) = parser.feed(line({"type": "system", "subtype": "init", "mcp_servers": [{"name": "x"}, 5, {}]}))
    assert isinstance(init, SessionEvent)
    assert init.session_id is None and init.model is None and init.tools == ()
    assert init.mcp_servers == {"x": "unknown"}


def test_mcp_tool_result_content_blocks_are_flattened() -> None:
    content = [
        {"type": "text", "text": "echo: hi"},
        {"type": "image", "source": {}},
        {"type": "other", "v": 1},
    ]
    obj = {
        "type": "user",
        "message": {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t9", "content": content, "is_error": False},
                {"type": "tool_result", "tool_use_id": "t10", "is_error": True},
            ],
        },
    }
    first, second = ClaudeStreamParser().feed(line(obj))
    assert isinstance(first, ToolResultEvent) and first.content == 'echo: hi\n[image]\n{"type":"other","v":1}'
    assert isinstance(second, ToolResultEvent) and second.content == "" and second.is_error


@pytest.mark.parametrize(
    ("content", "text"),
    [
        (None, ""),
        ("plain", "plain"),
        (["a", {"type": "text", "text": "b"}], "a\nb"),
        ({"k": "v"}, '{"k":"v"}'),
        (7, "7"),
    ],
)
def test_flatten_tool_result(content: object, text: str) -> None:
    assert flatten_tool_result(content) == text


def test_raw_is_the_decoded_object() -> None:
    obj = {"type": "system", "subtype": "init", "session_id": "s", "extra_future_field": {"a": [1]}}
    (event,) = ClaudeStreamParser().feed(line(obj))
    assert event.raw == obj


def test_new_parser_is_fresh() -> None:
    a = ClaudeCodeAdapter()
    p1, p2 = a.new_parser(), a.new_parser()
    p1.feed(assistant("m", [{"type": "text", "text": "x"}], {"input_tokens": 5}))
    assert p1.total_usage() == Usage(5) and p2.total_usage() == Usage()


# ------------------------------------------------------------------ properties

json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text()
json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
known_types = st.sampled_from(
    [
        "system",
        "assistant",
        "user",
        "control_request",
        "control_cancel_request",
        "control_response",
        "result",
        "stream_event",
        "rate_limit_event",
        "other",
    ]
)
field_names = st.sampled_from(
    [
        "subtype",
        "message",
        "request",
        "request_id",
        "usage",
        "result",
        "errors",
        "is_error",
        "session_id",
        "mcp_servers",
        "tools",
        "model",
        "error",
        "total_cost_usd",
        "isReplay",
    ]
)
nested_names = st.sampled_from(
    [
        "id",
        "content",
        "usage",
        "type",
        "text",
        "thinking",
        "input",
        "name",
        "tool_use_id",
        "tool_name",
        "subtype",
        "input_tokens",
        "output_tokens",
        "is_error",
        "status",
    ]
)
shaped_values = st.recursive(
    json_scalars | st.sampled_from(["init", "can_use_tool", "text", "tool_use", "tool_result", "thinking"]),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(nested_names, children, max_size=5),
    max_leaves=12,
)
vendor_like = st.builds(
    lambda t, fields: {"type": t, **fields},
    known_types,
    st.dictionaries(field_names, shaped_values, max_size=6),
)

quick = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@quick
@given(st.binary(max_size=2000))
def test_never_raises_on_arbitrary_bytes(data: bytes) -> None:
    events = ClaudeStreamParser().feed(data)
    assert events and all(isinstance(e, VendorEvent) for e in events)


@quick
@given(json_values)
def test_never_raises_on_arbitrary_json(value: object) -> None:
    data = json.dumps(value).encode()
    events = ClaudeStreamParser().feed(data)
    assert events and all(isinstance(e, VendorEvent) for e in events)
    if not isinstance(value, dict):
        assert all(isinstance(e, UnparsedLine) for e in events)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(vendor_like, max_size=6))
def test_vendor_like_streams_never_raise_and_usage_adds_up(objs: list[dict[str, Any]]) -> None:
    parser = ClaudeStreamParser()
    total = Usage()
    for obj in objs:
        events = parser.feed(json.dumps(obj).encode())
        assert events and all(isinstance(e, VendorEvent) for e in events)
        for event in events:
            assert json.dumps(event.raw) == json.dumps(obj)  # NaN-safe equality
            _ = event.kind  # every event has a stable kind
            if isinstance(event, UsageEvent):
                u = event.usage
                assert (
                    min(
                        u.input_tokens,
                        u.output_tokens,
                        u.cache_creation_input_tokens,
                        u.cache_read_input_tokens,
                    )
                    >= 0
                )
                total = total + u
        assert parser.total_usage() == total


# ------------------------------------------------------------------ steering acknowledgements


def _replay(text: str) -> bytes:
    return line({"type": "user", "message": {"role": "user", "content": text}, "isReplay": True})


def test_replays_acknowledge_guidance_and_the_prompts_echo_is_only_a_status(tmp_path: Path) -> None:
    """``--replay-user-messages`` echoes the launch prompt too, possibly after guidance was written
    (a stalled first model call): the prompt's echo is a status, the guidance's an acknowledgement."""
    request = LaunchRequest(binary="claude", cwd=tmp_path, run_dir=tmp_path, prompt="same words")
    parser = ClaudeStreamParser(request)
    parser.steer("same words")  # guidance with the prompt's very text
    parser.steer("also this")
    events = parse_all([_replay("same words"), _replay("also this"), _replay("same words")], parser)
    assert [type(e).__name__ for e in events] == ["StatusEvent", "SteeringAckEvent", "SteeringAckEvent"]
    assert [getattr(e, "text", None) for e in events] == [None, "also this", "same words"]
    assert all(e.kind == "steering_delivered" for e in events[1:])
    # a replay of nothing Octipus wrote (never seen on 2.1.197) stays a status
    assert parse_all([_replay("unknown")], parser)[0] == StatusEvent(
        raw=json.loads(_replay("unknown")), status="user_replay"
    )


def test_the_result_reports_its_iterations() -> None:
    result = line({"type": "result", "subtype": "success", "is_error": False, "result": "x", "num_turns": 2})
    (event,) = [e for e in parse_all([result]) if isinstance(e, ResultEvent)]
    assert event.turns == 2
    bare = line({"type": "result", "subtype": "success", "is_error": False, "result": "x", "num_turns": True})
    assert next(e for e in parse_all([bare]) if isinstance(e, ResultEvent)).turns is None


def test_guidance_replayed_together_is_acknowledged_item_by_item(tmp_path: Path) -> None:
    """Claude replays the messages it took together as one, joined by newlines (two guidances sent
    while a model call stalled; or the prompt and a guidance): each guidance in it is acknowledged."""
    parser = ClaudeStreamParser(
        LaunchRequest(binary="claude", cwd=tmp_path, run_dir=tmp_path, prompt="the prompt")
    )
    parser.steer("g1")
    parser.steer("g2\nsecond line")
    parser.steer("g3")
    events = parse_all([_replay("the prompt\ng1"), _replay("g2\nsecond line\ng3")], parser)
    assert [(type(e).__name__, getattr(e, "text", None)) for e in events] == [
        ("StatusEvent", None),
        ("SteeringAckEvent", "g1"),
        ("SteeringAckEvent", "g2\nsecond line"),
        ("SteeringAckEvent", "g3"),
    ]
    parser.steer("g4")
    (other,) = parse_all([_replay("g4\nsomething Octipus never wrote")], parser)
    assert isinstance(other, StatusEvent) and other.status == "user_replay"
    (late,) = parse_all([_replay("g4")], parser)
    assert late.kind == "steering_delivered" and getattr(late, "text", None) == "g4"


def test_the_prompt_is_pending_until_claude_replays_it(tmp_path: Path) -> None:
    """A resumed Claude answers the notification of a background task its earlier process left (a
    result of no turn) before it replays the launch prompt (2.1.197): that result does not answer it."""
    parser = ClaudeStreamParser(
        LaunchRequest(binary="claude", cwd=tmp_path, run_dir=tmp_path, prompt="And now?")
    )
    notification = line(
        {"type": "system", "subtype": "task_notification", "task_id": "b1", "status": "stopped"}
    )
    parse_all(
        [notification, line({"type": "result", "subtype": "success", "result": "", "num_turns": 0})], parser
    )
    assert parser.prompt_pending()
    parse_all([_replay("something else")], parser)
    assert parser.prompt_pending()
    parse_all([_replay("And now?")], parser)
    assert not parser.prompt_pending()
    assert not ClaudeStreamParser().prompt_pending()  # a recorded stream's: no prompt to wait for
