"""Benchmark: the time octipusd adds to one turn over running the same claude command directly.

Both sides drive the real ``claude`` binary against the same scripted Anthropic model (one
text reply per turn), in the same run, alternating:

* direct: ``claude -p --input-format stream-json --output-format stream-json --verbose ...``
  with one user line on stdin, read until the ``result`` line, stdin closed, wait for exit;
* octipusd: post a turn on a new session through the API and wait for the run's final status
  (this includes the bridge start, the store writes and event fan-out).

Prints the median of each (ms), the added time (ms) and the ratio octipusd/direct.
Usage: ``python bench/bench_turn.py [N]`` (default 5 turns each).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.harness import QUIET_ENV, DaemonHarness, claude_binary

SCRIPT = {"steps": [{"content": [{"type": "text", "text": "pong"}]}]}


def direct_turn(claude: Path, base_url: str, home: Path, cwd: Path) -> float:
    """Run one turn with the claude binary directly; return wall seconds."""
    env = {
        **os.environ,
        **QUIET_ENV,
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-bench",
    }
    argv = [
        str(claude),
        "-p",
        "--input-format",
        "stream-json",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode=acceptEdits",
    ]
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    line = {
        "type": "user",
        "message": {"role": "user", "content": "ping"},
        "parent_tool_use_id": None,
        "session_id": "",
    }
    proc.stdin.write((json.dumps(line) + "\n").encode())
    proc.stdin.flush()
    for raw in proc.stdout:
        if json.loads(raw).get("type") == "result":
            break
    proc.stdin.close()
    proc.wait(timeout=60)
    return time.perf_counter() - started


def octipus_turn(env: DaemonHarness) -> float:
    """Run one turn through octipusd on a new session; return wall seconds."""
    client = env.client()
    try:
        started = time.perf_counter()
        session = client.request("POST", "/sessions", json={"workspace": str(env.workspace)})["id"]
        run = client.request("POST", f"/sessions/{session}/turns", json={"prompt": "ping"})["id"]
        for _event in client.stream(run):
            pass
        status = client.request("GET", f"/runs/{run}")["status"]
        elapsed = time.perf_counter() - started
        assert status == "succeeded", status
        return elapsed
    finally:
        client.close()


def main() -> int:
    """Run the benchmark and print the figures."""
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    claude = claude_binary()
    with tempfile.TemporaryDirectory() as tmp, ScriptedAnthropicServer(SCRIPT) as model:
        root = Path(tmp)
        daemon = DaemonHarness(root / "daemon", model.base_url, claude)
        direct_home = root / "direct-home"
        direct_home.mkdir()
        with daemon:
            direct_turn(claude, model.base_url, direct_home, daemon.workspace)  # warm-up both
            octipus_turn(daemon)
            direct, through = [], []
            for _ in range(n):
                direct.append(direct_turn(claude, model.base_url, direct_home, daemon.workspace))
                through.append(octipus_turn(daemon))
    d, o = statistics.median(direct), statistics.median(through)
    print(
        f"per-turn wall time, median of {n}: direct claude {d * 1000:.0f} ms, through octipusd {o * 1000:.0f} ms"
    )
    print(f"octipusd adds {(o - d) * 1000:.0f} ms per turn; ratio octipusd/direct = {o / d:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
