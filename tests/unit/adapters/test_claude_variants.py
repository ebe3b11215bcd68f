"""GLM and Kimi: Claude Code with an explicitly configured vendor endpoint and key."""

from __future__ import annotations

import json
from dataclasses import replace
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from octipus_claude_code import ClaudeCodeAdapter
from octipus_claude_code.launch import SPACE_SETTINGS_NAME
from octipus_claude_code.variants import (
    GLM_BASE_URL,
    KIMI_BASE_URL,
    SETTINGS_FILE_NAME,
    GlmAdapter,
    KimiAdapter,
    VendorEndpointAdapter,
)

from octipusd.adapter import Adapter, BridgeEndpoint, LaunchRequest, PermissionMode
from octipusd.errors import AdapterError

SID = "3b5f4cdb-880d-44ed-a598-e5896220e408"
BRIDGE_TOKEN = "cap-Zm9vYmFyYmF6cXV4LXNlY3JldC10b2tlbi12YWx1ZQ"
KEY = "zai-0123456789abcdef"


@pytest.fixture
def request_(tmp_path: Path) -> LaunchRequest:
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    return LaunchRequest(
        binary="/opt/claude/bin/claude",
        cwd=tmp_path / "ws",
        run_dir=run_dir,
        prompt="hello",
        vendor_session_id=SID,
        bridge=BridgeEndpoint(url="http://127.0.0.1:43111/mcp", token=BRIDGE_TOKEN),
        env={
            "PATH": "/usr/bin",
            "HOME": "/home/u",
            "MY_ZAI_KEY": KEY,
            "ANTHROPIC_API_KEY": "sk-ant-should-not-leak",
            "CLAUDE_CODE_OAUTH_TOKEN": "sk-ant-oat-should-not-leak",
            "ANTHROPIC_BASE_URL": "https://api.anthropic.com",
        },
        options={"authTokenEnv": "MY_ZAI_KEY"},
    )


def adapters() -> list[VendorEndpointAdapter]:
    return [GlmAdapter(running_as_root=False), KimiAdapter(running_as_root=False)]


@pytest.mark.parametrize(
    ("cls", "name", "display"),
    [(GlmAdapter, "claude-glm", "Claude Code (GLM)"), (KimiAdapter, "claude-kimi", "Claude Code (Kimi)")],
)
def test_identity_and_entry_points(cls: type[VendorEndpointAdapter], name: str, display: str) -> None:
    a = cls()
    assert isinstance(a, Adapter) and isinstance(a, ClaudeCodeAdapter)
    assert (a.name, a.display_name, a.setting_key, a.default_binary, a.supports_resume) == (
        name,
        display,
        "claudeCode",
        "claude",
        True,
    )
    (ep,) = [ep for ep in entry_points(group="octipus.adapters") if ep.name == name]
    assert ep.load() is cls


@pytest.mark.parametrize(
    ("adapter", "url"), list(zip(adapters(), [GLM_BASE_URL, KIMI_BASE_URL], strict=True))
)
def test_env_mapping_with_default_endpoint(
    request_: LaunchRequest, adapter: VendorEndpointAdapter, url: str
) -> None:
    spec = adapter.build_launch(request_)
    assert spec.env["ANTHROPIC_BASE_URL"] == url
    assert spec.env["ANTHROPIC_AUTH_TOKEN"] == KEY
    assert "ANTHROPIC_API_KEY" not in spec.env and "CLAUDE_CODE_OAUTH_TOKEN" not in spec.env
    assert spec.secrets == (BRIDGE_TOKEN, KEY)
    assert not any(KEY in a for a in spec.argv)
    # the flag-settings layer pins the endpoint and key over the user's settings.json env/apiKeyHelper
    settings_path = request_.run_dir / SETTINGS_FILE_NAME
    assert spec.argv[-1] == f"--settings={settings_path}"
    assert json.loads(spec.files[settings_path]) == {
        "env": {
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_AUTH_TOKEN": KEY,
            "ANTHROPIC_API_KEY": "",
            "CLAUDE_CODE_OAUTH_TOKEN": "",
        },
        "apiKeyHelper": "",
    }
    # everything else is Claude Code's launch
    claude = ClaudeCodeAdapter(running_as_root=False).build_launch(request_)
    assert spec.argv[:-1] == claude.argv and spec.initial_input == claude.initial_input
    assert {p: t for p, t in spec.files.items() if p != settings_path} == claude.files
    assert not any(KEY in text for p, text in spec.files.items() if p != settings_path)
    assert spec.env["DISABLE_TELEMETRY"] == "1"


def test_options_base_url_and_model(request_: LaunchRequest) -> None:
    req = replace(
        request_,
        options={"authTokenEnv": "MY_ZAI_KEY", "baseUrl": " http://127.0.0.1:8080 ", "model": "glm-4.7"},
    )
    spec = GlmAdapter(running_as_root=False).build_launch(req)
    assert spec.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080"
    assert "--model=glm-4.7" in spec.argv
    # the session's model wins over the row option
    spec = GlmAdapter(running_as_root=False).build_launch(replace(req, model="glm-5"))
    assert "--model=glm-5" in spec.argv and "--model=glm-4.7" not in spec.argv


