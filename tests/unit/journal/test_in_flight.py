"""A request that may still land (seed 004: verification must be trustworthy before a retry).

A probe's ``not_applied`` settles an uncertain action only once no dispatched request of it can
still land (its in-flight bound passed, or Octipus ended its transport); the review shows until
when; a retry with the same idempotency key is refused meanwhile; an effect that appears after a
``not_applied`` settlement reopens the action; and ``needs_operator`` keeps its remedies.

Everything is real (the store on SQLite and PostgreSQL, the gate, the broker, the operator);
probes and compensations are plain async functions standing for the external system.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import pytest

from octipusd.errors import ConflictError, OctipusError
from octipusd.journal.operator import in_flight_time
from octipusd.journal.review import REVIEW_NOTE
from octipusd.toolkit import ActionRef, ProbeResult, ProbeStatus, RecoveryContract, RiskClass

if TYPE_CHECKING:
    from octipusd.store.journal_store import ToolAction
    from octipusd.toolkit import GateResult
    from tests.unit.journal.conftest import Bench

pytestmark = pytest.mark.anyio

TOOL = "chat.send"
NOT_YET = "not applied yet; a request may still be in flight until "


def key_of(arguments: Mapping[str, Any]) -> str | None:
    """The idempotency key of a ``chat.send`` call: its ``key`` argument."""
    value = arguments.get("key")
    return value if isinstance(value, str) else None


class Backend:
    """The external system the probe reads: what it answers, and every probe it saw."""

    def __init__(self, status: ProbeStatus, detail: str = "message 42 looked up") -> None:
        self.status = status
        self.detail = detail
        self.seen: list[ActionRef] = []

    async def probe(self, ref: ActionRef) -> ProbeResult:
        self.seen.append(ref)
        return ProbeResult(self.status, self.detail)


def register(bench: Bench, backend: Backend) -> RecoveryContract:
    """Declare ``chat.send`` (key, probe) in the bench's contracts; return its contract."""
    contract = RecoveryContract(RiskClass.COMPENSATABLE, idempotency_key=key_of, probe=backend.probe)
    bench.contracts[TOOL] = contract
    return contract


def iso(action: ToolAction) -> str:
    """The action's in-flight bound as people are shown it (rounded up to the second)."""
    assert action.in_flight_until is not None
    return in_flight_time(action.in_flight_until)


def _start(bench: Bench, key: str, *, session_id: str | None = None) -> ToolAction:
    return bench.store.start_action(
        user="alice",
        session_id=session_id or bench.session_id,
        run_id=None,
        agent="worker-alice",
        origin="agent",
        tool=TOOL,
        args_hash="2" * 64,
        risk_class="compensatable",
        owner=bench.owner,
        deadline_seconds=3600.0,
        idempotency_key=key,
        in_flight_seconds=60.0,
    )


def assert_last_receipt(
    bench: Bench, action_id: str, kind: str, state: str | None, data: dict[str, Any]
) -> None:
    """The action's newest receipt entry is exactly this."""
    receipt = bench.store.list_receipts(action_id)[-1]
    assert (receipt.kind, receipt.state, receipt.data) == (kind, state, data)


def assert_settled(bench: Bench, action_id: str, state: str, kind: str, data: dict[str, Any]) -> None:
    """The action is settled in ``state`` by the receipt entry (``kind``, ``data``), and nothing
    of the session blocks any more."""
    action = bench.store.get_action(action_id)
    assert action.recovery_state == state and action.resolved
    assert_last_receipt(bench, action_id, kind, state, data)
    assert blocking_ids(bench) == []


def blocking_ids(bench: Bench) -> list[str]:
    return [a.id for a in bench.store.blocking_actions(user="alice", session_id=bench.session_id)]


# ------------------------------------------------------------------ 1-3: when not_applied settles


