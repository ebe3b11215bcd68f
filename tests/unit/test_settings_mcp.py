"""``mcpServers`` settings: defaults, per-tool overrides and clear validation errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from octipusd.app import McpServersSource
from octipusd.errors import ConfigError
from octipusd.settings import McpServerSettings, load_settings


def _env(tmp_path: Path) -> dict[str, str]:
    return {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg"), "PATH": "/usr/bin:/bin"}


def _load(tmp_path: Path, toml: str) -> dict[str, McpServerSettings]:
    config = tmp_path / "c.toml"
    config.write_text(toml)
    return load_settings(config, _env(tmp_path)).mcpServers


def test_no_servers_by_default(tmp_path: Path) -> None:
    assert load_settings(None, _env(tmp_path)).mcpServers == {}


def test_stdio_and_http_servers_with_defaults_and_overrides(tmp_path: Path) -> None:
    servers = _load(
        tmp_path,
        """
[mcpServers.ledger]
transport = "stdio"
command = "ledger-mcp"
args = ["--ledger", "/srv/ledger.tsv"]
env = { LEDGER_MODE = "strict" }
[mcpServers.ledger.tools.append_entry]
riskClass = "compensatable"
idempotencyKey = "key"
probe = { tool = "find_entry", arguments = { key = "{idempotencyKey}" } }
compensation = { tool = "remove_entry", arguments = { key = "{idempotencyKey}", reason = "undo" } }

[mcpServers.tickets-2]
transport = "http"
url = "https://tickets.example/mcp"
headers = { Authorization = "Bearer t" }
trustRecoveryHints = true
riskClass = "containable"
owner = "ops"
connectTimeoutSeconds = 5
callTimeoutSeconds = 60
deadlineSeconds = 120
enabled = false
""",
    )
    ledger = servers["ledger"]
    assert (
        ledger.transport == "stdio"
        and ledger.command == "ledger-mcp"
        and ledger.env == {"LEDGER_MODE": "strict"}
    )
    assert ledger.trustRecoveryHints is False and ledger.enabled is True
    assert ledger.riskClass == "irreversible" and ledger.owner is None
    assert (ledger.connectTimeoutSeconds, ledger.callTimeoutSeconds, ledger.deadlineSeconds) == (
        15,
        300,
        3600,
    )
    tool = ledger.tools["append_entry"]
    assert tool.riskClass == "compensatable" and tool.idempotencyKey == "key"
    assert tool.probe is not None and tool.probe.tool == "find_entry" and tool.probe.uses_idempotency_key
    assert tool.compensation is not None and tool.compensation.arguments["reason"] == "undo"
    tickets = servers["tickets-2"]
    assert tickets.url == "https://tickets.example/mcp" and tickets.headers == {"Authorization": "Bearer t"}
    assert tickets.trustRecoveryHints and not tickets.enabled and tickets.owner == "ops"
    assert tickets.riskClass == "containable" and tickets.callTimeoutSeconds == 60


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('[mcpServers.led_ger]\ntransport = "stdio"\ncommand = "x"\n', "server name 'led_ger' is invalid"),
        ('[mcpServers."a.b"]\ntransport = "stdio"\ncommand = "x"\n', "server name 'a.b' is invalid"),
        (f'[mcpServers.{"a" * 41}]\ntransport = "stdio"\ncommand = "x"\n', "1-40 letters"),
        ('[mcpServers.shell]\ntransport = "stdio"\ncommand = "x"\n', "'shell' is reserved"),
        ('[mcpServers.a]\ncommand = "x"\n', "mcpServers.a.transport: Field required"),
        ('[mcpServers.a]\ntransport = "ws"\n', "mcpServers.a.transport: Input should be 'stdio' or 'http'"),
        ('[mcpServers.a]\ntransport = "stdio"\n', "mcpServers.a: transport stdio needs command"),
        ('[mcpServers.a]\ntransport = "http"\n', "mcpServers.a: transport http needs url"),
        ('[mcpServers.a]\ntransport = "http"\nurl = "ftp://h/x"\n', "is not an http:// or https:// URL"),
        ('[mcpServers.a]\ntransport = "http"\nurl = "http:///x"\n', "is not an http:// or https:// URL"),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\nurl = "http://h"\n',
            "apply only to transport http",
        ),
        (
            '[mcpServers.a]\ntransport = "http"\nurl = "http://h"\ncommand = "x"\n',
            "apply only to transport stdio",
        ),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\nriskClass = "maybe"\n',
            "mcpServers.a.riskClass",
        ),
        ('[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\ncallTimeoutSeconds = 0\n', "greater than 0"),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\nterminationCancelsCalls = "yes"\n',
            "mcpServers.a.terminationCancelsCalls: Input should be a valid boolean",
        ),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\ntrustRecoveryHints = 1\n',
            "mcpServers.a.trustRecoveryHints: Input should be a valid boolean",
        ),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\n[mcpServers.a.tools.t]\ncallTimeoutSeconds = -5\n',
            "mcpServers.a.tools.t.callTimeoutSeconds",
        ),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\ntrustHints = true\n',
            "mcpServers.a.trustHints: unknown",
        ),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\n[mcpServers.a.tools.t]\n'
            'probe = { tool = "find", arguments = { key = "{idempotencyKey}" } }\n',
            "probe arguments use '{idempotencyKey}' but the tool sets no idempotencyKey",
        ),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\n[mcpServers.a.tools.t]\n'
            'compensation = { tool = "undo", arguments = { keys = ["{idempotencyKey}"] } }\n',
            "compensation arguments use '{idempotencyKey}'",
        ),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\n[mcpServers.a.tools.t]\nprobe = { tool = "bad name" }\n',
            "'bad name' is not an MCP tool name",
        ),
        (
            '[mcpServers.a]\ntransport = "stdio"\ncommand = "x"\n[mcpServers.a.tools."bad name"]\n',
            "not an MCP tool",
        ),
    ],
)
def test_invalid_servers_name_the_key_and_the_problem(tmp_path: Path, toml: str, expected: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_settings(config, _env(tmp_path))
    message = info.value.message
    assert expected in message
    assert "mcpServers" in message
    # A missing key is reported "from defaults" by load_settings; a wrong one names the file.
    assert f"file {config}" in message or "Field required" in message
    assert "\n" not in message


def test_the_daemon_reads_mcp_servers_again_only_when_the_file_changed(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[mcpServers.one]\ntransport = "stdio"\ncommand = "one"\n')
    source = McpServersSource(load_settings(config, _env(tmp_path)), config)
    first = source()
    assert list(first) == ["one"]
    assert source() is first  # unchanged: the validated servers are kept, not read again
    config.write_text('[mcpServers.two]\ntransport = "stdio"\ncommand = "two"\n')
    assert list(source()) == ["two"]  # the next connection sees the edit
    config.write_text('[mcpServers.two]\ntransport = "stdio"\nbogus = 1\n')
    assert list(source()) == ["two"] and source.problem is not None and "bogus" in source.problem
    assert source.notices()  # and every run is told, until it is fixed
    config.write_text('[mcpServers.three]\ntransport = "stdio"\ncommand = "three"\n')
    assert list(source()) == ["three"] and source.problem is None
