"""Claude Code adapter: launch building (argv, env, files, stdin) and adapter identity."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from octipus_claude_code import (
    ALLOWED_ADDITIVE_FLAGS,
    BASE_FLAGS,
    QUIET_ENV,
    ClaudeCodeAdapter,
    launch as claude_launch,
    normalize_additive_flags,
    parse_version,
)
from octipus_claude_code.denials import CLAUDE_NATIVE_TOOLS, translate_denials
from octipus_claude_code.launch import (
    INLINE_SYSTEM_PROMPT_MAX_BYTES,
    MCP_CONFIG_NAME,
    SHELL_GUARD_MATCHER,
    SHELL_GUARD_TOOLS,
    SPACE_SETTINGS_NAME,
    SYSTEM_PROMPT_NAME,
)
from octipus_claude_code.variants import GlmAdapter

from octipusd.adapter import Adapter, BridgeEndpoint, LaunchRequest, PermissionMode, StdinMode
from octipusd.adapterkit import shell_guard_command
from octipusd.errors import AdapterError
from octipusd.policy.shellguard import GUARDED_TOOLS

SID = "3b5f4cdb-880d-44ed-a598-e5896220e408"
TOKEN = "cap-Zm9vYmFyYmF6cXV4LXNlY3JldC10b2tlbi12YWx1ZQ"
BINARY = "/opt/claude/bin/claude"


@pytest.fixture
def request_(tmp_path: Path) -> LaunchRequest:
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    return LaunchRequest(
        binary=BINARY,
        cwd=tmp_path / "ws",
        run_dir=run_dir,
        prompt="Write out.txt",
        vendor_session_id=SID,
        bridge=BridgeEndpoint(url="http://127.0.0.1:43111/mcp", token=TOKEN),
        env={"PATH": "/usr/bin", "HOME": "/home/u", "CLAUDECODE": "1", "DISABLE_TELEMETRY": ""},
    )


def adapter(root: bool = False) -> ClaudeCodeAdapter:
    return ClaudeCodeAdapter(running_as_root=root)


# ------------------------------------------------------------------ identity


def test_identity_and_protocol() -> None:
    a = ClaudeCodeAdapter()
    assert isinstance(a, Adapter)
    assert (a.name, a.display_name, a.setting_key, a.default_binary) == (
        "claude-code",
        "Claude Code",
        "claudeCode",
        "claude",
    )
    assert a.supports_resume is True
    assert a.version_argv("/x/claude") == ("/x/claude", "--version")


def test_entry_point_loads_this_adapter() -> None:
    eps = [ep for ep in entry_points(group="octipus.adapters") if ep.name == "claude-code"]
    assert eps, "octipus is not installed with its entry points (run scripts/bootstrap.sh)"
    instance = eps[0].load()()
    assert isinstance(instance, ClaudeCodeAdapter)
    assert isinstance(instance, Adapter)


def test_new_session_id_is_a_fresh_uuid4() -> None:
    a = adapter()
    ids = {a.new_session_id() for _ in range(50)}
    assert len(ids) == 50
    for value in ids:
        assert uuid.UUID(value).version == 4
        assert str(uuid.UUID(value)) == value


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("2.1.197 (Claude Code)\n", "2.1.197"),
        ("2.1.197 (Claude Code)", "2.1.197"),
        ("claude 10.20.30-beta.1 (Claude Code)", "10.20.30-beta.1"),
        ("", None),
        ("Claude Code", None),
    ],
)
def test_parse_version(output: str, expected: str | None) -> None:
    assert parse_version(output) == expected
    assert adapter().parse_version(output) == expected


# ------------------------------------------------------------------ argv


def test_first_turn_argv_exact(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(request_)
    config = request_.run_dir / MCP_CONFIG_NAME
    assert spec.argv == (
        BINARY,
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--replay-user-messages",
        "--permission-prompt-tool",
        "stdio",
        f"--session-id={SID}",
        f"--mcp-config={config}",
        "--strict-mcp-config",
        "--permission-mode=acceptEdits",
    )
    assert spec.argv[1 : 1 + len(BASE_FLAGS)] == BASE_FLAGS
    assert spec.cwd == request_.cwd
    assert spec.stdin_mode is StdinMode.STREAM


def test_resume_uses_resume_flag_not_session_id(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(replace(request_, resume=True))
    assert f"--resume={SID}" in spec.argv
    assert not any(a.startswith("--session-id") for a in spec.argv)


def test_first_turn_has_no_resume(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(request_)
    assert not any(a.startswith("--resume") for a in spec.argv)


@pytest.mark.parametrize("resume", [False, True])
@pytest.mark.parametrize("bad", [None, "", "not-a-uuid", "--dangerously-skip-permissions"])
def test_session_id_required_and_uuid(request_: LaunchRequest, bad: str | None, resume: bool) -> None:
    with pytest.raises(AdapterError, match="session id"):
        adapter().build_launch(replace(request_, vendor_session_id=bad, resume=resume))


@pytest.mark.parametrize(
    ("mode", "flag"),
    [
        (PermissionMode.WORKSPACE, "acceptEdits"),
        (PermissionMode.FULL, "bypassPermissions"),
        (PermissionMode.PLAN, "plan"),
        (PermissionMode.DEFAULT, "default"),
    ],
)
@pytest.mark.parametrize("root", [False, True])
def test_permission_modes(request_: LaunchRequest, mode: PermissionMode, flag: str, root: bool) -> None:
    spec = adapter(root).build_launch(replace(request_, permission_mode=mode))
    assert [a for a in spec.argv if a.startswith("--permission-mode")] == [f"--permission-mode={flag}"]
    if mode is PermissionMode.FULL and root:
        assert spec.env["IS_SANDBOX"] == "1"
    else:
        assert "IS_SANDBOX" not in spec.env


def test_default_mode_is_workspace_accept_edits(tmp_path: Path) -> None:
    req = LaunchRequest(binary="claude", cwd=tmp_path, run_dir=tmp_path, prompt="x", vendor_session_id=SID)
    assert "--permission-mode=acceptEdits" in adapter().build_launch(req).argv


def test_unknown_permission_mode_is_an_adapter_error(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="permission mode"):
        adapter().build_launch(replace(request_, permission_mode="yolo"))  # type: ignore[arg-type]


def test_model_and_system_prompt_use_equals_form(request_: LaunchRequest) -> None:
    prompt = "--dangerously-skip-permissions\nBe brief."
    spec = adapter().build_launch(replace(request_, model="-sonnet", system_prompt=prompt))
    assert "--model=-sonnet" in spec.argv
    assert f"--append-system-prompt={prompt}" in spec.argv
    # no value ever stands alone where the parser could read it as a flag
    assert "--dangerously-skip-permissions" not in spec.argv


def test_no_model_no_system_prompt(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(replace(request_, model=None, system_prompt=None))
    assert not any(a.startswith(("--model", "--append-system-prompt")) for a in spec.argv)
    spec = adapter().build_launch(replace(request_, model="", system_prompt=""))
    assert not any(a.startswith(("--model", "--append-system-prompt")) for a in spec.argv)


def test_large_system_prompt_goes_to_a_file(request_: LaunchRequest) -> None:
    big = "é" * INLINE_SYSTEM_PROMPT_MAX_BYTES  # 2 bytes each in UTF-8
    spec = adapter().build_launch(replace(request_, system_prompt=big))
    path = request_.run_dir / SYSTEM_PROMPT_NAME
    assert f"--append-system-prompt-file={path}" in spec.argv
    assert spec.files[path] == big
    assert not any(a.startswith("--append-system-prompt=") for a in spec.argv)
    assert max(len(a.encode()) for a in spec.argv) < 4096


def test_system_prompt_with_nul_goes_to_a_file(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(replace(request_, system_prompt="a\x00b"))
    assert any(a.startswith("--append-system-prompt-file=") for a in spec.argv)
    assert all("\x00" not in a for a in spec.argv)


def test_model_with_nul_is_rejected(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="NUL"):
        adapter().build_launch(replace(request_, model="opus\x00"))


# ------------------------------------------------------------------ MCP config and secrets


def test_mcp_config_file_and_token_only_there(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(request_)
    path = request_.run_dir / MCP_CONFIG_NAME
    assert set(spec.files) == {path}
    assert json.loads(spec.files[path]) == {
        "mcpServers": {
            "octipus": {
                "type": "http",
                "url": "http://127.0.0.1:43111/mcp",
                "headers": {"Authorization": f"Bearer {TOKEN}"},
                "timeout": 7_200_000,  # ms: the bridge's limit (Claude's default: 1e8 ms)
            }
        }
    }
    assert spec.env["CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT"] == "7200000"  # its default: 5 min
    assert spec.secrets == (TOKEN,)
    assert all(TOKEN not in a for a in spec.argv)
    assert all(TOKEN not in v for v in spec.env.values())
    assert all(TOKEN not in line for line in spec.initial_input)


def test_custom_server_name(request_: LaunchRequest) -> None:
    bridge = BridgeEndpoint(url="http://127.0.0.1:1/mcp", token=TOKEN, server_name="octi_2")
    spec = adapter().build_launch(replace(request_, bridge=bridge))
    config = json.loads(next(iter(spec.files.values())))
    assert list(config["mcpServers"]) == ["octi_2"]


def test_no_bridge_still_strict(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(replace(request_, bridge=None))
    assert "--strict-mcp-config" in spec.argv
    assert not any(a.startswith("--mcp-config") for a in spec.argv)
    assert spec.files == {}
    assert spec.secrets == ()


@pytest.mark.parametrize(
    ("bridge", "match"),
    [
        (BridgeEndpoint(url="ftp://127.0.0.1/mcp", token=TOKEN), "http"),
        (BridgeEndpoint(url="http://127.0.0.1/mcp", token=""), "token"),
        (BridgeEndpoint(url="http://127.0.0.1/mcp", token="a b\r\nX-Evil: 1"), "token"),
        (BridgeEndpoint(url="http://127.0.0.1/mcp", token=TOKEN, server_name="a b"), "server name"),
        (BridgeEndpoint(url="http://127.0.0.1/mcp", token=TOKEN, server_name=""), "server name"),
    ],
)
def test_bad_bridge(request_: LaunchRequest, bridge: BridgeEndpoint, match: str) -> None:
    with pytest.raises(AdapterError, match=match) as info:
        adapter().build_launch(replace(request_, bridge=bridge))
    if bridge.token:
        assert bridge.token not in str(info.value)


# ------------------------------------------------------------------ env


def test_env_keeps_request_env_adds_quiet_vars_strips_claudecode(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(request_)
    assert spec.env["PATH"] == "/usr/bin"
    assert spec.env["HOME"] == "/home/u"
    assert "CLAUDECODE" not in spec.env
    for key, value in QUIET_ENV.items():
        assert spec.env[key] == value
    assert set(QUIET_ENV) == {
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_TELEMETRY",
        "DISABLE_AUTOUPDATER",
        "DISABLE_ERROR_REPORTING",
        "DISABLE_BUG_COMMAND",
        "DISABLE_NON_ESSENTIAL_MODEL_CALLS",
    }
    assert spec.env["DISABLE_TELEMETRY"] == "1"  # the quiet value wins over the request's
    assert dict(request_.env)["CLAUDECODE"] == "1"  # the request is not mutated


# ------------------------------------------------------------------ stdin


def test_initial_input_is_one_stream_json_user_line(request_: LaunchRequest) -> None:
    prompt = 'multi\nline "quoted" ✓ \u2028 end'
    spec = adapter().build_launch(replace(request_, prompt=prompt))
    assert len(spec.initial_input) == 1
    line = spec.initial_input[0]
    assert "\n" not in line and "\r" not in line and "\u2028" not in line
    assert json.loads(line) == {
        "type": "user",
        "message": {"role": "user", "content": prompt},
        "parent_tool_use_id": None,
        "session_id": "",
    }
    assert adapter().encode_user_message(prompt) == line


# ------------------------------------------------------------------ additive flags


def test_allowed_additive_flags_are_appended(request_: LaunchRequest) -> None:
    flags = ["--no-session-persistence", "--no-chrome", "--disable-slash-commands", "--effort=xhigh"]
    spec = adapter().build_launch(replace(request_, additive_flags=flags))
    assert spec.argv[-4:] == tuple(flags)


@pytest.mark.parametrize("level", ["low", "medium", "high", "xhigh", "max"])
def test_effort_levels(level: str) -> None:
    assert normalize_additive_flags([f"--effort={level}"]) == (f"--effort={level}",)
    assert normalize_additive_flags(["--effort", level]) == (f"--effort={level}",)


def test_additive_flags_dedupe() -> None:
    assert normalize_additive_flags(["--no-chrome", "--no-chrome", "--effort=low", "--effort", "low"]) == (
        "--no-chrome",
        "--effort=low",
    )


@pytest.mark.parametrize(
    "flags",
    [
        ["--dangerously-skip-permissions"],
        ["--permission-mode=bypassPermissions"],
        ["--mcp-config=/tmp/evil.json"],
        ["--allowedTools", "Bash"],
        ["--add-dir=/"],
        ["--max-budget-usd=100"],
        ["--settings={}"],
        ["--no-chrome", "--output-format=text"],
        ["--no-chrome=1"],
        ["--effort=ultracode"],
        ["--effort"],
        ["--effort=low", "--effort=high"],
        ["-p"],
        [""],
    ],
)
def test_disallowed_additive_flags(request_: LaunchRequest, flags: list[str]) -> None:
    with pytest.raises(AdapterError) as info:
        adapter().build_launch(replace(request_, additive_flags=flags))
    message = str(info.value)
    assert "effort" in message.lower() or "allowed" in message


def test_disallowed_flag_message_names_flag_and_allowed_list() -> None:
    with pytest.raises(AdapterError) as info:
        normalize_additive_flags(["--dangerously-skip-permissions"])
    message = str(info.value)
    assert "--dangerously-skip-permissions" in message
    for allowed in ALLOWED_ADDITIVE_FLAGS:
        assert allowed in message


# ------------------------------------------------------------------ space mode (seed 003 "In shared spaces")


GUARD = "'/opt/octipus/bin/octipus-bridge' shell-guard || exit 2"


def space_adapter(root: bool = False) -> ClaudeCodeAdapter:
    return ClaudeCodeAdapter(running_as_root=root, shell_guard=GUARD)


def test_space_argv_exact(request_: LaunchRequest) -> None:
    spec = space_adapter().build_launch(replace(request_, space=True))
    config = request_.run_dir / MCP_CONFIG_NAME
    settings_path = request_.run_dir / SPACE_SETTINGS_NAME
    assert spec.argv == (
        BINARY,
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--replay-user-messages",
        "--permission-prompt-tool",
        "stdio",
        f"--session-id={SID}",
        f"--mcp-config={config}",
        "--strict-mcp-config",
        "--permission-mode=default",
        "--setting-sources=",
        f"--settings={settings_path}",
    )
    assert not any(a.startswith(("--allowedTools", "--allowed-tools")) for a in spec.argv)
    assert set(spec.files) == {config, settings_path}


@pytest.mark.parametrize(
    ("mode", "flag"),
    [
        (PermissionMode.WORKSPACE, "--permission-mode=default"),
        (PermissionMode.FULL, "--permission-mode=default"),
        (PermissionMode.DEFAULT, "--permission-mode=default"),
        (PermissionMode.PLAN, "--permission-mode=plan"),  # stricter than default: kept
    ],
)
def test_space_permission_mode(request_: LaunchRequest, mode: PermissionMode, flag: str) -> None:
    spec = space_adapter(root=True).build_launch(replace(request_, permission_mode=mode, space=True))
    assert [a for a in spec.argv if a.startswith("--permission-mode")] == [flag]
    assert "IS_SANDBOX" not in spec.env  # full becomes default: no bypass, so no sandbox flag as root


def test_space_settings_file_is_locked(request_: LaunchRequest) -> None:
    spec = space_adapter().build_launch(replace(request_, permission_mode=PermissionMode.FULL, space=True))
    settings = json.loads(spec.files[request_.run_dir / SPACE_SETTINGS_NAME])
    assert settings == {
        "permissions": {
            "allow": [],
            "defaultMode": "default",
            "disableBypassPermissionsMode": "disable",
            "disableAutoMode": "disable",
        },
        "enableAllProjectMcpServers": False,
        "enabledMcpjsonServers": [],
        "hooks": {
            "PreToolUse": [
                {
                    "matcher": "Bash|Write|Edit|MultiEdit|NotebookEdit",
                    "hooks": [{"type": "command", "command": GUARD, "timeout": 30}],
                }
            ]
        },
    }
    assert "disableAllHooks" not in settings  # the guard must run
    assert TOKEN not in spec.files[request_.run_dir / SPACE_SETTINGS_NAME]


def test_space_resume_keeps_the_space_flags(request_: LaunchRequest) -> None:
    spec = space_adapter().build_launch(replace(request_, space=True, resume=True))
    assert f"--resume={SID}" in spec.argv
    assert "--setting-sources=" in spec.argv
    assert f"--settings={request_.run_dir / SPACE_SETTINGS_NAME}" in spec.argv


def test_space_keeps_additive_flags_and_system_prompt(request_: LaunchRequest) -> None:
    spec = space_adapter().build_launch(
        replace(request_, space=True, model="m", system_prompt="be brief", additive_flags=["--no-chrome"])
    )
    assert spec.argv[-3:] == ("--model=m", "--append-system-prompt=be brief", "--no-chrome")


def test_outside_a_space_no_settings_flags(request_: LaunchRequest) -> None:
    spec = space_adapter().build_launch(request_)
    assert not any(a.startswith(("--setting-sources", "--settings")) for a in spec.argv)
    assert request_.run_dir / SPACE_SETTINGS_NAME not in spec.files


def test_default_guard_is_the_helper_next_to_the_interpreter() -> None:
    assert ClaudeCodeAdapter().shell_guard_command == shell_guard_command()
    assert shell_guard_command().endswith(" shell-guard || exit 2")


def test_space_without_a_guard_command_is_refused(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="shell guard"):
        claude_launch.build_launch(replace(request_, space=True), running_as_root=False)


def test_guard_matcher_covers_the_guards_tools() -> None:
    assert SHELL_GUARD_TOOLS == GUARDED_TOOLS
    assert tuple(SHELL_GUARD_MATCHER.split("|")) == GUARDED_TOOLS


def test_space_mode_is_declared() -> None:
    assert ClaudeCodeAdapter.space_mode and "--setting-sources=" in ClaudeCodeAdapter.space_mode


# ------------------------------------------------------------------ native denials (--disallowedTools)


def test_native_denials_become_disallowed_tools_after_the_permission_mode(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(replace(request_, denied_native=("Bash(rm:*)", "Write", "Read(/w/.env)")))
    mode_at = spec.argv.index("--permission-mode=acceptEdits")
    assert spec.argv[mode_at + 1 :] == (
        "--disallowedTools=Bash(rm*)",
        "--disallowedTools=Write",
        "--disallowedTools=Read(//w/.env)",
    )
    assert spec.notices == ()


def test_no_native_denials_no_flag_and_no_notice(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(request_)
    assert not any(a.startswith("--disallowedTools") for a in spec.argv)
    assert spec.notices == ()


@pytest.mark.parametrize(
    ("octipus", "claude"),
    [
        ("Bash", "Bash"),
        ("Bash(*)", "Bash"),
        ("Bash()", "Bash"),
        ("Bash(:*)", "Bash"),  # the empty prefix accepts every command
        # Octipus's x:* is a plain text prefix (rm:* also covers rmdir): Claude's x* says the same,
        # its own x:* would be a word-boundary prefix (observed with 2.1.197)
        ("Bash(rm:*)", "Bash(rm*)"),
        ("Bash(git push:*)", "Bash(git push*)"),
        ("Bash(rm -rf /tmp/x)", "Bash(rm -rf /tmp/x)"),
        ('Bash(rm "v1")', 'Bash(rm "v1")'),
        ("Bash(echo a, b)", "Bash(echo a, b)"),
        ("Bash(FOO=1 rm:*)", "Bash(FOO=1 rm*)"),
        ("Bash(echo (hi))", "Bash(echo \\(hi\\))"),  # \( \) \\ are literal in Claude's rule text
        ("Bash(echo a\\b:*)", "Bash(echo a\\\\b*)"),
        ("Read", "Read"),
        ("Read(/w/.env)", "Read(//w/.env)"),  # //path: absolute from the filesystem root
        ("Read(/w/sec:*)", "Read(//w/sec*)"),
        ("Read(/w/secrets/:*)", "Read(//w/secrets/*)"),
        ("Read(/:*)", "Read(//*)"),
        ("Read(/w/my file.txt)", "Read(//w/my file.txt)"),
        # Claude applies path rules to writes only as Edit(...) (Write(//p) refused nothing)
        ("Write(/w/out.txt)", "Edit(//w/out.txt)"),
        ("Edit(/w/src/:*)", "Edit(//w/src/*)"),
        ("MultiEdit(/w/a.py)", "Edit(//w/a.py)"),
        ("Write", "Write"),
        ("Edit(*)", "Edit"),
        ("WebFetch", "WebFetch"),
        ("NotebookEdit", "NotebookEdit"),
        ("mcp__github__create_issue", "mcp__github__create_issue"),
    ],
)
def test_native_denial_translation(octipus: str, claude: str) -> None:
    result = translate_denials([octipus])
    assert result.rules == (claude,), result
    assert result.relay_only == ()
    assert result.argv() == (f"--disallowedTools={claude}",)


@pytest.mark.parametrize(
    ("octipus", "reason"),
    [
        ("Bash(ls *.py:*)", "wildcard"),
        ("Bash(cat a | rm:*)", "compound command"),
        ("Bash(echo hi > out.txt)", "redirections"),
        ("Bash(echo $HOME)", "expansions"),
        ("Bash(a; b)", "shell operators"),
        ("Bash(echo `id`)", "expansions"),
        ("Bash(echo a # b)", "comments"),
        ("Bash(git::*)", "word-boundary"),
        ("Bash(echo a\x00b)", "control characters"),
        ("Bash(echo a\nrm x)", "control characters"),
        ("Read(.env)", "not an absolute path"),
        ("Read(~/.ssh/id_rsa)", "not an absolute path"),
        ("Read(//w/x)", "not an absolute path"),
        ("Read(/w/*.env)", "pattern syntax"),
        ("Read(/w/[ab])", "pattern syntax"),
        ("Read(/w/a(1).txt)", "pattern syntax"),
        ("Edit(/w/../etc/passwd)", "normalised"),
        ("Edit(/w/./x)", "normalised"),
        ("Edit(/w//x)", "normalised"),
        ("Edit(/w/dir/)", "normalised"),
        ("Read(/w/..:*)", "normalised"),
        ("WebFetch(https://example.com/:*)", "domain:host"),
        ("Glob(/w)", "no path rule for Glob"),
        ("Grep(/w/:*)", "no path rule for Grep"),
        ("NotebookEdit(/w/a.ipynb)", "Claude has no rule for NotebookEdit"),
        ("Task(review)", "Claude has no rule for Task"),
        ("Foo bar", "not a plain tool name"),
        ("mcp__octipus__shell__run", "deny shell__run, not cli-native:mcp__octipus__shell__run"),
        ("mcp__octipus__shell__run(ls:*)", "decided on the bridge"),
        ("Bash(x", "does not parse"),
    ],
)
def test_untranslatable_native_denials_stay_relay_only(octipus: str, reason: str) -> None:
    # never widened to the whole tool, never dropped in silence
    result = translate_denials([octipus, "Write"])
    assert result.rules == ("Write",), result
    ((text, why),) = result.relay_only
    assert text == f"cli-native:{octipus.strip()}"
    assert reason in why
    notice = result.notice()
    assert notice is not None and text in notice and "relays to Octipus" in notice


def test_all_native_denial_denies_every_claude_tool_but_never_the_bridge() -> None:
    result = translate_denials(["*", "Bash(rm:*)", "Write"])
    assert result.rules[: len(CLAUDE_NATIVE_TOOLS)] == CLAUDE_NATIVE_TOOLS
    assert result.rules[len(CLAUDE_NATIVE_TOOLS) :] == ("Bash(rm*)",)  # Write was already there
    # every tool 2.1.197 offers (its system/init "tools") is covered
    offered = {
        "Task", "AskUserQuestion", "Bash", "CronCreate", "CronDelete", "CronList", "Edit", "EnterPlanMode",
        "EnterWorktree", "ExitPlanMode", "ExitWorktree", "NotebookEdit", "Read", "ReportFindings",
        "ScheduleWakeup", "SendMessage", "Skill", "TaskCreate", "TaskGet", "TaskList", "TaskOutput",
        "TaskStop", "TaskUpdate", "WebFetch", "WebSearch", "Workflow", "Write",
    }  # fmt: skip
    assert offered <= set(result.rules)
    assert not any(r.startswith("mcp__") or r == "*" for r in result.rules)
    assert result.relay_only == ()


def test_all_native_denial_with_a_matcher_is_translated_where_it_can_be() -> None:
    result = translate_denials(["*(/etc/:*)", "*(rm:*)", "*(*)", "*(ls *:*)"])
    assert result.rules[:3] == ("Bash(/etc/*)", "Read(//etc/*)", "Edit(//etc/*)")
    assert result.rules[3] == "Bash(rm*)"
    assert result.rules[4:] == CLAUDE_NATIVE_TOOLS  # *(*) accepts anything: every tool
    texts = [text for text, _ in result.relay_only]
    assert texts == ["cli-native(/etc/:*)", "cli-native(rm:*)", "cli-native(ls *:*)"]
    assert "handed to Claude as Bash(/etc/*), Read(//etc/*), Edit(//etc/*)" in result.relay_only[0][1]
    assert "handed to Claude as" not in result.relay_only[2][1]


def test_native_denial_bridge_name_follows_the_endpoint() -> None:
    result = translate_denials(["mcp__octipus__shell__run", "mcp__ops__x"], bridge_server="ops")
    assert result.rules == ("mcp__octipus__shell__run",)
    assert [text for text, _ in result.relay_only] == ["cli-native:mcp__ops__x"]


def test_untranslatable_denials_become_a_launch_notice(request_: LaunchRequest) -> None:
    spec = adapter().build_launch(
        replace(request_, denied_native=("Bash(ls *.py:*)", "Read(.env)", "Bash(rm:*)", "Bash(a\x00b)"))
    )
    assert [a for a in spec.argv if a.startswith("--disallowedTools")] == ["--disallowedTools=Bash(rm*)"]
    (notice,) = spec.notices
    assert "cli-native:Bash(ls *.py:*)" in notice and "cli-native:Read(.env)" in notice
    assert not any("\x00" in a for a in spec.argv)


def test_space_runs_get_the_native_denials_too(request_: LaunchRequest) -> None:
    spec = space_adapter().build_launch(replace(request_, space=True, denied_native=("Read(/w/.env)",)))
    settings_at = spec.argv.index(f"--settings={request_.run_dir / SPACE_SETTINGS_NAME}")
    assert spec.argv[settings_at + 1 :] == ("--disallowedTools=Read(//w/.env)",)


def test_vendor_endpoint_variants_pass_the_native_denials(request_: LaunchRequest) -> None:
    request = replace(
        request_,
        options={"authTokenEnv": "ZAI_API_KEY"},
        env={**request_.env, "ZAI_API_KEY": "zk-test"},
        denied_native=("Bash(rm:*)", "Read(x)"),
    )
    spec = GlmAdapter(running_as_root=False).build_launch(request)
    assert "--disallowedTools=Bash(rm*)" in spec.argv
    assert len(spec.notices) == 1 and "cli-native:Read(x)" in spec.notices[0]
