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
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DEFAULT_DEADLINE_SECONDS",
    "ActionRef",
    "Compensation",
    "IdempotencyKey",
    "Probe",
    "ProbeResult",
    "ProbeStatus",
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