async def test_not_applied_while_in_flight_is_kept_as_evidence_and_applied_settles(bench: Bench) -> None:
    backend = Backend(ProbeStatus.NOT_APPLIED)
    register(bench, backend)
    action = bench.uncertain(tool=TOOL, in_flight_seconds=600)
    assert action.in_flight_until is not None and action.may_still_land(bench.store.now())

    verdict = await bench.operator.probe(action)
    assert verdict is not None
    assert verdict.result.status is ProbeStatus.NOT_APPLIED
    assert verdict.settled is False
    assert verdict.in_flight_until == action.in_flight_until
    assert not verdict.correction
    kept = bench.store.get_action(action.id)
    assert kept.recovery_state == "effect_unconfirmed" and not kept.resolved
    assert blocking_ids(bench) == [action.id]
    receipt = bench.store.list_receipts(action.id)[-1]
    assert receipt.kind == "probe" and receipt.state is None
    assert receipt.data["status"] == "not_applied"
    assert receipt.data["detail"] == "message 42 looked up"
    assert receipt.data["note"].startswith(NOT_YET), receipt.data
    assert receipt.data["note"] == NOT_YET + iso(action)
    assert receipt.data["in_flight_until"] == iso(action)

    # "applied" is final even while a request may still land: the effect is there
    backend.status = ProbeStatus.APPLIED
    verdict = await bench.operator.probe(action)
    assert verdict is not None and verdict.settled is True
    assert verdict.result.status is ProbeStatus.APPLIED and verdict.in_flight_until is None
    assert_settled(
        bench, action.id, "verified", "probe", {"status": "applied", "detail": "message 42 looked up"}
    )
    assert len(backend.seen) == 2


#: Seconds of the in-flight bound the "settles once the bound has passed" test waits out.
IN_FLIGHT_BOUND_S = 4.0


async def test_not_applied_settles_once_the_in_flight_bound_has_passed(bench: Bench) -> None:
    backend = Backend(ProbeStatus.NOT_APPLIED)
    register(bench, backend)
    # a bound the early probe surely comes before, even on a loaded machine (1 s did not)
    action = bench.uncertain(tool=TOOL, in_flight_seconds=IN_FLIGHT_BOUND_S)
    until = action.in_flight_until
    assert until is not None

    early = await bench.operator.probe(action)
    assert early is not None and early.settled is False and early.in_flight_until == until
    assert bench.store.get_action(action.id).recovery_state == "effect_unconfirmed"

    await bench.wait_until(lambda: bench.store.now() >= until, within=IN_FLIGHT_BOUND_S + 5.0)
    verdict = await bench.operator.probe(action)
    assert verdict is not None and verdict.settled is True, verdict
    assert verdict.in_flight_until is None
    assert_settled(
        bench, action.id, "verified", "probe", {"status": "not_applied", "detail": "message 42 looked up"}
    )


async def test_not_applied_settles_at_once_when_the_transport_was_ended(bench: Bench) -> None:
    backend = Backend(ProbeStatus.NOT_APPLIED)
    register(bench, backend)
    action = bench.uncertain(tool=TOOL, in_flight_seconds=600)

    assert bench.store.end_dispatch(action.id, data={"evidence": "x"}) is True
    assert bench.store.end_dispatch(action.id, data={"evidence": "y"}) is False  # written once
    ended = bench.store.get_action(action.id)
    assert ended.dispatch_ended_at is not None and not ended.may_still_land(bench.store.now())
    entries = [r for r in bench.store.list_receipts(action.id) if r.kind == "dispatch_ended"]
    assert [(r.state, r.data) for r in entries] == [(None, {"evidence": "x"})]

    verdict = await bench.operator.probe(action)
    assert verdict is not None and verdict.settled is True and verdict.in_flight_until is None
    settled = bench.store.get_action(action.id)
    assert settled.recovery_state == "verified" and settled.resolved
    assert settled.dispatch_ended_at == ended.dispatch_ended_at  # the second end changed nothing
    assert_last_receipt(
        bench, action.id, "probe", "verified", {"status": "not_applied", "detail": "message 42 looked up"}
    )


