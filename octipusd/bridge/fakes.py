"""In-memory :class:`ToolHost` for tests and benchmarks.

:class:`FakeToolHost` keeps plans, feedback and guidance per session in memory, records every
authorization request, event and child request, and can be told to deny tools, to fail its
context refresh or to refuse children. It never waits for a person and runs no child: a
spawned child "succeeds" at once with a canned summary.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from octipusd.errors import ConflictError, InvalidRequestError, VaultAccessError
from octipusd.toolkit import (
    AuthorizationResult,
    BackgroundJobs,
    Body,
    CallWatch,
    ChildRequest,
    Executed,
    MonitorAccess,
    MonitorOps,
    PipelineAccess,
    PipelineOps,
    PlanUpdate,
    RunIdentity,
    ShellTerms,
    monitor_access,
    pipeline_access,
    run_unjournaled,
)


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


@dataclass(frozen=True)
class SpawnRequest:
    """One :meth:`FakeToolHost.spawn_child` call as received."""

    identity: RunIdentity
    request: ChildRequest


@dataclass
class FakeToolHost:
    """A :class:`octipusd.toolkit.ToolHost` held in memory.

    Attributes:
        deny: Tool id -> denial reason; other tools are allowed.
        fail_context: When True, :meth:`run_context` raises ``RuntimeError``.
        plans: Session id -> saved plan.
        feedback: Session id -> feedback history (list of JSON objects).
        guidance: Session id -> queued guidance texts.
        authorizations: Every authorization request, in order.
        events: Every recorded event, in order.
        refuse_children: When set, :meth:`spawn_child` raises ``ConflictError`` with this text.
        spawned: Every child request, in order.
        steered: Every ``steer_child`` request, in order: ``(child run id, text)``.
        secrets: Vault entry name -> value :meth:`resolve_secrets` hands out (any other name is
            refused with :class:`~octipusd.errors.VaultAccessError`).
        resolved: Every ``resolve_secrets`` request, in order: ``(tool id, names)``.
        shell: What :meth:`shell_terms` answers (default: the sandbox off).
        jobs: What :meth:`background_jobs` answers (e.g. the runtime's ``RunJobs``); None: refused.
        pipelines: The pipelines' service the pipeline tools reach (None: they are refused), e.g. a
            real ``PipelineService`` over a test store.
        monitors: The monitors' service the monitor tools reach (None: they are refused).
    """

    deny: Mapping[str, str] = field(default_factory=dict)
    fail_context: bool = False
    plans: dict[str, dict[str, Any]] = field(default_factory=dict)
    feedback: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    guidance: dict[str, list[str]] = field(default_factory=dict)
    authorizations: list[AuthorizationRequest] = field(default_factory=list)
    events: list[RecordedEvent] = field(default_factory=list)
    refuse_children: str | None = None
    spawned: list[SpawnRequest] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)
    resolved: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)
    steered: list[tuple[str, str]] = field(default_factory=list)
    shell: ShellTerms = field(default_factory=ShellTerms)
    jobs: BackgroundJobs | None = None
    pipelines: PipelineOps | None = None
    monitors: MonitorOps | None = None

    def pipeline_access(self, identity: RunIdentity) -> PipelineAccess:
        """:attr:`pipelines` with the identity's run as the caller.

        Raises:
            PipelinesUnavailableError: :attr:`pipelines` is None.
        """
        return pipeline_access(self.pipelines, identity)

    def monitor_access(self, identity: RunIdentity) -> MonitorAccess:
        """:attr:`monitors` with the identity's run as the caller.

        Raises:
            MonitorsUnavailableError: :attr:`monitors` is None.
        """
        return monitor_access(self.monitors, identity)

    async def authorize(
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any], watch: CallWatch | None = None
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

    async def save_work_plan(self, identity: RunIdentity, update: PlanUpdate) -> dict[str, Any]:
        """Store the plan under the session (an ``id`` is kept or minted, ``revision`` counts saves),
        set the answered feedback items' ``status`` and ``response``, and return the plan.

        Raises:
            ConflictError: ``update.revision`` is not the plan's current revision (0: none).
        """
        previous = self.plans.get(identity.session_id)
        current = int(previous["revision"]) if previous else 0
        if update.revision != current:
            raise ConflictError(
                f"revision: stale: you sent {update.revision}, the current revision is {current}"
            )
        stored = copy.deepcopy(update.plan)
        stored["id"] = previous["id"] if previous and "id" in previous else f"plan-{identity.session_id}"
        stored["revision"] = current + 1
        self.plans[identity.session_id] = stored
        items = {item["id"]: item for item in self.feedback.get(identity.session_id, [])}
        for answer in update.responses:
            items[answer.id].update(status=answer.status.value, response=answer.response)
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

    async def spawn_child(self, identity: RunIdentity, request: ChildRequest) -> dict[str, Any]:
        """Record the request and return a succeeded child's summary at once.

        The child run id is ``child-<n>`` (1-based, in request order); the child counts as
        resumed when an earlier request of the same session used the same role and key.

        Raises:
            ConflictError: :attr:`refuse_children` is set.
        """
        if self.refuse_children is not None:
            raise ConflictError(self.refuse_children)
        resumed = request.resume_key is not None and any(
            earlier.identity.session_id == identity.session_id
            and earlier.request.role == request.role
            and earlier.request.resume_key == request.resume_key
            for earlier in self.spawned
        )
        self.spawned.append(SpawnRequest(identity, request))
        number = len(self.spawned)
        return {
            "childRunId": f"child-{number}",
            "role": request.role,
            "status": "succeeded",
            "resumed": resumed,
            "vendorSessionId": f"vendor-{request.role}-{request.resume_key}" if request.resume_key else None,
            "result": f"done: {request.brief}",
            "reason": None,
        }

    async def collect_children(
        self, identity: RunIdentity, child_run_ids: Sequence[str] | None, timeout_seconds: float
    ) -> dict[str, Any]:
        """Return every recorded child of the session as collected (the fake's children end at once)."""
        wanted = set(child_run_ids) if child_run_ids is not None else None
        children = [
            {"childRunId": f"child-{n}", "role": item.request.role, "status": "succeeded"}
            for n, item in enumerate(self.spawned, 1)
            if item.identity.session_id == identity.session_id and (wanted is None or f"child-{n}" in wanted)
        ]
        return {"children": children, "pending": []}

    async def steer_child(self, identity: RunIdentity, child_run_id: str, text: str) -> dict[str, Any]:
        """Record the guidance; a child the fake spawned takes it as queued.

        Raises:
            InvalidRequestError: no child ``child_run_id`` was spawned in the session.
        """
        known = {
            f"child-{n}"
            for n, item in enumerate(self.spawned, 1)
            if item.identity.session_id == identity.session_id
        }
        if child_run_id not in known:
            raise InvalidRequestError(
                f"childRunId: {child_run_id} is not a child of this run that still runs"
            )
        self.steered.append((child_run_id, text))
        return {"childRunId": child_run_id, "delivery": "queued"}

    async def resolve_secrets(
        self, identity: RunIdentity, tool_id: str, names: Sequence[str]
    ) -> Mapping[str, str]:
        """Hand out :attr:`secrets`; an unknown name is refused."""
        self.resolved.append((tool_id, tuple(names)))
        missing = [name for name in names if name not in self.secrets]
        if missing:
            raise VaultAccessError(f"vault entry {missing[0]!r} does not exist")
        return {name: self.secrets[name] for name in names}

    def shell_terms(self, identity: RunIdentity) -> ShellTerms:
        """Return :attr:`shell`."""
        return self.shell

    def background_jobs(self, identity: RunIdentity) -> BackgroundJobs:
        """Return :attr:`jobs`; refused when there are none (as for a call started by hand)."""
        if self.jobs is None:
            raise ConflictError("this host keeps no background commands")
        return self.jobs

    async def record(self, identity: RunIdentity, kind: str, data: dict[str, Any]) -> None:
        """Append the event to :attr:`events`."""
        self.events.append(RecordedEvent(identity, kind, copy.deepcopy(data)))

    def kinds(self) -> list[str]:
        """Return the kinds of the recorded events, in order."""
        return [event.kind for event in self.events]
