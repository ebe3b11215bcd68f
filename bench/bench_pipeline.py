"""Benchmark: pipelines (issue 27), with the stub CLI answering every stage at once.

``transition``
    The daemon's own cost per stage transition: a pipeline of ``--stages`` standard stages in a row
    (each stage a stub run; the walk's store writes, durable steps and stage runs in between),
    created through the API and waited for, against the same number of stub turns posted back to
    back on one session through the run API, each waited for. Rounds alternate the two sides after
    a warm-up of each (the first pipeline loads the durable engine); the ratio is of the medians
    of seconds per stage (target <= 1.2).
``burst``
    ``--pipelines`` pipelines of ``--items`` items each (one ``loopOverPlan`` stage) created at once
    on SQLite; every pipeline must complete, every item be ``done`` and every attempt accounted
    for (one succeeded attempt per item, with its succeeded run). Reports what was lost (target:
    nothing) and the wall time.

Both poll the API every :data:`POLL_S`. No timed assertion: the figures are printed and recorded
(:func:`summary.record`); ``burst`` exits 1 when something was lost.

Usage: ``python bench/bench_pipeline.py [--rounds 5] [--stages 8] [--pipelines 100] [--items 5]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Any

from summary import record

from octipusd.ctl.client import Client
from octipusd.testing.harness import DaemonHarness, write_python_stub
from octipusd.testing.stub_cli import CLAUDE_INIT, SCRIPT_ENV, claude_result

#: The issue's target: a stage transition costs at most this ratio of a stub turn through the API.
TARGET_RATIO = 1.2
#: Seconds between two looks at a pipeline or a run.
POLL_S = 0.01
#: Seconds a pipeline (or the burst) may take at most before the benchmark gives up.
TIMEOUT_S = 900.0
#: The stub's turn: a one-line answer, at once.
STUB_ACTIONS: list[dict[str, Any]] = [
    {"read_line": True},
    {"emit": CLAUDE_INIT},
    {"emit": claude_result("pong", tokens=1)},
    {"read_line": True},
]
FINAL_RUN = {"succeeded", "failed", "interrupted", "cancelled"}
FINAL_PIPELINE = {"completed", "failed", "stopped", "paused"}


def stages_template(stages: int) -> dict[str, Any]:
    return {
        "name": "bench-stages",
        "description": "standard stages in a row",
        "steps": [{"name": f"s{i}", "topic": "general", "promptTemplate": "ping"} for i in range(stages)],
    }


LOOP_TEMPLATE: dict[str, Any] = {
    "name": "bench-items",
    "description": "one stage per item",
    "steps": [{"name": "work", "topic": "general", "loopOverPlan": True, "promptTemplate": "ping"}],
}


def wait_pipeline(client: Client, pid: str) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        doc = client.request("GET", f"/pipelines/{pid}", params={"includeHistory": "false"})
        if doc["status"] in FINAL_PIPELINE:
            return dict(doc)
        time.sleep(POLL_S)
    raise TimeoutError(f"pipeline {pid} did not end within {TIMEOUT_S:g} s")


def pipeline_side(daemon: DaemonHarness, stages: int) -> float:
    """One pipeline of ``stages`` stages, created and waited for; seconds per stage."""
    with closing(daemon.client()) as client:
        started = time.perf_counter()
        body = {"template": stages_template(stages), "workspace": str(daemon.workspace)}
        pid = client.request("POST", "/pipelines", json=body)["id"]
        doc = wait_pipeline(client, pid)
        elapsed = time.perf_counter() - started
    assert doc["status"] == "completed", doc
    return elapsed / stages


def turns_side(daemon: DaemonHarness, turns: int) -> float:
    """``turns`` stub turns back to back on one new session, each waited for; seconds per turn."""
    with closing(daemon.client()) as client:
        started = time.perf_counter()
        session = client.request("POST", "/sessions", json={"workspace": str(daemon.workspace)})["id"]
        for _ in range(turns):
            run = client.request("POST", f"/sessions/{session}/turns", json={"prompt": "ping"})["id"]
            while (status := client.request("GET", f"/runs/{run}")["status"]) not in FINAL_RUN:
                time.sleep(POLL_S)
            assert status == "succeeded", status
        return (time.perf_counter() - started) / turns


def bench_transition(daemon: DaemonHarness, rounds: int, stages: int) -> None:
    pipeline_side(daemon, stages)  # warm-up: loads the durable engine
    turns_side(daemon, stages)
    pipes: list[float] = []
    turns: list[float] = []
    for _ in range(rounds):
        pipes.append(pipeline_side(daemon, stages))
        turns.append(turns_side(daemon, stages))
    p, t = statistics.median(pipes), statistics.median(turns)
    ratio = p / t
    print(
        f"[transition] {stages} stages, median of {rounds}: per stage {p * 1000:.0f} ms in a pipeline, "
        f"{t * 1000:.0f} ms per stub turn through the run API; ratio {ratio:.2f}"
    )
    record(
        "pipeline stage transition (stub) vs a stub turn: ratio",
        f"{ratio:.2f} ({p * 1000:.0f} / {t * 1000:.0f} ms)",
        f"<= {TARGET_RATIO:g}",
        ratio <= TARGET_RATIO,
    )


def lost_in(doc: dict[str, Any], client: Client, items: int) -> list[str]:
    """What a pipeline lost: not completed, an item not done, an attempt missing or not succeeded."""
    pid = doc["id"]
    problems = [] if doc["status"] == "completed" else [f"{pid}: {doc['status']} {doc.get('error')}"]
    done = [i for i in doc["items"] if i["status"] == "done"]
    if len(doc["items"]) != items or len(done) != items:
        problems.append(f"{pid}: {len(done)} of {len(doc['items'])} items done (of {items})")
    attempts = doc["attempts"]
    if sorted(a["itemId"] for a in attempts) != sorted(i["id"] for i in doc["items"]):
        problems.append(f"{pid}: attempts {len(attempts)} do not match the items one to one")
    for attempt in attempts:
        runs = [client.request("GET", f"/runs/{r}")["status"] for r in attempt["runIds"]]
        if attempt["status"] != "succeeded" or runs != ["succeeded"]:
            problems.append(f"{pid}: attempt {attempt['id']} {attempt['status']}, runs {runs}")
    return problems


def bench_burst(daemon: DaemonHarness, pipelines: int, items: int) -> bool:
    body = {
        "template": LOOP_TEMPLATE,
        "workspace": str(daemon.workspace),
        "items": [{"title": f"item {i}"} for i in range(items)],
    }

    def create(_index: int) -> str:
        with closing(daemon.client()) as client:
            return str(client.request("POST", "/pipelines", json=body)["id"])

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        ids = list(pool.map(create, range(pipelines)))
    created = time.perf_counter() - started
    with closing(daemon.client()) as client:
        docs = [wait_pipeline(client, pid) for pid in ids]
        elapsed = time.perf_counter() - started
        lost = [p for doc in docs for p in lost_in(doc, client, items)]
    attempts = sum(len(d["attempts"]) for d in docs)
    print(
        f"[burst] {pipelines} pipelines x {items} items: created in {created:.1f} s, all ended in "
        f"{elapsed:.1f} s ({attempts} attempts, {attempts / elapsed:.1f} stages/s); lost: {len(lost)}"
    )
    for problem in lost[:20]:
        print(f"[burst] LOST {problem}")
    record(
        f"{pipelines} pipelines of {items} items at once (SQLite): lost",
        f"{len(lost)} ({attempts} attempts in {elapsed:.0f} s)",
        "0",
        not lost,
    )
    return not lost


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the transition figure")
    parser.add_argument("--stages", type=int, default=8, help="stages of the transition pipeline (<= 10)")
    parser.add_argument("--pipelines", type=int, default=100, help="pipelines of the burst")
    parser.add_argument("--items", type=int, default=5, help="items of each burst pipeline")
    options = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="octipus-bench-pipeline-") as tmp:
        root = Path(tmp)
        script = root / "stub.json"
        script.write_text(json.dumps(STUB_ACTIONS))
        stub = write_python_stub(
            root / "bin" / "claude-stub", "octipusd.testing.stub_cli", {SCRIPT_ENV: str(script)}
        )
        with DaemonHarness(root / "transition", "http://127.0.0.1:9", stub) as daemon:
            bench_transition(daemon, options.rounds, options.stages)
        with DaemonHarness(root / "burst", "http://127.0.0.1:9", stub) as daemon:
            ok = bench_burst(daemon, options.pipelines, options.items)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
