"""Benchmark: tool-call round trip through the Octipus bridge vs a bare SDK server.

Measures, in one run and on loopback only, the median wall time of one ``tools/call``
round trip made with the ``mcp`` SDK's streamable HTTP client:

* **bridge**: :func:`octipusd.bridge.server.open_bridge` with a
  :class:`~octipusd.bridge.fakes.FakeToolHost` -- capability check, per-worker queue (unless
  the tool bypasses it), ``host.authorize``, the handler, two ``host.record`` events and,
  for mutating tools, the run-context refresh;
* **bare**: a plain ``MCPServer`` of the same SDK on uvicorn, no auth, serving a tool of the
  same name that returns the same text.

Blocks of calls alternate between the two servers so drift affects both alike. Prints both
medians (ms), their p90, and the ratio bridge/bare.

Usage::

    .venv/bin/python bench/bench_bridge.py [--calls 200] [--warmup 20] [--mode legacy|auto]
                                           [--tool get_work_plan|update_work_plan]
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.toolkit import RunIdentity
from octipusd.tools import DEFAULT_TOOLS

BLOCKS = 4
PLAN = {"plan": {"title": "bench", "steps": [{"id": "1", "title": "measure", "status": "in_progress"}]}}


@contextlib.asynccontextmanager
async def bare_server(tool: str) -> AsyncIterator[str]:
    """Serve a plain ``MCPServer`` with one trivial tool named ``tool``; yield its URL."""
    server = MCPServer("bare")

    async def handler(plan: dict[str, Any] | None = None) -> str:
        return '{"plan": null}'

    server.add_tool(handler, name=tool, description="Trivial tool.", structured_output=False)
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


@contextlib.asynccontextmanager
async def client(url: str, token: str | None, mode: str) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(10.0, read=60.0))
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as session:
        yield session


async def timed_calls(session: Client, tool: str, arguments: dict[str, Any], count: int) -> list[float]:
    """Return the round-trip times (ms) of ``count`` sequential calls."""
    samples: list[float] = []
    for _ in range(count):
        started = time.perf_counter()
        result = await session.call_tool(tool, arguments)
        samples.append((time.perf_counter() - started) * 1000.0)
        if result.is_error:
            raise RuntimeError(f"benchmark call failed: {result.content}")
    return samples


def p90(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=10)[-1]


async def run(calls: int, warmup: int, mode: str, tool: str) -> None:
    arguments: dict[str, Any] = PLAN if tool == "update_work_plan" else {}
    with tempfile.TemporaryDirectory() as workspace:
        identity = RunIdentity("bench-run", "bench-session", "bench", "bench-worker", Path(workspace), False)
        async with (
            open_bridge(identity, FakeToolHost(), DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
            bare_server(tool) as bare_url,
            client(bridge.url, bridge.endpoint.token, mode) as bridge_client,
            client(bare_url, None, mode) as bare_client,
        ):
            await timed_calls(bridge_client, tool, arguments, warmup)
            await timed_calls(bare_client, tool, arguments, warmup)
            bridge_samples: list[float] = []
            bare_samples: list[float] = []
            per_block = max(1, calls // BLOCKS)
            for _ in range(BLOCKS):
                bridge_samples += await timed_calls(bridge_client, tool, arguments, per_block)
                bare_samples += await timed_calls(bare_client, tool, arguments, per_block)
            protocol = bridge_client.protocol_version

    bridge_median = statistics.median(bridge_samples)
    bare_median = statistics.median(bare_samples)
    print(
        f"tool={tool} calls={len(bridge_samples)} each, warm-up={warmup}, client mode={mode} (protocol {protocol})"
    )
    print(f"bridge : median {bridge_median:7.3f} ms   p90 {p90(bridge_samples):7.3f} ms")
    print(f"bare   : median {bare_median:7.3f} ms   p90 {p90(bare_samples):7.3f} ms")
    print(f"ratio bridge/bare (median): {bridge_median / bare_median:.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calls", type=int, default=200, help="measured calls per server (default 200)")
    parser.add_argument(
        "--warmup", type=int, default=20, help="unmeasured calls per server first (default 20)"
    )
    parser.add_argument(
        "--mode", choices=["legacy", "auto"], default="legacy", help="SDK client connect mode"
    )
    parser.add_argument("--tool", choices=["get_work_plan", "update_work_plan"], default="get_work_plan")
    options = parser.parse_args(argv)
    if not 1 <= options.calls <= 10_000 or not 0 <= options.warmup <= 1_000:
        parser.error("--calls must be 1..10000 and --warmup 0..1000")
    # Configure logging before MCPServer() does (it installs a Rich INFO handler otherwise).
    logging.basicConfig(level=logging.WARNING)
    anyio.run(run, options.calls, options.warmup, options.mode, options.tool)
    return 0


if __name__ == "__main__":
    sys.exit(main())
