"""Codex launch: argv, environment and first stdin lines of both transports (no binary needed)."""

from __future__ import annotations

import json
import tomllib
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from octipus_codex import (
    ALLOWED_ADDITIVE_FLAGS,
    BRIDGE_TOKEN_ENV,
    QUIET_FLAGS,
    CodexAdapter,
    normalize_additive_flags,
    rpc,
    toml_string,
)
from octipus_codex.launch import EXEC_INLINE_MAX_BYTES, app_server_plan

from octipusd.adapter import (
    Adapter,
    BridgeEndpoint,
    LaunchRequest,
    LaunchSpec,
    PermissionMode,
    StdinMode,
    load_adapters,
)
from octipusd.adapter_launch import vendor_launch
from octipusd.errors import AdapterError

TOKEN = "capability-Zx9_-secret-token-value"
THREAD = "01a22922-dcdf-70f0-b775-bfb16a2a24ff"
BRIDGE = BridgeEndpoint(url="http://127.0.0.1:40001/mcp", token=TOKEN)


@pytest.fixture
def request_(tmp_path: Path) -> LaunchRequest:
    return LaunchRequest(
        binary="/opt/codex",
        cwd=tmp_path / "ws",
        run_dir=tmp_path / "run",
        prompt="fix the bug",
        bridge=BRIDGE,
        env={"PATH": "/usr/bin", "HOME": "/home/u"},
    )


def exec_request(request: LaunchRequest, **changes: Any) -> LaunchRequest:
    return replace(request, options={"transport": "exec"}, **changes)


def lines(spec: LaunchSpec) -> list[dict[str, Any]]:
    return [json.loads(line) for line in spec.initial_input]


def plan_for(request: LaunchRequest) -> rpc.Plan:
    """The requests the parser of this launch will send (after checking the launch builds)."""
    CodexAdapter().build_launch(request)
    return app_server_plan(request)


# ------------------------------------------------------------------------------ registry


def test_adapter_attributes_and_protocol() -> None:
    adapter = CodexAdapter()
    assert isinstance(adapter, Adapter)
    assert (adapter.name, adapter.setting_key, adapter.default_binary) == ("codex", "codexCli", "codex")
    assert adapter.supports_resume is True
    assert adapter.new_session_id() is None
    assert adapter.version_argv("/x/codex") == ("/x/codex", "--version")
    assert adapter.parse_version("codex-cli 0.171.0\n") == "0.171.0"


def test_entry_point_registers_codex() -> None:
    errors: list[str] = []
    adapters = load_adapters(errors)
    assert isinstance(adapters.get("codex"), CodexAdapter), errors


# ------------------------------------------------------------------------------ app-server


def test_app_server_is_the_default_transport(request_: LaunchRequest) -> None:
    spec = CodexAdapter().build_launch(request_)
    assert spec.argv == ("/opt/codex", "app-server", *QUIET_FLAGS)
    assert "--disable" in spec.argv and "remote_plugin" in spec.argv
    assert spec.stdin_mode is StdinMode.STREAM
    assert spec.cwd == request_.cwd
    assert spec.secrets == (TOKEN,)


def test_app_server_initial_input_is_initialize_initialized_config_read(request_: LaunchRequest) -> None:
    spec = CodexAdapter().build_launch(request_)
    init, initialized, config_read = lines(spec)
    assert init["method"] == "initialize" and init["id"] == rpc.INITIALIZE_ID
    assert init["params"]["clientInfo"]["name"] == "octipus"
    assert initialized == {"method": "initialized"}
    assert config_read == {
        "id": rpc.CONFIG_READ_ID,
        "method": "config/read",
        "params": {"cwd": str(request_.cwd)},
    }
    assert all("jsonrpc" not in line for line in lines(spec))


def test_plan_carries_thread_start_with_sandbox_bridge_and_prompt(request_: LaunchRequest) -> None:
    plan = plan_for(replace(request_, model="gpt-x", system_prompt="be brief"))
    assert plan.thread_method == "thread/start"
    assert plan.thread_params == {
        "cwd": str(request_.cwd),
        "approvalPolicy": "untrusted",
        "approvalsReviewer": "user",
        "sandbox": "workspace-write",
        "config": {
            "mcp_servers": {
                "octipus": {
                    "url": BRIDGE.url,
                    "bearer_token_env_var": BRIDGE_TOKEN_ENV,
                    "required": True,
                    "default_tools_approval_mode": "approve",
                    "tool_timeout_sec": 7200.0,  # Codex's own default is 60 s
                }
            },
            "allow_login_shell": False,  # a login shell would lose the bridge helper's PATH entry
        },
        "model": "gpt-x",
        "developerInstructions": "be brief",
    }
    assert plan.turn_params == {"input": [{"type": "text", "text": "fix the bug", "text_elements": []}]}
    assert plan.bridge == "octipus" and plan.resume is None


