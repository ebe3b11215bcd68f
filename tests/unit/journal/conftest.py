"""Fixtures of the action-journal tests (seed 000 "Action recovery", seed 001 approved recovery).

Everything is real: the store on SQLite and on the test PostgreSQL (``store_url``), the
permission gate with a real approval broker, the journal, the recovery review gate and
``shell__run`` running real subprocesses. Side effects are counted in an external *ledger*: a
file in the session's workspace that each shell command appends one line to.

:class:`Bench` holds one session (workspace + ledger) and one run of user ``alice`` and builds
every journal component over the store; :meth:`Bench.reopen` closes the store and opens it
again on the same database (a daemon restart as far as the journal is concerned).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.journal.executor import ActionJournal, ActionScope
from octipusd.journal.operator import RecoveryOperator
from octipusd.journal.review import RecoveryGate
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.gate import PermissionGate
from octipusd.runtime.actions import ActionService
from octipusd.store import Store
from octipusd.store.journal_store import ToolAction
from octipusd.toolkit import (
    CallContext,
    Executed,
    GateResult,
    Origin,
    RecoveryContract,
    RunIdentity,
    ToolOutcome,
    ToolSpec,
)
from octipusd.tools import SHELL_RUN

#: Bound of every wait in these tests (seconds); nothing should come near it.
WITHIN = 15.0
#: The ledger file each shell command appends to (relative to the session's workspace).
LEDGER = "ledger.txt"


class Recorder:
    """The components' ``emit``: records ``(run_id, kind, data)``; a test can wait for a kind."""

    def __init__(self) -> None:
        self.events: list[tuple[str | None, str, dict[str, Any]]] = []
        self._changed = anyio.Condition()

    async def __call__(self, run_id: str | None, kind: str, data: dict[str, Any]) -> None:
        self.events.append((run_id, kind, data))
        async with self._changed:
            self._changed.notify_all()

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The data of every recorded event of ``kind``, in order."""
        return [data for _, k, data in self.events if k == kind]

    async def wait_for(self, kind: str, count: int = 1) -> dict[str, Any]:
        """Wait (bounded) until ``count`` events of ``kind`` were emitted; return the last of them."""
        with anyio.fail_after(WITHIN):
            async with self._changed:
                while len(self.of(kind)) < count:
                    await self._changed.wait()
        return self.of(kind)[count - 1]


def ledger_lines(path: Path) -> int:
    """How many lines the ledger holds (0 when the file was never created)."""
    if not path.exists():
        return 0
    return len(path.read_text().splitlines())


async def wait_until(predicate: Callable[[], bool], within: float = WITHIN) -> None:
    """Wait (bounded) until ``predicate()`` holds; polls every 10 ms."""
    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110 - a file or a row has no event to wait on
            await anyio.sleep(0.01)


@dataclass
class Pending:
    """A gate check running in a task: its result once done."""

    done: anyio.Event
    results: list[GateResult]

    async def result(self) -> GateResult:
        with anyio.fail_after(WITHIN):
            await self.done.wait()
        (result,) = self.results
        return result


def start(tg: anyio.abc.TaskGroup, check: Callable[[], Awaitable[GateResult]]) -> Pending:
    """Run ``check`` in ``tg``; the returned :class:`Pending` gives its result."""
    pending = Pending(anyio.Event(), [])

    async def run() -> None:
        pending.results.append(await check())
        pending.done.set()

    tg.start_soon(run)
    return pending


@dataclass
class Bench:
    """One database, sessions of ``alice``, and the journal components over an open store.

    Attributes:
        url: The database URL (reopened by :meth:`reopen`).
        store: The open store.
        root: A folder for workspaces.
        session_id: Alice's first session (workspace :attr:`workspace`, ledger :attr:`ledger`).
        run_id: A run of that session (approvals of a run need one).
        contracts: Tool id -> recovery contract (the operator's lookup; tests add tools).
    """

    url: str
    store: Store
    root: Path
    owner: str = "daemon-1"
    session_id: str = ""
    run_id: str = ""
    workspace: Path = field(default_factory=Path)
    emit: Recorder = field(default_factory=Recorder)
    contracts: dict[str, RecoveryContract] = field(default_factory=dict)
    runs: dict[str, str] = field(default_factory=dict)
    sessions: int = 0

    def __post_init__(self) -> None:
        assert SHELL_RUN.contract is not None
        self.contracts.setdefault(SHELL_RUN.tool_id, SHELL_RUN.contract)
        self.session_id, self.workspace = self.new_session()
        self.run_id = self.runs[self.session_id]
        self.build(self.owner)

    @property
    def ledger(self) -> Path:
        return self.workspace / LEDGER

    def lines(self) -> int:
        """Lines in the first session's ledger."""
        return ledger_lines(self.ledger)

    def new_session(self, *, with_run: bool = True) -> tuple[str, Path]:
        """A new session (fresh workspace folder) and, by default, one run in it."""
        self.sessions += 1
        workspace = self.root / f"ws{self.sessions}"
        workspace.mkdir(parents=True)
        session = self.store.create_session(workspace=str(workspace), adapter="codex")
        if with_run:
            self.runs[session.id] = self.store.create_run(
                session_id=session.id, prompt="work", owner="test"
            ).id
        return session.id, workspace

    def build(self, owner: str, *, timeout: float = 30.0) -> None:
        """(Re)build every component over :attr:`store` for the daemon instance ``owner``."""
        self.owner = owner
        self.broker = ApprovalBroker(self.store, timeout_seconds=timeout)
        self.gate = PermissionGate(self.store, self.broker, self.emit, Policy.from_setting(None))
        self.journal = ActionJournal(self.store, owner, record_timeout_seconds=WITHIN)
        self.operator = RecoveryOperator(self.store, self.contracts.get, self.emit)
        self.recovery = RecoveryGate(self.store, self.journal, self.gate, self.operator, self.emit)

    def reopen(self, owner: str) -> None:
        """Close the store, open it again on the same database, rebuild for ``owner``."""
        self.store.close()
        self.store = Store.open(self.url)
        self.build(owner)

    # ---------------------------------------------------------------- helpers for tests

    ledger_lines = staticmethod(ledger_lines)
    wait_until = staticmethod(wait_until)
    start = staticmethod(start)

    # ---------------------------------------------------------------- who and where

    def identity(self, *, user: str = "alice", session_id: str | None = None) -> RunIdentity:
        session = self.store.get_session(session_id or self.session_id)
        return RunIdentity(
            run_id=self.runs.get(session.id, self.run_id),
            session_id=session.id,
            user=user,
            worker_id=f"worker-{user}",
            workspace=Path(session.workspace),
            attended=True,
        )

    def scope(self, *, user: str = "alice", session_id: str | None = None) -> ActionScope:
        sid = session_id or self.session_id
        return ActionScope(
            user=user, session_id=sid, run_id=self.runs.get(sid), agent=f"worker-{user}", origin=Origin.AGENT
        )

    def ctx(self, *, attended: bool = True, session_id: str | None = None) -> CallContext:
        sid = session_id or self.session_id
        session = self.store.get_session(sid)
        return CallContext(
            run_id=self.runs.get(sid, self.run_id),
            session_id=sid,
            workspace=session.workspace,
            attended=attended,
        )

    # ---------------------------------------------------------------- calls

    async def shell(
        self,
        command: str,
        *,
        seconds: float | None = None,
        user: str = "alice",
        session_id: str | None = None,
    ) -> Executed:
        """Run ``shell__run`` through :meth:`ActionJournal.execute`, the handler as the body.

        ``seconds`` is the command's own ``timeout`` argument.
        """
        arguments: dict[str, Any] = {"command": command}
        if seconds is not None:
            arguments["timeout"] = seconds
        identity = self.identity(user=user, session_id=session_id)

        async def body() -> str | dict[str, Any] | ToolOutcome:
            with anyio.fail_after(SHELL_RUN.timeout_seconds):
                return await SHELL_RUN.handler(identity, FakeToolHost(), dict(arguments))

        return await self.journal.execute(
            self.scope(user=user, session_id=session_id),
            SHELL_RUN.tool_id,
            arguments,
            SHELL_RUN.recovery_contract,
            body,
            timeout_seconds=SHELL_RUN.timeout_seconds,
        )

    async def check(
        self,
        ctx: CallContext,
        *,
        user: str = "alice",
        session_id: str | None = None,
        tool: str = SHELL_RUN.tool_id,
        arguments: Mapping[str, Any] | None = None,
        contract: RecoveryContract | None = None,
    ) -> GateResult:
        """The recovery review gate's check of the next mutation (``shell__run`` by default)."""
        return await self.recovery.check(
            ctx,
            self.scope(user=user, session_id=session_id),
            tool,
            dict(arguments if arguments is not None else {"command": "echo next >> " + LEDGER}),
            contract if contract is not None else SHELL_RUN.recovery_contract,
        )

    def uncertain(
        self,
        *,
        user: str = "alice",
        session_id: str | None = None,
        tool: str = SHELL_RUN.tool_id,
        in_flight_seconds: float | None = 0.0,
        idempotency_key: str | None = None,
    ) -> ToolAction:
        """Write one uncertain record directly (started, then uncertain), as a lost call leaves it.

        ``in_flight_seconds`` is the call's deadline: by default 0 (no request of it can still
        land, as after a call that timed out at its own deadline).
        """
        sid = session_id or self.session_id
        action = self.store.start_action(
            user=user,
            session_id=sid,
            run_id=self.runs.get(sid),
            agent=f"worker-{user}",
            origin="agent",
            tool=tool,
            args_hash="0" * 64,
            risk_class="containable",
            owner=self.owner,
            deadline_seconds=3600.0,
            in_flight_seconds=in_flight_seconds,
            idempotency_key=idempotency_key,
        )
        assert self.store.finish_action(action.id, outcome="uncertain", detail="timed out")
        return self.store.get_action(action.id)

    def service(
        self,
        owner: str | None = None,
        *,
        resolve: Callable[[str], Any] | None = None,
        journal: ActionJournal | None = None,
    ) -> ActionService:
        """An :class:`ActionService` over the store (its own journal unless one is given)."""
        owner = owner or self.owner
        own_journal = journal or ActionJournal(self.store, owner, record_timeout_seconds=WITHIN)
        return ActionService(
            store=self.store,
            journal=own_journal,
            operator=RecoveryOperator(self.store, self.contracts.get, self.emit),
            gate=self.gate,
            broker=self.broker,
            resolve=resolve or builtin_resolver(),
            owner=owner,
        )


def builtin_resolver(*specs: ToolSpec) -> Callable[[str], Any]:
    """A resolver finding ``shell__run`` (and ``specs``)."""
    known = {s.tool_id: s for s in (SHELL_RUN, *specs)}

    @asynccontextmanager
    async def resolve(tool_id: str) -> AsyncIterator[ToolSpec]:
        yield known[tool_id]

    def lookup(tool_id: str) -> Any:
        if tool_id not in known:
            from octipusd.errors import NotFoundError

            raise NotFoundError(f"no tool {tool_id!r}")
        return resolve(tool_id)

    return lookup


@pytest.fixture
def bench(store: Store, store_url: str, tmp_path: Path) -> Iterator[Bench]:
    made = Bench(url=store_url, store=store, root=tmp_path / "sessions")
    try:
        yield made
    finally:
        made.store.close()


@pytest.fixture
async def tasks() -> AsyncIterator[anyio.abc.TaskGroup]:
    """A task group for concurrent work; cancelled at the end so a failed test never hangs."""
    async with anyio.create_task_group() as tg:
        yield tg
        tg.cancel_scope.cancel()
