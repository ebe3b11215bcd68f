"""MCP connectors against the real ledger MCP server (stdio and streamable HTTP subprocesses).

No MCP piece is mocked: the server is ``octipusd.testing.ledger_mcp`` in its own process, the
client is the SDK's ``ClientSession``; the ledger file is the evidence of side effects.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import TextContent

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.server import open_bridge
from octipusd.connectors import ConnectorRegistry
from octipusd.connectors.registry import ConnectorSecrets
from octipusd.errors import (
    ConnectorCompensationError,
    ConnectorUnavailableError,
    NotFoundError,
    VaultAccessError,
)
from octipusd.settings import McpServerSettings
from octipusd.testing import ledger_mcp
from octipusd.testing.ledger_mcp import count_lines
from octipusd.toolkit import (
    ActionRef,
    NotExecutedError,
    ProbeStatus,
    RiskClass,
    RunIdentity,
    ToolOutcome,
    ToolSpec,
    validate_tool_specs,
)
from octipusd.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio

LEDGER_MODULE = "octipusd.testing.ledger_mcp"

# ---------------------------------------------------------------------------- helpers


start_http_server = ledger_mcp.start_http_server
stop = ledger_mcp.stop_server


@dataclass
class LedgerEnv:
    """One ledger server reachable over one transport, and helpers on its files."""

    transport: str
    ledger: Path
    faults: Path
    url: str | None = None
    servers: dict[str, McpServerSettings] = field(default_factory=dict)

    def settings(self, **overrides: Any) -> McpServerSettings:
        base: dict[str, Any] = {"transport": self.transport, "connectTimeoutSeconds": 15}
        if self.transport == "stdio":
            base |= {
                "command": sys.executable,
                "args": ["-m", LEDGER_MODULE, "--ledger", str(self.ledger), "--faults", str(self.faults)],
            }
        else:
            base["url"] = self.url
        return McpServerSettings.model_validate(base | overrides)

    def registry(
        self, name: str = "ledger", secrets: ConnectorSecrets | None = None, **overrides: Any
    ) -> ConnectorRegistry:
        self.servers[name] = self.settings(**overrides)
        return ConnectorRegistry(lambda: self.servers, secrets)

    def fault(self, tool: str, mode: str, seconds: float = 0) -> None:
        self.faults.write_text(json.dumps({tool: {"mode": mode, "seconds": seconds}}))

    def clear_faults(self) -> None:
        self.faults.write_text("{}")

    def count(self, key: str | None = None) -> int:
        return count_lines(self.ledger, key)


def new_key() -> str:
    return f"k-{uuid.uuid4().hex[:10]}"


def by_name(tools: tuple[ToolSpec, ...]) -> dict[str, ToolSpec]:
    return {spec.name: spec for spec in tools}


async def call(spec: ToolSpec, identity: RunIdentity, **arguments: Any) -> Any:
    return await spec.handler(identity, FakeToolHost(), arguments)


def action(key: str | None, tool: str = "ledger.append_entry") -> ActionRef:
    return ActionRef(action_id="a-1", tool=tool, idempotency_key=key, session_id="session-1", user="alice")


# ---------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """One HTTP ledger server per module (tests use fresh keys and reset the faults file)."""
    folder = tmp_path_factory.mktemp("ledger-http")
    ledger, faults = folder / "ledger.tsv", folder / "faults.json"
    faults.write_text("{}")
    proc, url = start_http_server(ledger, faults, folder / "port")
    try:
        yield url, ledger, faults
    finally:
        stop(proc)


@pytest.fixture(params=["stdio", "http"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LedgerEnv]:
    if request.param == "stdio":
        faults = tmp_path / "faults.json"
        faults.write_text("{}")
        yield LedgerEnv("stdio", tmp_path / "ledger.tsv", faults)
        return
    url, ledger, faults = request.getfixturevalue("http_server")
    faults.write_text("{}")
    try:
        yield LedgerEnv("http", ledger, faults, url=url)
    finally:
        faults.write_text("{}")


@pytest.fixture
def http_env(http_server: tuple[str, Path, Path]) -> Iterator[LedgerEnv]:
    """The module's HTTP ledger server (probes and compensations open a connection each; over
    HTTP that is cheap, over stdio it spawns a server)."""
    url, ledger, faults = http_server
    faults.write_text("{}")
    try:
        yield LedgerEnv("http", ledger, faults, url=url)
    finally:
        faults.write_text("{}")


# ---------------------------------------------------------------------------- discovery


async def test_discovery_untrusted_server_has_no_read_only_tools(
    env: LedgerEnv, identity: RunIdentity
) -> None:
    registry = env.registry()
    async with registry.connect_all() as connectors:
        assert connectors.notices == ()
        tools = by_name(connectors.tools)
        assert set(tools) == {
            "ledger__append_entry",
            "ledger__append_pair",
            "ledger__find_entry",
            "ledger__remove_entry",
            "ledger__list_entries",
            "ledger__lying_read",
            "ledger__show_env",
        }
        append = tools["ledger__append_entry"]
        assert append.identity == "ledger.append_entry" and append.tool_id == "ledger.append_entry"
        assert append.input_schema["type"] == "object"
        assert set(append.input_schema["properties"]) == {"key", "text"}
        assert append.description.startswith("Append one line")
        assert append.timeout_seconds == 300 + 5
        # Untrusted: every hint is ignored, every tool is a journaled mutation.
        assert all(spec.mutating and not spec.read_only for spec in connectors.tools)
        contract = tools["ledger__find_entry"].recovery_contract
        assert contract.risk_class is RiskClass.IRREVERSIBLE
        # Publishable next to Octipus's own tools.
        validate_tool_specs((*DEFAULT_TOOLS, *connectors.tools))

        # lying_read claims readOnlyHint but appends: the call is a mutation and it happened.
        key = new_key()
        assert await call(tools["ledger__lying_read"], identity, key=key) == {"found": False}
        assert env.count(key) == 1


async def test_discovery_trusted_server_honours_exact_read_only_hint(env: LedgerEnv) -> None:
    registry = env.registry(trustRecoveryHints=True)
    async with registry.connect_all() as connectors:
        tools = by_name(connectors.tools)
        read_only = {name for name, spec in tools.items() if spec.read_only}
        assert read_only == {
            "ledger__find_entry",
            "ledger__list_entries",
            "ledger__lying_read",
            "ledger__show_env",
        }
        assert tools["ledger__find_entry"].contract is None
        assert tools["ledger__append_entry"].mutating
        assert tools["ledger__append_entry"].recovery_contract.risk_class is RiskClass.IRREVERSIBLE


async def test_trust_is_read_again_on_the_next_connection(env: LedgerEnv) -> None:
    registry = env.registry(trustRecoveryHints=False)
    async with registry.connect_all() as connectors:
        assert not by_name(connectors.tools)["ledger__find_entry"].read_only
    env.servers["ledger"] = env.settings(trustRecoveryHints=True)
    async with registry.connect_all() as connectors:
        assert by_name(connectors.tools)["ledger__find_entry"].read_only
    env.servers["ledger"] = env.settings(enabled=False)
    async with registry.connect_all() as connectors:
        assert connectors.tools == () and connectors.notices == ()


# ---------------------------------------------------------------------------- call outcomes


async def test_completed_call_appends_exactly_once(env: LedgerEnv, identity: RunIdentity) -> None:
    async with env.registry().connect_all() as connectors:
        tools = by_name(connectors.tools)
        key = new_key()
        assert await call(tools["ledger__append_entry"], identity, key=key, text="hello") == {"appended": key}
        assert env.count(key) == 1
        listing = await call(tools["ledger__list_entries"], identity)
        assert {"key": key, "text": "hello"} in listing["entries"]


async def test_is_error_is_uncertain(env: LedgerEnv, identity: RunIdentity) -> None:
    async with env.registry(trustRecoveryHints=True).connect_all() as connectors:
        append = by_name(connectors.tools)["ledger__append_entry"]
        env.fault("append_entry", "error_after")
        key = new_key()
        # Arguments cannot claim anything: a declaration inside them is just data for the server.
        outcome = await call(
            append, identity, key=key, text="x", _meta={"octipus/recovery": {"outcome": "not_executed"}}
        )
        assert isinstance(outcome, ToolOutcome)
        assert outcome.is_error and outcome.detail == "isError"
        assert outcome.uncertain == "ledger.append_entry reported an error; it may have acted before failing"
        assert "failed after writing" in str(outcome.value)
        assert env.count(key) == 1


async def test_trusted_not_executed_declaration(env: LedgerEnv, identity: RunIdentity) -> None:
    async with env.registry(trustRecoveryHints=True).connect_all() as connectors:
        append = by_name(connectors.tools)["ledger__append_entry"]
        env.fault("append_entry", "not_executed")
        key = new_key()
        with pytest.raises(NotExecutedError, match="refused before its mutation boundary"):
            await call(append, identity, key=key, text="x")
        assert env.count(key) == 0


async def test_untrusted_not_executed_declaration_is_ignored(env: LedgerEnv, identity: RunIdentity) -> None:
    async with env.registry(trustRecoveryHints=False).connect_all() as connectors:
        append = by_name(connectors.tools)["ledger__append_entry"]
        env.fault("append_entry", "not_executed")
        outcome = await call(append, identity, key=new_key(), text="x")
        assert isinstance(outcome, ToolOutcome) and outcome.uncertain and outcome.is_error
        # A lying server that wrote and then declared not_executed stays uncertain too.
        env.fault("append_entry", "lie_not_executed")
        key = new_key()
        outcome = await call(append, identity, key=key, text="x")
        assert isinstance(outcome, ToolOutcome) and outcome.uncertain and outcome.detail == "isError"
        assert env.count(key) == 1


async def test_timeout_after_acceptance_is_uncertain(env: LedgerEnv, identity: RunIdentity) -> None:
    async with env.registry(callTimeoutSeconds=0.5).connect_all() as connectors:
        append = by_name(connectors.tools)["ledger__append_entry"]
        assert append.timeout_seconds == 5.5
        env.fault("append_entry", "hang_after", seconds=3)
        key = new_key()
        started = time.monotonic()
        outcome = await call(append, identity, key=key, text="x")
        assert time.monotonic() - started < 2.5
        assert isinstance(outcome, ToolOutcome) and outcome.is_error
        assert outcome.uncertain == "ledger.append_entry timed out after 0.5 s; it may have acted"
        assert outcome.detail is not None and outcome.detail.startswith("MCPError")
        assert env.count(key) == 1  # the effect happened before the answer was lost


async def test_partial_multi_step_error_is_uncertain(env: LedgerEnv, identity: RunIdentity) -> None:
    async with env.registry().connect_all() as connectors:
        pair = by_name(connectors.tools)["ledger__append_pair"]
        env.fault("append_pair", "fail_second_step")
        key = new_key()
        outcome = await call(pair, identity, key=key, first="a", second="b")
        assert isinstance(outcome, ToolOutcome) and outcome.uncertain
        assert env.count(key) == 1


async def test_calls_after_the_connection_closed_are_not_executed(
    env: LedgerEnv, identity: RunIdentity
) -> None:
    async with env.registry().connect_all() as connectors:
        append = by_name(connectors.tools)["ledger__append_entry"]
    key = new_key()
    with pytest.raises(NotExecutedError, match="connection to MCP server 'ledger' is closed"):
        await call(append, identity, key=key, text="x")
    assert env.count(key) == 0


async def test_crashed_stdio_server_call_is_uncertain_and_next_is_not_executed(
    tmp_path: Path, identity: RunIdentity
) -> None:
    faults = tmp_path / "faults.json"
    ledger_env = LedgerEnv("stdio", tmp_path / "ledger.tsv", faults)
    ledger_env.fault("append_entry", "crash_after")
    async with ledger_env.registry().connect_all() as connectors:
        append = by_name(connectors.tools)["ledger__append_entry"]
        outcome = await call(append, identity, key="first", text="x")
        assert isinstance(outcome, ToolOutcome) and outcome.uncertain and outcome.is_error
        assert ledger_env.count("first") == 1
        ledger_env.clear_faults()
        with pytest.raises(NotExecutedError, match=r"nothing reached the server|is closed"):
            await call(append, identity, key="second", text="x")
        assert ledger_env.count("second") == 0


async def test_http_server_gone_before_the_call_is_not_executed(
    tmp_path: Path, identity: RunIdentity
) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text("{}")
    proc, url = start_http_server(tmp_path / "ledger.tsv", faults, tmp_path / "port")
    try:
        ledger_env = LedgerEnv("http", tmp_path / "ledger.tsv", faults, url=url)
        async with ledger_env.registry().connect_all() as connectors:
            append = by_name(connectors.tools)["ledger__append_entry"]
            assert await call(append, identity, key="first", text="x") == {"appended": "first"}
            proc.kill()
            proc.wait()
            # The POST cannot connect: the request provably never reached the server.
            with pytest.raises(NotExecutedError, match=r"nothing reached the server|is closed"):
                await call(append, identity, key="second", text="x")
            with pytest.raises(NotExecutedError):
                await call(append, identity, key="third", text="x")
        assert ledger_env.count() == 1
    finally:
        stop(proc)


# ---------------------------------------------------------------------------- failures to connect


async def test_a_server_that_fails_to_start_is_a_notice(env: LedgerEnv, tmp_path: Path) -> None:
    env.servers["ledger"] = env.settings()
    env.servers["broken"] = McpServerSettings(
        transport="stdio", command=sys.executable, args=["-m", "octipusd_no_such_module"]
    )
    env.servers["missing"] = McpServerSettings(transport="stdio", command=str(tmp_path / "no-such-binary"))
    env.servers["refused"] = McpServerSettings(
        transport="http", url="http://127.0.0.1:9/mcp", connectTimeoutSeconds=3
    )
    registry = ConnectorRegistry(lambda: env.servers)
    async with registry.connect_all() as connectors:
        assert {spec.name.split("__")[0] for spec in connectors.tools} == {"ledger"}
        notices = "\n".join(connectors.notices)
        assert len(connectors.notices) == 3
        assert "MCP server 'broken' is unavailable" in notices and "No module named" in notices
        assert "MCP server 'missing' is unavailable: FileNotFoundError" in notices
        assert "MCP server 'refused' is unavailable: ConnectError" in notices


async def test_connect_timeout_is_a_notice(tmp_path: Path) -> None:
    # A process that never answers the handshake.
    servers = {
        "silent": McpServerSettings(
            transport="stdio",
            command=sys.executable,
            args=["-c", "import sys\nfor _ in sys.stdin: pass"],  # reads requests, never answers
            connectTimeoutSeconds=0.5,
        )
    }
    registry = ConnectorRegistry(lambda: servers)
    started = time.monotonic()
    async with registry.connect_all() as connectors:
        assert connectors.notices == ("MCP server 'silent' is unavailable: did not connect within 0.5 s",)
    assert time.monotonic() - started < 6


async def test_connect_one_server(env: LedgerEnv) -> None:
    env.servers["ledger"] = env.settings()
    env.servers["off"] = env.settings(enabled=False)
    env.servers["refused"] = McpServerSettings(
        transport="http", url="http://127.0.0.1:9/mcp", connectTimeoutSeconds=3
    )
    registry = ConnectorRegistry(lambda: env.servers)
    async with registry.connect("ledger") as connectors:
        assert "ledger__append_entry" in by_name(connectors.tools)
    with pytest.raises(NotFoundError, match="'nowhere' is not configured"):
        async with registry.connect("nowhere"):
            pass
    with pytest.raises(NotFoundError, match="'off' is disabled"):
        async with registry.connect("off"):
            pass
    with pytest.raises(
        ConnectorUnavailableError, match="MCP server 'refused' is unavailable: ConnectError"
    ) as info:
        async with registry.connect("refused"):
            pass
    assert info.value.http_status == 503


async def test_an_error_in_the_block_propagates_unwrapped(env: LedgerEnv) -> None:
    with pytest.raises(KeyError, match="boom"):
        async with env.registry().connect_all():
            raise KeyError("boom")


# ---------------------------------------------------------------------------- contracts


def recovery_overrides() -> dict[str, Any]:
    probe = {"tool": "find_entry", "arguments": {"key": "{idempotencyKey}"}}
    compensation = {"tool": "remove_entry", "arguments": {"key": "{idempotencyKey}"}}
    return {
        "riskClass": "containable",
        "owner": "ops",
        "tools": {
            "append_entry": {
                "riskClass": "compensatable",
                "deadlineSeconds": 60,
                "idempotencyKey": "key",
                "probe": probe,
                "compensation": compensation,
            },
            "append_pair": {"idempotencyKey": "key", "probe": probe, "owner": "ledger-team"},
        },
    }


async def test_contract_from_configuration(env: LedgerEnv) -> None:
    registry = env.registry(**recovery_overrides())
    async with registry.connect_all() as connectors:
        contract = by_name(connectors.tools)["ledger__append_entry"].recovery_contract
    assert contract.risk_class is RiskClass.COMPENSATABLE
    assert contract.owner == "ops" and contract.deadline_seconds == 60
    assert contract.idempotency_key is not None and contract.probe and contract.compensation
    assert contract.idempotency_key({"key": "k1", "text": "x"}) == "k1"
    assert contract.idempotency_key({"key": "", "text": "x"}) is None
    assert contract.idempotency_key({"key": 7}) is None

    offline = registry.contract_for("ledger.append_pair")
    assert offline is not None
    assert offline.risk_class is RiskClass.CONTAINABLE and offline.owner == "ledger-team"
    assert offline.compensation is None and offline.probe is not None
    default = registry.contract_for("ledger.list_entries")
    assert default is not None and default.risk_class is RiskClass.CONTAINABLE and default.probe is None
    assert registry.contract_for("elsewhere.tool") is None
    assert registry.contract_for("no-dot") is None


async def test_probe_applied_not_applied_partial_unavailable(
    http_env: LedgerEnv, identity: RunIdentity
) -> None:
    env = http_env
    registry = env.registry(**recovery_overrides())
    append = registry.contract_for("ledger.append_entry")
    pair = registry.contract_for("ledger.append_pair")
    assert append is not None and append.probe is not None
    assert pair is not None and pair.probe is not None
    key = new_key()
    assert (await append.probe(action(key))).status is ProbeStatus.NOT_APPLIED
    async with registry.connect_all() as connectors:
        tools = by_name(connectors.tools)
        await call(tools["ledger__append_entry"], identity, key=key, text="x")
        env.fault("append_pair", "fail_second_step")
        pair_key = new_key()
        await call(tools["ledger__append_pair"], identity, key=pair_key, first="a", second="b")
        env.clear_faults()
    result = await append.probe(action(key))
    assert result.status is ProbeStatus.APPLIED and result.detail == "probe ledger.find_entry: applied"
    partial = await pair.probe(action(pair_key, "ledger.append_pair"))
    assert partial.status is ProbeStatus.UNKNOWN and "'partial'" in partial.detail

    env.fault("find_entry", "unavailable")
    outage = await append.probe(action(key))
    assert outage.status is ProbeStatus.UNKNOWN and "backend unavailable" in outage.detail
    env.clear_faults()

    missing_key = await append.probe(action(None))
    assert missing_key.status is ProbeStatus.UNKNOWN and "idempotency key" in missing_key.detail

    env.servers["ledger"] = McpServerSettings.model_validate(
        {
            "transport": "http",
            "url": "http://127.0.0.1:9/mcp",
            "connectTimeoutSeconds": 2,
            **recovery_overrides(),
        }
    )
    down = await append.probe(action(key))
    assert down.status is ProbeStatus.UNKNOWN and "could not run" in down.detail
    assert "\n" not in down.detail


async def test_probe_and_compensation_over_stdio(tmp_path: Path) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text("{}")
    ledger_env = LedgerEnv("stdio", tmp_path / "ledger.tsv", faults)
    registry = ledger_env.registry(**recovery_overrides())
    contract = registry.contract_for("ledger.append_entry")
    assert contract is not None and contract.probe is not None and contract.compensation is not None
    (tmp_path / "ledger.tsv").write_text("k1\tx\n")
    assert (await contract.probe(action("k1"))).status is ProbeStatus.APPLIED
    detail = await contract.compensation(action("k1"))
    assert detail.startswith("compensation ledger.remove_entry succeeded") and '"removed": 1' in detail
    assert ledger_env.count("k1") == 0


async def test_compensation_success_and_failure(http_env: LedgerEnv, identity: RunIdentity) -> None:
    env = http_env
    registry = env.registry(**recovery_overrides())
    contract = registry.contract_for("ledger.append_entry")
    assert contract is not None and contract.compensation is not None
    key = new_key()
    async with registry.connect_all() as connectors:
        await call(by_name(connectors.tools)["ledger__append_entry"], identity, key=key, text="x")
    assert env.count(key) == 1

    env.fault("remove_entry", "unavailable")
    with pytest.raises(ConnectorCompensationError, match="reported an error: backend unavailable"):
        await contract.compensation(action(key))
    assert env.count(key) == 1
    env.clear_faults()

    detail = await contract.compensation(action(key))
    assert detail.startswith("compensation ledger.remove_entry succeeded")
    assert env.count(key) == 0

    with pytest.raises(ConnectorCompensationError, match="idempotency key"):
        await contract.compensation(action(None))


async def test_handlers_never_leak_exceptions_on_bad_arguments(env: LedgerEnv, identity: RunIdentity) -> None:
    async with env.registry().connect_all() as connectors:
        append = by_name(connectors.tools)["ledger__append_entry"]
        with anyio.fail_after(10):
            outcome = await call(append, identity, key=new_key())  # "text" missing
        # The server rejected the arguments, but a generic error stays conservative.
        assert isinstance(outcome, ToolOutcome) and outcome.is_error and outcome.uncertain


def ledger_servers(ledger: Path) -> list[psutil.Process]:
    """Live (non-zombie) processes of this test's ledger server."""
    found = []
    for proc in psutil.Process().children(recursive=True):
        try:
            if str(ledger) in proc.cmdline() and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.NoSuchProcess:
            continue
    return found


