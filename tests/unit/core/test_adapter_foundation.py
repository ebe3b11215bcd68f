"""The adapter foundation: the one usage subtraction and the declared vendor facts' defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from octipus_antigravity import AntigravityAdapter
from octipus_claude_code import ClaudeCodeAdapter
from octipus_codex import CodexAdapter
from octipus_vibe import VibeAdapter

from octipusd.adapter import (
    Adapter,
    AdapterDefaults,
    ControlCancelEvent,
    EventKind,
    LaunchRequest,
    ResultEvent,
    RunFailureEvent,
    SessionEvent,
    StreamParserDefaults,
    TextEvent,
    ToolUseEvent,
    Usage,
    VendorEvent,
)
from octipusd.adapterkit import decode_line, load_object
from octipusd.errors import AdapterError


def test_usage_subtraction_is_field_wise_and_clamped_at_zero() -> None:
    total = Usage(300, 40, 5, 60, estimated=True)
    assert total - Usage(100, 10, 0, 20) == Usage(200, 30, 5, 40, estimated=True)
    assert total - Usage(500, 50, 9, 99) == Usage(0, 0, 0, 0, estimated=True)
    assert Usage(1, 2, 3, 4) - Usage(estimated=True) == Usage(1, 2, 3, 4)  # estimated is the minuend's
    assert (total - Usage(100, 10, 0, 20)) + Usage(100, 10, 0, 20) == total


def test_run_failure_is_a_stored_event_kind() -> None:
    event = RunFailureEvent(raw={"type": "system"}, reason="the bridge is pending")
    assert event.kind is EventKind.RUN_FAILURE and str(event.kind) == "run_failure"


def test_defaults_declare_the_common_vendor(tmp_path: Path) -> None:
    class Plain(AdapterDefaults):
        supports_resume = True
        display_name = "Plain CLI"

    request = LaunchRequest(binary="x", cwd=tmp_path, run_dir=tmp_path, prompt="p", resume=True)
    plain = Plain()
    assert plain.resumable({"transport": "any"}) is True
    assert plain.usage_is_cumulative(request) is False
    assert plain.stderr_session_missing("no rollout found for thread id x") is False
    assert plain.encode_interrupt("r1") is None
    assert plain.capabilities({"transport": "any"}) is None
    assert plain.check_additive_flags([]) == ()
    with pytest.raises(AdapterError, match=r"'--x' is not allowed: Plain CLI declares no additive flags"):
        plain.check_additive_flags(["--x"])
    assert (plain.binary_env, plain.space_mode, dict(plain.tool_aliases)) == (None, None, {})
    assert StreamParserDefaults().steer("guidance") is None
    assert StreamParserDefaults().prompt_pending() is False
    assert plain.after_result(TextEvent(raw=None, text="late")) is False


@pytest.mark.parametrize(
    "adapter", [ClaudeCodeAdapter(), CodexAdapter(), VibeAdapter(), AntigravityAdapter()]
)
def test_every_builtin_adapter_declares_the_protocol(adapter: Adapter, tmp_path: Path) -> None:
    assert isinstance(adapter, Adapter)
    parser = adapter.new_parser(None)
    assert isinstance(parser, StreamParserDefaults)
    request = LaunchRequest(binary="x", cwd=tmp_path, run_dir=tmp_path, prompt="p")
    assert adapter.usage_is_cumulative(request) is False  # a first turn never reports earlier turns
    row = adapter.capabilities({})
    assert row is not None and all(dataclasses.astuple(row))
    assert adapter.binary_env is not None and adapter.binary_env.startswith("OCTIPUS_")


def test_the_vendors_that_differ_override_the_defaults(tmp_path: Path) -> None:
    resumed_exec = LaunchRequest(
        binary="codex",
        cwd=tmp_path,
        run_dir=tmp_path,
        prompt="p",
        vendor_session_id="01a22922-0000-7000-8000-000000000000",
        resume=True,
        options={"transport": "exec"},
    )
    assert CodexAdapter().usage_is_cumulative(resumed_exec)
    assert CodexAdapter().stderr_session_missing("Error: no rollout found for thread id x (code -32600)")
    assert ClaudeCodeAdapter().encode_interrupt("r1") is not None
    assert AntigravityAdapter().encode_interrupt("r1") is None
    assert VibeAdapter().resumable({"transport": "headless"}) is False and VibeAdapter().resumable({})
    assert ClaudeCodeAdapter().new_parser(None).steer("more") is not None
    assert CodexAdapter().tool_aliases["commandExecution"] == "Bash" and not ClaudeCodeAdapter().tool_aliases
    assert VibeAdapter().space_mode is None and CodexAdapter().space_mode is not None
    assert CodexAdapter().capabilities({"transport": "exec"}) != CodexAdapter().capabilities({})


@pytest.mark.parametrize(
    ("adapter", "kept"),
    [
        (ClaudeCodeAdapter(), {SessionEvent}),  # it announces each turn it starts, the prompt's too
        (CodexAdapter(), {ControlCancelEvent}),  # serverRequest/resolved after an interrupted turn
        (VibeAdapter(), set()),
        (AntigravityAdapter(), set()),
    ],
)
def test_what_may_follow_a_final_result_is_declared(adapter: Adapter, kept: set[type[VendorEvent]]) -> None:
    after = [
        SessionEvent(raw=None, session_id="s"),
        ControlCancelEvent(raw=None, request_id="r"),
        TextEvent(raw=None, text="late"),
        ToolUseEvent(raw=None, tool_use_id="t", name="Bash", input={}),
        ResultEvent(raw=None, is_error=False, subtype="success", text="late"),
    ]
    assert {type(e) for e in after if adapter.after_result(e)} == kept


def test_lines_are_decoded_and_objects_loaded_without_raising() -> None:
    assert decode_line(b"caf\xc3\xa9 \xff") == "café \ufffd"
    assert decode_line(memoryview(b"ok")) == "ok" and decode_line("text") == "text"
    released = memoryview(b"gone")
    released.release()
    assert decode_line(released).startswith("<released memory")
    odd = object()
    assert decode_line(odd) == repr(odd)  # type: ignore[arg-type]  # no buffer: its repr
    assert load_object('{"type": "x"}') == {"type": "x"}
    assert load_object("[1, 2]") is None and load_object("not json") is None
    assert load_object("[" * 100_000 + "]" * 100_000) is None  # nested too deep