# ------------------------------------------------------------------ 4: what the review shows


async def test_the_review_shows_until_when_a_request_may_still_land(
    bench: Bench, tasks: anyio.abc.TaskGroup
) -> None:
    answers: dict[str, ProbeStatus] = {}

    async def probe(ref: ActionRef) -> ProbeResult:
        return ProbeResult(answers[ref.action_id], "looked up")

    bench.contracts[TOOL] = RecoveryContract(RiskClass.COMPENSATABLE, probe=probe)
    in_flight = bench.uncertain(tool=TOOL, in_flight_seconds=600)
    past = bench.uncertain(tool=TOOL, in_flight_seconds=0.0)
    answers[in_flight.id] = ProbeStatus.NOT_APPLIED  # kept as evidence: it may still land
    answers[past.id] = ProbeStatus.UNKNOWN  # ambiguous: a person reviews it

    pending = bench.start(tasks, lambda: bench.check(bench.ctx()))
    requested = await bench.emit.wait_for("approval_requested")
    approval = bench.store.get_approval(requested["approval_id"])
    assert approval.kind == "action_recovery"
    assert list(approval.action_ids) == [in_flight.id, past.id]
    assert approval.input["note"] == REVIEW_NOTE
    shown = {a["action_id"]: a for a in approval.input["actions"]}
    assert shown[in_flight.id]["in_flight_until"] == iso(in_flight)
    assert shown[in_flight.id]["note"] == "a request may still be in flight until " + iso(in_flight)
    assert shown[in_flight.id]["recovery_state"] == "effect_unconfirmed"
    assert shown[past.id]["in_flight_until"] is None
    assert shown[past.id]["note"] is None

    await bench.broker.answer(approval.id, approve=True, decided_by="alice")
    result = await pending.result()
    assert result.allowed and result.reason == "1 recovery review(s) approved", result


# ------------------------------------------------------------------ 5: no retry while in flight


async def test_a_retry_with_the_key_of_an_in_flight_action_is_refused_after_its_review(
    bench: Bench, tasks: anyio.abc.TaskGroup
) -> None:
    backend = Backend(ProbeStatus.NOT_APPLIED)
    contract = register(bench, backend)
    action = bench.uncertain(tool=TOOL, in_flight_seconds=600, idempotency_key="K")

    async def check(key: str) -> GateResult:
        return await bench.check(bench.ctx(), tool=TOOL, arguments={"key": key}, contract=contract)

    pending = bench.start(tasks, lambda: check("K"))
    requested = await bench.emit.wait_for("approval_requested")
    approval = bench.store.get_approval(requested["approval_id"])
    assert list(approval.action_ids) == [action.id]
    await bench.broker.answer(approval.id, approve=True, decided_by="alice")
    refused = await pending.result()
    assert not refused.allowed, refused
    assert "may still take effect" in refused.reason, refused.reason
    assert iso(action) in refused.reason, refused.reason
    assert action.id in refused.reason and "'K'" in refused.reason
    acknowledged = bench.store.get_action(action.id)
    assert acknowledged.review_id == approval.id and acknowledged.resolved
    assert acknowledged.recovery_state == "effect_unconfirmed"  # a review proves nothing

    with anyio.fail_after(10):  # no second review: the action is acknowledged
        again = await check("K")
        other = await check("L")
    assert not again.allowed and "may still take effect" in again.reason, again
    assert other.allowed and other.reason == "no unresolved earlier actions", other
    assert len(bench.emit.of("approval_requested")) == 1


# ------------------------------------------------------------------ 6: a late effect reopens