async def test_sessions_close_on_exit_and_on_cancellation(tmp_path: Path, identity: RunIdentity) -> None:
    faults = tmp_path / "faults.json"
    ledger_env = LedgerEnv("stdio", tmp_path / "ledger.tsv", faults)
    ledger_env.fault("append_entry", "hang_before", seconds=30)
    registry = ledger_env.registry()
    started = time.monotonic()
    with anyio.move_on_after(1.5) as scope:
        async with registry.connect_all() as connectors:
            assert len(ledger_servers(ledger_env.ledger)) == 1
            # A call still running in the server when the run is cancelled.
            await call(by_name(connectors.tools)["ledger__append_entry"], identity, key="k", text="x")
    assert scope.cancelled_caught
    assert time.monotonic() - started < 5
    assert ledger_servers(ledger_env.ledger) == []
    assert ledger_env.count() == 0


async def test_connector_tools_through_the_bridge(env: LedgerEnv, identity: RunIdentity) -> None:
    """The specs publish next to Octipus's tools and a real MCP client calls them via the bridge."""
    registry = env.registry(trustRecoveryHints=True)
    key = new_key()
    async with (
        registry.connect_all() as connectors,
        open_bridge(identity, FakeToolHost(), (*DEFAULT_TOOLS, *connectors.tools)) as bridge,
    ):
        http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {bridge.endpoint.token}"}, timeout=httpx2.Timeout(10, read=30)
        )
        async with (
            http,
            Client(streamable_http_client(bridge.url, http_client=http), mode="legacy") as client,
        ):
            listing = {tool.name: tool for tool in (await client.list_tools()).tools}
            find, append = listing["ledger__find_entry"], listing["ledger__append_entry"]
            assert find.annotations is not None and find.annotations.read_only_hint is True
            assert append.annotations is not None and append.annotations.read_only_hint is False
            result = await client.call_tool("ledger__append_entry", {"key": key, "text": "via bridge"})
            assert not result.is_error
            first = result.content[0]
            assert isinstance(first, TextContent) and json.loads(first.text) == {"appended": key}
            found = await client.call_tool("ledger__find_entry", {"key": key})
            assert not found.is_error
    assert env.count(key) == 1


