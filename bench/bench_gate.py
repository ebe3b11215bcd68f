"""Benchmark: one permission decision through the gate vs the bare rule engine.

Measures, in one run, the wall time of deciding one allowed call three ways:

* **gate + event**: :meth:`octipusd.policy.gate.PermissionGate.decide` as the daemon runs it, on a
  real SQLite store: the stored rules and active grants and the session's flow label read from the
  store's in-memory view (:class:`~octipusd.store.policy_view.PolicyView`), the flow guard checked,
  and the ``policy_decision`` event stored and published through the daemon's
  :class:`~octipusd.runtime.events.EventHub` (today one committed transaction per event);
* **gate**: the same decision with events kept in memory: the gate's own cost, what remains of the
  path once events are written in batches;
* **engine**: :meth:`octipusd.policy.engine.Policy.decide` alone, on the same rules held in memory.

Before the timed calls a rule is added and removed and a grant created and revoked through the
store, and the next decision is checked to see each change (the view is kept current, not stale).
The store holds ``--rules`` stored rules and ``--grants`` grants. Blocks alternate between the three
so drift affects them alike. Prints medians and p90 (ms) and the ratios to the engine.

Usage::

    .venv/bin/python bench/bench_gate.py [--calls 300] [--rules 50] [--grants 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.gate import PermissionGate
from octipusd.runtime.events import EventHub
from octipusd.store.repository import Store
from octipusd.toolkit import CallContext

ARGS = {"command": "git status"}


async def _in_memory(run_id: str, kind: str, data: dict[str, Any]) -> None:
    """An event sink that keeps nothing: the gate's own cost."""


async def _check_changes_seen(gate: PermissionGate, store: Store, ctx: CallContext) -> None:
    """A rule and a grant changed through the store are seen by the very next decision."""
    rule = store.add_rule(level="deny", rule="shell__run(git:*)", created_by="bench")
    assert not (await gate.decide(ctx, "shell__run", ARGS)).allowed
    store.remove_rule(rule.id)
    assert (await gate.decide(ctx, "shell__run", ARGS)).allowed
    grant = store.create_grant(tool_id="bench__probe", level="allow", created_by="bench")
    assert (await gate.evaluate("bench__probe", {}, action=None, session_id="", workspace="")).grant_id
    store.revoke_grant(grant.id, revoked_by="bench")
    assert not (await gate.evaluate("bench__probe", {}, action=None, session_id="", workspace="")).grant_id


def _stats(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.9)] * 1000


async def _main(calls: int, rules: int, grants: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{Path(tmp) / 'bench.db'}")
        session = store.create_session(workspace=tmp, adapter="claude-code")
        run = store.create_run(session_id=session.id, prompt="bench", owner="bench")
        for i in range(rules):
            store.add_rule(level="deny", rule=f"cli-native:Bash(never-{i}:*)", created_by="bench")
        for i in range(grants):
            store.create_grant(tool_id=f"tool{i}__x", level="allow", created_by="bench")

        base = Policy.from_setting({"allow": ["shell(git:*)"], "deny": [], "ask": []})
        hub = EventHub(store)
        stored = PermissionGate(store, ApprovalBroker(store, 300), hub.emit, base)
        bare = PermissionGate(store, ApprovalBroker(store, 300), _in_memory, base)
        ctx = CallContext(run_id=run.id, session_id=session.id, workspace=tmp, attended=True)
        await _check_changes_seen(stored, store, ctx)
        engine = await stored.current_policy()  # the same rules, in memory

        def gate_call(gate: PermissionGate) -> Callable[[], Awaitable[float]]:
            async def one() -> float:
                start = time.perf_counter()
                result = await gate.decide(ctx, "shell__run", ARGS)
                assert result.allowed
                return time.perf_counter() - start

            return one

        async def one_engine() -> float:
            start = time.perf_counter()
            decision = engine.decide("shell__run", ARGS, session_id=session.id, workspace=tmp)
            assert str(decision.level) == "allow"
            return time.perf_counter() - start

        ways: dict[str, Callable[[], Awaitable[float]]] = {
            "gate + event": gate_call(stored),
            "gate": gate_call(bare),
            "engine": one_engine,
        }
        times: dict[str, list[float]] = {name: [] for name in ways}
        for one in ways.values():  # warm-up
            for _ in range(20):
                await one()
        block = 25
        while len(times["engine"]) < calls:
            for name, one in ways.items():
                for _ in range(block):
                    times[name].append(await one())
        store.close()

    medians = {name: _stats(values) for name, values in times.items()}
    e_med = medians["engine"][0]
    labels = {
        "gate + event": "gate + event (view, flow guard, event stored per call)",
        "gate": "gate (view, flow guard, events in memory)",
        "engine": "engine (rules in memory)",
    }
    for name, (med, p90) in medians.items():
        ratio = "" if name == "engine" else f", ratio to engine {med / e_med:.2f}"
        print(f"{labels[name]:<56} median {med:.3f} ms, p90 {p90:.3f} ms{ratio}")
    print(f"({rules} stored rules, {grants} grants, {calls} calls each)")


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