async def test_an_effect_appearing_after_a_not_applied_settlement_reopens_the_action(bench: Bench) -> None:
    backend = Backend(ProbeStatus.NOT_APPLIED, "no message 42")
    contract = register(bench, backend)
    action = bench.uncertain(tool=TOOL, in_flight_seconds=0.0, idempotency_key="K")

    with anyio.fail_after(10):
        first = await bench.check(bench.ctx(), tool=TOOL, arguments={"key": "K"}, contract=contract)
    assert first.allowed, first
    settled = bench.store.get_action(action.id)
    assert settled.recovery_state == "verified" and settled.resolved
    (earlier,) = [
        r for r in bench.store.list_receipts(action.id) if r.kind == "probe" and r.state == "verified"
    ]
    assert earlier.data["status"] == "not_applied"
    assert bench.emit.of("action_escalated") == []

    backend.status, backend.detail = ProbeStatus.APPLIED, "message 42 found"
    with anyio.fail_after(10):
        retry = await bench.check(bench.ctx(), tool=TOOL, arguments={"key": "K"}, contract=contract)
    assert not retry.allowed, retry
    assert "has appeared since" in retry.reason and action.id in retry.reason, retry.reason

    reopened = bench.store.get_action(action.id)
    assert reopened.recovery_state == "needs_operator"
    assert not reopened.resolved and reopened.review_id is None
    assert blocking_ids(bench) == [action.id]
    (correction,) = [r for r in bench.store.list_receipts(action.id) if r.kind == "correction"]
    assert correction.state == "needs_operator"
    assert correction.data["earlier"]["receipt_id"] == earlier.id
    assert correction.data["earlier"]["status"] == "not_applied"
    assert correction.data["earlier"]["detail"] == "no message 42"
    assert correction.data["now"] == {"status": "applied", "detail": "message 42 found"}
    (escalated,) = bench.emit.of("action_escalated")
    assert escalated["action_id"] == action.id and escalated["tool"] == TOOL
    assert "appeared" in escalated["reason"]


async def test_a_later_completed_call_with_the_key_skips_the_recheck(bench: Bench) -> None:
    backend = Backend(ProbeStatus.NOT_APPLIED)
    contract = register(bench, backend)
    action = bench.uncertain(tool=TOOL, in_flight_seconds=0.0, idempotency_key="K")
    assert (await bench.operator.probe(action)) is not None
    assert bench.store.get_action(action.id).recovery_state == "verified"

    later = _start(bench, "K")
    assert bench.store.finish_action(later.id, outcome="completed", detail=None)

    backend.status = ProbeStatus.APPLIED  # the later call's effect: the probe cannot tell them apart
    probes = len(backend.seen)
    with anyio.fail_after(10):
        result = await bench.check(bench.ctx(), tool=TOOL, arguments={"key": "K"}, contract=contract)
    assert result.allowed, result
    assert len(backend.seen) == probes  # not rechecked
    kept = bench.store.get_action(action.id)
    assert kept.recovery_state == "verified" and kept.resolved
    assert [r for r in bench.store.list_receipts(action.id) if r.kind == "correction"] == []
    assert bench.emit.of("action_escalated") == []


# ------------------------------------------------------------------ 7: needs_operator keeps remedies


async def test_an_escalated_action_is_settled_only_by_an_explicit_probe(bench: Bench) -> None:
    backend = Backend(ProbeStatus.NOT_APPLIED)
    register(bench, backend)
    action = bench.uncertain(tool=TOOL, in_flight_seconds=0.0)
    assert bench.store.set_recovery_state(action.id, state="needs_operator", kind="escalated", data={})

    assert await bench.operator.probe(action) is None  # the automatic gate leaves it to the owner
    assert backend.seen == []
    assert bench.store.get_action(action.id).recovery_state == "needs_operator"

    verdict = await bench.operator.probe(action, explicit=True)
    assert verdict is not None and verdict.settled is True, verdict
    settled = bench.store.get_action(action.id)
    assert settled.recovery_state == "verified" and settled.resolved
    receipt = bench.store.list_receipts(action.id)[-1]
    assert receipt.kind == "probe" and receipt.state == "verified"
    assert receipt.data["status"] == "not_applied"


