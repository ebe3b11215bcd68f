"""Mistral Vibe adapter: launch building (argv, env, files, first stdin lines) for both transports."""

from __future__ import annotations

import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from octipus_vibe import (
    BRIDGE_TOKEN_ENV,
    DEFAULT_TOKEN_LIMIT,
    DEFAULT_TURN_LIMIT,
    HEADER_TYPE,
    MCP_SERVERS_ENV,
    MODEL_ENV,
    QUIET_ENV,
    WRAPPER,
    SessionPlan,
    VibeAdapter,
    check_additive_flags,
    compose_prompt,
)
from octipus_vibe.launch import SPACE_REFUSAL

from octipusd.adapter import Adapter, BridgeEndpoint, LaunchRequest, PermissionMode, StdinMode
from octipusd.adapter_launch import with_bridge_helper
from octipusd.errors import AdapterError

TOKEN = "tok_" + "A" * 43
BRIDGE = BridgeEndpoint(url="http://127.0.0.1:40123/mcp", token=TOKEN)


def request(tmp_path: Path, **fields: Any) -> LaunchRequest:
    base: dict[str, Any] = {
        "binary": "/opt/vibe/bin/vibe-acp",
        "cwd": tmp_path / "ws",
        "run_dir": tmp_path / "run",
        "prompt": "do the thing",
        "bridge": BRIDGE,
        "env": {"PATH": "/usr/bin", "HOME": "/home/u", "VIBE_HOME": "/home/u/.vibe"},
    }
    base.update(fields)
    return LaunchRequest(**base)


def acp_lines(spec_lines: tuple[str, ...]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in spec_lines]


# ------------------------------------------------------------------------- the adapter object


def test_adapter_identity() -> None:
    adapter = VibeAdapter()
    assert isinstance(adapter, Adapter)
    assert (adapter.name, adapter.display_name, adapter.setting_key) == (
        "vibe",
        "Mistral Vibe",
        "mistralVibe",
    )
    assert adapter.default_binary == "vibe-acp"
    assert adapter.supports_resume is True
    assert adapter.new_session_id() is None
    assert adapter.version_argv("/x/vibe-acp") == ("/x/vibe-acp", "--version")
    assert adapter.parse_version("vibe-acp 3.0.2\n") == "3.0.2"
    assert adapter.parse_version("vibe 3.0.2") == "3.0.2"
    assert adapter.parse_version("no version") is None


def test_entry_point_registers_the_adapter() -> None:
    from octipusd.adapter import load_adapters

    errors: list[str] = []
    adapters = load_adapters(errors)
    assert isinstance(adapters.get("vibe"), VibeAdapter), errors


@pytest.mark.parametrize("flags", [["--effort=high"], ["--no-chrome"], ["-x"]])
def test_any_additive_flag_is_refused(flags: list[str], tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="Vibe has no additive flags") as info:
        check_additive_flags(flags)
    assert flags[0] in str(info.value)
    with pytest.raises(AdapterError, match=flags[0]):
        VibeAdapter().build_launch(request(tmp_path, additive_flags=flags))
    assert VibeAdapter().check_additive_flags([]) == ()


def test_unknown_transport_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match=r"unknown Mistral Vibe transport 'exec'.*acp, headless"):
        VibeAdapter().build_launch(request(tmp_path, options={"transport": "exec"}))


# ------------------------------------------------------------------------- ACP


def test_acp_launch_new_session(tmp_path: Path) -> None:
    spec = VibeAdapter().build_launch(request(tmp_path))
    assert spec.argv == ("/opt/vibe/bin/vibe-acp",)
    assert spec.stdin_mode is StdinMode.STREAM
    assert spec.cwd == tmp_path / "ws"
    assert spec.files == {}
    assert spec.secrets == (TOKEN,)
    init, session = acp_lines(spec.initial_input)
    assert init["method"] == "initialize" and init["id"] == "octipus/initialize"
    assert init["params"]["protocolVersion"] == 1
    assert init["params"]["clientCapabilities"] == {
        "fs": {"readTextFile": False, "writeTextFile": False},
        "terminal": False,
    }
    assert session["method"] == "session/new"
    assert session["params"] == {
        "cwd": str(tmp_path / "ws"),
        "mcpServers": [
            {
                "type": "http",
                "name": "octipus",
                "url": BRIDGE.url,
                "headers": [{"name": "Authorization", "value": f"Bearer {TOKEN}"}],
            }
        ],
    }
    plan = SessionPlan.from_id(session["id"])
    assert plan is not None
    assert plan.prompt == [{"type": "text", "text": "do the thing"}]
    assert (plan.mode, plan.bridge, plan.resume) == ("accept-edits", "octipus", None)
    assert (plan.turn_limit, plan.token_limit) == (DEFAULT_TURN_LIMIT, DEFAULT_TOKEN_LIMIT)
    # the token is only in the session request (stdin), never in the plan echoed back on stdout
    assert TOKEN not in session["id"]