def test_missing_variable_is_named(request_: LaunchRequest) -> None:
    env = {k: v for k, v in request_.env.items() if k != "MY_ZAI_KEY"}
    with pytest.raises(AdapterError, match="environment variable MY_ZAI_KEY") as info:
        GlmAdapter().build_launch(replace(request_, env=env))
    assert "Z.ai" in str(info.value)
    with pytest.raises(AdapterError, match="MY_ZAI_KEY"):
        KimiAdapter().build_launch(replace(request_, env={**env, "MY_ZAI_KEY": "  "}))


def test_auth_token_env_is_required(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match=r"authTokenEnv is not set.*MOONSHOT_API_KEY"):
        KimiAdapter().build_launch(replace(request_, options={}))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"authTokenEnv": "1BAD"}, "environment variable name"),
        ({"authTokenEnv": "OCTIPUS_GLM_KEY"}, r"daemon's own settings \(OCTIPUS_\*\), which never reach"),
        ({"authTokenEnv": 7}, "non-empty string"),
        ({"authTokenEnv": "MY_ZAI_KEY", "baseUrl": "api.z.ai"}, "http"),
        ({"authTokenEnv": "MY_ZAI_KEY", "baseUrl": "https://x y"}, "http"),
        ({"authTokenEnv": "MY_ZAI_KEY", "model": ""}, "non-empty string"),
        ({"authTokenEnv": "MY_ZAI_KEY", "apiKey": "zai-secret"}, "authTokenEnv"),
    ],
)
def test_bad_options(request_: LaunchRequest, options: dict[str, object], message: str) -> None:
    with pytest.raises(AdapterError, match=message) as info:
        GlmAdapter().build_launch(replace(request_, options=options))
    assert "zai-secret" not in str(info.value) and KEY not in str(info.value)


def test_key_with_newline_is_refused_without_echo(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="usable key") as info:
        GlmAdapter().build_launch(replace(request_, env={**request_.env, "MY_ZAI_KEY": "abc\ndef"}))
    assert "abc" not in str(info.value)


def test_claude_errors_still_apply(request_: LaunchRequest) -> None:
    with pytest.raises(AdapterError, match="not allowed"):
        GlmAdapter().build_launch(replace(request_, additive_flags=("--dangerously-skip-permissions",)))
    with pytest.raises(AdapterError, match="session id"):
        KimiAdapter().build_launch(replace(request_, vendor_session_id=None))


# ------------------------------------------------------------------ space mode (seed 003 "In shared spaces")


def test_space_mode_merges_the_endpoint_into_the_locked_settings(request_: LaunchRequest) -> None:
    for adapter in adapters():
        spec = adapter.build_launch(replace(request_, space=True))
        space_file = request_.run_dir / SPACE_SETTINGS_NAME
        settings_flags = [a for a in spec.argv if a.startswith("--settings")]
        assert settings_flags == [f"--settings={space_file}"]  # one layer, no second --settings
        assert "--setting-sources=" in spec.argv
        assert "--permission-mode=default" in spec.argv
        assert request_.run_dir / SETTINGS_FILE_NAME not in spec.files
        settings = json.loads(spec.files[space_file])
        assert settings["env"] == {
            "ANTHROPIC_BASE_URL": adapter.default_base_url,
            "ANTHROPIC_AUTH_TOKEN": KEY,
            "ANTHROPIC_API_KEY": "",
            "CLAUDE_CODE_OAUTH_TOKEN": "",
        }
        assert settings["apiKeyHelper"] == ""
        assert settings["permissions"]["allow"] == []
        assert settings["permissions"]["disableBypassPermissionsMode"] == "disable"
        assert settings["enableAllProjectMcpServers"] is False
        (entry,) = settings["hooks"]["PreToolUse"]
        assert entry["hooks"][0]["command"] == adapter.shell_guard_command
        # the endpoint stays in the process environment too, and the key is a secret
        assert spec.env["ANTHROPIC_BASE_URL"] == adapter.default_base_url
        assert spec.env["ANTHROPIC_AUTH_TOKEN"] == KEY
        assert "ANTHROPIC_API_KEY" not in spec.env and "CLAUDE_CODE_OAUTH_TOKEN" not in spec.env
        assert KEY in spec.secrets and BRIDGE_TOKEN in spec.secrets
        assert all(KEY not in a for a in spec.argv)


def test_space_mode_keeps_plan_and_the_row_model(request_: LaunchRequest) -> None:
    spec = GlmAdapter(running_as_root=False).build_launch(
        replace(
            request_,
            space=True,
            permission_mode=PermissionMode.PLAN,
            options={**request_.options, "model": "glm-4.7"},
        )
    )
    assert "--permission-mode=plan" in spec.argv
    assert "--model=glm-4.7" in spec.argv


def test_outside_a_space_the_vendor_settings_file_is_unchanged(request_: LaunchRequest) -> None:
    spec = KimiAdapter(running_as_root=False).build_launch(request_)
    assert spec.argv[-1] == f"--settings={request_.run_dir / SETTINGS_FILE_NAME}"
    assert "--setting-sources=" not in spec.argv
    assert request_.run_dir / SPACE_SETTINGS_NAME not in spec.files
