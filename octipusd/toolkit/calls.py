"""What the permission gate is asked with and answers, for every caller of it.

:class:`CallContext` (who asks: the run, its session and workspace) and :class:`GateResult`
(the answer) are shared by the gate (:class:`octipusd.policy.gate.PermissionGate`), the
recovery review (:class:`octipusd.journal.review.RecoveryGate`) and the runtime that relays
a vendor's permission requests.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from octipusd.toolkit.identity import StageTag

__all__ = ["CallAllowance", "CallContext", "GateResult"]


@dataclass
class CallContext:
    """Who is asking: the run and session of a call.

    Attributes:
        run_id: The run.
        session_id: Its session (flow labels and session-scoped grants live there).
        workspace: The run's working folder (absolute path; workspace-scoped grants).
        attended: False when no person can answer (an ASK is then refused).
        on_waiting: Called with +1 before an approval is created and -1 after its wait ends
            (the runtime shows ``awaiting_approval`` and pauses the active-work clock).
        review_required: Notes of refused ASKs of an unattended run, appended here.
        space: True when the session belongs to a shared space: Octipus's own shell tool then
            never writes a coding agent's configuration (the shell guard, seed 003).
        plan: True for a plan-mode turn: only reading and planning tools may run (see
            :meth:`PermissionGate.plan_refusal`).
        approvals: Ids of the approvals asked through this context whose wait has not returned:
            one whose caller went away meanwhile (its wait was cancelled) stays listed, so a
            caller with a context of its own (:func:`dataclasses.replace`) knows what it left open.
        stage: The pipeline stage attempt this run works for (a stage worker's own run only; a
            child it spawns, the root agent and a hand-started call have None): what a pipeline's
            allowances (:class:`CallAllowance`) are scoped to.
        host_services: The run's own shell commands share the host's services (a stage with
            ``hostServices``); an allowance holds only under the same setting.
    """

    run_id: str
    session_id: str
    workspace: str
    attended: bool
    on_waiting: Callable[[int], Awaitable[None]] | None = None
    review_required: list[str] = field(default_factory=list)
    space: bool = False
    plan: bool = False
    approvals: list[str] = field(default_factory=list)
    stage: StageTag | None = None
    host_services: bool = False


@dataclass(frozen=True)
class GateResult:
    """The gate's answer for one call.

    Attributes:
        allowed: Whether the call may run.
        reason: One line for the model and the events (which rule, who approved, why denied).
        updated_input: For a questionnaire, the input carrying the answers (Claude's
            ``updatedInput``); None otherwise (the caller echoes the original input).
        expired: True when the approval was not answered in time (the run must fail).
        approval_id: The approval that was asked, if any.
    """

    allowed: bool
    reason: str
    updated_input: dict[str, Any] | None = None
    expired: bool = False
    approval_id: str | None = None


class CallAllowance(Protocol):
    """Something a person approved ahead that turns an ASK into an ALLOW for one exact call.

    The gate consults its allowances only where it would otherwise ask a person (the rules said
    ASK, or the flow guard turned an ALLOW into an ASK): a DENY always wins and a questionnaire is
    always asked. A pipeline's approved calls (``metadata.approvedCalls``) and its approved gate
    commands are allowances; each holds only for the stage worker it was granted to
    (:attr:`CallContext.stage`).
    """

    async def allows(
        self, ctx: CallContext, tool_id: str, arguments: dict[str, Any], action: str | None
    ) -> str | None:
        """Why ``tool_id`` with ``arguments`` may run without asking (one line for the events), or
        None when this allowance does not cover it. Store errors propagate (the call then fails;
        nothing is allowed by an error)."""
        ...
