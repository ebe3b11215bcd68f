"""Test-only workflows for the durable engine's tests (imported by the tests and by the SIGKILL child).

The workflows reach the engine through :data:`ENGINE` (set by whoever launches it), as the
walker's workflow reaches its service. Step bodies count their runs in :data:`RUNS` (in-process)
or append a line to a file (across processes).
"""

from __future__ import annotations

import collections
from pathlib import Path

import anyio

from octipusd.durable.engine import DurableEngine, Interrupted, WorkflowDef

ENGINE: list[DurableEngine] = []
RUNS: collections.Counter[str] = collections.Counter()


def engine() -> DurableEngine:
    return ENGINE[-1]


async def double(x: int) -> int:
    RUNS["double"] += 1
    return x * 2


async def add_one(x: int) -> int:
    RUNS["add_one"] += 1
    return x + 1


async def two_steps(x: int) -> int:
    doubled = await engine().step("double", double, x)
    return await engine().step("add_one", add_one, doubled)


async def waits_for_go(prefix: str) -> str:
    await engine().set_event("state", "waiting")
    message = await engine().recv("go", 60)
    await engine().set_event("state", "done")
    return f"{prefix}:{message}"


async def paid_work(folder: str) -> str:
    """Record the run, say it began, then block (until the process is killed)."""
    with (Path(folder) / "runs").open("a") as runs:
        runs.write("ran\n")
    (Path(folder) / "began").write_text("yes")
    await anyio.sleep_forever()
    return "unreachable"


async def quick_paid_work(folder: str) -> str:
    with (Path(folder) / "runs").open("a") as runs:
        runs.write("ran\n")
    return "paid"


async def guarded(folder: str) -> str:
    outcome = await engine().guarded_step("paid", paid_work, folder)
    return "interrupted" if isinstance(outcome, Interrupted) else f"ran:{outcome.value}"


async def guarded_quick(folder: str) -> str:
    outcome = await engine().guarded_step("paid", quick_paid_work, folder)
    return "interrupted" if isinstance(outcome, Interrupted) else f"ran:{outcome.value}"


TWO_STEPS = WorkflowDef("test.two_steps", two_steps)
WAITS_FOR_GO = WorkflowDef("test.waits_for_go", waits_for_go)
GUARDED = WorkflowDef("test.guarded", guarded)
GUARDED_QUICK = WorkflowDef("test.guarded_quick", guarded_quick)
ALL = (TWO_STEPS, WAITS_FOR_GO, GUARDED, GUARDED_QUICK)