def test_resume_sends_sandbox_and_bridge_again(request_: LaunchRequest) -> None:
    plan = plan_for(replace(request_, resume=True, vendor_session_id=THREAD))
    assert plan.thread_method == "thread/resume"
    assert plan.thread_params["threadId"] == THREAD
    assert plan.thread_params["sandbox"] == "workspace-write"
    assert plan.thread_params["approvalPolicy"] == "untrusted"
    assert "octipus" in plan.thread_params["config"]["mcp_servers"]
    assert plan.thread_params["excludeTurns"] is True
    assert plan.resume == THREAD


def test_resume_without_an_id_is_refused(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="thread id"):
        CodexAdapter().build_launch(replace(request_, resume=True))


@pytest.mark.parametrize(
    ("mode", "sandbox", "policy"),
    [
        (PermissionMode.WORKSPACE, "workspace-write", "untrusted"),
        (PermissionMode.FULL, "danger-full-access", "never"),
        (PermissionMode.PLAN, "read-only", "never"),
        (PermissionMode.DEFAULT, "read-only", "untrusted"),
    ],
)
def test_sandbox_and_approval_per_mode(
    request_: LaunchRequest, mode: PermissionMode, sandbox: str, policy: str
) -> None:
    plan = plan_for(replace(request_, permission_mode=mode))
    assert (plan.thread_params["sandbox"], plan.thread_params["approvalPolicy"]) == (sandbox, policy)
    argv = CodexAdapter().build_launch(exec_request(request_, permission_mode=mode)).argv
    assert f"--sandbox={sandbox}" in argv


def test_no_bridge_means_no_mcp_config_and_no_token(request_: LaunchRequest) -> None:
    spec = CodexAdapter().build_launch(replace(request_, bridge=None))
    plan = plan_for(replace(request_, bridge=None))
    assert "config" not in plan.thread_params and plan.bridge is None
    assert BRIDGE_TOKEN_ENV not in spec.env and spec.secrets == ()
    exec_spec = CodexAdapter().build_launch(exec_request(request_, bridge=None))
    assert not any("mcp_servers" in a or "login_shell" in a for a in exec_spec.argv)


def test_thread_request_switches_off_the_users_other_mcp_servers(request_: LaunchRequest) -> None:
    plan = plan_for(request_)
    line = json.loads(rpc.thread_request(plan, ("lab", "dot.server", "octipus")))
    servers = line["params"]["config"]["mcp_servers"]
    assert servers["lab"] == {"enabled": False} and servers["dot.server"] == {"enabled": False}
    assert servers["octipus"]["url"] == BRIDGE.url  # the bridge itself is never switched off
    assert line["id"] == rpc.THREAD_ID and line["method"] == "thread/start"


# ------------------------------------------------------------------------------ exec


def test_exec_argv(request_: LaunchRequest) -> None:
    spec = CodexAdapter().build_launch(exec_request(request_, model="gpt-x"))
    assert spec.argv[:4] == ("/opt/codex", "exec", "--json", "--skip-git-repo-check")
    assert spec.argv[4 : 4 + len(QUIET_FLAGS)] == QUIET_FLAGS
    assert "--sandbox=workspace-write" in spec.argv and "--model=gpt-x" in spec.argv
    configs = [spec.argv[i + 1] for i, a in enumerate(spec.argv) if a == "-c"]
    assert f'mcp_servers.octipus.url="{BRIDGE.url}"' in configs
    assert 'mcp_servers.octipus.bearer_token_env_var="OCTIPUS_BRIDGE_TOKEN"' in configs
    assert "mcp_servers.octipus.required=true" in configs
    assert 'mcp_servers.octipus.default_tools_approval_mode="approve"' in configs
    assert "mcp_servers.octipus.tool_timeout_sec=7200.0" in configs
    assert "allow_login_shell=false" in configs
    assert spec.argv[-2:] == ("--", "fix the bug")
    assert "resume" not in spec.argv
    assert spec.stdin_mode is StdinMode.DEVNULL and spec.initial_input == ()


