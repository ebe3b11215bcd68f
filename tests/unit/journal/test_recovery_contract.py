"""Seed 004 "Concrete diagnostic": six failure injections on one mutating connector tool.

The tool is ``ledger.append_entry`` (and ``ledger.append_pair``) of the real ledger MCP server
(``octipusd.testing.ledger_mcp``, over streamable HTTP in its own process), declared
``compensatable`` with an idempotency key, a verification probe (``find_entry``), a
compensation (``remove_entry``), a named owner and a deadline. Each case checks what the seed
asks: one planned action per effect, the actual effect discovered (probe), unsafe retries
blocked, an allowed remedy, and evidence for an operator in the receipt. The ledger file counts
the side effects. Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.connectors import ConnectorRegistry
from octipusd.errors import OctipusError
from octipusd.journal.executor import ActionJournal, ActionScope
from octipusd.journal.operator import RecoveryOperator
from octipusd.journal.review import RecoveryGate
from octipusd.settings import McpServerSettings
from octipusd.store import Store
from octipusd.testing.ledger_mcp import count_lines, start_http_server, stop_server
from octipusd.toolkit import ActionOutcome, CallContext, Executed, GateResult, RunIdentity, ToolSpec
from tests.unit.journal.conftest import wait_until

pytestmark = pytest.mark.anyio

_CONTRACT: dict[str, Any] = {
    "riskClass": "compensatable",
    "idempotencyKey": "key",
    "probe": {"tool": "find_entry", "arguments": {"key": "{idempotencyKey}"}},
    "compensation": {"tool": "remove_entry", "arguments": {"key": "{idempotencyKey}"}},
    "owner": "ops",
    "deadlineSeconds": 0.3,
}


class NoPerson:
    """Stands for the absent person of unattended work: the gate never reaches it."""

    async def ask_recovery(self, *args: Any, **kwargs: Any) -> GateResult:
        raise AssertionError("an unattended check must not ask anyone")


class World:
    """A store, a ledger server, the journal and the recovery pieces, for one test."""

    def __init__(self, store: Store, folder: Path, url: str, proc: subprocess.Popen[bytes]) -> None:
        self.store = store
        self.folder = folder
        self.proc = proc
        self.ledger = folder / "ledger.tsv"
        self.faults = folder / "faults.json"
        self.faults.write_text("{}")
        settings = McpServerSettings.model_validate(
            {
                "transport": "http",
                "url": url,
                "callTimeoutSeconds": 2.0,  # under the faults' 3 s holds; above a loaded machine's answer
                "tools": {"append_entry": _CONTRACT, "append_pair": _CONTRACT},
            }
        )
        self.registry = ConnectorRegistry(lambda: {"ledger": settings})
        self.journal = ActionJournal(store, "owner-1")
        self.events: list[tuple[str | None, str, dict[str, Any]]] = []
        self.operator = RecoveryOperator(store, self.registry.contract_for, self._notify)
        self.gate = RecoveryGate(store, self.journal, NoPerson(), self.operator, self._emit)
        session = store.create_session(workspace=str(folder), adapter="claude-code")
        self.scope = ActionScope(user="alice", session_id=session.id, run_id=None, agent="worker")
        self.identity = RunIdentity(
            run_id="run-1",
            session_id=session.id,
            user="alice",
            worker_id="worker",
            workspace=folder,
            attended=False,
        )

    async def _notify(self, run_id: str | None, kind: str, data: dict[str, Any]) -> None:
        self.events.append((run_id, kind, data))

    async def _emit(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        self.events.append((run_id, kind, data))

    def fault(self, **modes: str) -> None:
        self.faults.write_text(
            json.dumps({tool: {"mode": mode, "seconds": 3} for tool, mode in modes.items()})
        )

    def count(self, key: str | None = None) -> int:
        return count_lines(self.ledger, key)

    def ctx(self) -> CallContext:
        return CallContext(
            run_id="run-1", session_id=str(self.scope.session_id), workspace="", attended=False
        )

    async def check(self, spec: ToolSpec, args: dict[str, Any]) -> GateResult:
        return await self.gate.check(self.ctx(), self.scope, spec.tool_id, args, spec.recovery_contract)

    async def call(self, spec: ToolSpec, args: dict[str, Any]) -> Executed:
        verdict = await self.check(spec, args)
        assert verdict.allowed, verdict.reason

        async def body() -> Any:
            with anyio.fail_after(spec.timeout_seconds):
                return await spec.handler(self.identity, FakeToolHost(), dict(args))

        return await self.journal.execute(
            self.scope,
            spec.tool_id,
            args,
            spec.recovery_contract,
            body,
            timeout_seconds=spec.timeout_seconds,
            dispatch=spec.dispatch(),
        )

    def actions(self) -> list[Any]:
        return self.store.list_actions(session_id=self.scope.session_id)

    def receipt_kinds(self, action_id: str) -> list[str]:
        return [r.kind for r in self.store.list_receipts(action_id)]


@pytest.fixture
def world(store_url: str, tmp_path: Path) -> Iterator[World]:
    store = Store.open(store_url)
    proc, url = start_http_server(tmp_path / "ledger.tsv", tmp_path / "faults.json", tmp_path / "port")
    try:
        yield World(store, tmp_path, url, proc)
    finally:
        stop_server(proc)
        store.close()


def _key() -> str:
    return f"k-{uuid.uuid4().hex[:8]}"


def _specs(tools: tuple[ToolSpec, ...]) -> dict[str, ToolSpec]:
    return {spec.tool_id: spec for spec in tools}


async def test_1_timeout_before_the_request_leaves(world: World) -> None:
    # (a) the server is gone before tools/call is sent: trusted local evidence, nothing ran
    async with world.registry.connect_all() as connected:
        append = _specs(connected.tools)["ledger.append_entry"]
        stop_server(world.proc)
        done = await world.call(append, {"key": _key(), "text": "x"})
    assert done.outcome is ActionOutcome.NOT_EXECUTED, done
    assert world.count() == 0
    assert (await world.check(append, {"key": _key(), "text": "y"})).allowed  # no review needed


async def test_1b_a_request_that_left_but_got_no_answer_is_probed_not_assumed_failed(world: World) -> None:
    async with world.registry.connect_all() as connected:
        append = _specs(connected.tools)["ledger.append_entry"]
        world.fault(append_entry="hold_before")  # the server holds the request 3 s, then applies it
        key = _key()
        done = await world.call(append, {"key": key, "text": "x"})
        assert done.outcome is ActionOutcome.UNCERTAIN, done  # never labelled failed
        first = world.store.get_action(done.action_id or "")
        assert first.in_flight_until == first.started_at + timedelta(seconds=append.timeout_seconds)
        assert first.dispatch is not None and first.dispatch["kind"] == "mcp_http"
        assert first.dispatch["session_id"]  # the streamable HTTP session, recorded with started
        world.fault()
        # the probe finds nothing yet, but the request may still land: evidence, not a settlement
        refused = await world.check(append, {"key": key, "text": "x"})
        assert not refused.allowed and "review required" in refused.reason
        probe = [r for r in world.store.list_receipts(first.id) if r.kind == "probe"][-1]
        assert probe.state is None and probe.data["status"] == "not_applied"
        assert probe.data["note"].startswith("not applied yet; a request may still be in flight until ")
        assert world.store.get_action(first.id).recovery_state == "effect_unconfirmed"
        await wait_until(lambda: world.count(key) == 1, within=10)  # the held request lands
        # now the probe finds it: verified applied, and the retry is refused as a duplicate
        duplicate = await world.check(append, {"key": key, "text": "x"})
    assert not duplicate.allowed and "retrying would duplicate it" in duplicate.reason, duplicate
    settled = world.store.get_action(first.id)
    assert settled.recovery_state == "verified" and settled.outcome == "uncertain"
    assert world.count(key) == 1


async def test_2_timeout_after_acceptance_blocks_the_duplicate(world: World) -> None:
    async with world.registry.connect_all() as connected:
        append = _specs(connected.tools)["ledger.append_entry"]
        world.fault(append_entry="hang_after")
        key = _key()
        done = await world.call(append, {"key": key, "text": "pay"})
        assert done.outcome is ActionOutcome.UNCERTAIN, done
        world.fault()
        retry = await world.check(append, {"key": key, "text": "pay"})
        assert not retry.allowed and "probe found the effect applied" in retry.reason, retry
        other = await world.call(append, {"key": _key(), "text": "another"})  # not a duplicate
    assert other.outcome is ActionOutcome.COMPLETED
    assert world.count(key) == 1  # the effect happened exactly once
    assert world.store.get_action(done.action_id or "").recovery_state == "verified"


async def test_3_duplicated_callback_changes_nothing(world: World) -> None:
    async with world.registry.connect_all() as connected:
        append = _specs(connected.tools)["ledger.append_entry"]
        done = await world.call(append, {"key": _key(), "text": "once"})
    assert done.outcome is ActionOutcome.COMPLETED and done.action_id
    # the completion arrives a second time, and an uncertain report after it
    assert not world.store.finish_action(done.action_id, outcome="completed", detail="again")
    assert not world.store.finish_action(done.action_id, outcome="uncertain", detail="late timeout")
    [record] = world.actions()
    assert record.id == done.action_id and record.outcome == "completed"
    assert world.receipt_kinds(record.id).count("outcome") == 1
    assert world.count() == 1


async def test_4_partial_multi_step_success_is_compensated(world: World) -> None:
    async with world.registry.connect_all() as connected:
        pair = _specs(connected.tools)["ledger.append_pair"]
        append = _specs(connected.tools)["ledger.append_entry"]
        world.fault(append_pair="fail_second_step")
        key = _key()
        done = await world.call(pair, {"key": key, "first": "a", "second": "b"})
        assert done.outcome is ActionOutcome.UNCERTAIN and done.is_error, done
        world.fault()
        assert world.count(key) == 1  # one of two steps happened
        blocked = await world.check(append, {"key": _key(), "text": "next"})
        assert not blocked.allowed and "review required" in blocked.reason  # partial = unknown
        action = world.store.get_action(done.action_id or "")
        detail = await world.operator.compensate(action, by="ops")
        assert "removed" in detail
        assert world.count(key) == 0
        assert world.store.get_action(action.id).recovery_state == "compensated"
        assert (await world.check(append, {"key": _key(), "text": "next"})).allowed
    assert world.receipt_kinds(action.id)[-2:] == ["compensation", "compensation"]


async def test_5_verification_endpoint_outage_goes_to_the_owner_past_the_deadline(world: World) -> None:
    async with world.registry.connect_all() as connected:
        append = _specs(connected.tools)["ledger.append_entry"]
        world.fault(append_entry="hang_after", find_entry="unavailable")
        key = _key()
        done = await world.call(append, {"key": key, "text": "x"})
        assert done.outcome is ActionOutcome.UNCERTAIN
        blocked = await world.check(append, {"key": _key(), "text": "y"})
        assert not blocked.allowed  # an outage is not "not applied"
        action = world.store.get_action(done.action_id or "")
        assert action.recovery_state == "effect_unconfirmed"
        escalated = await world.operator.escalate_due(datetime.now(UTC) + timedelta(seconds=1))
    assert [(e.action.id, e.owner) for e in escalated] == [(action.id, "ops")]
    assert world.store.get_action(action.id).recovery_state == "needs_operator"
    assert any(kind == "action_escalated" and data["owner"] == "ops" for _, kind, data in world.events)
    probes = [r for r in world.store.list_receipts(action.id) if r.kind == "probe"]
    assert probes and all(r.data["status"] == "unknown" for r in probes)
    assert world.count(key) == 1


async def test_6_failed_compensation_needs_an_operator(world: World) -> None:
    async with world.registry.connect_all() as connected:
        append = _specs(connected.tools)["ledger.append_entry"]
        world.fault(append_entry="error_after", find_entry="unavailable", remove_entry="unavailable")
        key = _key()
        done = await world.call(append, {"key": key, "text": "x"})
        assert done.outcome is ActionOutcome.UNCERTAIN  # isError after dispatch stays conservative
        action = world.store.get_action(done.action_id or "")
        with pytest.raises(OctipusError, match="needs an operator"):
            await world.operator.compensate(action, by="ops")
        assert world.store.get_action(action.id).recovery_state == "needs_operator"
        blocked = await world.check(append, {"key": _key(), "text": "y"})
    assert not blocked.allowed  # autonomous work does not resume over an unresolved effect
    failure = [r for r in world.store.list_receipts(action.id) if r.kind == "compensation"][-1]
    assert "failed" in failure.data and failure.state == "needs_operator"
    assert world.count(key) == 1


async def test_irreversible_actions_never_run_unattended(world: World) -> None:
    async with world.registry.connect_all() as connected:
        lying = _specs(connected.tools)["ledger.lying_read"]  # undeclared: irreversible
        verdict = await world.check(lying, {"key": _key()})
    assert not verdict.allowed and "irreversible" in verdict.reason
    assert world.count() == 0