def test_acp_token_never_on_argv_or_env(tmp_path: Path) -> None:
    spec = VibeAdapter().build_launch(request(tmp_path))
    assert all(TOKEN not in item for item in spec.argv)
    assert all(TOKEN not in value for value in spec.env.values())


def test_acp_load_when_resuming(tmp_path: Path) -> None:
    spec = VibeAdapter().build_launch(request(tmp_path, vendor_session_id="sess-1", resume=True))
    session = acp_lines(spec.initial_input)[1]
    assert session["method"] == "session/load"
    assert session["params"]["sessionId"] == "sess-1"
    assert session["params"]["cwd"] == str(tmp_path / "ws")
    assert session["params"]["mcpServers"][0]["name"] == "octipus"  # re-sent on every load
    plan = SessionPlan.from_id(session["id"])
    assert plan is not None and plan.resume == "sess-1"


def test_resume_without_id_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="session id to resume"):
        VibeAdapter().build_launch(request(tmp_path, resume=True, vendor_session_id=None))


@pytest.mark.parametrize(
    ("mode", "vibe_mode"),
    [
        (PermissionMode.WORKSPACE, "accept-edits"),
        (PermissionMode.FULL, "auto-approve"),
        (PermissionMode.DEFAULT, "ask"),
        (PermissionMode.PLAN, "ask"),
    ],
)
def test_permission_modes(mode: PermissionMode, vibe_mode: str, tmp_path: Path) -> None:
    acp = VibeAdapter().build_launch(request(tmp_path, permission_mode=mode))
    plan = SessionPlan.from_id(acp_lines(acp.initial_input)[1]["id"])
    assert plan is not None and plan.mode == vibe_mode
    headless = VibeAdapter().build_launch(
        request(tmp_path, permission_mode=mode, options={"transport": "headless"})
    )
    agent = headless.argv[headless.argv.index("--agent") + 1]
    assert agent == vibe_mode


def test_unknown_permission_mode(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="unknown permission mode"):
        VibeAdapter().build_launch(request(tmp_path, permission_mode="yolo"))


def test_env_model_and_quiet_variables(tmp_path: Path) -> None:
    spec = VibeAdapter().build_launch(request(tmp_path, model="devstral-2"))
    env = dict(spec.env)
    assert env[MODEL_ENV] == "devstral-2"
    for name, value in QUIET_ENV.items():
        assert env[name] == value
    assert env["VIBE_BYPASS_TOOL_PERMISSIONS"] == "false"
    assert env["VIBE_HOME"] == "/home/u/.vibe" and env["PATH"] == "/usr/bin"
    assert MCP_SERVERS_ENV not in env and BRIDGE_TOKEN_ENV not in env
    no_model = dict(VibeAdapter().build_launch(request(tmp_path)).env)
    assert MODEL_ENV not in no_model


def test_system_prompt_heads_the_prompt(tmp_path: Path) -> None:
    spec = VibeAdapter().build_launch(request(tmp_path, system_prompt="Be brief."))
    plan = SessionPlan.from_id(acp_lines(spec.initial_input)[1]["id"])
    assert plan is not None
    text = plan.prompt[0]["text"]
    assert text == "<system-instructions>\nBe brief.\n</system-instructions>\n\ndo the thing"
    assert compose_prompt("p", None) == "p" and compose_prompt("p", "  ") == "p"


def test_limits_are_carried_and_checked(tmp_path: Path) -> None:
    spec = VibeAdapter().build_launch(request(tmp_path, turn_limit=7, token_limit=5000))
    plan = SessionPlan.from_id(acp_lines(spec.initial_input)[1]["id"])
    assert plan is not None and (plan.turn_limit, plan.token_limit) == (7, 5000)
    with pytest.raises(AdapterError, match="turn_limit must be a positive integer"):
        VibeAdapter().build_launch(request(tmp_path, turn_limit=0))