# ---------------------------------------------------------------------------- vault placeholders

TOKEN = "ledger-tok-0123456789abcdef"


async def test_env_and_header_placeholders_reach_the_server_and_are_masked(
    env: LedgerEnv, identity: RunIdentity
) -> None:
    asked: list[tuple[str, tuple[str, ...]]] = []

    async def secrets(server: str, names: Sequence[str]) -> Mapping[str, str]:
        asked.append((server, tuple(names)))
        if names != ["ledger_tok"]:
            raise VaultAccessError(f"vault entry {names[0]!r} does not exist")
        return {"ledger_tok": TOKEN}

    mapping: dict[str, Any] = (
        {"env": {"LEDGER_TOKEN": "{{secret:ledger_tok}}"}}
        if env.transport == "stdio"
        else {"headers": {"Authorization": "Bearer {{secret:ledger_tok}}"}}
    )
    registry = env.registry(secrets=secrets, **mapping)
    async with registry.connect_all() as connectors:
        assert connectors.notices == ()
        tools = by_name(connectors.tools)
        show = tools["ledger__show_env"]
        # every call is checked against the call's user and tool (here: a host that grants it)
        granting = FakeToolHost(secrets={"ledger_tok": "unused"})
        shown = await show.handler(identity, granting, {"name": "LEDGER_TOKEN"})
        if env.transport == "stdio":
            digest = hashlib.sha256(TOKEN.encode()).hexdigest()
            assert shown == {"value": "[REDACTED:ledger_tok]", "sha256": digest}
        refusing = FakeToolHost()  # a user or tool the entry is not for: nothing is sent
        with pytest.raises(
            NotExecutedError, match=r"ledger\.show_env was not called: vault entry 'ledger_tok'"
        ):
            await show.handler(identity, refusing, {"name": "LEDGER_TOKEN"})
        assert refusing.resolved == [("ledger.show_env", ("ledger_tok",))]
    assert asked == [("ledger", ("ledger_tok",))]

    bad = {key: {k: "{{secret:missing}}" for k in value} for key, value in mapping.items()}
    async with env.registry(secrets=secrets, **bad).connect_all() as connectors:
        assert connectors.tools == ()
        assert "vault entry 'missing' does not exist" in connectors.notices[0]
    async with env.registry(**mapping).connect_all() as connectors:  # no vault at all
        assert "has no vault" in connectors.notices[0]


async def test_a_placeholder_outside_env_or_headers_is_refused(env: LedgerEnv) -> None:
    async def secrets(server: str, names: Sequence[str]) -> Mapping[str, str]:
        return {"x": TOKEN}

    field = (
        {"args": ["{{secret:x}}"]} if env.transport == "stdio" else {"url": f"{env.url}?t={{{{secret:x}}}}"}
    )
    async with env.registry(secrets=secrets, **field).connect_all() as connectors:
        assert connectors.tools == ()
        assert (
            "vault placeholders go only in values of env (stdio) or headers (http)" in connectors.notices[0]
        )
