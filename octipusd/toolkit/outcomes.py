"""What a journal record says about one mutating tool call (seed 000 "Implementation and
guarantees").

Outcomes, to the letter of the seed:

* ``started``: written and committed *before* the tool body runs. A record still ``started``
  whose call is no longer running in this process (the completion write failed, or the daemon
  that ran it is gone) is an orphan and counts as uncertain.
* ``completed``: the call returned and its return was confirmed. A finished attempt, not
  necessarily a success: a failed test or a non-zero shell exit is a completed attempt.
* ``not_executed``: trusted evidence that the body never reached its mutation boundary: a
  shell parser refusal, a policy rejection, a proven failure before process start, a
  permission revoked before the body started, a local bridge refusal before an MCP
  ``tools/call``, or (for a server whose recovery declarations are trusted) an ``isError``
  result carrying ``_meta["octipus/recovery"].outcome == "not_executed"``. Only code raises
  :class:`NotExecutedError`; no argument or result field a model controls can produce it.
* ``uncertain``: a timeout, kill, signal, cancellation after start, missing completion
  evidence, and generic tool failures (``success: false``, MCP ``isError``, transport errors):
  partial effects may have happened.

Acknowledging an uncertain record (a recovery review) never relabels it ``completed``.

A call's end is classified the same way whether it is journaled or not (:func:`classify`,
:func:`run_unjournaled`): the journal (:class:`octipusd.journal.executor.ActionJournal`) and
the hosts that run a body without one share it.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from octipusd.errors import InvalidRequestError, NotExecutedError, OctipusError, traceback_of

__all__ = [
    "DETAIL_CHARS",
    "ActionOutcome",
    "Body",
    "Executed",
    "Origin",
    "ToolOutcome",
    "classify",
    "describe_failure",
    "log_body_failure",
    "run_unjournaled",
]

_log = logging.getLogger("octipusd.tools")

#: Characters of an outcome's evidence (``detail``, a receipt line) kept in the journal.
DETAIL_CHARS = 300


class ActionOutcome(enum.StrEnum):
    """The ``outcome`` column of ``tool_actions``."""

    STARTED = "started"
    COMPLETED = "completed"
    NOT_EXECUTED = "not_executed"
    UNCERTAIN = "uncertain"


class Origin(enum.StrEnum):
    """Who started a call: an agent through its bridge, or a person by hand from a client
    (seed 001's "Test-tab" call)."""

    AGENT = "agent"
    MANUAL = "manual"


@dataclass(frozen=True)
class ToolOutcome:
    """A handler's return when the call finished but its outcome is not a plain completion.

    Attributes:
        value: The result to hand back (text or a JSON object), as for a plain return.
        uncertain: Why the effect is uncertain (e.g. ``"timed out after 5 s"``); None means the
            return is a confirmed completion.
        is_error: Mark the MCP result ``isError`` (the model sees an error).
        detail: Short evidence kept on the journal record (an exit code, an error class), never
            the result body.
        in_flight: No answer came and the request may still be running where it was sent (a
            connector call that timed out or lost its connection): the action stays in flight
            until its bound. False means the call is over (it answered, or Octipus stopped it).
    """

    value: str | dict[str, Any]
    uncertain: str | None = None
    is_error: bool = False
    detail: str | None = None
    in_flight: bool = False


#: ``async () -> result``: the tool body, raising on failure.
Body = Callable[[], Awaitable[str | dict[str, Any] | ToolOutcome]]


@dataclass(frozen=True)
class Executed:
    """How one call ended.

    Attributes:
        value: The result for the caller (text or JSON object); for a failure, its message.
        is_error: The caller sees an error result.
        outcome: ``completed``, ``not_executed`` or ``uncertain``.
        detail: One line of evidence (also stored on the record).
        action_id: The journal record (None when the call was not journaled).
        recorded: False when the outcome write failed (the ``started`` record then blocks).
        answered: The call is over (it returned, Octipus stopped it, or it provably never left):
            no request of it can land any more. False after a timeout, a cancellation or any
            other failure of the body, and for a :class:`ToolOutcome` marked ``in_flight``.
    """

    value: str | dict[str, Any]
    is_error: bool
    outcome: ActionOutcome
    detail: str | None
    action_id: str | None = None
    recorded: bool = True
    answered: bool = False


def describe_failure(tool: str, exc: BaseException, timeout_seconds: float | None = None) -> str:
    """The message a caller sees when a tool body raised ``exc``."""
    if isinstance(exc, NotExecutedError):
        return exc.message
    if isinstance(exc, InvalidRequestError):
        return f"invalid arguments for {tool}: {exc.message}"
    if isinstance(exc, OctipusError):
        return f"{tool} failed: {exc.message} ({exc.code})"
    if isinstance(exc, TimeoutError):
        limit = f" within {timeout_seconds:g} s" if timeout_seconds is not None else " in time"
        return f"{tool} did not finish{limit} and was stopped"
    return f"{tool} failed with an internal error: {type(exc).__name__}: {exc}"


def log_body_failure(tool: str, exc: BaseException) -> None:
    """Log a tool body's failure (the caller records it as the call's outcome): an Octipus error
    or a timeout, whose message says what happened, at INFO; anything else, unexpected, as a
    warning with its traceback."""
    unexpected = traceback_of(exc)
    _log.log(
        logging.WARNING if unexpected else logging.INFO,
        "%s",
        describe_failure(tool, exc),
        exc_info=unexpected,
    )


def classify(
    tool: str, value: str | dict[str, Any] | ToolOutcome | None, exc: BaseException | None, **kw: Any
) -> Executed:
    """Classify a call's end into a seed 000 outcome.

    Args:
        tool: The tool id (for messages).
        value: What the body returned (when it returned).
        exc: What it raised (when it raised); cancellation is handled by the caller.
        **kw: ``timeout_seconds`` for the timeout message.

    Returns:
        The :class:`Executed` (without an action id).
    """
    if exc is not None:
        message = describe_failure(tool, exc, kw.get("timeout_seconds"))
        if isinstance(exc, NotExecutedError):
            return Executed(message, True, ActionOutcome.NOT_EXECUTED, message[:DETAIL_CHARS], answered=True)
        detail = (
            "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"[:DETAIL_CHARS]
        )
        return Executed(message, True, ActionOutcome.UNCERTAIN, detail)
    if isinstance(value, ToolOutcome):
        answered = not value.in_flight
        if value.uncertain is not None:
            detail = value.uncertain if value.detail is None else f"{value.uncertain} ({value.detail})"
            return Executed(
                value.value, value.is_error, ActionOutcome.UNCERTAIN, detail[:DETAIL_CHARS], answered=answered
            )
        return Executed(value.value, value.is_error, ActionOutcome.COMPLETED, value.detail, answered=answered)
    return Executed(value if value is not None else "", False, ActionOutcome.COMPLETED, None, answered=True)


async def run_unjournaled(tool: str, body: Body, timeout_seconds: float | None = None) -> Executed:
    """Run a body without a journal (read-only and internal tools, tests): same classification.

    Cancellation propagates.
    """
    try:
        value = await body()
    except anyio.get_cancelled_exc_class():
        raise
    except Exception as exc:  # noqa: BLE001 - the body's failure is the call's result
        log_body_failure(tool, exc)
        return classify(tool, None, exc, timeout_seconds=timeout_seconds)
    return classify(tool, value, None)
