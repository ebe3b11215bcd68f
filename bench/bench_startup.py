"""Benchmark: the daemon's start-up and one octipusctl command, against the bare interpreter and libraries.

Measures, in one run, the median wall time of:

* **daemon start-up**, from exec of ``python -m octipusd`` to its socket answering
  ``GET /v1/health`` with 200, on three databases: ``new`` (no database file: the first start,
  migrations included), ``empty`` (migrated, no rows: a restart) and ``journal`` (migrated and
  holding ``--journal-rows`` rows in ``tool_actions``, ``--orphans`` of them ``started`` by a
  stopped daemon, so the start-up recovery scan has work). Each start copies a template built
  once per bench run (the journal rows are bulk-inserted with one Core ``executemany`` per
  batch). Vendor binaries are looked up on an empty ``cliModels.path`` (``OCTIPUS_CLI_PATH``),
  so the figure is Octipus's own cost, not the vendors' ``--version``;
* **octipusctl** ``--help`` and ``health`` with no daemon (exit 3);
* the baselines, alternating with the above: the bare interpreter (``python -c pass``), the
  bare import of the daemon's libraries (SQLAlchemy, SQLModel, FastAPI, uvicorn,
  pydantic-settings, anyio), the bare import of octipusctl's (httpx, typer, rich's console
  and table), and a one-command typer app on those libraries doing what ``health`` does with no
  daemon (the floor of any typer command: typer imports pydantic to coerce an option).

Every round runs each case once, in the same order, so drift affects all alike. Prints the
medians (ms) and the ratios against the baselines.

Usage::

    .venv/bin/python bench/bench_startup.py [--rounds 7] [--journal-rows 1000000] [--orphans 1000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from octipusd.store.engine import make_engine
from octipusd.store.models import ToolActionRow
from octipusd.store.repository import Store

ROOT = Path(__file__).resolve().parents[1]
#: How long one daemon may take to answer before the bench gives up (seconds).
START_TIMEOUT_S = 120.0
#: Pause between two health probes of a starting daemon (seconds).
PROBE_INTERVAL_S = 0.005
#: Rows per ``executemany`` when seeding the journal.
SEED_BATCH_ROWS = 20_000

DAEMON_LIBRARIES = "import sqlalchemy, sqlmodel, fastapi, uvicorn, pydantic_settings, anyio"
CTL_LIBRARIES = "import httpx, typer, rich.console, rich.table"
CTL_MAIN = "import sys; from octipusd.ctl.main import main; sys.argv[0] = 'octipusctl'; main()"
#: The floor of one typer command on the same libraries: a one-command app with one option
#: that asks a socket nobody listens on for ``/v1/health`` over httpx and exits 3 (typer itself
#: imports pydantic to coerce the option's value).
TYPER_FLOOR = """
import sys, httpx, typer
from rich.console import Console
app = typer.Typer(add_completion=False)
@app.command()
def health(as_json: bool = typer.Option(False, "--json")) -> None:
    client = httpx.Client(transport=httpx.HTTPTransport(uds=sys.argv[1], verify=False))
    try:
        client.get("http://octipusd/v1/health")
    except httpx.ConnectError:
        Console(stderr=True).print("nothing answers")
        raise typer.Exit(3) from None
app(sys.argv[2:])
"""


def python_env() -> dict[str, str]:
    """The environment of every measured process: this checkout first on the path, and byte
    code cached as in an installed package (``PYTHONDONTWRITEBYTECODE`` dropped: otherwise every
    start compiles each of Octipus's modules from source; the warm-up round writes the cache)."""
    paths = [str(ROOT), str(ROOT / "adapters"), str(ROOT / "worktrees")]
    old = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([*paths, *([old] if old else [])])}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


# ---------------------------------------------------------------------------- templates


