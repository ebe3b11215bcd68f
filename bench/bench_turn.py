"""Benchmark: the time octipusd adds to one turn over running the same vendor command directly.

Two modes, each measured in the same run, alternating the sides turn by turn:

``stub``
    The stub CLI (:mod:`octipusd.testing.stub_cli`) answering at once: it reads the user line,
    prints a Claude ``system/init`` and a ``result`` and exits at stdin EOF. Direct: spawn the same
    stub executable, write one user line, read until the ``result`` line, close stdin, wait for
    its exit. This is Octipus's own cost per turn, with nothing of a real vendor in it.
``claude``
    The real ``claude`` binary against the same scripted Anthropic model (one text reply per turn),
    with two direct baselines run with the argv octipusd itself passes (taken from the warm-up
    turn's ``run_status`` event, with a fresh ``--session-id``):

    * no MCP: the ``--mcp-config`` flag dropped (``--strict-mcp-config`` kept: no server at all);
    * bare MCP: ``--mcp-config`` pointing at a plain ``MCPServer`` of the same SDK on 127.0.0.1
      (streamable HTTP, uvicorn) listing tools of the same names, descriptions and schemas as the
      bridge, so Claude's own MCP handshake is in the baseline too.

Through octipusd: post a turn on a new session through the API and wait for the end of the run's
stream (the final status is stored and published by then; this includes the bridge, the store
writes and the event fan-out).

Prints, per mode, the median of each side (ms), and for each baseline the ms added and the ratio
octipusd/direct.

Usage: ``python bench/bench_turn.py [N] [--mode stub|claude|all]`` (default 5 turns each, all).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import CallToolResult, InputRequiredResult, TextContent, Tool, ToolAnnotations
from summary import record

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.harness import QUIET_ENV, DaemonHarness, claude_binary, write_python_stub
from octipusd.testing.stub_cli import CLAUDE_INIT, SCRIPT_ENV, claude_result
from octipusd.tools import DEFAULT_TOOLS

#: Issue 13's targets: ms a stub turn adds; ratio to ``claude`` with a bare MCP server configured.
TARGET_STUB_ADDED_MS = 20.0
TARGET_CLAUDE_RATIO = 1.05
SCRIPT = {"steps": [{"content": [{"type": "text", "text": "pong"}]}]}
#: The stub's turn: what Claude prints for a one-line answer, at once.
STUB_ACTIONS: list[dict[str, Any]] = [
    {"read_line": True},
    {"emit": CLAUDE_INIT},
    {"emit": claude_result("pong", tokens=1)},
    {"read_line": True},
]
USER_LINE = {
    "type": "user",
    "message": {"role": "user", "content": "ping"},
    "parent_tool_use_id": None,
    "session_id": "",
}


def direct_turn(argv: Sequence[str], env: dict[str, str], cwd: Path) -> float:
    """Run one turn of ``argv`` directly (one user line, read to ``result``, EOF, exit); wall seconds."""
    started = time.perf_counter()
    proc = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write((json.dumps(USER_LINE) + "\n").encode())
    proc.stdin.flush()
    for raw in proc.stdout:
        if json.loads(raw).get("type") == "result":
            break
    proc.stdin.close()
    proc.wait(timeout=60)
    return time.perf_counter() - started


def octipus_turn(env: DaemonHarness, seen: list[dict[str, Any]] | None = None) -> float:
    """Run one turn through octipusd on a new session; return wall seconds (events into ``seen``)."""
    client = env.client()
    try:
        started = time.perf_counter()
        session = client.request("POST", "/sessions", json={"workspace": str(env.workspace)})["id"]
        run = client.request("POST", f"/sessions/{session}/turns", json={"prompt": "ping"})["id"]
        for event in client.stream(run):
            if seen is not None:
                seen.append(event)
        elapsed = time.perf_counter() - started
        status = client.request("GET", f"/runs/{run}")["status"]
        assert status == "succeeded", status
        return elapsed
    finally:
        client.close()


def report(
    title: str, n: int, octipus: list[float], baselines: dict[str, list[float]]
) -> dict[str, tuple[float, float]]:
    """Print the medians, and the added time and ratio against each baseline.

    Returns:
        Baseline name -> (ms added per turn, ratio octipusd/direct), of the medians.
    """
    o = statistics.median(octipus)
    medians = ", ".join(f"{name} {statistics.median(s) * 1000:.0f} ms" for name, s in baselines.items())
    print(f"[{title}] per-turn wall time, median of {n}: {medians}, through octipusd {o * 1000:.0f} ms")
    figures: dict[str, tuple[float, float]] = {}
    for name, samples in baselines.items():
        d = statistics.median(samples)
        figures[name] = ((o - d) * 1000, o / d)
        print(f"[{title}] vs {name}: octipusd adds {(o - d) * 1000:.0f} ms per turn; ratio {o / d:.2f}")
    return figures


def alternate(n: int, sides: dict[str, Callable[[], float]]) -> dict[str, list[float]]:
    """Run every side once (warm-up), then ``n`` rounds of all sides in turn; seconds per side."""
    for side in sides.values():
        side()
    samples: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(n):
        for name, side in sides.items():
            samples[name].append(side())
    return samples


# ----------------------------------------------------------------------------- stub mode


def bench_stub(n: int, root: Path) -> None:
    """The stub answering at once: octipusd against spawning the stub directly."""
    script = root / "stub.json"
    script.write_text(json.dumps(STUB_ACTIONS))
    stub = write_python_stub(
        root / "bin" / "claude-stub", "octipusd.testing.stub_cli", {SCRIPT_ENV: str(script)}
    )
    daemon = DaemonHarness(root / "daemon", "http://127.0.0.1:9", stub)
    with daemon:
        argv = [str(stub), f"--session-id={uuid.uuid4()}"]
        samples = alternate(
            n,
            {
                "direct stub": lambda: direct_turn(argv, dict(os.environ), daemon.workspace),
                "octipusd": lambda: octipus_turn(daemon),
            },
        )
    through = samples.pop("octipusd")
    added, ratio = report("stub", n, through, samples)["direct stub"]
    record(
        "turn of a stub CLI: ms added",
        f"{added:.0f} ms (ratio {ratio:.2f})",
        f"<= {TARGET_STUB_ADDED_MS:g} ms",
        added <= TARGET_STUB_ADDED_MS,
    )


# ----------------------------------------------------------------------------- claude mode


class BareMCPServer(MCPServer[Any]):
    """A plain ``MCPServer`` listing the bridge's tools (names, descriptions, schemas); calls answer ok."""

    def __init__(self) -> None:
        super().__init__(name="octipus", log_level="WARNING")
        self._listing = [
            Tool(
                name=spec.name,
                description=spec.description,
                input_schema=dict(spec.input_schema),
                annotations=ToolAnnotations(read_only_hint=spec.read_only),
            )
            for spec in DEFAULT_TOOLS
        ]

    async def list_tools(self) -> list[Tool]:
        return list(self._listing)

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        return CallToolResult(content=[TextContent(type="text", text="ok")], is_error=False)


