"""The Codex parser on streams recorded from the real binary (fixtures/codex, see record.py there)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from octipus_codex import CodexAdapter, CodexStreamParser, rpc, session_missing

from octipusd.adapter import (
    BridgeEndpoint,
    ControlCancelEvent,
    ErrorEvent,
    LaunchRequest,
    PermissionMode,
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

FIXTURES = Path(__file__).parent / "fixtures" / "codex"


def stdout(name: str) -> list[bytes]:
    return (FIXTURES / f"{name}.stdout.jsonl").read_bytes().splitlines()


def stdin(name: str) -> list[str]:
    return (FIXTURES / f"{name}.stdin.jsonl").read_text().splitlines()


def recorded_request(name: str) -> LaunchRequest | None:
    """The launch request a fixture was recorded with (record.py), or None for the lab fixtures."""
    path = FIXTURES / f"{name}.request.json"
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    bridge = data["bridge"]
    return LaunchRequest(
        binary="codex",
        cwd=Path(data["cwd"]),
        run_dir=Path("/nonexistent"),
        prompt=data["prompt"],
        vendor_session_id=data["vendor_session_id"],
        resume=data["resume"],
        permission_mode=PermissionMode(data["permission_mode"]),
        system_prompt=data["system_prompt"],
        options=data["options"],
        bridge=None if bridge is None else BridgeEndpoint(token="redacted", **bridge),
    )


def parse(lines: list[bytes], parser: CodexStreamParser | None = None) -> list[VendorEvent]:
    parser = parser or CodexAdapter().new_parser()
    return [event for line in lines for event in parser.feed(line)]


def replay(name: str, lines: list[bytes] | None = None) -> list[VendorEvent]:
    """Parse a fixture with a parser made for its recorded launch request, as the runtime does."""
    parser = CodexAdapter().new_parser(recorded_request(name))
    return parse(stdout(name) if lines is None else lines, parser)


def of(events: list[VendorEvent], kind: type[Any]) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode()


# ------------------------------------------------------------------------------ app-server


def test_shell_approved_stream() -> None:
    events = replay("app_shell_approved")
    (session,) = of(events, SessionEvent)
    assert session.mcp_servers == {"octipus": "connected"} and session.model == "mock-model"
    (result,) = of(events, ResultEvent)
    assert result.is_error is False and result.subtype == "completed"
    assert result.session_id == session.session_id
    assert result.text == "Codex mock run complete"
    assert [t.text for t in of(events, TextEvent)] == ["running", "Codex mock run complete"]
    (use,) = of(events, ToolUseEvent)
    assert use.name == "commandExecution"
    assert use.input["command"] == "echo hello-from-mock > out.txt && cat out.txt"
    # not a login shell (``allow_login_shell = false``), which would reset PATH (octipus_codex.launch)
    assert use.input["rawCommand"] == "/bin/bash -c 'echo hello-from-mock > out.txt && cat out.txt'"
    (tool_result,) = of(events, ToolResultEvent)
    assert (tool_result.tool_use_id, tool_result.content, tool_result.is_error) == (
        use.tool_use_id,
        "hello-from-mock\n",
        False,
    )
    (request,) = of(events, PermissionRequestEvent)
    assert request.request_id == "0" and request.tool_name == "commandExecution"
    assert request.tool_use_id == use.tool_use_id
    assert request.input["command"] == use.input["command"] and request.input["cwd"]
    assert of(events, ControlCancelEvent)[0].request_id == "0"  # serverRequest/resolved
    # the session is announced before the turn result, and the result is last
    assert events.index(session) < events.index(result) == len(events) - 1


def test_replaying_a_stream_sends_the_recorded_requests_in_order() -> None:
    for name in ("app_shell_approved", "app_bridge_call", "app_resume", "app_user_mcp_isolated"):
        events = replay(name)
        sent = [ln for e in of(events, StdinWriteEvent) for ln in e.lines]
        recorded = stdin(name)
        assert [json.loads(ln)["method"] for ln in sent] == [
            "thread/resume" if name == "app_resume" else "thread/start",
            "turn/start",
        ]
        # exactly what the recorder wrote after the three initial lines (permission answers aside)
        assert sent == [ln for ln in recorded[3:] if "method" in json.loads(ln)]


def test_usage_is_per_turn_and_converted() -> None:
    events = replay("app_shell_approved")
    usages = [e.usage for e in of(events, UsageEvent)]
    # step 1: 110 input of which 10 cached, 20 output; step 2: 100 input, 20 output
    assert usages == [Usage(100, 20, 0, 10), Usage(100, 20, 0, 0)]
    (result,) = of(events, ResultEvent)
    assert result.usage == Usage(200, 40, 0, 10)


def test_resumed_thread_counts_only_its_own_turn() -> None:
    lines = stdout("app_resume")
    replayed = [ln for ln in lines if b"thread/tokenUsage/updated" in ln]
    assert len(replayed) == 2  # the previous turn's notification, replayed, and this turn's
    first, second = (json.loads(ln)["params"] for ln in replayed)
    assert first["turnId"] != second["turnId"]
    parser = CodexAdapter().new_parser(recorded_request("app_resume"))
    events = parse(lines, parser)
    (result,) = of(events, ResultEvent)
    assert result.usage == parser.total_usage() == Usage(100, 20, 0, 0)
    assert second["tokenUsage"]["total"]["totalTokens"] == 240  # Codex's figure is cumulative


def test_usage_held_until_the_turn_id_is_known() -> None:
    parser = CodexStreamParser()
    usage = {
        "method": "thread/tokenUsage/updated",
        "params": {
            "threadId": "t",
            "turnId": "turn-2",
            "tokenUsage": {
                "total": {"inputTokens": 50, "outputTokens": 5},
                "last": {"inputTokens": 50, "cachedInputTokens": 20, "outputTokens": 5},
            },
        },
    }
    other = json.loads(json.dumps(usage))
    other["params"]["turnId"] = "turn-1"
    other["params"]["tokenUsage"]["total"] = {"inputTokens": 1}
    assert parser.feed(line(other)) == [] and parser.feed(line(usage)) == []
    events = parser.feed(line({"id": rpc.TURN_START_ID, "result": {"turn": {"id": "turn-2"}}}))
    assert [e.usage for e in of(events, UsageEvent)] == [Usage(30, 5, 0, 20)]
    assert parser.feed(line(usage)) == []  # the same total again is not counted twice
    assert parser.total_usage() == Usage(30, 5, 0, 20)


def test_bridge_call_stream() -> None:
    events = replay("app_bridge_call")
    (use,) = of(events, ToolUseEvent)
    assert use.name == "mcp__octipus__update_work_plan"
    assert use.input == {
        "plan": {"title": "lab plan", "steps": [{"id": "s1", "title": "check", "status": "pending"}]}
    }
    (result,) = of(events, ToolResultEvent)
    assert result.is_error is False and '"title": "lab plan"' in result.content
    assert "[octipus run context]" in result.content
    assert of(events, PermissionRequestEvent) == []  # default_tools_approval_mode = approve


def test_declined_command_is_an_error_result_but_the_turn_succeeds() -> None:
    events = replay("app_shell_declined")
    (tool_result,) = of(events, ToolResultEvent)
    assert tool_result.is_error and tool_result.content == "declined"
    (result,) = of(events, ResultEvent)
    assert result.is_error is False and result.text == "Codex mock run complete"


def test_cancelled_turn_is_an_interrupted_error_result() -> None:
    events = replay("app_turn_cancelled")
    (result,) = of(events, ResultEvent)
    assert result.is_error and result.subtype == "interrupted"
    assert result.errors == ("the Codex turn was interrupted",)


def test_mcp_tool_elicitation_is_a_permission_request() -> None:
    events = replay("app_mcp_elicitation_accept")
    (request,) = of(events, PermissionRequestEvent)
    assert request.tool_name == "mcp__octipus__update_work_plan"
    assert request.input == {
        "plan": {"title": "lab plan", "steps": [{"id": "s1", "title": "check", "status": "pending"}]}
    }
    recorded_answer = json.loads(stdin("app_mcp_elicitation_accept")[-1])
    from octipusd.adapter import PermissionDecision

    assert (
        json.loads(CodexAdapter().encode_permission_response(request, PermissionDecision(True)))
        == recorded_answer
    )
    declined = replay("app_mcp_elicitation_decline")
    (tool_result,) = of(declined, ToolResultEvent)
    assert tool_result.is_error and tool_result.content == "user rejected MCP tool call"
    (req,) = of(declined, PermissionRequestEvent)
    assert json.loads(
        CodexAdapter().encode_permission_response(req, PermissionDecision(False))
    ) == json.loads(stdin("app_mcp_elicitation_decline")[-1])


def test_warnings_are_not_failures() -> None:
    events = replay("app_shell_declined")  # recorded where bubblewrap was not installed
    warnings = of(events, ErrorEvent)
    assert any("Model metadata for `mock-model` not found" in w.message for w in warnings)
    assert any("bubblewrap" in w.message for w in warnings)
    assert all(w.fatal is False for w in warnings)
    assert of(events, ResultEvent)[0].is_error is False


def test_model_error_fails_the_turn() -> None:
    events = replay("app_model_error")
    fatal = [e for e in of(events, ErrorEvent) if e.fatal]
    assert len(fatal) == 1 and "mock: bad request" in fatal[0].message
    (result,) = of(events, ResultEvent)
    assert result.is_error and result.subtype == "failed" and "mock: bad request" in result.errors[0]


def test_bad_bridge_token_reports_the_bridge_failed() -> None:
    events = replay("app_bad_token")
    (session,) = of(events, SessionEvent)
    assert session.session_id is None and session.mcp_servers == {"octipus": "failed"}
    (result,) = of(events, ResultEvent)
    assert result.is_error and result.subtype == "thread_start_failed"
    assert "required MCP servers failed to initialize: octipus" in result.errors[0]
    assert not session_missing(result)
    assert events.index(session) < events.index(result)
    (failure,) = of(events, RunFailureEvent)  # the parser fails the run itself, naming the status
    assert events.index(session) < events.index(failure) < events.index(result)
    assert "'octipus' as 'failed'" in failure.reason


def test_bridge_never_ready_fails_the_run_when_the_session_is_announced_at_the_turn_end() -> None:
    # the bridge accepted the connection but never answered: Codex reports it "starting" and never "ready"
    lines = [
        x for x in stdout("app_shell_approved") if b'"status":"ready"' not in x or b"startupStatus" not in x
    ]
    events = replay("app_shell_approved", lines)
    (session,) = of(events, SessionEvent)
    assert session.mcp_servers == {"octipus": "pending"}
    (failure,) = of(events, RunFailureEvent)
    assert "'octipus' as 'pending'" in failure.reason
    (result,) = of(events, ResultEvent)
    assert events.index(failure) < events.index(result)
    assert of(replay("app_shell_approved"), RunFailureEvent) == []  # ready: connected, no failure


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("app_resume_unknown", "no rollout found for thread id 01a22922-0000-7000-8000-000000000000"),
        ("app_resume_not_uuid", "invalid session id"),
    ],
)
def test_unknown_resume_is_the_missing_session_signal(name: str, text: str) -> None:
    events = replay(name)
    (result,) = of(events, ResultEvent)
    assert result.is_error and result.subtype == "resume_failed"
    assert text in result.errors[0]
    assert CodexAdapter().session_missing(result)
    assert of(events, SessionEvent) == []  # nothing confirms a session


def test_resume_answered_with_another_thread_is_a_cold_start() -> None:
    lines = stdout("app_resume")
    index = next(i for i, ln in enumerate(lines) if b'"id":"octipus/thread"' in ln)
    response = json.loads(lines[index])
    requested = response["result"]["thread"]["id"]
    response["result"]["thread"]["id"] = "01a22999-ffff-7fff-8fff-ffffffffffff"
    lines[index] = line(response)
    events = replay("app_resume", lines)
    (cold,) = [e for e in of(events, StatusEvent) if e.status.startswith("cold_start")]
    assert requested in cold.status and "01a22999-ffff-7fff-8fff-ffffffffffff" in cold.status
    (session,) = of(events, SessionEvent)
    assert session.session_id == "01a22999-ffff-7fff-8fff-ffffffffffff"
    assert events.index(cold) < events.index(session)
    (turn,) = [json.loads(ln) for e in of(events, StdinWriteEvent) for ln in e.lines if "turn/start" in ln]
    assert turn["params"]["threadId"] == "01a22999-ffff-7fff-8fff-ffffffffffff"
    assert of(events, ResultEvent)[0].session_id == "01a22999-ffff-7fff-8fff-ffffffffffff"


def test_user_mcp_servers_are_switched_off() -> None:
    events = replay("app_user_mcp_isolated")
    (write,) = [e for e in of(events, StdinWriteEvent) if "thread/start" in e.lines[0]]
    servers = json.loads(write.lines[0])["params"]["config"]["mcp_servers"]
    assert servers["lab"] == {"enabled": False} and servers["octipus"]["required"] is True
    (session,) = of(events, SessionEvent)
    assert session.mcp_servers == {"octipus": "connected"}  # no status for "lab": not started


def test_unsupported_server_requests_are_answered_with_an_error() -> None:
    parser = CodexStreamParser()
    request = {"id": 7, "method": "item/tool/requestUserInput", "params": {"questions": []}}
    unknown, write = parser.feed(line(request))
    assert isinstance(unknown, UnknownEvent) and unknown.type == "item/tool/requestUserInput"
    assert isinstance(write, StdinWriteEvent)
    answer = json.loads(write.lines[0])
    assert answer["id"] == 7 and answer["error"]["code"] == -32601
    other = {"id": "e1", "method": "mcpServer/elicitation/request", "params": {"mode": "url", "_meta": None}}
    _, reply = parser.feed(line(other))
    assert isinstance(reply, StdinWriteEvent)
    assert json.loads(reply.lines[0]) == {
        "id": "e1",
        "result": {"action": "decline", "content": None, "_meta": None},
    }


def test_file_change_and_permissions_requests_from_the_schema() -> None:
    parser = CodexStreamParser()
    item = {
        "type": "fileChange",
        "id": "call_1",
        "status": "inProgress",
        "changes": [{"path": "/w/a.py", "kind": {"type": "add"}, "diff": "+x"}],
    }
    (use,) = parser.feed(
        line({"method": "item/started", "params": {"item": item, "threadId": "t", "turnId": "u"}})
    )
    assert isinstance(use, ToolUseEvent) and use.name == "fileChange" and use.input["path"] == "/w/a.py"
    (req,) = parser.feed(
        line(
            {
                "id": 3,
                "method": "item/fileChange/requestApproval",
                "params": {"itemId": "call_1", "reason": "why"},
            }
        )
    )
    assert isinstance(req, PermissionRequestEvent) and req.tool_name == "fileChange"
    assert req.input["path"] == "/w/a.py" and req.input["reason"] == "why" and req.request_id == "3"
    (perm,) = parser.feed(
        line(
            {
                "id": 4,
                "method": "item/permissions/requestApproval",
                "params": {
                    "itemId": "x",
                    "cwd": "/w",
                    "reason": None,
                    "permissions": {"network": {"enabled": True}, "fileSystem": None},
                },
            }
        )
    )
    assert isinstance(perm, PermissionRequestEvent) and perm.tool_name == "permissions"
    (legacy,) = parser.feed(
        line(
            {
                "id": 5,
                "method": "execCommandApproval",
                "params": {"callId": "c", "command": ["/bin/bash", "-lc", "git status"], "cwd": "/w"},
            }
        )
    )
    assert isinstance(legacy, PermissionRequestEvent)
    assert legacy.tool_name == "commandExecution" and legacy.input["command"] == "git status"


# ------------------------------------------------------------------------------ exec


def test_exec_shell_stream() -> None:
    events = replay("exec_shell")
    (session,) = of(events, SessionEvent)
    assert session.mcp_servers == {"octipus": "connected"}
    (use,) = of(events, ToolUseEvent)
    assert (
        use.name == "commandExecution"
        and use.input["command"] == "echo hello-from-mock > out.txt && cat out.txt"
    )
    (tool_result,) = of(events, ToolResultEvent)
    assert tool_result.content == "hello-from-mock\n" and not tool_result.is_error
    (warning,) = of(events, ErrorEvent)  # the "error" item is only a warning
    assert "Model metadata" in warning.message and warning.fatal is False
    (result,) = of(events, ResultEvent)
    assert not result.is_error and result.text == "Codex mock run complete"
    assert result.session_id == session.session_id and result.usage == Usage(200, 40, 0, 10)


def test_exec_bridge_call_stream() -> None:
    events = replay("exec_bridge_call")
    (use,) = of(events, ToolUseEvent)
    assert use.name == "mcp__octipus__update_work_plan"
    (tool_result,) = of(events, ToolResultEvent)
    assert not tool_result.is_error and "lab plan" in tool_result.content


def test_exec_usage_is_the_thread_total_on_a_resume_without_the_thread_usage() -> None:
    events = replay("exec_resume")
    (result,) = of(events, ResultEvent)
    # two turns of 100 + 20 tokens: exec reports the thread's cumulative figure (observed.md §2.3)
    assert result.usage == Usage(200, 40, 0, 0)


def test_exec_usage_is_the_turns_own_given_the_thread_usage() -> None:
    request = recorded_request("exec_resume")
    assert request is not None and CodexAdapter().usage_is_cumulative(request)
    parser = CodexAdapter().new_parser(replace(request, thread_usage=Usage(100, 20, 0, 0)))
    events = parse(stdout("exec_resume"), parser)
    (result,) = of(events, ResultEvent)
    assert result.usage == Usage(100, 20, 0, 0)  # the turn's own, not the thread's 200/40
    assert [e.usage for e in of(events, UsageEvent)] == [Usage(100, 20, 0, 0)]
    assert parser.total_usage() == Usage(100, 20, 0, 0)
    # a stored figure above the vendor's (e.g. a run counted twice) clamps at 0, never negative
    parser = CodexAdapter().new_parser(replace(request, thread_usage=Usage(500, 10, 0, 0)))
    (result,) = of(parse(stdout("exec_resume"), parser), ResultEvent)
    assert result.usage == Usage(0, 30, 0, 0)


def test_exec_resume_answered_with_another_thread_counts_from_zero() -> None:
    request = replace(DRIVING, options={"transport": "exec"}, thread_usage=Usage(100, 20, 0, 0))
    parser = CodexStreamParser(request)
    parser.feed(line({"type": "thread.started", "thread_id": "01a22999-ffff-7fff-8fff-ffffffffffff"}))
    events = parser.feed(line({"type": "turn.completed", "usage": {"input_tokens": 30, "output_tokens": 5}}))
    (result,) = of(events, ResultEvent)
    assert result.usage == Usage(30, 5, 0, 0)


def test_exec_usage_delta_within_one_process() -> None:
    parser = CodexStreamParser()
    completed = {
        "type": "turn.completed",
        "usage": {"input_tokens": 200, "cached_input_tokens": 0, "output_tokens": 40},
    }
    first = parser.feed(line(completed))
    completed["usage"] = {"input_tokens": 300, "cached_input_tokens": 50, "output_tokens": 60}
    second = parser.feed(line(completed))
    assert of(first, UsageEvent)[0].usage == Usage(200, 40, 0, 0)
    assert of(second, UsageEvent)[0].usage == Usage(50, 20, 0, 50)
    assert parser.total_usage() == Usage(250, 60, 0, 50)


def test_exec_model_error() -> None:
    events = replay("exec_model_error")
    assert all(not e.fatal for e in of(events, ErrorEvent))
    (result,) = of(events, ResultEvent)
    assert result.is_error and "mock: bad request" in result.errors[0]


def test_exec_reasoning_and_unknown_items() -> None:
    parser = CodexStreamParser()
    (thinking,) = parser.feed(
        line({"type": "item.completed", "item": {"id": "i", "type": "reasoning", "text": "hmm"}})
    )
    assert isinstance(thinking, ThinkingEvent) and thinking.text == "hmm"
    (unknown,) = parser.feed(line({"type": "item.completed", "item": {"id": "j", "type": "novel"}}))
    assert isinstance(unknown, UnknownEvent)
    (other,) = parser.feed(line({"type": "brand.new"}))
    assert isinstance(other, UnknownEvent) and other.type == "brand.new"


# ------------------------------------------------------------------------------ robustness


def test_non_json_lines() -> None:
    parser = CodexStreamParser()
    (unparsed,) = parser.feed(b"\xff\xfe not json")
    assert isinstance(unparsed, UnparsedLine) and "not json" in unparsed.text
    (array,) = parser.feed(b"[1, 2]")
    assert isinstance(array, UnparsedLine)
    assert parser.finish(0) == []


quick = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)

METHODS = [
    "item/started",
    "item/completed",
    "turn/completed",
    "turn/started",
    "thread/tokenUsage/updated",
    "mcpServer/startupStatus/updated",
    "serverRequest/resolved",
    "error",
    "warning",
    "item/commandExecution/requestApproval",
    "mcpServer/elicitation/request",
    "item/permissions/requestApproval",
    "execCommandApproval",
    "applyPatchApproval",
]
TYPES = ["thread.started", "turn.completed", "turn.failed", "item.started", "item.completed", "error"]
ITEM_TYPES = [
    "commandExecution",
    "mcpToolCall",
    "fileChange",
    "agentMessage",
    "reasoning",
    "webSearch",
    "command_execution",
    "mcp_tool_call",
    "file_change",
    "agent_message",
]

vendor_like = st.one_of(
    st.fixed_dictionaries(
        {"method": st.sampled_from(METHODS)},
        optional={
            "id": json_values,
            "params": st.one_of(
                json_values,
                st.fixed_dictionaries(
                    {},
                    optional={
                        "item": st.one_of(
                            json_values,
                            st.fixed_dictionaries(
                                {"type": st.sampled_from(ITEM_TYPES)},
                                optional={
                                    "id": json_values,
                                    "status": json_values,
                                    "command": json_values,
                                    "changes": json_values,
                                    "arguments": json_values,
                                    "result": json_values,
                                    "error": json_values,
                                },
                            ),
                        ),
                        "turn": json_values,
                        "turnId": json_values,
                        "tokenUsage": json_values,
                        "_meta": json_values,
                        "requestId": json_values,
                        "command": json_values,
                    },
                ),
            ),
        },
    ),
    st.fixed_dictionaries(
        {
            "id": st.one_of(
                json_values,
                st.sampled_from([rpc.INITIALIZE_ID, rpc.TURN_START_ID, rpc.CONFIG_READ_ID, rpc.THREAD_ID]),
            )
        },
        optional={"result": json_values, "error": json_values},
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(TYPES)},
        optional={
            "item": st.one_of(json_values, st.fixed_dictionaries({"type": st.sampled_from(ITEM_TYPES)})),
            "usage": json_values,
            "thread_id": json_values,
            "error": json_values,
        },
    ),
)


@quick
@given(st.binary(max_size=2000))
def test_parser_never_raises_on_bytes(data: bytes) -> None:
    parser = CodexStreamParser()
    for chunk in data.split(b"\n"):
        assert isinstance(parser.feed(chunk), list)


@quick
@given(json_values)
def test_parser_never_raises_on_json(value: Any) -> None:
    assert isinstance(CodexStreamParser().feed(json.dumps(value).encode()), list)


DRIVING = LaunchRequest(
    binary="codex",
    cwd=Path("/w"),
    run_dir=Path("/r"),
    prompt="p",
    vendor_session_id="01a22922-0000-7000-8000-000000000000",
    resume=True,
    bridge=BridgeEndpoint(url="http://127.0.0.1:1/mcp", token="t"),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(vendor_like, max_size=8), st.sampled_from([None, DRIVING]))
def test_parser_never_raises_on_vendor_like_lines(objects: list[Any], request: LaunchRequest | None) -> None:
    parser = CodexStreamParser(request)
    total = Usage()
    for obj in objects:
        for event in parser.feed(json.dumps(obj).encode()):
            if isinstance(event, UsageEvent):
                total = total + event.usage
    assert parser.total_usage() == total


def test_recorded_streams_cut_anywhere_never_raise() -> None:
    for path in sorted(FIXTURES.glob("*.stdout.jsonl")):
        for raw in path.read_bytes().splitlines():
            parser = CodexStreamParser()
            for cut in (1, len(raw) // 2, len(raw) - 1):
                assert isinstance(parser.feed(raw[:cut]), list)


def test_parser_without_its_request_only_parses() -> None:
    events = parse(stdout("app_shell_approved"))
    assert of(events, StdinWriteEvent) == []  # nothing to build the thread and turn requests from
    assert any(isinstance(e, UnknownEvent) and e.type == "response" for e in events)
    assert of(events, ResultEvent)[0].is_error is False  # the stream itself still parses


def test_exec_session_names_the_requested_bridge_and_flags_a_cold_start() -> None:
    thread = {"type": "thread.started", "thread_id": "01a22999-ffff-7fff-8fff-ffffffffffff"}
    no_bridge = replace(DRIVING, bridge=None, resume=False, options={"transport": "exec"})
    (session,) = CodexStreamParser(no_bridge).feed(line(thread))
    assert isinstance(session, SessionEvent) and session.mcp_servers == {}
    cold, announced = CodexStreamParser(replace(DRIVING, options={"transport": "exec"})).feed(line(thread))
    assert isinstance(cold, StatusEvent) and cold.status.startswith("cold_start")
    assert isinstance(announced, SessionEvent) and announced.mcp_servers == {"octipus": "connected"}
    assert announced.session_id == thread["thread_id"]