async def test_the_owner_compensates_once_the_backend_is_back(
    bench: Bench, tasks: anyio.abc.TaskGroup
) -> None:
    broken = True
    release = anyio.Event()
    hold = False
    ran: list[str] = []

    async def compensation(ref: ActionRef) -> str:
        ran.append(ref.action_id)
        if broken:
            raise ConnectionError("the chat API is unreachable")
        if hold:
            await release.wait()
        return "message 42 retracted"

    bench.contracts[TOOL] = RecoveryContract(RiskClass.COMPENSATABLE, compensation=compensation)
    action = bench.uncertain(tool=TOOL)

    with pytest.raises(OctipusError, match="needs an operator"):
        await bench.operator.compensate(action, by="alice")
    failed = bench.store.get_action(action.id)
    assert failed.recovery_state == "needs_operator" and not failed.resolved
    assert bench.store.list_receipts(action.id)[-1].data["failed"].startswith("ConnectionError")
    (escalated,) = bench.emit.of("action_escalated")
    assert escalated["action_id"] == action.id and "compensation failed" in escalated["reason"]

    broken = False  # the backend is back
    hold = True
    done: list[str] = []

    async def second() -> None:
        done.append(await bench.operator.compensate(failed, by="alice"))

    tasks.start_soon(second)
    await bench.wait_until(lambda: bench.store.get_action(action.id).recovery_state == "recovering")
    with pytest.raises(ConflictError):
        await bench.operator.compensate(bench.store.get_action(action.id), by="bob")
    assert len(ran) == 2  # the refused one never reached the backend
    release.set()
    await bench.wait_until(lambda: bool(done))

    assert done == ["message 42 retracted"]
    assert_settled(
        bench, action.id, "compensated", "compensation", {"detail": "message 42 retracted", "by": "alice"}
    )


async def test_an_unattended_refusal_says_until_when_a_request_may_still_land(bench: Bench) -> None:
    register(bench, Backend(ProbeStatus.NOT_APPLIED))
    action = bench.uncertain(tool=TOOL, in_flight_seconds=600)
    refused = await bench.check(bench.ctx(attended=False))
    assert not refused.allowed and refused.reason.startswith("review required: 1 earlier action(s)")
    assert f"{action.id}: a request may still be in flight until {iso(action)}" in refused.reason


async def test_a_compensation_offsets_only_this_actions_effect(bench: Bench) -> None:
    ran: list[str] = []

    async def compensation(ref: ActionRef) -> str:
        ran.append(ref.action_id)
        return "retracted"

    backend = Backend(ProbeStatus.APPLIED)
    bench.contracts[TOOL] = RecoveryContract(
        RiskClass.COMPENSATABLE, idempotency_key=key_of, probe=backend.probe, compensation=compensation
    )
    # in flight, nothing seen yet: an offset now would not cover what may still land
    waiting = bench.uncertain(tool=TOOL, in_flight_seconds=600, idempotency_key="k1")
    bench.contracts[TOOL] = RecoveryContract(
        RiskClass.COMPENSATABLE, idempotency_key=key_of, compensation=compensation
    )
    with pytest.raises(ConflictError, match="may still be in flight until"):
        await bench.operator.compensate(waiting, by="alice")
    # in flight, but its probe found the effect: the request has landed, it can be offset
    bench.contracts[TOOL] = RecoveryContract(
        RiskClass.COMPENSATABLE, idempotency_key=key_of, probe=backend.probe, compensation=compensation
    )
    verdict = await bench.operator.probe(waiting)
    assert verdict is not None and verdict.settled
    assert await bench.operator.compensate(waiting, by="alice") == "retracted"
    # a later call with the same key ran: a keyed compensation would offset its effect too
    earlier = bench.uncertain(tool=TOOL, idempotency_key="k2")
    later = _start(bench, "k2")
    assert bench.store.finish_action(later.id, outcome="completed", detail=None)
    with pytest.raises(ConflictError, match="a later call with the same idempotency key"):
        await bench.operator.compensate(earlier, by="alice")
    assert ran == [waiting.id]
    assert bench.store.get_action(earlier.id).recovery_state == "effect_unconfirmed"