def test_exec_resume_puts_the_thread_before_the_prompt(request_: LaunchRequest) -> None:
    spec = CodexAdapter().build_launch(exec_request(request_, resume=True, vendor_session_id=THREAD))
    assert spec.argv[-4:] == ("resume", THREAD, "--", "fix the bug")


def test_exec_resume_refuses_a_non_uuid(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="not a UUID"):
        CodexAdapter().build_launch(exec_request(request_, resume=True, vendor_session_id="my-thread"))


def test_exec_prompt_starting_with_a_dash_stays_a_prompt(request_: LaunchRequest) -> None:
    spec = CodexAdapter().build_launch(exec_request(request_, prompt="--help me"))
    assert spec.argv[-2:] == ("--", "--help me")


def test_exec_refuses_a_prompt_too_long_for_argv(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="app-server"):
        CodexAdapter().build_launch(exec_request(request_, prompt="x" * (EXEC_INLINE_MAX_BYTES + 1)))
    # the app-server transport sends it on stdin
    plan = plan_for(replace(request_, prompt="x" * (EXEC_INLINE_MAX_BYTES + 1)))
    assert plan.turn_params["input"][0]["text"] == "x" * (EXEC_INLINE_MAX_BYTES + 1)


def test_exec_system_prompt_is_developer_instructions_as_toml(request_: LaunchRequest) -> None:
    text = 'line "one"\n\\two\x7f'
    spec = CodexAdapter().build_launch(exec_request(request_, system_prompt=text))
    (value,) = [a for a in spec.argv if a.startswith("developer_instructions=")]
    assert tomllib.loads(value)["developer_instructions"] == text


# ------------------------------------------------------------------------------ both


@pytest.mark.parametrize("transport", [None, "app-server", "exec"])
def test_token_only_in_the_child_environment(request_: LaunchRequest, transport: str | None) -> None:
    options = {} if transport is None else {"transport": transport}
    spec = vendor_launch(CodexAdapter(), replace(request_, options=options), helper="/opt/octipus/bin/x")
    assert spec.env[BRIDGE_TOKEN_ENV] == TOKEN
    assert spec.env["PATH"] == "/usr/bin:/opt/octipus/bin" and spec.env["HOME"] == "/home/u"
    assert all(TOKEN not in a for a in spec.argv)
    assert all(TOKEN not in line for line in spec.initial_input)
    assert spec.files == {}
    assert TOKEN in spec.secrets


def test_unknown_transport_is_refused(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="unknown Codex transport 'mcp'"):
        CodexAdapter().build_launch(replace(request_, options={"transport": "mcp"}))


def test_other_options_are_ignored(request_: LaunchRequest) -> None:
    spec = CodexAdapter().build_launch(replace(request_, options={"inheritApiKeys": True, "x": 1}))
    assert spec.argv[1] == "app-server"


@pytest.mark.parametrize(
    "bridge",
    [
        BridgeEndpoint(url="ftp://127.0.0.1/mcp", token=TOKEN),
        BridgeEndpoint(url=BRIDGE.url, token=TOKEN, server_name="oct.ipus"),
        BridgeEndpoint(url=BRIDGE.url, token="has space"),
        BridgeEndpoint(url=BRIDGE.url, token=""),
    ],
)
def test_invalid_bridge_is_refused_without_leaking_the_token(
    request_: LaunchRequest, bridge: BridgeEndpoint
) -> None:
    with pytest.raises(AdapterError) as info:
        CodexAdapter().build_launch(replace(request_, bridge=bridge))
    assert TOKEN not in str(info.value)


def test_unknown_permission_mode_is_refused(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="unknown permission mode"):
        CodexAdapter().build_launch(replace(request_, permission_mode="yolo"))  # type: ignore[arg-type]


def test_nul_in_prompt_is_refused_for_exec(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="NUL"):
        CodexAdapter().build_launch(exec_request(request_, prompt="a\x00b"))


# ------------------------------------------------------------------------------ additive flags


def test_additive_flags_normalized() -> None:
    flags = ["--strict-config", "--color", "never", "--strict-config", "--color=never"]
    assert normalize_additive_flags(flags) == ("--strict-config", "--color=never")
    assert CodexAdapter().check_additive_flags(["--color=auto"]) == ("--color=auto",)


