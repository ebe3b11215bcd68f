"""The gate decides from the store's in-memory view of rules, grants and flow labels
(:mod:`octipusd.store.policy_view`), on SQLite and PostgreSQL.

Issue 13 part 3: every rule or grant change is seen by the very next decision; a grant's use is
still counted exactly once in the database; a write that fails leaves the view as it was. The
changes go through the real API routes (``httpx`` over ASGI, in the test's event loop) and the
real store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import httpx
import pytest

from octipusd.api.app import create_app
from octipusd.api.common import Services
from octipusd.errors import ConflictError, NotFoundError, StoreError
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.gate import PermissionGate
from octipusd.runtime.events import EventHub
from octipusd.store import Store
from octipusd.toolkit import CallContext, GateResult

pytestmark = pytest.mark.anyio

#: Longest wait for something the gate does in a concurrent task (seconds).
WITHIN = 15.0

MAKE = {"command": "make test"}


@dataclass
class Daemon:
    """A real store, gate and API over one session and run."""

    store: Store
    gate: PermissionGate
    http: httpx.AsyncClient
    session_id: str
    run_id: str
    workspace: str
    approvals: list[str]
    asked: anyio.Event

    def ctx(self, *, attended: bool = False) -> CallContext:
        return CallContext(
            run_id=self.run_id, session_id=self.session_id, workspace=self.workspace, attended=attended
        )

    async def decide(self, *, attended: bool = False) -> GateResult:
        return await self.gate.decide(self.ctx(attended=attended), "shell__run", MAKE)

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.http.post(f"/v1{path}", json=body)
        assert response.status_code in (200, 201), response.text
        reply: dict[str, Any] = response.json()
        return reply

    async def delete(self, path: str) -> None:
        response = await self.http.delete(f"/v1{path}")
        assert response.status_code in (200, 204), response.text


@pytest.fixture
async def daemon(store: Store, tmp_path: Path) -> AsyncIterator[Daemon]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session = store.create_session(workspace=str(workspace), adapter="codex")
    run = store.create_run(session_id=session.id, prompt="work", owner="test")
    hub = EventHub(store)
    broker = ApprovalBroker(store, timeout_seconds=WITHIN)
    approvals: list[str] = []
    asked = anyio.Event()

    async def emit(run_id: str, kind: str, data: dict[str, Any]) -> None:
        await hub.emit(run_id, kind, data)
        if kind == "approval_requested":
            approvals.append(data["approval_id"])
            asked.set()

    gate = PermissionGate(store, broker, emit, Policy.from_setting(None))
    services = Services(
        store=store,
        runs=SimpleNamespace(),  # type: ignore[arg-type]  # the policy routes never use it
        gate=gate,
        adapters={},
        user="alice",
        hub=hub,
        broker=broker,
        resolutions={},
    )
    transport = httpx.ASGITransport(app=create_app(services))
    async with httpx.AsyncClient(transport=transport, base_url="http://octipusd") as http:
        yield Daemon(store, gate, http, session.id, run.id, str(workspace), approvals, asked)


def refused_for_review(result: GateResult) -> bool:
    return not result.allowed and result.reason.startswith("review required: shell__run")


async def test_rule_changes_through_the_api_are_seen_by_the_next_decision(daemon: Daemon) -> None:
    assert refused_for_review(await daemon.decide())  # the default ASK; the view is loaded now

    allow = await daemon.post("/rules", {"level": "allow", "rule": "shell__run(make:*)"})
    allowed = await daemon.decide()
    assert allowed.allowed and "shell__run(make:*)" in allowed.reason, allowed

    # the rule changed: the same rule at another level (a stored deny wins)
    deny = await daemon.post("/rules", {"level": "deny", "rule": "shell__run(make:*)"})
    denied = await daemon.decide()
    assert not denied.allowed and denied.reason.startswith("denied by Octipus policy"), denied

    await daemon.delete(f"/rules/{deny['id']}")
    assert (await daemon.decide()).allowed
    await daemon.delete(f"/rules/{allow['id']}")
    assert refused_for_review(await daemon.decide())
    assert daemon.store.policy_entries().rules == ()


async def test_grant_changes_through_the_api_are_seen_by_the_next_decision(daemon: Daemon) -> None:
    assert refused_for_review(await daemon.decide())

    limited = await daemon.post("/grants", {"tool_id": "shell__run", "matcher": "make:*", "max_uses": 2})
    for _ in range(2):
        result = await daemon.decide()
        assert result.allowed and f"grant {limited['id']}" in result.reason, result
    assert refused_for_review(await daemon.decide())  # used up: the view dropped it
    assert daemon.store.get_grant(limited["id"]).uses == 2

    open_ended = await daemon.post("/grants", {"tool_id": "shell__run"})
    assert (await daemon.decide()).allowed
    await daemon.delete(f"/grants/{open_ended['id']}")
    assert refused_for_review(await daemon.decide())
    assert daemon.store.get_grant(open_ended["id"]).uses == 1
    assert daemon.store.policy_entries().grants == ()


async def test_a_remembered_approval_is_seen_by_the_next_decision(daemon: Daemon) -> None:
    results: list[GateResult] = []

    async def ask() -> None:
        results.append(await daemon.decide(attended=True))

    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await daemon.asked.wait()
            (approval_id,) = daemon.approvals
            await daemon.post(
                f"/approvals/{approval_id}",
                {"decision": "approve", "remember": {"scope": "session", "match": "tool", "max_uses": 1}},
            )
    assert results[0].allowed, results
    grant_id = daemon.store.get_approval(approval_id).grant_id
    assert grant_id is not None
    again = await daemon.decide()  # unattended: only the remembered grant can allow it
    assert again.allowed and f"grant {grant_id}" in again.reason, again
    assert refused_for_review(await daemon.decide())
    assert daemon.store.get_grant(grant_id).uses == 1


@pytest.mark.parametrize("uses", [1, 3])
async def test_a_grant_with_n_uses_allows_exactly_n_concurrent_decisions(daemon: Daemon, uses: int) -> None:
    assert refused_for_review(await daemon.decide())
    grant = daemon.store.create_grant(tool_id="shell__run", level="allow", created_by="alice", max_uses=uses)
    results: list[GateResult] = []

    async def call() -> None:
        results.append(await daemon.decide())

    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            for _ in range(3 * uses + 2):
                tg.start_soon(call)
    allowed = [r for r in results if r.allowed]
    assert len(allowed) == uses, results
    assert all(f"grant {grant.id}" in r.reason for r in allowed)
    assert all(refused_for_review(r) for r in results if not r.allowed), results
    assert daemon.store.get_grant(grant.id).uses == uses
    assert refused_for_review(await daemon.decide())


async def test_a_failed_write_leaves_the_view_as_it_was(daemon: Daemon) -> None:
    rule = daemon.store.add_rule(level="allow", rule="shell__run(make:*)", created_by="alice")
    assert (await daemon.decide()).allowed
    before = daemon.store.policy_view.entries
    assert before is not None and before.rules == (rule,)

    with pytest.raises(ConflictError):
        daemon.store.add_rule(level="allow", rule="shell__run(make:*)", created_by="alice")
    with pytest.raises(NotFoundError):
        daemon.store.remove_rule("0" * 32)
    with pytest.raises(NotFoundError):
        daemon.store.revoke_grant("0" * 32, revoked_by="alice")  # its UPDATE ran, then rolled back
    with pytest.raises(StoreError):  # the commit fails: no such session (foreign key)
        daemon.store.create_grant(tool_id="shell__run", level="deny", created_by="alice", session_id="1" * 32)
    assert daemon.store.policy_view.entries is before
    assert (await daemon.decide()).allowed
    assert [g.session_id for g in daemon.store.list_grants()] == []


async def test_a_grant_expires_by_the_store_clock_while_the_view_is_unchanged(
    migrated_store_url: str, tmp_path: Path
) -> None:
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    with Store.open(migrated_store_url, clock=lambda: now[0]) as store:
        session = store.create_session(workspace=str(tmp_path), adapter="codex")
        run = store.create_run(session_id=session.id, prompt="work", owner="test")
        gate = PermissionGate(
            store,
            ApprovalBroker(store, 30),
            EventHub(store).emit,
            Policy.from_setting(None),
            clock=lambda: now[0],
        )
        ctx = CallContext(run_id=run.id, session_id=session.id, workspace=str(tmp_path), attended=False)
        store.create_grant(
            tool_id="shell__run", level="allow", created_by="alice", expires_at=now[0] + timedelta(minutes=5)
        )
        assert (await gate.decide(ctx, "shell__run", MAKE)).allowed
        entries = store.policy_view.entries
        now[0] += timedelta(minutes=5)
        assert refused_for_review(await gate.decide(ctx, "shell__run", MAKE))
        assert store.policy_view.entries is entries  # no write happened: the gate's cache expired it


async def test_a_flow_label_added_by_another_gate_is_seen_by_the_next_decision(daemon: Daemon) -> None:
    daemon.store.add_rule(level="allow", rule="cli-native:WebFetch", created_by="alice")
    fetch = {"url": "https://example.com"}
    assert (await daemon.gate.decide(daemon.ctx(), "cli-native:WebFetch", fetch)).allowed  # label cached
    other = PermissionGate(daemon.store, daemon.gate.broker, daemon.gate.emit, daemon.gate.base)
    await other.observe(daemon.ctx(), "cli-native:Read", {"file_path": ".env"})  # reads a credential
    assert "secret" in daemon.store.get_session(daemon.session_id).flow_label
    refused = await daemon.gate.decide(daemon.ctx(), "cli-native:WebFetch", fetch)
    assert not refused.allowed and "flow guard" in refused.reason, refused


async def test_deleting_a_session_drops_its_grants_from_the_view(daemon: Daemon) -> None:
    other = daemon.store.create_session(workspace=daemon.workspace, adapter="codex")
    kept = daemon.store.create_grant(tool_id="shell__run", level="allow", created_by="alice")
    daemon.store.create_grant(tool_id="shell__run", level="deny", created_by="alice", session_id=other.id)
    assert len(daemon.store.policy_entries().grants) == 2
    daemon.store.delete_session(other.id)
    assert daemon.store.policy_entries().grants == (kept,)
    assert (await daemon.decide()).allowed
