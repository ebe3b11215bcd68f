"""In-memory :class:`ToolHost` for tests and benchmarks.

:class:`FakeToolHost` keeps plans, feedback and guidance per session in memory, records every
authorization request and event, and can be told to deny tools or to fail its context
refresh. It never waits for a person.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from octipusd.bridge.host import AuthorizationResult
from octipusd.bridge.identity import RunIdentity
from octipusd.journal.executor import Body, Executed, run_unjournaled


@dataclass(frozen=True)
class AuthorizationRequest:
    """One :meth:`FakeToolHost.authorize` call as received."""

    identity: RunIdentity
    tool_id: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class RecordedEvent:
    """One :meth:`FakeToolHost.record` call as received."""

    identity: RunIdentity
    kind: str
    data: dict[str, Any]


@dataclass
class FakeToolHost:
    """A :class:`octipusd.bridge.host.ToolHost` held in memory.

    Attributes:
        deny: Tool id -> denial reason; other tools are allowed.
        fail_context: When True, :meth:`run_context` raises ``RuntimeError``.
        plans: Session id -> saved plan.
        feedback: Session id -> feedback history (list of JSON objects).
        guidance: Session id -> queued guidance texts.
        authorizations: Every authorization request, in order.
        events: Every recorded event, in order.
    """

    deny: Mapping[str, str] = field(default_factory=dict)
    fail_context: bool = False
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    feedback: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    guidance: dict[str, list[str]] = field(default_factory=dict)
    authorizations: list[AuthorizationRequest] = field(default_factory=list)
    events: list[RecordedEvent] = field(default_factory=list)

    async def authorize(
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any]
    ) -> AuthorizationResult:
        """Allow unless ``tool_id`` is in :attr:`deny`."""
        self.authorizations.append(AuthorizationRequest(identity, tool_id, copy.deepcopy(arguments)))
        if tool_id in self.deny:
            return AuthorizationResult(False, self.deny[tool_id])
        return AuthorizationResult(True, "allowed by FakeToolHost")

    async def get_work_plan(self, identity: RunIdentity) -> dict[str, Any] | None:
        """Return a copy of the session's plan, or None."""
        plan = self.plans.get(identity.session_id)
        return copy.deepcopy(plan) if plan is not None else None

    async def save_work_plan(self, identity: RunIdentity, plan: dict[str, Any]) -> dict[str, Any]:
        """Store the plan under the session (an ``id`` is kept or minted) and return it."""
        previous = self.plans.get(identity.session_id)
        stored = copy.deepcopy(plan)
        stored["id"] = previous["id"] if previous and "id" in previous else f"plan-{identity.session_id}"
        self.plans[identity.session_id] = stored
        return copy.deepcopy(stored)

    async def run_context(self, identity: RunIdentity) -> dict[str, Any]:
        """Return ``{session_id, run_id, plan, feedback, guidance}`` of the identity's session.

        Raises:
            RuntimeError: :attr:`fail_context` is set.
        """
        if self.fail_context:
            raise RuntimeError("context repository unavailable (FakeToolHost.fail_context)")
        return {
            "session_id": identity.session_id,
            "run_id": identity.run_id,
            "plan": copy.deepcopy(self.plans.get(identity.session_id)),
            "feedback": copy.deepcopy(self.feedback.get(identity.session_id, [])),
            "guidance": list(self.guidance.get(identity.session_id, [])),
        }

    async def run_action(
        self,
        identity: RunIdentity,
        tool_id: str,
        arguments: dict[str, Any],
        body: Body,
        timeout_seconds: float | None,
    ) -> Executed:
        """Run the body without a journal (same outcome classification)."""
        return await run_unjournaled(tool_id, body, timeout_seconds)

    async def record(self, identity: RunIdentity, kind: str, data: dict[str, Any]) -> None:
        """Append the event to :attr:`events`."""
        self.events.append(RecordedEvent(identity, kind, copy.deepcopy(data)))

    def kinds(self) -> list[str]:
        """Return the kinds of the recorded events, in order."""
        return [event.kind for event in self.events]
