"""Settings: the seed's keys from TOML and environment, errors that name key, source and accepted values."""

from __future__ import annotations

from pathlib import Path

import pytest

from octipusd.adapter import load_adapters
from octipusd.app import vendor_binaries
from octipusd.errors import ConfigError
from octipusd.settings import (
    Settings,
    VendorBinary,
    default_config_path,
    default_socket_path,
    load_settings as load_any,
)

#: The installed adapters' binary settings, as the daemon passes them.
VENDORS = vendor_binaries(load_adapters())


def load_settings(config: Path | None, environ: dict[str, str]) -> Settings:
    return load_any(config, environ, VENDORS)


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), **extra}


def test_defaults(tmp_path: Path) -> None:
    s = load_settings(None, _env(tmp_path))
    assert s.cliModels.path is None and s.cliModels.binary_path("claudeCode") is None
    assert s.agent.promptDumps is True and s.permissions.rules is None
    assert s.daemon.approvalTimeoutSeconds == 300


def test_seed_keys_from_toml_file(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text(
        "[cliModels]\n"
        'path = "/opt/bin:/usr/bin"\n'
        '[cliModels.claudeCode]\nbinaryPath = "/opt/claude/bin/claude"\n'
        '[cliModels.codexCli]\nbinaryPath = "codex"\n'
        '[cliModels.antigravityCli]\nbinaryPath = "agy"\n'
        '[cliModels.mistralVibe]\nbinaryPath = "vibe-acp"\n'
        "[agent]\npromptDumps = false\n"
        '[permissions]\nrules = { allow = ["cli-native:Bash(git:*)"] }\n'
    )
    s = load_settings(config, _env(tmp_path))
    assert s.cliModels.path == "/opt/bin:/usr/bin"
    assert s.cliModels.binary_path("claudeCode") == "/opt/claude/bin/claude"
    assert s.cliModels.binary_path("codexCli") == "codex"
    assert s.cliModels.binary_path("antigravityCli") == "agy"
    assert s.cliModels.binary_path("mistralVibe") == "vibe-acp"
    assert s.agent.promptDumps is False
    assert s.permissions.rules == {"allow": ["cli-native:Bash(git:*)"]}


def test_default_config_file_is_read(tmp_path: Path) -> None:
    env = _env(tmp_path)
    path = default_config_path(env)
    path.parent.mkdir(parents=True)
    path.write_text("[agent]\npromptDumps = false\n")
    assert load_settings(None, env).agent.promptDumps is False


def test_first_boot_environment_names(tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        OCTIPUS_CLI_PATH="/a:/b",
        OCTIPUS_CLAUDE_BINARY="claude-x",
        OCTIPUS_CODEX_BINARY="/c/codex",
        OCTIPUS_ANTIGRAVITY_BINARY="agy2",
        OCTIPUS_VIBE_BINARY="/v/vibe-acp",
        OCTIPUS_DATABASE_URL="postgresql+psycopg://u@/db",
    )
    s = load_settings(None, env)
    assert s.cliModels.path == "/a:/b"
    assert s.cliModels.binary_path("claudeCode") == "claude-x"
    assert s.cliModels.binary_path("codexCli") == "/c/codex"
    assert s.cliModels.binary_path("antigravityCli") == "agy2"
    assert s.cliModels.binary_path("mistralVibe") == "/v/vibe-acp"
    assert s.database.url == "postgresql+psycopg://u@/db"


def test_file_wins_over_first_boot_variable(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[cliModels.claudeCode]\nbinaryPath = "from-file"\n')
    s = load_settings(config, _env(tmp_path, OCTIPUS_CLAUDE_BINARY="from-env"))
    assert s.cliModels.binary_path("claudeCode") == "from-file"


@pytest.mark.parametrize(
    ("toml", "key", "accepted"),
    [
        ('[cliModels]\npath = "relative/bin"\n', "cliModels.path", "absolute directories"),
        ('[cliModels.codexCli]\nbinaryPath = "x/codex"\n', "cliModels.codexCli.binaryPath", "absolute path"),
        ('[agent]\npromptDumps = "sometimes"\n', "agent.promptDumps", "true or false"),
        ('[database]\nurl = "mysql://x"\n', "database.url", "postgresql+psycopg"),
        ("[daemon]\napprovalTimeoutSeconds = 0\n", "daemon.approvalTimeoutSeconds", "at most 300"),
        ('[permissions]\nrules = { alow = ["x"] }\n', "permissions.rules", "allow"),
    ],
)
def test_invalid_value_names_key_file_and_accepted_values(
    tmp_path: Path, toml: str, key: str, accepted: str
) -> None:
    config = tmp_path / "c.toml"
    config.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_settings(config, _env(tmp_path))
    assert key in info.value.message and f"file {config}" in info.value.message
    assert accepted in info.value.message
    assert info.value.exit_code == 2


def test_unknown_key_and_bad_toml(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[agent]\npromptDump = true\n")
    with pytest.raises(ConfigError, match=r"agent\.promptDump: unknown setting"):
        load_settings(config, _env(tmp_path))
    config.write_text("[agent\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(config, _env(tmp_path))
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "missing.toml", _env(tmp_path))


def test_the_replaced_daemon_web_port_names_its_successors(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text("[daemon]\nwebPort = 8765\n")
    with pytest.raises(ConfigError) as info:
        load_settings(config, _env(tmp_path))
    assert "daemon.webPort" in info.value.message and f"file {config}" in info.value.message
    assert "web.port" in info.value.message and "web.enabled" in info.value.message
    with pytest.raises(ConfigError, match=r"daemon\.webPort.*environment variable OCTIPUS_DAEMON__WEBPORT"):
        load_settings(None, _env(tmp_path, OCTIPUS_DAEMON__WEBPORT="0"))


def test_invalid_variable_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(None, _env(tmp_path, OCTIPUS_CLAUDE_BINARY="rel/claude"))
    assert "environment variable OCTIPUS_CLAUDE_BINARY" in info.value.message


def test_cli_model_sections_are_the_adapters_declared_keys(tmp_path: Path) -> None:
    # the nested variable of a declared key, in any case, and a file section no adapter declares
    nested = load_settings(None, _env(tmp_path, OCTIPUS_CLIMODELS__CODEXCLI__BINARYPATH="/n/codex"))
    assert nested.cliModels.binary_path("codexCli") == "/n/codex"
    config = tmp_path / "c.toml"
    config.write_text('[cliModels.codexCLI]\nbinaryPath = "codex"\n')
    with pytest.raises(ConfigError, match=r"cliModels\.codexCLI: unknown setting"):
        load_settings(config, _env(tmp_path))
    # a vendor added by its package alone: its key and first-boot variable come with it
    plugin = [*VENDORS, VendorBinary("pluginCli", "OCTIPUS_PLUGIN_BINARY")]
    config.write_text('[cliModels.pluginCli]\nbinaryPath = "/p/plugin"\n')
    assert load_any(config, _env(tmp_path), plugin).cliModels.binary_path("pluginCli") == "/p/plugin"
    from_env = load_any(None, _env(tmp_path, OCTIPUS_PLUGIN_BINARY="plugin2"), plugin)
    assert from_env.cliModels.binary_path("pluginCli") == "plugin2"
    with pytest.raises(ConfigError, match="environment variable OCTIPUS_PLUGIN_BINARY"):
        load_any(None, _env(tmp_path, OCTIPUS_PLUGIN_BINARY="rel/plugin"), plugin)
    assert {v.env for v in VENDORS} == {
        "OCTIPUS_CLAUDE_BINARY",
        "OCTIPUS_CODEX_BINARY",
        "OCTIPUS_ANTIGRAVITY_BINARY",
        "OCTIPUS_VIBE_BINARY",
    }


def test_swarm_level_table_from_toml_and_first_boot_variable(tmp_path: Path) -> None:
    """A level table may give one key (the level's other limits keep their defaults); the seed's
    first-boot variable turns worktree isolation on; a bad limit names its dotted key."""
    config = tmp_path / "c.toml"
    config.write_text("[swarm.levelDefaults.agent]\nfanOut = 1\n")
    s = load_settings(config, _env(tmp_path, SWARM_WORKTREE_ISOLATION="true"))
    assert s.swarm.worktreeIsolation is True
    agent = s.swarm.levelDefaults.agent
    assert (agent.fanOut, agent.tokens, agent.wallMs, agent.maxPendingDetached) == (1, 80_000, 600_000, 3)
    assert s.swarm.levelDefaults.root.fanOut == 6 and s.swarm.levelDefaults.subagent.fanOut == 0
    assert s.swarm.levelDefaults.at(1) == agent
    defaults = load_settings(None, _env(tmp_path))
    assert defaults.swarm.worktreeIsolation is False and defaults.swarm.levelDefaults.agent.fanOut == 4

    nested = load_settings(None, _env(tmp_path, OCTIPUS_SWARM__LEVELDEFAULTS__ROOT__FANOUT="2"))
    assert nested.swarm.levelDefaults.root.fanOut == 2 and nested.swarm.levelDefaults.root.tokens == 200_000

    config.write_text("[swarm.levelDefaults.agent]\nfanOut = 101\n")
    with pytest.raises(ConfigError) as info:
        load_settings(config, _env(tmp_path))
    message = info.value.message
    assert "swarm.levelDefaults.agent.fanOut" in message and f"file {config}" in message, message
    assert "a whole number of children from 0 to 100" in message, message
    config.write_text("[swarm.levelDefaults.agnet]\nfanOut = 1\n")
    with pytest.raises(ConfigError, match=r"swarm\.levelDefaults\.agnet: unknown setting"):
        load_settings(config, _env(tmp_path))
    with pytest.raises(ConfigError, match="environment variable SWARM_WORKTREE_ISOLATION"):
        load_settings(None, _env(tmp_path, SWARM_WORKTREE_ISOLATION="maybe"))


def test_socket_path_under_runtime_dir(tmp_path: Path) -> None:
    assert default_socket_path({"XDG_RUNTIME_DIR": str(tmp_path)}) == tmp_path / "octipus" / "octipusd.sock"