# ------------------------------------------------------------------ one key, one effect at a time


async def test_a_key_runs_one_call_at_a_time_and_never_during_its_compensation(bench: Bench) -> None:
    from octipusd.errors import KeyInUseError

    running = _start(bench, "k")
    with pytest.raises(KeyInUseError, match=f"action {running.id}\\) is running"):
        _start(bench, "k")
    _start(bench, "other")  # another key is free
    assert bench.store.finish_action(running.id, outcome="uncertain", detail="timed out")
    # the uncertain one is being compensated: neither a new call nor a retry check lets one through
    assert (
        bench.store.begin_compensation(running.id, expect=(None, "effect_unconfirmed"), data={}) == "started"
    )
    with pytest.raises(KeyInUseError, match="is being compensated"):
        _start(bench, "k")
    register(bench, Backend(ProbeStatus.NOT_APPLIED))
    other, _ = bench.new_session()  # its own session waits for a review; another one checks the key
    refused = await bench.check(
        bench.ctx(session_id=other),
        session_id=other,
        tool=TOOL,
        arguments={"key": "k"},
        contract=bench.contracts[TOOL],
    )
    assert not refused.allowed and "is being compensated now" in refused.reason, refused
    # a deadline never hands a running compensation to its owner
    assert not bench.store.set_recovery_state(
        running.id, state="needs_operator", kind="escalated", data={}, expect=(None, "effect_unconfirmed")
    )


async def test_an_unsettled_action_of_another_session_refuses_its_key(bench: Bench) -> None:
    register(bench, Backend(ProbeStatus.UNKNOWN))  # its backend cannot tell
    action = bench.uncertain(tool=TOOL, idempotency_key="k")
    other, _ = bench.new_session()
    refused = await bench.check(
        bench.ctx(session_id=other),
        session_id=other,
        tool=TOOL,
        arguments={"key": "k"},
        contract=bench.contracts[TOOL],
    )
    assert not refused.allowed
    assert f"(action {action.id}) has an uncertain outcome nobody has settled or reviewed" in refused.reason
    allowed = await bench.check(
        bench.ctx(session_id=other),
        session_id=other,
        tool=TOOL,
        arguments={"key": "k2"},
        contract=bench.contracts[TOOL],
    )
    assert allowed.allowed, allowed


async def test_a_later_call_with_the_key_blocks_the_compensation_in_its_transaction(bench: Bench) -> None:
    earlier = bench.uncertain(tool=TOOL, idempotency_key="k")
    later = _start(bench, "k2")
    assert (
        bench.store.begin_compensation(earlier.id, expect=(None, "effect_unconfirmed"), data={}) == "started"
    )
    assert bench.store.set_recovery_state(earlier.id, state="needs_operator", kind="compensation", data={})
    # a tie on started_at counts as later, both ways
    tied = _start(bench, "k3")
    assert bench.store.finish_action(tied.id, outcome="uncertain", detail="x")
    twin = bench.store.get_action(tied.id)
    assert bench.store.later_call_with_key(twin) is False
    assert later.id != twin.id
    made = _start(bench, "k")  # a later call with the first key
    assert bench.store.finish_action(made.id, outcome="completed", detail=None)
    assert bench.store.begin_compensation(earlier.id, expect=("needs_operator",), data={}) == "later"
    assert bench.store.get_action(earlier.id).recovery_state == "needs_operator"  # nothing written


async def test_a_persons_remedy_on_a_call_that_then_ends_uncertain_is_kept(bench: Bench) -> None:
    action = _start(bench, "k")
    assert bench.store.set_recovery_state(
        action.id, state="contained", kind="contained", data={"by": "alice"}
    )
    assert bench.store.finish_action(action.id, outcome="uncertain", detail="timed out")
    kept = bench.store.get_action(action.id)
    assert kept.outcome == "uncertain" and kept.recovery_state == "contained" and kept.resolved
