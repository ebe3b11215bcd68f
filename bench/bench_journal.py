"""Benchmark: the action journal's own cost (seed 000's execution boundary), on SQLite and PostgreSQL.

For each database (a SQLite file with ``synchronous=FULL``; a private PostgreSQL server with its
durable defaults, ``fsync`` and ``synchronous_commit`` on, started by
:func:`octipusd.testing.postgres.start_postgres`), in one run:

* **journal pairs/s**: :meth:`octipusd.journal.executor.ActionJournal.execute` around a body that
  returns at once: ``started`` committed before the body, the outcome after it (the worker-thread
  hops included), one call after the other;
* **raw pairs/s**: the same rows written through the same driver (the engine's own DB-API
  connection: sqlite3 with the store's pragmas, psycopg), hand-written SQL, in the same
  transactions: the action row and its ``contract`` receipt entry in one, the outcome ``UPDATE``
  and its ``outcome`` receipt entry in a second; the **ratio** journal/raw (issue 13's target:
  >= 0.5); and, for reference, raw single-row inserts/s (one row per commit);
* **start-up recovery**: the store calls the daemon makes at start (``interrupt_orphaned_runs``,
  ``orphan_started_actions``, ``quarantine_invocations``, ``open_dispatches``) on a database
  holding ``--orphans`` actions left ``started`` by a stopped instance (plus ``--history``
  completed ones) against an empty one; medians of ``--repeat``.

Pair blocks alternate between journal and raw so drift affects both alike. With ``--calls`` > 0 it
also prints the earlier per-call figure (SQLite): one ``shell__run`` call running ``true``, the
recovery review check plus the journal against the same call unjournaled.

Usage::

    .venv/bin/python bench/bench_journal.py [--pairs 600] [--orphans 1000] [--history 0]
        [--repeat 3] [--calls 300] [--backends sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from sqlalchemy import insert
from sqlalchemy.engine import make_url

from octipusd.bridge.fakes import FakeToolHost
from octipusd.journal.executor import ActionJournal, ActionScope, args_hash, contract_receipt
from octipusd.journal.operator import RecoveryOperator
from octipusd.journal.review import RecoveryGate
from octipusd.store.models import ToolActionRow
from octipusd.store.repository import Store
from octipusd.testing.postgres import admin_connect, start_postgres
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
#: Pairs per alternating block.
BLOCK = 50
#: Rows per bulk insert while filling a database (setup, not measured).
FILL_CHUNK = 5000

#: The columns of ``tool_actions`` the journal writes (all of them), in the raw ``INSERT``.
_COLUMNS = (
    'id, "user", session_id, run_id, agent, pipeline_id, node_id, origin, invocation_id, tool, args_hash, '
    "risk_class, idempotency_key, recovery_owner, deadline_seconds, owner, outcome, detail, recovery_state, "
    "deadline_at, review_id, reviewed_by, reviewed_at, started_at, finished_at, in_flight_until, dispatch, "
    "dispatch_ended_at"
)
#: The receipt entries the journal writes for one call (the same text as the journal's).
_CONTRACT_DATA = json.dumps(
    dict(contract_receipt(CONTRACT), outcome="started", detail=None), separators=(",", ":"), default=str
)
_OUTCOME_DATA = '{"outcome":"completed","detail":null}'


class _RawPairs:
    """The journal's rows written through the store engine's own DB-API connection."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.sqlite = store.engine.dialect.name == "sqlite"
        self.fairy = store.engine.raw_connection()
        self.conn: Any = self.fairy.driver_connection
        self.session_id = session_id
        mark = "?" if self.sqlite else "%s"
        n = len(_COLUMNS.split(","))
        self.insert_action = f"INSERT INTO tool_actions ({_COLUMNS}) VALUES ({', '.join([mark] * n)})"
        self.insert_receipt = (
            f"INSERT INTO action_receipts (action_id, kind, state, data, created_at) VALUES ({mark}, {mark}, "
            f"{mark}, {mark}, {mark})"
        )
        self.finish = (
            f"UPDATE tool_actions SET outcome = {mark}, detail = {mark}, finished_at = {mark}, "
            f"dispatch_ended_at = {mark} WHERE id = {mark} AND outcome = 'started'"
        )

    def _now(self) -> Any:
        now = datetime.now(UTC)
        return now.replace(tzinfo=None).isoformat(sep=" ") if self.sqlite else now

    def _tx(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        if self.sqlite:
            self.conn.execute("BEGIN IMMEDIATE")
        cursor = self.conn.cursor()
        for sql, params in statements:
            cursor.execute(sql, params)
        cursor.close()
        self.conn.commit()

    def action_row(self, action_id: str, now: Any) -> tuple[Any, ...]:
        head = (action_id, "bench", self.session_id, None, "bench", None, None, "agent", None, "bench.tool")
        contract = (
            args_hash(ARGS),
            str(CONTRACT.risk_class),
            None,
            CONTRACT.owner,
            CONTRACT.deadline_seconds,
        )
        return (
            *head,
            *contract,
            "bench",
            "started",
            None,
            None,
            None,
            None,
            None,
            None,
            now,
            None,
            None,
            None,
            None,
        )

    def pair(self) -> None:
        action_id, now = uuid.uuid4().hex, self._now()
        self._tx(
            (self.insert_action, self.action_row(action_id, now)),
            (self.insert_receipt, (action_id, "contract", None, _CONTRACT_DATA, now)),
        )
        end = self._now()
        self._tx(
            (self.finish, ("completed", None, end, end, action_id)),
            (self.insert_receipt, (action_id, "outcome", None, _OUTCOME_DATA, end)),
        )

    def single(self) -> None:
        self._tx((self.insert_action, self.action_row(uuid.uuid4().hex, self._now())))

    def close(self) -> None:
        self.fairy.close()


async def _pairs(store: Store, pairs: int) -> dict[str, float]:
    """Journal pairs/s, raw pairs/s and raw single inserts/s on ``store`` (medians over blocks)."""
    session = store.create_session(workspace=tempfile.gettempdir(), adapter="claude-code")
    journal = ActionJournal(store, "bench")
    scope = ActionScope(user="bench", session_id=session.id, run_id=None, agent="bench")
    raw = _RawPairs(store, session.id)

    async def body() -> Any:
        return {"ok": True}

    async def journal_block() -> float:
        start = time.perf_counter()
        for _ in range(BLOCK):
            done = await journal.execute(scope, "bench.tool", ARGS, CONTRACT, body)
            assert done.recorded
        return BLOCK / (time.perf_counter() - start)

    def raw_block(step: Callable[[], None]) -> float:
        start = time.perf_counter()
        for _ in range(BLOCK):
            step()
        return BLOCK / (time.perf_counter() - start)

    await journal_block()  # warm-up
    raw_block(raw.pair)
    rates: dict[str, list[float]] = {"journal": [], "raw": [], "single": []}
    try:
        for _ in range(max(1, pairs // BLOCK)):
            rates["journal"].append(await journal_block())
            rates["raw"].append(raw_block(raw.pair))
            rates["single"].append(raw_block(raw.single))
    finally:
        raw.close()
    return {kind: statistics.median(values) for kind, values in rates.items()}


def _fill(store: Store, *, orphans: int, history: int) -> None:
    """Write ``history`` completed actions and ``orphans`` started ones of a stopped instance."""
    session = store.create_session(workspace=tempfile.gettempdir(), adapter="claude-code")
    table: Any = ToolActionRow.__table__
    now = datetime.now(UTC)

    def row(outcome: str) -> dict[str, Any]:
        return {
            "id": uuid.uuid4().hex,
            "user": "bench",
            "session_id": session.id,
            "origin": "agent",
            "tool": "bench.tool",
            "args_hash": "0" * 64,
            "risk_class": "containable",
            "deadline_seconds": 3600.0,
            "owner": "gone",
            "outcome": outcome,
            "started_at": now,
            "finished_at": now if outcome == "completed" else None,
        }

    with store.engine.begin() as conn:
        for outcome, count in (("completed", history), ("started", orphans)):
            for start in range(0, count, FILL_CHUNK):
                conn.execute(insert(table), [row(outcome) for _ in range(min(FILL_CHUNK, count - start))])


def _recover(store: Store) -> tuple[float, int]:
    """The start-up recovery calls of ``octipusd.app``; returns (seconds, orphans marked)."""
    start = time.perf_counter()
    store.interrupt_orphaned_runs(live_owner="bench-new", reason="octipusd stopped while the run was live")
    marked = store.orphan_started_actions(owner="bench-new")
    store.quarantine_invocations(owner="bench-new")
    store.open_dispatches(store.now())
    return time.perf_counter() - start, len(marked)


def _recovery(databases: Callable[[], Any], orphans: int, history: int, repeat: int) -> dict[str, float]:
    """Median start-up recovery time (s) on ``orphans`` orphans (+ ``history``) and on an empty database."""
    times: dict[str, list[float]] = {"orphans": [], "empty": []}
    for _ in range(repeat):
        for kind in ("orphans", "empty"):
            with databases() as url:
                store = Store.open(url)
                try:
                    if kind == "orphans":
                        _fill(store, orphans=orphans, history=history)
                    seconds, marked = _recover(store)
                    assert marked == (orphans if kind == "orphans" else 0), marked
                    times[kind].append(seconds)
                finally:
                    store.close()
    return {kind: statistics.median(values) for kind, values in times.items()}


@contextmanager
def _sqlite_databases(root: Path) -> Iterator[Callable[[], Any]]:
    @contextmanager
    def one() -> Iterator[str]:
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            yield f"sqlite:///{Path(tmp) / 'bench.db'}"

    yield one


@contextmanager
def _postgres_databases() -> Iterator[Callable[[], Any]]:
    server_url, stop = start_postgres(durable=True)

    @contextmanager
    def one() -> Iterator[str]:
        name = f"b_{uuid.uuid4().hex}"
        with admin_connect(server_url) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin_connect(server_url) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    try:
        yield one
    finally:
        stop()


class _NoPerson:
    async def ask_recovery(self, *args: Any, **kwargs: Any) -> GateResult:
        raise AssertionError("nothing is unresolved in this benchmark")


async def _per_call(url: str, calls: int, history: int) -> tuple[list[float], list[float]]:
    """The earlier figure: review check + journal around ``shell__run true`` vs the call unjournaled."""
    store = Store.open(url)
    tmp = tempfile.gettempdir()
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
        return await SHELL_RUN.handler(identity, FakeToolHost(), dict(ARGS))

    async def journaled() -> float:
        start = time.perf_counter()
        assert (await gate.check(ctx, scope, "shell__run", ARGS, CONTRACT)).allowed
        assert (await journal.execute(scope, "shell__run", ARGS, CONTRACT, body)).recorded
        return time.perf_counter() - start

    async def bare() -> float:
        start = time.perf_counter()
        await run_unjournaled("shell__run", body)
        return time.perf_counter() - start

    journaled_times: list[float] = []
    bare_times: list[float] = []
    for _ in range(10):  # warm-up
        await journaled()
        await bare()
    while len(journaled_times) < calls:
        journaled_times.extend([await journaled() for _ in range(25)])
        bare_times.extend([await bare() for _ in range(25)])
    store.close()
    return journaled_times, bare_times


def _print_per_call(journaled: list[float], bare: list[float], history: int) -> None:
    def stats(values: list[float]) -> tuple[float, float]:
        ordered = sorted(values)
        return statistics.median(ordered) * 1000, ordered[int(len(ordered) * 0.9)] * 1000

    j_med, j_p90 = stats(journaled)
    b_med, b_p90 = stats(bare)
    print("per call (SQLite), shell__run `true`:")
    print(f"  journaled (review check + started + outcome): median {j_med:.3f} ms, p90 {j_p90:.3f} ms")
    print(f"  bare      (the same call, no journal):        median {b_med:.3f} ms, p90 {b_p90:.3f} ms")
    print(f"  ratio journaled/bare: {j_med / b_med:.2f} ({history} earlier records, {len(journaled)} calls)")


async def _backend(name: str, databases: Callable[[], Any], args: argparse.Namespace) -> None:
    with databases() as url:
        store = Store.open(url)
        try:
            rates = await _pairs(store, args.pairs)
        finally:
            store.close()
    recovery = _recovery(databases, args.orphans, args.history, args.repeat)
    print(f"{name}:")
    print(
        f"  journal pairs/s {rates['journal']:8.0f}   raw pairs/s {rates['raw']:8.0f}   "
        f"ratio {rates['journal'] / rates['raw']:.2f}   (raw single-row inserts/s {rates['single']:.0f})"
    )
    extra = f" + {args.history} completed" if args.history else ""
    print(
        f"  start-up recovery: {recovery['orphans'] * 1000:8.1f} ms with {args.orphans} orphaned actions{extra}, "
        f"{recovery['empty'] * 1000:.1f} ms empty (median of {args.repeat})"
    )
    if name == "SQLite" and args.calls > 0:
        with databases() as url:
            _print_per_call(*await _per_call(url, args.calls, args.calls_history), args.calls_history)


async def _main(args: argparse.Namespace) -> None:
    backends = {b.strip() for b in args.backends.split(",")}
    with tempfile.TemporaryDirectory() as root:
        if "sqlite" in backends:
            with _sqlite_databases(Path(root)) as databases:
                await _backend("SQLite", databases, args)
        if "postgresql" in backends:
            with _postgres_databases() as databases:
                await _backend("PostgreSQL", databases, args)


def main() -> None:
    """Parse the options and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=600, help="pairs per kind (journal, raw)")
    parser.add_argument("--orphans", type=int, default=1000)
    parser.add_argument("--history", type=int, default=0, help="completed actions beside the orphans")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=300, help="per-call figure (0: skip)")
    parser.add_argument("--calls-history", type=int, default=1000)
    parser.add_argument("--backends", default="sqlite,postgresql")
    anyio.run(_main, parser.parse_args())


if __name__ == "__main__":
    main()
