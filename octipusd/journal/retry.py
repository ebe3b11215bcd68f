"""Query before retrying (seed 004): the duplicate-effect block of a call with an idempotency key.

Before a call whose contract declares an idempotency key runs, :func:`duplicate_refusal` looks at
the user's earlier uncertain calls of the same tool with the same key (in any session: the effect
is the same whichever session retries it) and refuses the new call when one of them:

* is still running in this daemon, or is being compensated;
* was found applied by its probe (settled ``verified``, or reopened by a ``correction``), or is
  found applied now (acknowledged by a review but unsettled, or handed to its owner: probed
  again first) -- retrying would duplicate the effect;
* was verified as not applied and its effect has appeared since (:meth:`RecoveryOperator.recheck`
  reopens it);
* may still take effect: a dispatched request of it can still land (its in-flight bound has not
  passed and its transport was not ended), whatever a review said;
* has an uncertain outcome that nothing settled and no person reviewed (in another session of the
  user: its own session is blocked by its recovery review anyway).

A new call of a key that is running or being compensated is also refused when its ``started``
record is written (:meth:`Store.start_action`), which closes the race between two checks.

A *completed* earlier call is not considered: explicitly repeating a successful action remains
possible (seed 000 "Boundaries"); neither are compensated or contained ones.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from typing import Any

from octipusd.journal.executor import ActionScope
from octipusd.journal.operator import SAME_KEY_LIMIT, RecoveryOperator, in_flight_time
from octipusd.store.aio import in_thread
from octipusd.store.journal_store import ActionReceipt, ToolAction
from octipusd.toolkit import ProbeStatus, RecoveryContract, RecoveryState

__all__ = ["duplicate_refusal", "idempotency_key_of", "retry_refusal"]

log = logging.getLogger("octipusd.journal")

_DUPLICATE = "had an uncertain outcome, and its verification probe found the effect applied; retrying would duplicate it"
_REMEDIED = (RecoveryState.COMPENSATED.value, RecoveryState.CONTAINED.value)


async def duplicate_refusal(
    operator: RecoveryOperator,
    scope: ActionScope,
    tool_id: str,
    arguments: Mapping[str, Any],
    contract: RecoveryContract,
    *,
    live: Collection[str],
    fresh: Collection[str] = (),
) -> str | None:
    """Why a call of ``tool_id`` with ``arguments`` must not run now (see the module docstring).

    Args:
        operator: Probes and rechecks the earlier actions.
        scope: Who calls (the user's earlier calls are considered).
        tool_id: The proposed call's tool.
        arguments: Its input (the key is read from it by the contract).
        contract: Its recovery contract (no idempotency key: nothing to compare, None).
        live: Ids of the actions running in this daemon now.
        fresh: Ids of the actions the caller probed moments ago (a settled one is not rechecked).

    Returns:
        The refusal for the model or person, or None.
    """
    key = idempotency_key_of(tool_id, contract, arguments)
    if key is None:
        return None
    return await retry_refusal(operator, user=scope.user, tool_id=tool_id, key=key, live=live, fresh=fresh)


def idempotency_key_of(
    tool_id: str, contract: RecoveryContract | None, arguments: Mapping[str, Any]
) -> str | None:
    """The idempotency key a call of ``tool_id`` with ``arguments`` declares, or None (no contract,
    no key declared, an empty key, or a key function that fails: logged, and the call counts as
    one without a key)."""
    if contract is None or contract.idempotency_key is None:
        return None
    try:
        key = contract.idempotency_key(arguments)
    except Exception:  # a broken key function: the call proceeds as one without a key
        log.warning("the idempotency key of %s could not be read", tool_id, exc_info=True)
        return None
    return key or None


async def retry_refusal(
    operator: RecoveryOperator,
    *,
    user: str,
    tool_id: str,
    key: str,
    live: Collection[str],
    fresh: Collection[str] = (),
) -> str | None:
    """Why a new call of ``tool_id`` with idempotency key ``key`` by ``user`` must not run.

    Probes may run (each bounded by the operator's own deadline) and their answers are recorded;
    the actions in ``fresh`` were probed moments ago by the caller and are not checked again.

    Returns:
        The refusal, naming the earlier action, or None.
    """
    store = operator.store
    prior = await in_thread(
        lambda: store.uncertain_with_key(user=user, tool=tool_id, key=key, limit=SAME_KEY_LIMIT)
    )
    for action in prior:
        why = await _refusal_of(operator, action, live=live, fresh=fresh)
        if why is not None:
            return f"not repeated: an earlier {tool_id} call with idempotency key {key!r} (action {action.id}) {why}"
    return None


def _found_applied(receipts: list[ActionReceipt]) -> bool:
    """The latest settling evidence says the effect happened: a settling probe that found it, or
    a correction (an effect that appeared after a "not applied" settlement) not followed by a
    settling probe that found nothing."""
    settling = [
        r
        for r in receipts
        if r.kind == "correction" or (r.kind == "probe" and r.state == RecoveryState.VERIFIED.value)
    ]
    if not settling:
        return False
    last = settling[-1]
    return last.kind == "correction" or last.data.get("status") == ProbeStatus.APPLIED.value


async def _refusal_of(
    operator: RecoveryOperator, action: ToolAction, *, live: Collection[str], fresh: Collection[str]
) -> str | None:
    """Why ``action`` forbids a retry with its key now (None: it does not).

    ``fresh`` holds the actions probed moments ago by the same check (not probed again).
    """
    if action.outcome == "started" and action.id in live:
        return "is running now; wait for its outcome"
    if action.recovery_state == RecoveryState.RECOVERING.value:
        return "is being compensated now; retry once its compensation has finished"
    if action.recovery_state in _REMEDIED:
        return None
    receipts = await in_thread(operator.store.list_receipts, action.id)
    if _found_applied(receipts):
        return _DUPLICATE
    if action.recovery_state == RecoveryState.VERIFIED.value:
        if action.id in fresh or await in_thread(operator.store.later_call_with_key, action):
            return None  # just settled by this check, or a later call ran (indistinguishable)
        verdict = await operator.recheck(action)
        if verdict is not None and verdict.correction:
            return (
                "was verified as not applied, but its effect has appeared since; the action is reopened "
                f"for review (`octipusctl actions show {action.id}`)"
            )
        return None
    return await _unsettled_refusal(operator, action)


async def _unsettled_refusal(operator: RecoveryOperator, action: ToolAction) -> str | None:
    """The refusal for an action nothing has settled yet: probed (or, when it is with its owner,
    looked at) now; anything but a trustworthy "not applied" refuses, unless a person reviewed it
    and no request of it can land any more."""
    if action.recovery_state == RecoveryState.NEEDS_OPERATOR.value:
        looked = await operator.look(action)
    else:
        verdict = await operator.probe(action)
        looked = verdict.result if verdict is not None else None
        if verdict is not None and verdict.settled and looked is not None:
            return _DUPLICATE if looked.status is ProbeStatus.APPLIED else None
    if looked is not None and looked.status is ProbeStatus.APPLIED:
        return _DUPLICATE  # even when a concurrent check settled it first
    now = await in_thread(operator.store.get_action, action.id)
    if now.may_still_land(operator.store.now()):
        until = now.in_flight_until
        when = f"until {in_flight_time(until)}" if until is not None else "until a person settles it"
        return (
            f"may still take effect: its request can still land {when}; retry after that, or once its probe "
            "or a person has settled it"
        )
    if not now.resolved:
        where = f"session {now.session_id}" if now.session_id else "no session"
        return (
            f"has an uncertain outcome nobody has settled or reviewed ({where}); probe, review or contain it "
            f"first (`octipusctl actions show {now.id}`)"
        )
    return None