def _checkpointed(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def empty_template(folder: Path) -> Path:
    """A migrated database with no rows."""
    path = folder / "empty.db"
    Store.open(f"sqlite:///{path}").close()
    return _checkpointed(path)


def _journal_rows(count: int, orphans: int) -> Iterator[dict[str, object]]:
    start = datetime.now(UTC) - timedelta(days=30)
    for i in range(count):
        orphan = i < orphans
        yield {
            "id": uuid.uuid4().hex,
            "user": "bench",
            "origin": "agent",
            "tool": f"bench.tool{i % 50}",
            "args_hash": f"{i:064x}",
            "risk_class": "irreversible",
            "deadline_seconds": 60.0,
            "owner": "stopped-daemon" if orphan else "old-daemon",
            "outcome": "started" if orphan else "completed",
            "started_at": start + timedelta(milliseconds=i),
            "finished_at": None if orphan else start + timedelta(milliseconds=i + 5),
        }


def journal_template(folder: Path, empty: Path, rows: int, orphans: int) -> Path:
    """``empty`` plus ``rows`` journal rows (``orphans`` of them ``started`` by a stopped daemon)."""
    path = folder / "journal.db"
    shutil.copy(empty, path)
    engine = make_engine(f"sqlite:///{path}")
    table = ToolActionRow.__table__  # type: ignore[attr-defined]
    began = time.perf_counter()
    batch: list[dict[str, object]] = []
    with engine.begin() as conn:
        for row in _journal_rows(rows, orphans):
            batch.append(row)
            if len(batch) == SEED_BATCH_ROWS:
                conn.execute(table.insert(), batch)
                batch = []
        if batch:
            conn.execute(table.insert(), batch)
    engine.dispose()
    print(f"seeded {rows:,} journal rows in {time.perf_counter() - began:.1f} s", flush=True)
    return _checkpointed(path)


# ---------------------------------------------------------------------------- measured processes


def _health_answers(client: httpx.Client) -> bool:
    try:
        return client.get("/health").status_code == 200
    except (httpx.TransportError, OSError):
        return False


def start_daemon(work: Path, template: Path | None) -> float:
    """Seconds from exec of ``python -m octipusd`` to 200 on ``GET /v1/health``; then stop it."""
    root = Path(tempfile.mkdtemp(dir=work))
    for name in ("run", "data", "config", "home", "cli"):
        (root / name).mkdir(mode=0o700)
    if template is not None:
        (root / "data" / "octipus").mkdir(mode=0o700)
        shutil.copy(template, root / "data" / "octipus" / "octipus.db")
    env = {
        **python_env(),
        "HOME": str(root / "home"),
        "XDG_RUNTIME_DIR": str(root / "run"),
        "XDG_DATA_HOME": str(root / "data"),
        "XDG_CONFIG_HOME": str(root / "config"),
        "OCTIPUS_CLI_PATH": str(root / "cli"),
        "OCTIPUS_LOG_LEVEL": "WARNING",
    }
    sock = root / "run" / "octipus" / "octipusd.sock"
    with (
        open(root / "octipusd.log", "wb") as log,
        httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://octipusd/v1") as client,
    ):
        began = time.perf_counter()
        daemon = subprocess.Popen([sys.executable, "-m", "octipusd"], env=env, stdout=log, stderr=log)
        try:
            while not _health_answers(client):
                if daemon.poll() is not None or time.perf_counter() - began > START_TIMEOUT_S:
                    raise RuntimeError(f"octipusd did not answer: {(root / 'octipusd.log').read_text()}")
                time.sleep(PROBE_INTERVAL_S)
            elapsed = time.perf_counter() - began
        finally:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
    shutil.rmtree(root, ignore_errors=True)
    return elapsed


def run_python(code: str, *args: str, env: dict[str, str] | None = None, expect: int = 0) -> float:
    """Seconds of one ``python -c code args...`` to its exit."""
    began = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code, *args], env=env or python_env(), capture_output=True, check=False
    )
    elapsed = time.perf_counter() - began
    if done.returncode != expect:
        raise RuntimeError(f"{code} {args} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    return elapsed


# ---------------------------------------------------------------------------- the run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--journal-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--orphans", type=int, default=1000, help="journal rows left 'started' by a stopped daemon"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        work = Path(tmp)
        empty = empty_template(work)
        journal = (
            journal_template(work, empty, args.journal_rows, args.orphans) if args.journal_rows else None
        )
        no_daemon = {**python_env(), "OCTIPUS_DAEMON__SOCKET": str(work / "nothing.sock")}
        cases: dict[str, Callable[[], float]] = {
            "python -c pass": lambda: run_python("pass"),
            "import daemon libraries": lambda: run_python(DAEMON_LIBRARIES),
            "daemon start, new database": lambda: start_daemon(work, None),
            "daemon start, empty database": lambda: start_daemon(work, empty),
            "import octipusctl libraries": lambda: run_python(CTL_LIBRARIES),
            "octipusctl --help": lambda: run_python(CTL_MAIN, "--help"),
            "octipusctl health (no daemon)": lambda: run_python(CTL_MAIN, "health", env=no_daemon, expect=3),
            "one-command typer app (no daemon)": lambda: run_python(
                TYPER_FLOOR, str(work / "nothing.sock"), "--json", expect=3
            ),
        }
        if journal is not None:
            cases[f"daemon start, {args.journal_rows:,} journal rows"] = lambda: start_daemon(work, journal)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for case in cases.values():  # warm-up: byte code compiled, files in the page cache
            case()
        for round_no in range(args.rounds):
            for name, case in cases.items():
                times[name].append(case())
            print(f"round {round_no + 1}/{args.rounds} done", flush=True)
    med = {name: statistics.median(values) * 1000 for name, values in times.items()}
    print(f"\nmedians of {args.rounds} rounds (ms); ratios against the baselines of the same run")
    width = max(len(name) for name in med)
    bases = {
        "daemon": ("python -c pass", "import daemon libraries"),
        "octipusctl": ("import octipusctl libraries", "one-command typer app (no daemon)"),
    }
    for name, value in med.items():
        kind = (
            "daemon" if name.startswith("daemon") else "octipusctl" if name.startswith("octipusctl") else ""
        )
        ratios = "".join(f"  {value / med[b]:6.2f}x {b}" for b in bases.get(kind, ()))
        print(f"{name:<{width}}  {value:8.1f}{ratios}")


if __name__ == "__main__":
    main()
