"""Recovery contracts (seed 004): what a mutating tool declares before it runs.

Every mutating tool has a :class:`RecoveryContract`: its risk class, and optionally an
idempotency key, a verification probe, a compensation, a named owner of unresolved outcomes
and an escalation deadline. The contract is persisted with the ``started`` record (its risk
class, key, owner and deadline), before the tool body runs.

Risk classes (seed 004 "One Retry Policy Cannot Fit Every Side Effect"):

* ``reversible``: restoring the prior value undoes it;
* ``compensatable``: cannot be undone, but a correction can offset it;
* ``containable``: its blast radius can be bounded (a kill switch, a timeout, a workspace);
* ``irreversible``: no technical undo exists. Irreversible actions never run unattended.

Recovery states of an action whose outcome was uncertain (seed 004 "Implementation
pattern"): ``effect_unconfirmed`` -> ``verified`` (a probe established whether the effect
happened) or ``recovering`` (a compensation is running) -> ``compensated``, ``contained``, or
``needs_operator`` (the probe stayed ambiguous past the deadline, or the compensation failed:
the receipt goes to the named owner). ``verified``, ``compensated`` and ``contained`` resolve
the action; the others keep blocking later mutations until a person reviews them.

A probe's "not applied" settles an action only once no dispatched request of it can still land
(seed 004: verification must be trustworthy before a retry): after its in-flight bound (the
``started`` time plus the call's own deadline) has passed, or once Octipus has positively ended
the request's transport (:class:`DispatchRef`, ended at restart). Before that the answer is kept
as evidence and the action stays unconfirmed (:class:`ProbeVerdict`).
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "DEFAULT_DEADLINE_SECONDS",
    "ActionRef",
    "Compensation",
    "DispatchEnd",
    "DispatchKind",
    "DispatchRef",
    "IdempotencyKey",
    "Probe",
    "ProbeResult",
    "ProbeStatus",
    "ProbeVerdict",
    "RecoveryContract",
    "RecoveryState",
    "RiskClass",
]

#: Default escalation deadline of an unresolved action (seconds).
DEFAULT_DEADLINE_SECONDS = 3600.0


class RiskClass(enum.StrEnum):
    """How an effect can be remedied after partial success (seed 004)."""

    REVERSIBLE = "reversible"
    COMPENSATABLE = "compensatable"
    CONTAINABLE = "containable"
    IRREVERSIBLE = "irreversible"


class RecoveryState(enum.StrEnum):
    """The ``recovery_state`` column of an uncertain action (seed 004's state machine)."""

    EFFECT_UNCONFIRMED = "effect_unconfirmed"
    VERIFIED = "verified"
    RECOVERING = "recovering"
    COMPENSATED = "compensated"
    CONTAINED = "contained"
    NEEDS_OPERATOR = "needs_operator"

    @property
    def resolved(self) -> bool:
        """True when the evidence settles the action (it no longer blocks mutations)."""
        return self in (RecoveryState.VERIFIED, RecoveryState.COMPENSATED, RecoveryState.CONTAINED)


class ProbeStatus(enum.StrEnum):
    """What a verification probe observed."""

    APPLIED = "applied"
    NOT_APPLIED = "not_applied"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ProbeResult:
    """The answer of a verification probe.

    Attributes:
        status: ``applied`` (the effect is there), ``not_applied`` (it is not), or ``unknown``
            (the probe failed or its answer was ambiguous, e.g. a partial effect).
        detail: One line of evidence for the receipt (no result bodies).
    """

    status: ProbeStatus
    detail: str = ""


@dataclass(frozen=True)
class ProbeVerdict:
    """What one probe run established for the journal.

    Attributes:
        result: The probe's own answer.
        settled: True when the answer settled the action (``verified``); False for ``unknown``,
            and for ``not_applied`` while a dispatched request may still land.
        in_flight_until: When no dispatched request of the action can land any more (None: its
            transport was ended, or no bound is known), shown to the person while unsettled.
        correction: True when an ``applied`` answer contradicted an earlier ``not_applied``
            settlement: the action was reopened for review.
    """

    result: ProbeResult
    settled: bool
    in_flight_until: datetime | None = None
    correction: bool = False


class DispatchKind(enum.StrEnum):
    """How a call's request reached the code that acts on it."""

    MCP_HTTP = "mcp_http"  # a streamable HTTP session of an MCP server
    MCP_STDIO = "mcp_stdio"  # a stdio MCP server process (found by its environment marker)


@dataclass(frozen=True)
class DispatchRef:
    """Where a call's request went, recorded with ``started`` so a restarted daemon can end it.

    Attributes:
        kind: See :class:`DispatchKind`.
        server: The MCP server's name in ``mcpServers`` (its URL and headers are read from the
            configuration when the transport is ended).
        session_id: ``Mcp-Session-Id`` of a streamable HTTP session.
        url_sha256: SHA-256 (hex) of the URL the session was opened on (the URL itself may hold
            a credential): a session is ended only at that same URL.
        marker: The environment marker (``OCTIPUS_RUN_ID``) of a stdio server's processes.
    """

    kind: DispatchKind
    server: str
    session_id: str | None = None
    url_sha256: str | None = None
    marker: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The stored form (a small JSON object)."""
        out: dict[str, Any] = {"kind": str(self.kind), "server": self.server}
        optional = {"session_id": self.session_id, "url_sha256": self.url_sha256, "marker": self.marker}
        out.update({name: value for name, value in optional.items() if value is not None})
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DispatchRef | None:
        """Read the stored form; None when it is not one this version knows (or a stdio form
        without its marker)."""
        try:
            kind = DispatchKind(str(data.get("kind")))
        except ValueError:
            return None
        server = data.get("server")
        if not isinstance(server, str) or not server:
            return None
        text = {
            k: v for k in ("session_id", "url_sha256", "marker") if isinstance(v := data.get(k), str) and v
        }
        if kind is DispatchKind.MCP_STDIO and "marker" not in text:
            return None  # without its marker a stdio server's processes cannot be told apart
        return cls(kind, server, text.get("session_id"), text.get("url_sha256"), text.get("marker"))


@dataclass(frozen=True)
class DispatchEnd:
    """What ending a stopped daemon's transport established.

    Attributes:
        ended: No request sent over it can land any more (the action's probe may settle it).
        evidence: One line for the receipt.
    """

    ended: bool
    evidence: str


@dataclass(frozen=True)
class ActionRef:
    """What a probe or compensation learns of the action it inspects (never argument bodies).

    Attributes:
        action_id: The journal record.
        tool: ``shell__run`` or ``server.tool``.
        idempotency_key: The key declared for the call, if any.
        session_id: The Octipus session the action belongs to.
        user: The user it ran for.
    """

    action_id: str
    tool: str
    idempotency_key: str | None
    session_id: str | None
    user: str


#: ``(arguments) -> key or None``: the duplicate guard of one call.
IdempotencyKey = Callable[[Mapping[str, Any]], str | None]
#: ``async (action) -> ProbeResult``: read-only check of the external state; may raise.
Probe = Callable[[ActionRef], Awaitable[ProbeResult]]
#: ``async (action) -> detail``: offsets the effect; raises when it fails.
Compensation = Callable[[ActionRef], Awaitable[str]]


@dataclass(frozen=True)
class RecoveryContract:
    """The recovery contract of one mutating tool (seed 004 "Implementation pattern").

    Attributes:
        risk_class: See :class:`RiskClass`.
        idempotency_key: Derives the call's key from its arguments (stored, unlike the
            arguments); None when the tool has no duplicate guard.
        probe: Verification probe run on an uncertain action before any retry.
        compensation: Remedy for an applied or partial effect.
        owner: Who receives unresolved outcomes past the deadline; None means the user the
            action ran for.
        deadline_seconds: How long an uncertain action may stay unconfirmed before it goes to
            its owner (seconds).
        intended_effects: One line: what the tool changes (shown in reviews).
    """

    risk_class: RiskClass
    idempotency_key: IdempotencyKey | None = None
    probe: Probe | None = None
    compensation: Compensation | None = None
    owner: str | None = None
    deadline_seconds: float = DEFAULT_DEADLINE_SECONDS
    intended_effects: str = ""
