"""Benchmark: the action journal's cost on one mutating call (seed 000's execution boundary).

Measures, in one run, the median wall time of one ``shell__run`` call running ``true`` (the
real tool: its ``sh -n`` parse check and the job):

* **journaled**: the recovery review check (the session's unresolved records read, with
  ``--history`` completed records of the session in the journal) plus
  :meth:`octipusd.journal.executor.ActionJournal.execute` (``started`` committed before the body,
  the outcome after it) on a real SQLite store with ``synchronous=FULL``;
* **bare**: the same call through :func:`octipusd.toolkit.run_unjournaled` (no journal,
  the path of read-only tools).

Blocks alternate between the two so drift affects both alike. Prints both medians (ms), their
p90 and the ratio journaled/bare.

Usage::

    .venv/bin/python bench/bench_journal.py [--calls 300] [--history 1000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from octipusd.bridge.fakes import FakeToolHost
from octipusd.journal.executor import ActionJournal, ActionScope
from octipusd.journal.operator import RecoveryOperator
from octipusd.journal.review import RecoveryGate
from octipusd.store.repository import Store
from octipusd.toolkit import (
    CallContext,
    GateResult,
    RecoveryContract,
    RiskClass,
    RunIdentity,
    run_unjournaled,
)
from octipusd.tools import SHELL_RUN

CONTRACT = RecoveryContract(RiskClass.CONTAINABLE)
ARGS = {"command": "true"}


class _NoPerson:
    async def ask_recovery(self, *args: Any, **kwargs: Any) -> GateResult:
        raise AssertionError("nothing is unresolved in this benchmark")


async def _call(identity: RunIdentity) -> Any:
    return await SHELL_RUN.handler(identity, FakeToolHost(), dict(ARGS))


async def _main(calls: int, history: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store.open(f"sqlite:///{Path(tmp) / 'bench.db'}")
        session = store.create_session(workspace=tmp, adapter="claude-code")
        journal = ActionJournal(store, "bench")
        scope = ActionScope(user="bench", session_id=session.id, run_id=None, agent="bench")
        for _ in range(history):
            record = store.start_action(
                user="bench",
                session_id=session.id,
                run_id=None,
                agent="bench",
                origin="agent",
                tool="shell__run",
                args_hash="0" * 64,
                risk_class="containable",
                owner="bench",
                deadline_seconds=60.0,
            )
            store.finish_action(record.id, outcome="completed", detail=None)

        async def emit(run_id: str, kind: str, data: dict[str, Any]) -> None:
            return None

        gate = RecoveryGate(store, journal, _NoPerson(), RecoveryOperator(store, lambda _: None), emit)
        ctx = CallContext(run_id="bench", session_id=session.id, workspace=tmp, attended=True)
        identity = RunIdentity("bench", session.id, "bench", "bench", Path(tmp), True)

        async def body() -> Any:
            return await _call(identity)

        async def journaled() -> float:
            start = time.perf_counter()
            verdict = await gate.check(ctx, scope, "shell__run", ARGS, CONTRACT)
            assert verdict.allowed
            done = await journal.execute(scope, "shell__run", ARGS, CONTRACT, body)
            assert done.recorded
            return time.perf_counter() - start

        async def bare() -> float:
            start = time.perf_counter()
            await run_unjournaled("shell__run", body)
            return time.perf_counter() - start

        for _ in range(20):  # warm-up
            await journaled()
            await bare()
        journaled_times: list[float] = []
        bare_times: list[float] = []
        block = 25
        while len(journaled_times) < calls:
            for _ in range(block):
                journaled_times.append(await journaled())
            for _ in range(block):
                bare_times.append(await bare())
        store.close()

    def stats(values: list[float]) -> tuple[float, float]:
        ordered = sorted(values)
        return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.9)] * 1000

    j_med, j_p90 = stats(journaled_times)
    b_med, b_p90 = stats(bare_times)
    print(f"journaled (review check + started + outcome): median {j_med:.3f} ms, p90 {j_p90:.3f} ms")
    print(f"bare      (the same call, no journal):        median {b_med:.3f} ms, p90 {b_p90:.3f} ms")
    print(
        f"ratio journaled/bare: {j_med / b_med:.1f} ({history} earlier records, {len(journaled_times)} calls)"
    )


def main() -> None:
    """Parse the options and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--history", type=int, default=1000)
    args = parser.parse_args()
    anyio.run(_main, args.calls, args.history)


if __name__ == "__main__":
    main()