@pytest.mark.parametrize(
    ("binary", "acp", "headless"),
    [
        ("/v/bin/vibe-acp", "/v/bin/vibe-acp", "/v/bin/vibe"),
        ("/v/bin/vibe", "/v/bin/vibe-acp", "/v/bin/vibe"),
        ("/v/bin/my-wrapper", "/v/bin/my-wrapper", "/v/bin/my-wrapper"),
    ],
)
def test_binary_siblings(binary: str, acp: str, headless: str, tmp_path: Path) -> None:
    assert VibeAdapter().build_launch(request(tmp_path, binary=binary)).argv[0] == acp
    spec = VibeAdapter().build_launch(request(tmp_path, binary=binary, options={"transport": "headless"}))
    assert spec.argv[6] == headless


def test_acp_without_bridge(tmp_path: Path) -> None:
    spec = VibeAdapter().build_launch(request(tmp_path, bridge=None))
    session = acp_lines(spec.initial_input)[1]
    assert session["params"]["mcpServers"] == []
    assert spec.secrets == ()
    plan = SessionPlan.from_id(session["id"])
    assert plan is not None and plan.bridge is None


@pytest.mark.parametrize(
    ("bridge", "message"),
    [
        (BridgeEndpoint(url="ftp://x/mcp", token=TOKEN), "not an http"),
        (BridgeEndpoint(url="http://127.0.0.1:1/mcp", token="has space"), "bridge token"),
        (BridgeEndpoint(url="http://127.0.0.1:1/mcp", token=TOKEN, server_name="oc.tipus"), "server name"),
    ],
)
def test_invalid_bridge(bridge: BridgeEndpoint, message: str, tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match=message) as info:
        VibeAdapter().build_launch(request(tmp_path, bridge=bridge))
    assert TOKEN not in str(info.value)


# ------------------------------------------------------------------------- headless


def headless(tmp_path: Path, **fields: Any) -> Any:
    return VibeAdapter().build_launch(request(tmp_path, options={"transport": "headless"}, **fields))


def test_headless_argv(tmp_path: Path) -> None:
    spec = headless(tmp_path, turn_limit=12, token_limit=34567)
    run = tmp_path / "run"
    assert spec.argv[:4] == ("/bin/sh", "-c", WRAPPER, "octipus-vibe-headless")
    header = json.loads(spec.argv[4])
    assert header == {
        "type": HEADER_TYPE,
        "bridge": "octipus",
        "agent": "accept-edits",
        "turnLimit": 12,
        "tokenLimit": 34567,
        "notice": header["notice"],
    }
    assert "denied" in header["notice"]
    assert spec.argv[5] == str(run / "vibe-output")
    assert spec.argv[6:] == (
        "/opt/vibe/bin/vibe",
        "--prompt-file",
        str(run / "vibe-prompt.txt"),
        "--output",
        "streaming",
        "--agent",
        "accept-edits",
        "--max-turns",
        "12",
        "--max-tokens",
        "34567",
        "--workdir",
        str(tmp_path / "ws"),
        "--output-dir",
        str(run / "vibe-output"),
    )
    assert spec.stdin_mode is StdinMode.DEVNULL
    assert spec.initial_input == ()
    assert spec.files == {run / "vibe-prompt.txt": "do the thing"}
    assert "do the thing" not in " ".join(spec.argv)  # the prompt stays off the command line


def test_headless_full_mode_has_no_notice_and_defaults(tmp_path: Path) -> None:
    spec = headless(tmp_path, permission_mode=PermissionMode.FULL)
    header = json.loads(spec.argv[4])
    assert header["notice"] is None and header["agent"] == "auto-approve"
    assert spec.argv[spec.argv.index("--max-turns") + 1] == str(DEFAULT_TURN_LIMIT)
    assert spec.argv[spec.argv.index("--max-tokens") + 1] == str(DEFAULT_TOKEN_LIMIT)


def test_headless_bridge_through_env_never_argv(tmp_path: Path) -> None:
    spec = with_bridge_helper(headless(tmp_path), BRIDGE)  # as the runtime starts it
    env = dict(spec.env)
    assert BRIDGE_TOKEN_ENV == "OCTIPUS_BRIDGE_TOKEN"  # the bridge helper's name, not one of Vibe's own
    assert env[BRIDGE_TOKEN_ENV] == TOKEN
    servers = json.loads(env[MCP_SERVERS_ENV])
    assert servers == [
        {
            "name": "octipus",
            "transport": "streamable-http",
            "url": BRIDGE.url,
            "auth": {"type": "static", "api_key_env": BRIDGE_TOKEN_ENV},
            "tool_timeout_sec": 7200.0,  # the bridge's limit (Vibe's default: 60 s)
        }
    ]
    assert TOKEN not in env[MCP_SERVERS_ENV]
    assert all(TOKEN not in item for item in spec.argv)
    assert all(TOKEN not in content for content in spec.files.values())
    assert spec.secrets == (TOKEN,)


