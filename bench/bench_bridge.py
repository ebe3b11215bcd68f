"""Benchmark: one tool call through a run's real bridge vs a bare MCP server of the same SDK.

Measures, in one run and on loopback only, the median wall time of one ``tools/call`` round trip
made with the ``mcp`` SDK's streamable HTTP client:

* **bridge**: the bridge of a live run of the daemon's own run core (``octipusd.app.build_runs``
  on a real SQLite store in a temporary folder), so each call goes through the run's
  :class:`~octipusd.runtime.host.RunHost`: the permission gate (a configured rule allows the
  tool; its ``policy_decision`` event is stored), for a mutating tool the recovery review gate
  and the action journal (``started`` and outcome records, ``synchronous=FULL``), the handler,
  and the ``bridge_call`` events stored and published by the event hub. Only the vendor process
  is a replay (:mod:`octipusd.testing.replay`) that announces the bridge and then waits until the
  run is stopped;
* **bare**: a plain ``MCPServer`` of the same SDK on uvicorn, no auth, serving a tool of the same
  name with the same body (``get_work_plan``: a constant; ``shell__run``: the same syntax check
  and ``/bin/sh -c`` job as the bridge's tool).

Two tools are measured: ``get_work_plan`` (read-only: gate, handler, events) and ``shell__run``
running ``true`` (mutating: the journal too). Blocks of calls alternate between the two servers
so drift affects both alike. Prints both medians (ms), their p90, the ratio bridge/bare, and what
the run stored (events, journal records) as evidence of the path taken.

Usage::

    .venv/bin/python bench/bench_bridge.py [--calls 200] [--warmup 20] [--mode legacy|auto]
                                           [--tool get_work_plan|shell__run|all]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer
from summary import record

from octipusd.adapter import LaunchSpec, load_adapters
from octipusd.app import build_runs
from octipusd.bridge.server import Bridge
from octipusd.journal.executor import ActionJournal
from octipusd.journal.operator import RecoveryOperator
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.runner.executables import Resolution
from octipusd.runtime.events import EventHub
from octipusd.settings import Settings
from octipusd.store.repository import Store
from octipusd.testing.replay import Recording, ReplayLauncher, Step
from octipusd.testing.stub_cli import session_id_from_argv
from octipusd.tools.shell import run_shell
from octipusd.tools.shell_command import base_environment, check_syntax

BLOCKS = 4
ADAPTER = "claude-code"
#: The configured rules of the run: the two measured tools are allowed by a rule.
RULES = {"allow": ["get_work_plan", "shell(true)"], "deny": [], "ask": []}
ARGUMENTS: dict[str, dict[str, Any]] = {"get_work_plan": {}, "shell__run": {"command": "true"}}
#: Ratio bridge/bare the issue asks to keep (issue 13's table).
TARGET_RATIO = 1.1


@contextlib.asynccontextmanager
async def bare_server(workspace: Path, store: Store, session_id: str) -> AsyncIterator[str]:
    """Serve a plain ``MCPServer`` with the two tools (same bodies as the bridge's: the work plan read
    from the same store, the same shell job); yield its URL."""
    server = MCPServer("bare")

    async def get_work_plan() -> str:
        plan = await anyio.to_thread.run_sync(store.get_work_plan, session_id)
        return json.dumps({"plan": None if plan is None else plan.plan})

    async def shell_run(command: str) -> str:
        complaint = await check_syntax(command, workspace)
        if complaint is not None:
            raise RuntimeError(complaint)
        env = {**base_environment(), "PWD": str(workspace)}
        result = await run_shell(command, cwd=workspace, env=env, timeout_seconds=60.0)
        return json.dumps(result.to_dict())

    server.add_tool(get_work_plan, name="get_work_plan", description="Trivial tool.", structured_output=False)
    server.add_tool(shell_run, name="shell__run", description="Shell job.", structured_output=False)
    config = uvicorn.Config(
        server.streamable_http_app(), host="127.0.0.1", port=0, log_level="warning", access_log=False
    )
    runner = uvicorn.Server(config)
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.serve)
        with anyio.fail_after(10):
            while not runner.started:  # noqa: ASYNC110 (uvicorn has no startup event)
                await anyio.sleep(0.002)
        port = runner.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            runner.should_exit = True


def _held_vendor(spec: LaunchSpec, run_id: str) -> Recording:
    """A Claude stream that announces the bridge as connected, then waits for a stop."""
    sid = session_id_from_argv(list(spec.argv))
    init = {
        "type": "system",
        "subtype": "init",
        "session_id": sid,
        "tools": [],
        "mcp_servers": [{"name": "octipus", "status": "connected"}],
    }
    never = {"type": "result", "subtype": "success", "is_error": False, "result": "", "session_id": sid}
    return Recording((Step(init), Step(never, after_writes=10**9)))


@dataclass(frozen=True)
class LiveRun:
    """The bridge of a live run, and where its evidence is stored."""

    bridge: Bridge
    store: Store
    run_id: str
    session_id: str


@contextlib.asynccontextmanager
async def live_run(root: Path, workspace: Path) -> AsyncIterator[LiveRun]:
    """A run of the daemon's run core (real store, gate, journal, hub, bridge) held live; yield its bridge.

    The run core is composed as the daemon does it (:func:`octipusd.app.build_runs`), with the
    configured :data:`RULES`; the run is stopped and its task group closed on exit.
    """
    store = Store.open(f"sqlite:///{root / 'bench.db'}")
    try:
        hub = EventHub(store)
        launcher = ReplayLauncher(_held_vendor)
        runs, _gate = build_runs(
            Settings(),
            store=store,
            hub=hub,
            broker=ApprovalBroker(store, 300),
            policy=Policy.from_setting(RULES),
            adapters={ADAPTER: load_adapters()[ADAPTER]},
            resolutions={ADAPTER: Resolution(ADAPTER, "claude", "/bin/true", None, "/usr/bin:/bin")},
            data_dir=root / "data",
            owner="bench-owner",
            base_env={"PATH": "/usr/bin:/bin"},
            journal=ActionJournal(store, "bench-owner"),
            operator=RecoveryOperator(store, lambda _tool: None, hub.emit_optional),
            connectors=None,
            config_notices=None,
            launcher=launcher,
        )
        async with anyio.create_task_group() as tg:
            runs.bind(tg)
            session = store.create_session(workspace=str(workspace), adapter=ADAPTER)
            run = await runs.post_turn(session.id, "bench")
            live = runs.registry.get(run.id)
            assert live is not None
            with anyio.fail_after(30):
                while live.bridge is None or not launcher.transports:  # noqa: ASYNC110 (no event for it)
                    await anyio.sleep(0.005)
            try:
                yield LiveRun(live.bridge, store, run.id, session.id)
            finally:
                await runs.stop(run.id, "benchmark done")
                with anyio.fail_after(30):
                    await live.done.wait()
                tg.cancel_scope.cancel()
    finally:
        store.close()


@contextlib.asynccontextmanager
async def client(url: str, token: str | None, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10.0, read=60.0))
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as session:
        yield session


async def timed_calls(session: Client, tool: str, count: int) -> list[float]:
    """Return the round-trip times (ms) of ``count`` sequential calls."""
    samples: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        result = await session.call_tool(tool, ARGUMENTS[tool])
        samples.append((time.perf_counter() - started) * 1000.0)
        if result.is_error:
            raise RuntimeError(f"benchmark call of {tool} failed: {result.content}")
    return samples


def p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1]


def evidence(live: LiveRun) -> str:
    """What the run stored: its events by kind and its journal records by outcome."""
    kinds = Counter(e.kind for e in live.store.list_events(live.run_id, after_seq=0, limit=100_000))
    outcomes = Counter(a.outcome for a in live.store.list_actions(run_id=live.run_id, limit=100_000))
    return f"events {dict(sorted(kinds.items()))}; journal records {dict(sorted(outcomes.items()))}"


async def measure(tool: str, bridge: Client, bare: Client, calls: int, warmup: int) -> float:
    """Alternate blocks of calls of ``tool`` on both servers; print the figures, return the ratio."""
    await timed_calls(bridge, tool, warmup)
    await timed_calls(bare, tool, warmup)
    bridge_samples: list[float] = []
    bare_samples: list[float] = []
    per_block = max(1, calls // BLOCKS)
    for _ in range(BLOCKS):
        bridge_samples += await timed_calls(bridge, tool, per_block)
        bare_samples += await timed_calls(bare, tool, per_block)
    bridge_median = statistics.median(bridge_samples)
    bare_median = statistics.median(bare_samples)
    ratio = bridge_median / bare_median
    print(f"[{tool}] calls={len(bridge_samples)} each, warm-up={warmup}")
    print(
        f"[{tool}] bridge (real run host): median {bridge_median:7.3f} ms   p90 {p90(bridge_samples):7.3f} ms"
    )
    print(f"[{tool}] bare MCP server       : median {bare_median:7.3f} ms   p90 {p90(bare_samples):7.3f} ms")
    print(f"[{tool}] ratio bridge/bare (median): {ratio:.2f}; added {bridge_median - bare_median:.3f} ms")
    return ratio


async def run(calls: int, warmup: int, mode: str, tools: list[str]) -> dict[str, float]:
    """Measure each tool; return its ratio bridge/bare."""
    ratios: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace = root / "workspace"
        workspace.mkdir()
        async with (
            live_run(root, workspace) as live,
            bare_server(workspace, live.store, live.session_id) as bare_url,
            client(live.bridge.url, live.bridge.endpoint.token, mode) as bridge_client,
            client(bare_url, None, mode) as bare_client,
        ):
            print(f"client mode={mode} (protocol {bridge_client.protocol_version})")
            for tool in tools:
                ratios[tool] = await measure(tool, bridge_client, bare_client, calls, warmup)
            print(f"the run stored: {evidence(live)}")
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="measured calls per server (default 200)")
    parser.add_argument(
        "--warmup", type=int, default=20, help="unmeasured calls per server first (default 20)"
    )
    parser.add_argument(
        "--mode", choices=["legacy", "auto"], default="legacy", help="SDK client connect mode"
    )
    parser.add_argument("--tool", choices=[*ARGUMENTS, "all"], default="all")
    options = parser.parse_args(argv)
    if not 1 <= options.calls <= 10_000 or not 0 <= options.warmup <= 1_000:
        parser.error("--calls must be 1..10000 and --warmup 0..1000")
    # Configure logging before MCPServer() does (it installs a Rich INFO handler otherwise).
    logging.basicConfig(level=logging.WARNING)
    tools = list(ARGUMENTS) if options.tool == "all" else [options.tool]
    ratios = anyio.run(run, options.calls, options.warmup, options.mode, tools)
    if "get_work_plan" in ratios:
        ratio = ratios["get_work_plan"]
        record(
            "bridge call ratio (get_work_plan, read-only)",
            f"{ratio:.2f}",
            f"<= {TARGET_RATIO}",
            ratio <= TARGET_RATIO,
        )
    if "shell__run" in ratios:
        record("bridge call ratio (shell__run `true`, journaled)", f"{ratios['shell__run']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