@contextlib.contextmanager
def bare_mcp_server() -> Iterator[str]:
    """Serve :class:`BareMCPServer` on 127.0.0.1 in a thread of its own; yield its URL."""
    config = uvicorn.Config(
        BareMCPServer().streamable_http_app(), host="127.0.0.1", port=0, log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=anyio.run, args=(server.serve,), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the bare MCP server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def octipus_argv(events: list[dict[str, Any]]) -> list[str]:
    """The vendor argv octipusd ran, from a turn's ``run_status`` event."""
    for event in events:
        if event["kind"] == "run_status" and "argv" in event["data"]:
            return list(event["data"]["argv"])
    raise RuntimeError("the turn published no argv")


def direct_argv(argv: Sequence[str], mcp_config: Path | None) -> list[str]:
    """``argv`` with a fresh session id, and its ``--mcp-config`` replaced by ``mcp_config`` (or dropped)."""
    out: list[str] = []
    for arg in argv:
        if arg.startswith("--session-id="):
            out.append(f"--session-id={uuid.uuid4()}")
        elif arg.startswith("--mcp-config="):
            if mcp_config is not None:
                out.append(f"--mcp-config={mcp_config}")
        else:
            out.append(arg)
    return out


def bench_claude(n: int, root: Path) -> None:
    """The real claude: octipusd against claude with no MCP server and with a bare one."""
    claude = claude_binary()
    with ScriptedAnthropicServer(SCRIPT) as model, bare_mcp_server() as bare_url:
        daemon = DaemonHarness(root / "daemon", model.base_url, claude)
        home = root / "direct-home"
        home.mkdir()
        env = {
            **os.environ,
            **QUIET_ENV,
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "ANTHROPIC_BASE_URL": model.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-bench",
        }
        config = root / "bare-mcp.json"
        bare = {"type": "http", "url": bare_url, "headers": {"Authorization": "Bearer bench"}}
        config.write_text(json.dumps({"mcpServers": {"octipus": bare}}))
        with daemon:
            events: list[dict[str, Any]] = []
            octipus_turn(daemon, events)
            argv = octipus_argv(events)
            samples = alternate(
                n,
                {
                    "claude, no MCP": lambda: direct_turn(direct_argv(argv, None), env, daemon.workspace),
                    "claude, bare MCP": lambda: direct_turn(direct_argv(argv, config), env, daemon.workspace),
                    "octipusd": lambda: octipus_turn(daemon),
                },
            )
    through = samples.pop("octipusd")
    figures = report("claude", n, through, samples)
    added, ratio = figures["claude, bare MCP"]
    record(
        "turn of claude: ratio vs claude with a bare MCP server",
        f"{ratio:.2f} (+{added:.0f} ms)",
        f"<= {TARGET_CLAUDE_RATIO:g}",
        ratio <= TARGET_CLAUDE_RATIO,
    )
    added, ratio = figures["claude, no MCP"]
    record("turn of claude: ratio vs claude with no MCP server", f"{ratio:.2f} (+{added:.0f} ms)")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("n", nargs="?", type=int, default=5, help="measured turns per side (default 5)")
    parser.add_argument("--mode", choices=["stub", "claude", "all"], default="all")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)  # before MCPServer() installs a Rich INFO handler
    with tempfile.TemporaryDirectory() as tmp:
        if options.mode in ("stub", "all"):
            (Path(tmp) / "stub").mkdir()
            bench_stub(options.n, Path(tmp) / "stub")
        if options.mode in ("claude", "all"):
            (Path(tmp) / "claude").mkdir()
            bench_claude(options.n, Path(tmp) / "claude")
    return 0


if __name__ == "__main__":
    sys.exit(main())