def test_headless_resume_and_system_prompt(tmp_path: Path) -> None:
    spec = headless(tmp_path, vendor_session_id="-weird-id", resume=True, system_prompt="Rules.")
    assert spec.argv[-1] == "--resume=-weird-id"  # bound with '=': never read as a flag
    assert next(iter(spec.files.values())).startswith("<system-instructions>\nRules.\n")


def fake_vibe(folder: Path, body: str) -> Path:
    path = folder / "vibe"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def run_wrapper(spec: Any) -> subprocess.CompletedProcess[bytes]:
    for path, content in spec.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return subprocess.run(
        list(spec.argv),
        env=dict(spec.env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=10,
        check=False,
    )


def test_headless_wrapper_prints_header_output_and_export(tmp_path: Path) -> None:
    """The /bin/sh wrapper, run for real around a stand-in ``vibe``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    export = {"outcome": "finished", "schema_version": 1, "exit_code": 0, "note": "line1\nline2"}
    body = (
        'out=""; prev=""; for a in "$@"; do [ "$prev" = "--output-dir" ] && out=$a; prev=$a; done\n'
        'mkdir -p "$out"\n'
        'echo \'{"sessionId":"s","type":"message","role":"assistant","content":[]}\'\n'
        "echo 'on stderr' >&2\n"
        f"cat > \"$out/export.json\" <<'EOF'\n{json.dumps(export, indent=2)}\nEOF\n"
        "exit 3\n"
    )
    fake_vibe(bindir, body)
    (tmp_path / "ws").mkdir()
    out_dir = tmp_path / "run" / "vibe-output"
    out_dir.mkdir(parents=True)
    (out_dir / "export.json").write_text('{"stale": true}')
    spec = headless(tmp_path, binary=str(bindir / "vibe"))
    done = run_wrapper(spec)
    assert done.returncode == 3
    lines = done.stdout.decode().splitlines()
    assert json.loads(lines[0])["type"] == HEADER_TYPE
    assert json.loads(lines[1])["sessionId"] == "s"
    assert json.loads(lines[2]) == export  # one line, still the same JSON
    assert len(lines) == 3  # the stale export of an earlier run was removed first
    assert done.stderr.decode() == "on stderr\n"
    assert not out_dir.exists()  # removed after printing (it repeats the user's config)


def test_headless_wrapper_without_export(tmp_path: Path) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake_vibe(bindir, 'printf "%s\\n" "$@" > "$(dirname "$0")/args"\nexit 1\n')
    (tmp_path / "ws").mkdir()
    (tmp_path / "run" / "vibe-output").mkdir(parents=True)
    spec = headless(tmp_path, binary=str(bindir / "vibe"), prompt='it\'s $HOME `id` "quoted"')
    done = run_wrapper(spec)
    assert done.returncode == 1
    assert len(done.stdout.decode().splitlines()) == 1  # only the header
    args = (bindir / "args").read_text().splitlines()
    assert args == list(spec.argv[7:])  # every value passed through untouched
    assert (tmp_path / "run" / "vibe-prompt.txt").read_text() == 'it\'s $HOME `id` "quoted"'


# ------------------------------------------------------------------------- space mode


@pytest.mark.parametrize("transport", [None, "acp", "headless"])
@pytest.mark.parametrize("mode", list(PermissionMode))
def test_space_is_refused(tmp_path: Path, transport: str | None, mode: PermissionMode) -> None:
    """Seed 003 "In shared spaces": Mistral Vibe declares no space mode and is refused in spaces."""
    options = {} if transport is None else {"transport": transport}
    with pytest.raises(AdapterError) as info:
        VibeAdapter().build_launch(request(tmp_path, space=True, permission_mode=mode, options=options))
    message = str(info.value)
    assert message == SPACE_REFUSAL
    assert "Mistral Vibe declares no space mode and is refused in shared spaces" in message
    assert "Claude Code or Codex model row with metadata.cliAgent.sharedUse: true" in message


def test_space_refusal_comes_before_other_checks(tmp_path: Path) -> None:
    with pytest.raises(AdapterError, match="no space mode"):
        VibeAdapter().build_launch(
            request(tmp_path, space=True, additive_flags=["--bogus"], options={"transport": "x"})
        )


def test_no_space_mode_declared() -> None:
    assert VibeAdapter.space_mode is None
    assert VibeAdapter().space_mode is None
