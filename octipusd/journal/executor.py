"""The execution boundary: ``started`` before the call, the outcome after it (seed 000).

:class:`ActionJournal` wraps the body of every mutating tool call, whoever starts it (an agent
through its bridge, a person by hand, the approved-action recovery):

1. ``started`` is written and committed with the call's contract (risk class, idempotency key,
   owner, deadline; seed 004), an argument hash (never the arguments), the call's in-flight
   bound (``started`` plus its own deadline: until then a dispatched request may still land)
   and where its request goes (:class:`~octipusd.toolkit.DispatchRef`, so a restarted
   daemon can end it). If that write fails the body does not run
   (:class:`~octipusd.errors.JournalUnavailableError`).
2. The body runs. Its end is classified (:func:`octipusd.toolkit.classify`): a plain return is
   ``completed``; a :class:`~octipusd.toolkit.ToolOutcome` marked uncertain, a timeout, a cancellation
   after start and any other failure are ``uncertain``; only
   :class:`~octipusd.toolkit.NotExecutedError` (raised by Octipus code that proved
   nothing ran) is ``not_executed``.
3. The outcome is written (shielded from cancellation). If that write fails, the result is
   still returned and the ``started`` record, no longer running here, blocks later mutations
   of the user and session until a person reviews it.

The set of actions running in this process (:attr:`ActionJournal.live`) is what separates a
running ``started`` record from an orphan.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import anyio

from octipusd.errors import ConflictError, JournalUnavailableError, OctipusError, describe_error, traceback_of
from octipusd.store.aio import in_thread
from octipusd.store.journal_store import ToolAction
from octipusd.store.repository import Store
from octipusd.toolkit import (
    DETAIL_CHARS,
    ActionOutcome,
    Body,
    DispatchRef,
    Executed,
    Origin,
    RecoveryContract,
    classify,
    log_body_failure,
)

__all__ = [
    "ActionJournal",
    "ActionScope",
    "args_hash",
    "contract_receipt",
]

log = logging.getLogger("octipusd.journal")

#: Deadline of each journal write, ``started`` and the outcome (seconds).
RECORD_TIMEOUT_SECONDS = 30.0

#: ``(outcome, detail, executed) -> written``: a caller's own outcome write (runs in a worker
#: thread), used when the outcome must commit together with another record (seed 001).
Commit = Callable[[ActionOutcome, "str | None", "Executed"], bool]


def args_hash(arguments: Mapping[str, Any]) -> str:
    """SHA-256 (hex, 64 characters) of the canonical JSON of ``arguments`` (sorted keys)."""
    text = json.dumps(dict(arguments), sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def contract_receipt(contract: RecoveryContract) -> dict[str, Any]:
    """The part of a contract persisted in the receipt before execution (JSON object)."""
    return {
        "risk_class": str(contract.risk_class),
        "intended_effects": contract.intended_effects,
        "has_idempotency_key": contract.idempotency_key is not None,
        "probe": contract.probe is not None,
        "compensation": contract.compensation is not None,
        "owner": contract.owner,
        "deadline_seconds": contract.deadline_seconds,
        "retry_policy": "no automatic retry after an uncertain outcome; probe first, then a person decides",
    }


@dataclass(frozen=True)
class ActionScope:
    """Who a call runs for, and where: the journal's ownership and correlation columns.

    Attributes:
        user: The user.
        session_id: The Octipus session (the recovery scope is user + session).
        run_id: The run whose bridge made the call (None for a call started by hand).
        agent: The worker id.
        origin: ``agent`` or ``manual``.
        pipeline_id: Pipeline correlation, if any.
        node_id: Pipeline node correlation, if any.
        invocation: ``(invocation id, claim token)`` of a hand-started call.
        author: Who made the call: the person who started the turn (a space member), or the
            user who started it by hand.
    """

    user: str
    session_id: str | None
    run_id: str | None
    agent: str | None
    origin: Origin = Origin.AGENT
    pipeline_id: str | None = None
    node_id: str | None = None
    invocation: tuple[str, str] | None = None
    author: str | None = None


class ActionJournal:
    """Writes the journal around mutating calls (see the module docstring).

    Args:
        store: The store.
        owner: This daemon instance's id (``started`` records of other instances are orphans).
        record_timeout_seconds: Deadline of each journal write (seconds).
    """

    def __init__(
        self, store: Store, owner: str, *, record_timeout_seconds: float = RECORD_TIMEOUT_SECONDS
    ) -> None:
        self.store = store
        self.owner = owner
        self.record_timeout_seconds = record_timeout_seconds
        self.live: set[str] = set()
        self.on_uncertain: Callable[[], None] | None = None

    async def refused(
        self,
        scope: ActionScope,
        tool: str,
        arguments: Mapping[str, Any],
        contract: RecoveryContract,
        reason: str,
    ) -> ToolAction | None:
        """Record a mutating call refused before execution (a policy rejection): ``not_executed``.

        Returns:
            The record, or None when it could not be written (logged; nothing ran either way).
        """
        try:
            with anyio.fail_after(self.record_timeout_seconds):
                return await in_thread(
                    lambda: self.store.start_action(
                        **self._columns(scope, tool, arguments, contract),
                        outcome="not_executed",
                        detail=reason[:DETAIL_CHARS],
                    )
                )
        except (OctipusError, TimeoutError) as exc:  # the store failed or did not answer in time
            log.warning("could not record the refused call of %s: %s", tool, describe_error(exc))
            return None

    async def execute(
        self,
        scope: ActionScope,
        tool: str,
        arguments: Mapping[str, Any],
        contract: RecoveryContract,
        body: Body,
        *,
        timeout_seconds: float | None = None,
        commit: Commit | None = None,
        dispatch: DispatchRef | None = None,
    ) -> Executed:
        """Run ``body`` inside the execution boundary.

        Args:
            scope: Ownership of the call.
            tool: The tool id (``shell__run``, ``server.tool``).
            arguments: The call's arguments (hashed, never stored).
            contract: The tool's recovery contract.
            body: The call itself; it raises on failure.
            timeout_seconds: The body's own deadline (seconds): the timeout message, and the
                in-flight bound recorded with ``started`` (None: no bound is known, so a probe's
                "not applied" never settles the action by itself).
            commit: Writes the outcome instead of ``Store.finish_action`` (a hand-started call
                commits its outcome and its request status together).
            dispatch: Where the call's request goes, recorded with ``started``.

        Returns:
            The :class:`Executed`; a failure of the body is a result, not an exception.

        Raises:
            JournalUnavailableError: ``started`` could not be written; the body did not run.
            ConflictError: a hand-started call lost its claim; the body did not run.
            Cancellation: after ``uncertain`` was recorded (shielded).
        """
        try:
            with anyio.fail_after(self.record_timeout_seconds):
                action = await in_thread(
                    lambda: self.store.start_action(
                        **self._columns(scope, tool, arguments, contract),
                        in_flight_seconds=timeout_seconds,
                        dispatch=dispatch.to_json() if dispatch is not None else None,
                    )
                )
        except ConflictError:
            raise
        except (OctipusError, TimeoutError) as exc:  # the store failed or did not answer in time
            raise JournalUnavailableError(
                f"{tool} was not run: the action journal could not record it before execution "
                f"({describe_error(exc)}); retry once the database is reachable"
            ) from exc
        self.live.add(action.id)
        try:
            try:
                value = await body()
            except anyio.get_cancelled_exc_class():
                cancelled = Executed(
                    f"{tool} was cancelled after it started",
                    True,
                    ActionOutcome.UNCERTAIN,
                    "cancelled after it started",
                )
                with anyio.CancelScope(shield=True):
                    await self._finish(action.id, cancelled, commit)
                raise
            except Exception as exc:  # noqa: BLE001 - the body's failure is the call's recorded outcome
                log_body_failure(tool, exc)
                executed = classify(tool, None, exc, timeout_seconds=timeout_seconds)
            else:
                executed = classify(tool, value, None)
            with anyio.CancelScope(shield=True):
                recorded = await self._finish(action.id, executed, commit)
            return Executed(
                executed.value,
                executed.is_error,
                executed.outcome,
                executed.detail,
                action.id,
                recorded,
                executed.answered,
            )
        finally:
            self.live.discard(action.id)

    async def _finish(self, action_id: str, executed: Executed, commit: Commit | None) -> bool:
        outcome, detail = executed.outcome, executed.detail
        try:
            with anyio.fail_after(self.record_timeout_seconds):
                if commit is not None:
                    written = await in_thread(commit, outcome, detail, executed)
                    if not written:
                        log.warning("the outcome of action %s was not written: its claim changed", action_id)
                else:
                    await in_thread(
                        lambda: self.store.finish_action(
                            action_id, outcome=str(outcome), detail=detail, answered=executed.answered
                        )
                    )
                    written = True
        except Exception as exc:  # the body ran: its result is returned whatever the write did
            # The ``started`` record left behind is the evidence: it blocks further mutations of
            # the session until a person reviews it.
            log.error(
                "the outcome (%s) of action %s could not be recorded: %s; its started record now "
                "blocks further mutations of the session until a person reviews it",
                outcome,
                action_id,
                describe_error(exc),
                exc_info=traceback_of(exc),
            )
            written = False
        if outcome is ActionOutcome.UNCERTAIN and self.on_uncertain is not None:
            self.on_uncertain()  # after the write: its escalation deadline is now in the store
        return written

    def _columns(
        self, scope: ActionScope, tool: str, arguments: Mapping[str, Any], contract: RecoveryContract
    ) -> dict[str, Any]:
        key = None
        if contract.idempotency_key is not None:
            try:
                key = contract.idempotency_key(arguments)
            except (KeyError, TypeError, ValueError) as exc:  # arguments of an unexpected shape
                # the call is still recorded, without a key (a key function must not hide the call)
                log.warning("idempotency key of %s failed: %r", tool, exc)
        return {
            "user": scope.user,
            "session_id": scope.session_id,
            "run_id": scope.run_id,
            "agent": scope.agent,
            "origin": str(scope.origin),
            "pipeline_id": scope.pipeline_id,
            "node_id": scope.node_id,
            "tool": tool,
            "args_hash": args_hash(arguments),
            "risk_class": str(contract.risk_class),
            "idempotency_key": key,
            "recovery_owner": contract.owner,
            "deadline_seconds": contract.deadline_seconds,
            "owner": self.owner,
            "contract": contract_receipt(contract),
            "invocation": scope.invocation,
            "author": scope.author or scope.user,
        }
