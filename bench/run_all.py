"""Run every benchmark, one subprocess each, and print one table of issue 13's figures at the end.

Each benchmark's own output is streamed as it runs; the ``BENCH-RESULT`` lines it prints
(:func:`summary.record`) are collected, and the table ``figure | measured | target | met`` is
printed last (Markdown, with the machine it was measured on), ready for the README. A benchmark
that exits non-zero is shown in the table as failed, and the others still run.

``--quick`` runs the same chain with small sizes (a few minutes): to check that every benchmark
still runs and reports, not to measure. ``--only`` picks benchmarks by name.

Usage::

    .venv/bin/python bench/run_all.py [--quick] [--only bridge,gate]
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
from summary import Result, parse

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Bench:
    """One benchmark run: its name, its script, its arguments (full and ``--quick``)."""

    name: str
    script: str
    full: tuple[str, ...]
    quick: tuple[str, ...]


BENCHES: tuple[Bench, ...] = (
    Bench(
        "concurrency-burst",
        "bench_concurrency.py",
        ("--runs", "50", "--events", "1000"),
        ("--runs", "5", "--events", "200"),
    ),
    Bench(
        "concurrency-paced",
        "bench_concurrency.py",
        ("--runs", "200", "--events", "200", "--pace", "20"),
        ("--runs", "20", "--events", "40", "--pace", "20"),
    ),
    Bench("turn-stub", "bench_turn.py", ("5", "--mode", "stub"), ("2", "--mode", "stub")),
    Bench("turn-claude", "bench_turn.py", ("5", "--mode", "claude"), ("2", "--mode", "claude")),
    Bench("bridge", "bench_bridge.py", (), ("--calls", "40", "--warmup", "5")),
    Bench("gate", "bench_gate.py", (), ("--calls", "50")),
    Bench(
        "journal",
        "bench_journal.py",
        (),
        ("--pairs", "100", "--orphans", "100", "--repeat", "1", "--calls", "0"),
    ),
    Bench(
        "startup",
        "bench_startup.py",
        (),
        ("--rounds", "1", "--journal-rows", "20000", "--orphans", "100"),
    ),
    Bench("reuse", "bench_reuse.py", (), ("--repeat", "5")),
    Bench("request-guard", "bench_request_guard.py", (), ("--scale", "0.05", "--repeat", "2")),
    Bench("worktree", "bench_worktree.py", (), ("--files", "2000", "--rounds", "2")),
    Bench(
        "pipeline",
        "bench_pipeline.py",
        (),
        ("--rounds", "2", "--stages", "4", "--pipelines", "10", "--items", "5"),
    ),
)


def run_one(bench: Bench, quick: bool) -> tuple[list[Result], int]:
    """Run one benchmark, streaming its output; return its results and its exit code."""
    argv = [sys.executable, str(HERE / bench.script), *(bench.quick if quick else bench.full)]
    print(f"\n=== {bench.name}: {' '.join(argv[1:])}", flush=True)
    began = time.perf_counter()
    results: list[Result] = []
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env) as process:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            sys.stdout.flush()
            result = parse(line.rstrip("\n"))
            if result is not None:
                results.append(result)
    code = process.returncode
    print(f"=== {bench.name}: exit {code} after {time.perf_counter() - began:.1f} s", flush=True)
    return results, code


def machine() -> str:
    """One line naming the machine the table was measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = psutil.virtual_memory().total / 2**30
    return (
        f"{cpu}, {os.cpu_count()} cores, {memory:.1f} GiB RAM, {platform.system()} {platform.release()}, "
        f"Python {platform.python_version()}"
    )


def table(results: list[Result], quick: bool) -> str:
    """The Markdown table of all results."""
    met = {True: "yes", False: "**no**", None: "-"}
    rows = [
        "| figure | measured | target | met |",
        "| --- | --- | --- | --- |",
        *(f"| {r.figure} | {r.measured} | {r.target} | {met[r.met]} |" for r in results),
    ]
    title = "quick run (small sizes: checks the chain, not a measurement)" if quick else "full run"
    return "\n".join([f"Benchmarks, {title}; measured on {machine()}", "", *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes everywhere (checks the chain)")
    parser.add_argument("--only", default="", help="comma-separated benchmark names (default: all)")
    options = parser.parse_args(argv)
    names = [name.strip() for name in options.only.split(",") if name.strip()]
    unknown = sorted(set(names) - {b.name for b in BENCHES})
    if unknown:
        parser.error(
            f"unknown benchmark(s) {', '.join(unknown)}; known: {', '.join(b.name for b in BENCHES)}"
        )
    results: list[Result] = []
    failed = 0
    for bench in BENCHES:
        if names and bench.name not in names:
            continue
        found, code = run_one(bench, options.quick)
        results += found
        if code != 0:
            failed += 1
            results.append(Result(f"{bench.name}: the benchmark failed (exit {code})", "-", "-", False))
    print("\n" + table(results, options.quick), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
