"""Benchmark: one permission decision through the gate vs the bare rule engine.

Measures, in one run, the median wall time of deciding one allowed call:

* **gate**: :meth:`octipusd.policy.gate.PermissionGate.decide` on a real SQLite store: stored
  rules and active grants read fresh, the flow guard's session label read and checked, the
  ``policy_decision`` event stored (as the daemon does for every tool call);
* **engine**: :meth:`octipusd.policy.engine.Policy.decide` alone, on the same rules held in memory.

The store holds ``--rules`` stored rules and ``--grants`` grants, so the cost of reading them fresh
shows. Blocks alternate between the two so drift affects both alike. Prints both medians (ms),
their p90 and the ratio gate/engine.

Usage::

    .venv/bin/python bench/bench_gate.py [--calls 300] [--rules 50] [--grants 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.gate import PermissionGate
from octipusd.store.repository import Store
from octipusd.toolkit import CallContext

ARGS = {"command": "git status"}


async def _main(calls: int, rules: int, grants: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{Path(tmp) / 'bench.db'}")
        session = store.create_session(workspace=tmp, adapter="claude-code")
        run = store.create_run(session_id=session.id, prompt="bench", owner="bench")
        for i in range(rules):
            store.add_rule(level="deny", rule=f"cli-native:Bash(never-{i}:*)", created_by="bench")
        for i in range(grants):
            store.create_grant(tool_id=f"tool{i}__x", level="allow", created_by="bench")

        async def emit(run_id: str, kind: str, data: dict[str, Any]) -> None:
            await anyio.to_thread.run_sync(store.append_event, run_id, kind, data)

        base = Policy.from_setting({"allow": ["shell(git:*)"], "deny": [], "ask": []})
        gate = PermissionGate(store, ApprovalBroker(store, 300), emit, base)
        ctx = CallContext(run_id=run.id, session_id=session.id, workspace=tmp, attended=True)
        engine = await gate.current_policy()  # the same rules, in memory

        async def one_gate() -> float:
            start = time.perf_counter()
            result = await gate.decide(ctx, "shell__run", ARGS)
            assert result.allowed
            return time.perf_counter() - start

        async def one_engine() -> float:
            start = time.perf_counter()
            decision = engine.decide("shell__run", ARGS, session_id=session.id, workspace=tmp)
            assert str(decision.level) == "allow"
            return time.perf_counter() - start

        for _ in range(20):  # warm-up
            await one_gate()
            await one_engine()
        gate_times: list[float] = []
        engine_times: list[float] = []
        block = 25
        while len(gate_times) < calls:
            for _ in range(block):
                gate_times.append(await one_gate())
            for _ in range(block):
                engine_times.append(await one_engine())
        store.close()

    def stats(values: list[float]) -> tuple[float, float]:
        ordered = sorted(values)
        return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.9)] * 1000

    g_med, g_p90 = stats(gate_times)
    e_med, e_p90 = stats(engine_times)
    print(f"gate   (store reads + flow guard + event): median {g_med:.3f} ms, p90 {g_p90:.3f} ms")
    print(f"engine (rules in memory):                  median {e_med:.3f} ms, p90 {e_p90:.3f} ms")
    print(
        f"ratio gate/engine: {g_med / e_med:.1f} ({rules} stored rules, {grants} grants, {len(gate_times)} calls)"
    )


def main() -> None:
    """Parse the options and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rules", type=int, default=50)
    parser.add_argument("--grants", type=int, default=50)
    args = parser.parse_args()
    anyio.run(_main, args.calls, args.rules, args.grants)


if __name__ == "__main__":
    main()