@pytest.mark.parametrize(
    ("flags", "match"),
    [
        (["--dangerously-bypass-approvals-and-sandbox"], "--dangerously-bypass-approvals-and-sandbox"),
        (["-c", "model=x"], "'-c'"),
        (["--color=rainbow"], "unknown value"),
        (["--color"], "needs a value"),
        (["--color=never", "--color=always"], "two colour values"),
        (["--no-chrome"], "--no-chrome"),
    ],
)
def test_disallowed_additive_flags(flags: list[str], match: str) -> None:
    with pytest.raises(AdapterError, match=match) as info:
        normalize_additive_flags(flags)
    if "is not allowed" in str(info.value):
        assert all(a in str(info.value) for a in ALLOWED_ADDITIVE_FLAGS)


def test_additive_flags_reach_argv(request_: LaunchRequest) -> None:
    flags = ("--strict-config", "--color=never")
    app = CodexAdapter().build_launch(replace(request_, additive_flags=flags))
    assert app.argv[-1] == "--strict-config" and not any(a.startswith("--color") for a in app.argv)
    ex = CodexAdapter().build_launch(exec_request(request_, additive_flags=flags))
    assert "--strict-config" in ex.argv and "--color=never" in ex.argv
    assert ex.argv.index("--color=never") < ex.argv.index("--")


# ------------------------------------------------------------------------------ encodings


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_toml_string_round_trips(value: str) -> None:
    expected = value.encode("utf-8", "replace").decode("utf-8")
    assert tomllib.loads(f"k = {toml_string(value)}")["k"] == expected


@settings(max_examples=100, deadline=None)
@given(prompt=st.text(max_size=300), model=st.one_of(st.none(), st.text(min_size=1, max_size=20)))
def test_turn_request_carries_the_prompt(prompt: str, model: str | None) -> None:
    request = LaunchRequest(binary="codex", cwd=Path("/w"), run_dir=Path("/r"), prompt=prompt, bridge=BRIDGE)
    if model is not None and "\x00" not in model:
        request = replace(request, model=model)
    plan = app_server_plan(request)
    line = json.loads(rpc.thread_request(plan))
    assert line["params"].get("model") == request.model
    turn = json.loads(rpc.turn_request(plan, THREAD))
    assert turn["id"] == rpc.TURN_START_ID
    assert turn["params"]["threadId"] == THREAD and turn["params"]["input"][0]["text"] == prompt


def test_uuid_thread_ids_are_accepted_as_is(request_: LaunchRequest) -> None:
    thread = str(uuid.uuid4())
    spec = CodexAdapter().build_launch(exec_request(request_, resume=True, vendor_session_id=thread))
    assert thread in spec.argv


# ------------------------------------------------------------------------------ space mode


@pytest.mark.parametrize("mode", list(PermissionMode))
def test_space_is_read_only_with_no_escalation(request_: LaunchRequest, mode: PermissionMode) -> None:
    """Seed 003 "In shared spaces": Codex runs in the read-only sandbox whatever the row says."""
    space = replace(request_, permission_mode=mode, space=True)
    plan = plan_for(space)
    assert (plan.thread_params["sandbox"], plan.thread_params["approvalPolicy"]) == ("read-only", "never")
    assert plan.thread_params["approvalsReviewer"] == "user"
    argv = CodexAdapter().build_launch(exec_request(space)).argv
    assert [a for a in argv if a.startswith("--sandbox")] == ["--sandbox=read-only"]


def test_space_resume_sends_read_only_again(request_: LaunchRequest) -> None:
    space = replace(
        request_, permission_mode=PermissionMode.FULL, space=True, resume=True, vendor_session_id=THREAD
    )
    plan = plan_for(space)
    assert plan.thread_method == "thread/resume"
    assert (plan.thread_params["sandbox"], plan.thread_params["approvalPolicy"]) == ("read-only", "never")
    argv = CodexAdapter().build_launch(exec_request(space)).argv
    assert "--sandbox=read-only" in argv and argv[-4:-2] == ("resume", THREAD)


def test_space_keeps_the_bridge_and_checks_the_mode(request_: LaunchRequest) -> None:
    plan = plan_for(replace(request_, space=True))
    assert plan.thread_params["config"]["mcp_servers"]["octipus"]["default_tools_approval_mode"] == "approve"
    with pytest.raises(AdapterError, match="unknown permission mode"):
        CodexAdapter().build_launch(replace(request_, space=True, permission_mode="yolo"))  # type: ignore[arg-type]


def test_space_mode_is_declared() -> None:
    assert CodexAdapter.space_mode and "read-only" in CodexAdapter.space_mode
