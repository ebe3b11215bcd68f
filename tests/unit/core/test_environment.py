"""The vendor's, a command's and a connector server's environment: an allowlist, not the daemon's."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from octipus_antigravity import AntigravityAdapter
from octipus_claude_code import ClaudeCodeAdapter
from octipus_claude_code.variants import GlmAdapter, KimiAdapter
from octipus_codex import CodexAdapter
from octipus_vibe import VibeAdapter

from octipusd.adapter import Adapter, load_adapters
from octipusd.environment import LOGIN_VARIABLES, login_environment, matches, vendor_environment

#: What a daemon's environment may hold besides the login: its settings, its database, other credentials.
DAEMON_SECRETS: Mapping[str, str] = {
    "OCTIPUS_DATABASE_URL": "postgresql://u:secret@db.example/octipus",
    "octipus_daemon__socket": "/run/x.sock",
    "DATABASE_URL": "postgresql://u:secret@db.example/app",
    "PGPASSWORD": "secret",
    "GITHUB_TOKEN": "ghp_x",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "FOO_SECRET": "foo",
    "PYTHONPATH": "/daemon/src",
    "VIRTUAL_ENV": "/daemon/venv",
    "CLAUDECODE": "1",
}
LOGIN: Mapping[str, str] = {
    "PATH": "/login/bin:/usr/bin",
    "HOME": "/home/u",
    "USER": "u",
    "LOGNAME": "u",
    "SHELL": "/bin/bash",
    "LANG": "C.UTF-8",
    "LC_TIME": "en_GB.UTF-8",
    "TERM": "xterm",
    "TZ": "Europe/Paris",
    "TMPDIR": "/tmp/u",
    "XDG_CONFIG_HOME": "/home/u/.config",
    "XDG_RUNTIME_DIR": "/run/user/1000",
    "HTTPS_PROXY": "http://proxy:3128",
    "no_proxy": "localhost",
    "SSL_CERT_FILE": "/etc/ssl/ca.pem",
    "NODE_EXTRA_CA_CERTS": "/etc/ssl/extra.pem",
}
API_KEYS: Mapping[str, str] = {
    "ANTHROPIC_API_KEY": "sk-ant",
    "OPENAI_API_KEY": "sk-oai",
    "ZAI_API_KEY": "zai",
}
CLAUDE_CONFIG: Mapping[str, str] = {
    "CLAUDE_CONFIG_DIR": "/home/u/.claude",
    "CLAUDE_CODE_OAUTH_TOKEN": "oauth",
    "CLAUDE_CODE_MAX_RETRIES": "0",
    "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
    "DISABLE_TELEMETRY": "1",
}
DAEMON: Mapping[str, str] = {**DAEMON_SECRETS, **LOGIN, **API_KEYS, **CLAUDE_CONFIG, "CODEX_HOME": "/c"}


def test_the_login_environment_keeps_only_the_login_variables() -> None:
    assert login_environment(DAEMON) == LOGIN


def test_matches_names_and_prefixes_case_sensitively() -> None:
    assert matches("LC_ALL", LOGIN_VARIABLES) and matches("XDG_DATA_HOME", LOGIN_VARIABLES)
    assert matches("http_proxy", LOGIN_VARIABLES) and matches("HTTP_PROXY", LOGIN_VARIABLES)
    assert not matches("Path", LOGIN_VARIABLES) and not matches("LC", LOGIN_VARIABLES)
    assert not matches("XDG", LOGIN_VARIABLES)


def test_a_vendor_gets_the_login_its_declared_configuration_and_nothing_of_the_daemons() -> None:
    env = vendor_environment(DAEMON, ClaudeCodeAdapter(), {})
    assert env == {**LOGIN, **CLAUDE_CONFIG}


def test_api_keys_pass_only_with_inherit_api_keys_true() -> None:
    claude = ClaudeCodeAdapter()
    assert vendor_environment(DAEMON, claude, {"inheritApiKeys": True}) == {
        **LOGIN,
        **CLAUDE_CONFIG,
        "ANTHROPIC_API_KEY": "sk-ant",  # Claude's own keys only, not OpenAI's or Z.ai's
    }
    assert "ANTHROPIC_API_KEY" not in vendor_environment(DAEMON, claude, {"inheritApiKeys": "yes"})
    glm = vendor_environment(DAEMON, GlmAdapter(), {"inheritApiKeys": True})
    assert glm["ZAI_API_KEY"] == "zai" and "OPENAI_API_KEY" not in glm


def test_a_declared_key_is_a_key_even_when_a_config_prefix_covers_it() -> None:
    daemon = {**DAEMON, "CODEX_API_KEY": "sk-codex"}
    env = vendor_environment(daemon, CodexAdapter(), {})
    assert env == {**LOGIN, "CODEX_HOME": "/c"}
    assert vendor_environment(daemon, CodexAdapter(), {"inheritApiKeys": True})["CODEX_API_KEY"] == "sk-codex"


def test_pass_env_and_auth_token_env_name_variables_and_env_is_set_last() -> None:
    options = {
        "passEnv": ["GITHUB_TOKEN", "OPENAI_API_KEY", "NOT_SET", "OCTIPUS_DATABASE_URL"],
        "authTokenEnv": "ZAI_API_KEY",
        "env": {"HOME": "/row/home", "ROW_ONLY": "x"},
    }
    env = vendor_environment(DAEMON, ClaudeCodeAdapter(), options)
    assert env == {
        **LOGIN,
        **CLAUDE_CONFIG,
        "GITHUB_TOKEN": "ghp_x",
        "OPENAI_API_KEY": "sk-oai",  # named on the row: passes without inheritApiKeys
        "ZAI_API_KEY": "zai",
        "HOME": "/row/home",
        "ROW_ONLY": "x",
    }


@pytest.mark.parametrize(
    "adapter",
    [ClaudeCodeAdapter(), GlmAdapter(), KimiAdapter(), CodexAdapter(), VibeAdapter(), AntigravityAdapter()],
)
def test_every_adapter_declares_its_variables_and_none_of_the_daemons(adapter: Adapter) -> None:
    assert isinstance(adapter.config_env, frozenset) and isinstance(adapter.api_key_env, frozenset)
    assert adapter.api_key_env, "every vendor reads some API key"
    for pattern in adapter.config_env | adapter.api_key_env:
        assert not pattern.upper().startswith("OCTIPUS"), pattern
        assert "*" not in pattern[:-1], pattern
    env = vendor_environment(DAEMON, adapter, {"inheritApiKeys": True})
    assert not set(DAEMON_SECRETS) & set(env)


def test_the_installed_adapters_declare_every_key_the_runtime_used_to_strip() -> None:
    declared = set().union(*(a.api_key_env for a in load_adapters().values()))
    old_list = {"ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "OPENAI_API_KEY", "CODEX_API_KEY"}
    old_list |= {"MISTRAL_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "ZAI_API_KEY", "ZHIPUAI_API_KEY"}
    old_list |= {"MOONSHOT_API_KEY", "KIMI_API_KEY"}
    assert old_list <= declared
