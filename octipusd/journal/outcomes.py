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
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from octipusd.errors import OctipusError

__all__ = ["ActionOutcome", "NotExecutedError", "Origin", "ToolOutcome"]


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


class NotExecutedError(OctipusError):
    """Trusted evidence that a call stopped before its mutation boundary.

    Raised only by Octipus code that has proven nothing ran (argument validation before any
    effect, a shell parser refusal, a failed process spawn, a bridge refusal before an MCP
    ``tools/call``, a trusted server declaration). The journal records ``not_executed`` and the
    next mutation needs no recovery review.

    Args:
        message: What stopped the call and what to do, for the model and the person.
    """

    code = "not_executed"
    http_status = 422


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
