"""The recovery review gate (seed 000 "What the user sees", "Validation"; seed 004 probes).

:class:`RecoveryGate` with a real :class:`PermissionGate`, a real approval broker and the store
(SQLite and PostgreSQL). People answer approvals concurrently, through ``broker.answer``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.journal.review import REVIEW_BATCH
from octipusd.toolkit import (
    UNDECLARED_CONTRACT,
    ActionOutcome,
    ActionRef,
    AuthorizationResult,
    Body,
    CallWatch,
    Executed,
    ProbeResult,
    ProbeStatus,
    RecoveryContract,
    RiskClass,
    RunIdentity,
)
from octipusd.tools import (
    COLLECT_CHILDREN,
    DEFAULT_TOOLS,
    GET_CLI_RUN_CONTEXT,
    GET_WORK_PLAN,
    SHELL_READ_BACKGROUND,
    SHELL_RUN,
    SHELL_RUN_BACKGROUND,
    SHELL_STOP_BACKGROUND,
    SPAWN_CHILD,
    STEER_CHILD,
    UPDATE_WORK_PLAN,
)
from octipusd.tools.monitor import MONITOR_TOOLS
from octipusd.tools.pipeline import (
    ANSWER_PIPELINE_APPROVAL,
    CREATE_PIPELINE,
    GET_PIPELINE_STATUS,
    RESUME_PIPELINE,
    STOP_PIPELINE,
    UPDATE_PIPELINE_ITEMS,
)
from tests.unit.bridge.bridge_support import connect, texts

if TYPE_CHECKING:
    from tests.unit.journal.conftest import Bench

pytestmark = pytest.mark.anyio

LEDGER = "ledger.txt"


# ------------------------------------------------------------------ batches and exact scope


async def test_reviews_cover_exact_batches_of_at_most_20(bench: Bench, tasks: anyio.abc.TaskGroup) -> None:
    assert REVIEW_BATCH == 20
    made = {bench.uncertain().id for _ in range(45)}
    expected = [a.id for a in bench.store.list_actions(session_id=bench.session_id, unresolved=True)]
    assert set(expected) == made and len(expected) == 45

    pending = bench.start(tasks, lambda: bench.check(bench.ctx()))
    approvals = []
    covered: list[str] = []
    for number, size in enumerate((20, 20, 5), start=1):
        requested = await bench.emit.wait_for("approval_requested", number)
        approval = bench.store.get_approval(requested["approval_id"])
        assert approval.kind == "action_recovery" and approval.status == "pending"
        assert list(approval.action_ids) == expected[len(covered) : len(covered) + size]
        assert [a["action_id"] for a in approval.input["actions"]] == list(approval.action_ids)
        assert approval.input["proposed"] == {"tool": "shell__run"}
        covered.extend(approval.action_ids)
        approvals.append(approval)
        await bench.broker.answer(approval.id, approve=True, decided_by="alice")
    result = await pending.result()

    assert result.allowed and result.reason == "3 recovery review(s) approved", result
    assert len(bench.emit.of("approval_requested")) == 3
    assert covered == expected
    for approval in approvals:
        acknowledged = bench.store.list_actions(ids=approval.action_ids)
        assert len(acknowledged) == len(approval.action_ids)
        for action in acknowledged:
            # acknowledged by exactly this review; the outcome is never relabelled completed
            assert action.review_id == approval.id and action.reviewed_by == "alice"
            assert action.outcome == "uncertain" and action.recovery_state == "effect_unconfirmed"
            assert action.resolved
    reviewed = bench.store.list_receipts(expected[0])
    assert [r.kind for r in reviewed] == ["contract", "outcome", "reviewed"]
    assert reviewed[-1].data == {"review_id": approvals[0].id, "by": "alice"}
    assert bench.store.blocking_actions(user="alice", session_id=bench.session_id) == []
    # a recovery approval is no permanent permission: no grant, and the next uncertain action asks again
    assert bench.store.list_grants() == []
    later = bench.uncertain()
    again = await bench.check(bench.ctx(attended=False))
    assert not again.allowed and later.id in again.reason


async def test_an_action_that_becomes_uncertain_while_the_person_decides_needs_its_own_review(
    bench: Bench, tasks: anyio.abc.TaskGroup
) -> None:
    first = bench.uncertain()
    pending = bench.start(tasks, lambda: bench.check(bench.ctx()))
    one = await bench.emit.wait_for("approval_requested", 1)
    assert bench.store.get_approval(one["approval_id"]).action_ids == (first.id,)

    second = bench.uncertain()  # a concurrent call of the session became uncertain meanwhile
    await bench.broker.answer(one["approval_id"], approve=True, decided_by="alice")
    two = await bench.emit.wait_for("approval_requested", 2)
    assert two["approval_id"] != one["approval_id"]
    assert bench.store.get_approval(two["approval_id"]).action_ids == (second.id,)
    assert bench.store.get_action(first.id).review_id == one["approval_id"]
    assert bench.store.get_action(second.id).review_id is None  # the first review did not cover it

    await bench.broker.answer(two["approval_id"], approve=False, decided_by="alice", reason="check first")
    result = await pending.result()
    assert not result.allowed and "denied by alice: check first" in result.reason, result
    assert bench.store.get_action(second.id).review_id is None
    assert [a.id for a in bench.store.blocking_actions(user="alice", session_id=bench.session_id)] == [
        second.id
    ]


async def test_a_permission_revoked_during_the_recovery_review_still_denies(
    bench: Bench, tasks: anyio.abc.TaskGroup
) -> None:
    bench.uncertain()
    pending = bench.start(tasks, lambda: bench.check(bench.ctx()))
    requested = await bench.emit.wait_for("approval_requested")
    bench.store.add_rule(level="deny", rule="shell__run", created_by="operator")
    await bench.broker.answer(requested["approval_id"], approve=True, decided_by="alice")
    result = await pending.result()
    assert not result.allowed, result
    assert "denied by Octipus policy" in result.reason
    assert "changed while the approval was open" in result.reason, result.reason
    assert result.approval_id == requested["approval_id"]


# ------------------------------------------------------------------ unattended work


async def test_unattended_work_cannot_approve_its_own_recovery(bench: Bench) -> None:
    action = bench.uncertain()
    for _ in range(2):  # asking again changes nothing
        ctx = bench.ctx(attended=False)
        result = await bench.check(ctx)
        assert not result.allowed and result.reason.startswith("review required:"), result
        assert action.id in result.reason and "unattended" in result.reason
        assert ctx.review_required == [result.reason]
    assert bench.store.list_approvals() == []
    assert len(bench.emit.of("review_required")) == 2
    assert not bench.store.get_action(action.id).resolved


async def test_an_irreversible_contract_is_refused_unattended_before_anything_else(bench: Bench) -> None:
    probes: list[ActionRef] = []

    async def probe(ref: ActionRef) -> ProbeResult:
        probes.append(ref)
        return ProbeResult(ProbeStatus.APPLIED, "sent")

    irreversible = RecoveryContract(RiskClass.IRREVERSIBLE, probe=probe)
    bench.contracts["mail.send"] = irreversible
    for contract in (irreversible, UNDECLARED_CONTRACT):
        ctx = bench.ctx(attended=False)
        result = await bench.check(ctx, tool="mail.send", arguments={"to": "x"}, contract=contract)
        assert not result.allowed and result.reason.startswith(
            "review required: mail.send is declared irreversible"
        )
        assert ctx.review_required == [result.reason]
    bench.uncertain(tool="mail.send")
    result = await bench.check(
        bench.ctx(attended=False), tool="mail.send", arguments={}, contract=irreversible
    )
    assert not result.allowed and "irreversible" in result.reason
    assert probes == []  # refused before the journal was even read or probed
    assert bench.store.list_approvals() == []
    # attended, with nothing unresolved, an irreversible call passes the recovery gate
    other, _ = bench.new_session()
    attended = await bench.check(
        bench.ctx(session_id=other), session_id=other, tool="mail.send", arguments={}, contract=irreversible
    )
    assert attended.allowed, attended


# ------------------------------------------------------------------ probes (seed 004)


@pytest.mark.parametrize("status", [ProbeStatus.APPLIED, ProbeStatus.NOT_APPLIED])
async def test_a_probe_that_settles_removes_the_record_from_review(bench: Bench, status: ProbeStatus) -> None:
    probes: list[ActionRef] = []

    async def probe(ref: ActionRef) -> ProbeResult:
        probes.append(ref)
        return ProbeResult(status, "message 42 checked in the channel")

    bench.contracts["chat.send"] = RecoveryContract(RiskClass.COMPENSATABLE, probe=probe)
    action = bench.uncertain(tool="chat.send")
    with anyio.fail_after(10):  # asking a person would wait: the probe must settle it first
        result = await bench.check(bench.ctx())
    assert result.allowed and result.reason == "no unresolved earlier actions", result
    assert bench.emit.of("approval_requested") == [] and bench.store.list_approvals() == []
    assert [(p.action_id, p.tool, p.user, p.session_id) for p in probes] == [
        (action.id, "chat.send", "alice", bench.session_id)
    ]
    settled = bench.store.get_action(action.id)
    assert settled.recovery_state == "verified" and settled.resolved
    assert settled.outcome == "uncertain" and settled.review_id is None  # never relabelled
    receipt = bench.store.list_receipts(action.id)[-1]
    assert receipt.kind == "probe" and receipt.state == "verified"
    assert receipt.data == {"status": str(status), "detail": "message 42 checked in the channel"}


@pytest.mark.parametrize("ambiguous", ["unknown", "raises"])
async def test_an_ambiguous_probe_still_asks(
    bench: Bench, tasks: anyio.abc.TaskGroup, ambiguous: str
) -> None:
    probes: list[ActionRef] = []

    async def probe(ref: ActionRef) -> ProbeResult:
        probes.append(ref)
        if ambiguous == "raises":
            raise ConnectionError("the chat API is unreachable")
        return ProbeResult(ProbeStatus.UNKNOWN, "partial: 1 of 2 messages found")

    bench.contracts["chat.send"] = RecoveryContract(RiskClass.COMPENSATABLE, probe=probe)
    action = bench.uncertain(tool="chat.send")
    pending = bench.start(tasks, lambda: bench.check(bench.ctx()))
    requested = await bench.emit.wait_for("approval_requested")
    assert bench.store.get_approval(requested["approval_id"]).action_ids == (action.id,)
    unsettled = bench.store.get_action(action.id)
    assert unsettled.recovery_state == "effect_unconfirmed" and not unsettled.resolved
    receipt = bench.store.list_receipts(action.id)[-1]
    assert receipt.kind == "probe" and receipt.data["status"] == "unknown"
    await bench.broker.answer(requested["approval_id"], approve=True, decided_by="alice")
    result = await pending.result()
    assert result.allowed and result.reason == "1 recovery review(s) approved", result
    assert len(probes) == 1  # probed once per check, not once per review round


# ------------------------------------------------------------------ read-only and internal tools


def test_read_only_and_internal_tools_never_reach_the_recovery_gate() -> None:
    flags = {spec.tool_id: spec.mutating for spec in DEFAULT_TOOLS}
    assert flags == {
        GET_CLI_RUN_CONTEXT.tool_id: False,
        GET_WORK_PLAN.tool_id: False,
        UPDATE_WORK_PLAN.tool_id: False,
        SPAWN_CHILD.tool_id: False,  # delegation is orchestration: internal, not journaled
        COLLECT_CHILDREN.tool_id: False,
        STEER_CHILD.tool_id: False,
        SHELL_RUN.tool_id: True,  # arbitrary shell counts as a mutation
        SHELL_RUN_BACKGROUND.tool_id: True,  # so does starting one in the background
        SHELL_READ_BACKGROUND.tool_id: False,  # reading its output so far
        SHELL_STOP_BACKGROUND.tool_id: False,  # ending a process Octipus started: internal
        # pipelines: Octipus's own record, each write one locked transaction; their stage workers'
        # calls are journaled by themselves
        CREATE_PIPELINE.tool_id: False,
        GET_PIPELINE_STATUS.tool_id: False,
        RESUME_PIPELINE.tool_id: False,
        STOP_PIPELINE.tool_id: False,
        UPDATE_PIPELINE_ITEMS.tool_id: False,
        ANSWER_PIPELINE_APPROVAL.tool_id: False,  # the person decides; the approval is the record
        # monitors: Octipus's own record; a wake-up's turn journals its own calls
        **{spec.tool_id: False for spec in MONITOR_TOOLS},
    }
    assert SHELL_RUN.contract is not None and SHELL_RUN.contract.risk_class is RiskClass.CONTAINABLE
    assert SHELL_RUN_BACKGROUND.recovery_contract.risk_class is RiskClass.CONTAINABLE


class JournalHost(FakeToolHost):
    """A bridge host wired like the runtime: the recovery gate for mutating tools, the journal
    around their bodies (``RunManager.authorize`` / ``run_action``), unattended."""

    def __init__(self, bench: Bench) -> None:
        super().__init__()
        self.bench = bench
        self.checked: list[str] = []
        self.specs = {spec.tool_id: spec for spec in DEFAULT_TOOLS}

    async def authorize(
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any], watch: CallWatch | None = None
    ) -> AuthorizationResult:
        spec = self.specs[tool_id]
        if not spec.mutating:
            return AuthorizationResult(True, "read-only or internal")
        self.checked.append(tool_id)
        scope = self.bench.scope()
        result = await self.bench.recovery.check(
            self.bench.ctx(attended=False), scope, tool_id, arguments, spec.recovery_contract
        )
        if not result.allowed:
            await self.bench.journal.refused(scope, tool_id, arguments, spec.recovery_contract, result.reason)
        return AuthorizationResult(result.allowed, result.reason)

    async def run_action(
        self,
        identity: RunIdentity,
        tool_id: str,
        arguments: dict[str, Any],
        body: Body,
        timeout_seconds: float | None,
    ) -> Executed:
        return await self.bench.journal.execute(
            self.bench.scope(),
            tool_id,
            arguments,
            self.specs[tool_id].recovery_contract,
            body,
            timeout_seconds=timeout_seconds,
        )


async def test_through_the_bridge_one_entry_per_call_and_read_tools_stay_available(bench: Bench) -> None:
    host = JournalHost(bench)
    identity = bench.identity()
    plan = {"title": "Check", "steps": [{"id": "s1", "title": "look", "status": "pending"}]}
    async with (
        open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge,
        connect(bridge.url, bridge.endpoint.token) as client,
    ):
        ran = await client.call_tool("shell__run", {"command": f"echo x >> {LEDGER}"})
        assert not ran.is_error, texts(ran)
        (record,) = bench.store.list_actions(session_id=bench.session_id)
        assert record.outcome == "completed" and record.tool == "shell__run"

        lost = bench.uncertain()  # an earlier call of the session lost its outcome
        reads = {
            "get_work_plan": await client.call_tool("get_work_plan", {}),
            "update_work_plan": await client.call_tool("update_work_plan", {"plan": plan}),
            "get_cli_run_context": await client.call_tool("get_cli_run_context", {}),
        }
        blocked = await client.call_tool("shell__run", {"command": f"echo y >> {LEDGER}"})

    for name, result in reads.items():
        assert not result.is_error, (name, texts(result))
    assert host.checked == ["shell__run", "shell__run"]  # internal tools never reached the gate
    assert blocked.is_error
    assert texts(blocked)[0].startswith("denied: review required:") and lost.id in texts(blocked)[0]
    assert bench.lines() == 1
    records = bench.store.list_actions(session_id=bench.session_id)
    assert [r.outcome for r in records] == ["completed", "uncertain", "not_executed"]
    finished = [e.data for e in host.events if e.kind == "tool_call_finished"]
    assert finished[0]["outcome"] == str(ActionOutcome.COMPLETED) and finished[0]["action_id"] == record.id
    assert all("action_id" not in data for data in finished[1:])  # the read tools were not journaled
    json.dumps(finished)
