"""The seam between the bridge (and its tools) and the daemon's runtime.

The runtime implements :class:`ToolHost` (a run's bridge host; the host of a call started by
hand); the bridge and the tools only call it. Tests and the benchmark use
:class:`octipusd.bridge.fakes.FakeToolHost`. :class:`ChildRequest` is what the
``spawn_child`` tool (:mod:`octipusd.tools.children`) hands to :meth:`ToolHost.spawn_child`.
:class:`CallWatch` is the bridge's side of one call under :meth:`ToolHost.authorize`: why the bridge
stopped waiting for it (:class:`CallStop`), and when a person is being asked.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from octipusd.toolkit.gates import GateSpec
from octipusd.toolkit.identity import RunIdentity
from octipusd.toolkit.monitors import MonitorAccess
from octipusd.toolkit.outcomes import Body, Executed
from octipusd.toolkit.pipelines import PipelineAccess
from octipusd.toolkit.plans import PlanUpdate
from octipusd.toolkit.sandbox import ShellTerms

if TYPE_CHECKING:  # background imports the secrets module, which imports this one
    from octipusd.toolkit.background import BackgroundJobs

__all__ = ["AuthorizationResult", "CallStop", "CallWatch", "ChildRequest", "StopCause", "ToolHost"]


@dataclass(frozen=True)
class AuthorizationResult:
    """The permission verdict for one tool call.

    Attributes:
        allowed: True to run the tool.
        reason: Why it was denied (shown to the model as ``denied: <reason>``), or a short
            note on an allow (e.g. the rule that matched).
    """

    allowed: bool
    reason: str = ""


class StopCause(enum.StrEnum):
    """Why the bridge stopped waiting for a tool call before it ran."""

    #: Its caller disconnected (seed 003: queued calls whose callers disconnected are discarded).
    CALLER_LEFT = "caller_left"
    #: A deadline of the bridge passed (:class:`~octipusd.bridge.server.BridgeLimits`).
    DEADLINE = "deadline"
    #: The bridge closes because its run ends.
    RUN_ENDING = "run_ending"


@dataclass(frozen=True)
class CallStop:
    """Why the bridge cancelled one call's authorization.

    Attributes:
        cause: What kind of stop it was.
        reason: What happened, as a clause without the call's name (``its caller disconnected``,
            ``the bridge's wall clock of 7200 s for one tool request ran out``).
    """

    cause: StopCause
    reason: str


class CallWatch(Protocol):
    """The bridge's side of one call being authorized (:meth:`ToolHost.authorize`)."""

    def stopped(self) -> CallStop | None:
        """Why the bridge cancelled the authorization, once it did; None while it has not (a
        cancellation from elsewhere, e.g. the MCP session's own, has no bridge cause)."""
        ...

    def waiting(self, delta: int) -> None:
        """Tell the bridge that an approval wait of the call opens (+1) or ends (-1).

        While one is open the bridge's backstop on the permission check holds: a person's answer has
        its own limits, which the host enforces (an expired approval fails a managed run).
        """
        ...


@dataclass(frozen=True)
class ChildRequest:
    """One validated ``spawn_child`` call: the child agent run a parent asks for.

    Seed 003 ("Plans, feedback and delegation", "Resuming child sessions per role and task").
    The tool validates every field before the host sees it.

    Attributes:
        role: The child's role, a key of :data:`octipusd.tools.children.CHILD_ROLES`; it
            selects the child's stable role prompt and belongs to its session fingerprint.
        brief: The task for the child (1 to 20000 characters); volatile, re-sent on a resumed
            run.
        resume_key: The parent's task id (1 to 200 letters, digits, ``.``, ``_``, ``:`` or
            ``-``), unscoped. The host stores it as ``<parent scope>><role>:<resume_key>``;
            the same key with the same role continues that child's vendor session. None gives
            a fresh child.
        max_turns: Turn limit of the child run (1 to 200), or None for the host's default.
        token_budget: Token budget of the child run (tokens, at least 1), or None for the
            host's default. A child stopped for exceeding it drops its resume key.
        timeout_seconds: Wall-clock limit of the child run (seconds, 1 to 7200), or None for
            the host's default.
        detach: Return as soon as the child started; its result is picked up with
            ``collect_children`` (seed 003 "detach mode").
        gates: The child's command scorer gates, in order (at most 8; empty: none), run in its
            tree after it finishes (:mod:`octipusd.runtime.gates`); the tool refused directory
            switches pointing outside the child's tree before this request was built.
    """

    role: str
    brief: str
    resume_key: str | None = None
    max_turns: int | None = None
    token_budget: int | None = None
    timeout_seconds: float | None = None
    detach: bool = False
    gates: tuple[GateSpec, ...] = ()


@runtime_checkable
class ToolHost(Protocol):
    """What the bridge needs from the daemon for one run.

    Every method receives the run's :class:`RunIdentity` as bound by the bridge, never an
    identity taken from tool arguments. The bridge puts a deadline on each call
    (:class:`octipusd.bridge.server.BridgeLimits`); implementations may raise any
    exception, which the bridge turns into a tool error (or, for ``run_context`` and
    ``record``, logs without failing the call).
    """

    async def authorize(
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any], watch: CallWatch | None = None
    ) -> AuthorizationResult:
        """Decide whether ``tool_id`` may run with ``arguments`` (permission rules, flow guard).

        May wait for a person in an attended run (seed 003: at most five minutes in a managed
        run; the host enforces that limit). ``arguments`` are already stripped of identity keys.
        ``watch`` (given by the bridge; None for a check with no caller to lose) is told of each
        approval wait, and says why the bridge cancelled the call when it does: a host that fails
        the run for an abandoned approval names that cause.
        """
        ...

    async def get_work_plan(self, identity: RunIdentity) -> dict[str, Any] | None:
        """Return the session's durable work plan (with its ``revision``), or None if there is none."""
        ...

    async def save_work_plan(self, identity: RunIdentity, update: PlanUpdate) -> dict[str, Any]:
        """Persist a validated work plan with the agent's feedback answers, if ``update.revision`` is
        the plan's current revision, and return the plan as stored (it gains its new ``revision``).

        Raises:
            ConflictError: the revision is stale (the message names the current one).
            InvalidRequestError: an answer names no feedback item of the session.
        """
        ...

    async def run_context(self, identity: RunIdentity) -> dict[str, Any]:
        """Return the fresh run context: plan, complete feedback history, queued guidance
        (and pending children). JSON-serializable."""
        ...

    async def spawn_child(self, identity: RunIdentity, request: ChildRequest) -> dict[str, Any]:
        """Run one child agent run for the calling run and return its summary.

        With ``request.detach`` the call returns once the child started
        (``{"childRunId", "role", "status": "running", "detached": true}``) and the summary is
        picked up with :meth:`collect_children`; otherwise it waits for the child's end.

        The child is a child of ``identity``'s run (its parent); the host applies the role,
        depth and budget constraints, scopes ``request.resume_key`` by the parent (seed 003
        "Resuming child sessions per role and task") and waits for the child to finish.

        Returns:
            The child's summary, JSON-serializable::

                {"childRunId": str, "role": str,
                 "status": str,                 # the child run's terminal status
                 "resumed": bool,               # True when a stored vendor session was continued
                 "vendorSessionId": str | None,
                 "result": str | None,          # the child's final answer
                 "reason": str | None}          # why it did not succeed, or a note (key ignored...)

        Raises:
            InvalidRequestError: the request is not acceptable for this parent (e.g. the role
                is not allowed here, or a limit exceeds what the parent may grant); the text
                says which field and what is accepted.
            ConflictError: the child cannot start in the current state (e.g. the depth limit
                is reached or the parent's run is ending); the text says why.
        """
        ...

    async def collect_children(
        self, identity: RunIdentity, child_run_ids: Sequence[str] | None, timeout_seconds: float
    ) -> dict[str, Any]:
        """Wait for the calling run's detached children and return their summaries.

        Args:
            identity: The parent run.
            child_run_ids: The children to wait for; None for every detached child not yet
                collected.
            timeout_seconds: Longest wait (seconds); children still running then are listed as
                pending, not cancelled.

        Returns:
            ``{"children": [summary, ...], "pending": [{"childRunId", "role", "status"}, ...]}``;
            each summary has the shape :meth:`spawn_child` returns and is handed out once.

        Raises:
            InvalidRequestError: an id that is not a detached child of this run.
            ConflictError: the parent run is not live.
        """
        ...

    async def steer_child(self, identity: RunIdentity, child_run_id: str, text: str) -> dict[str, Any]:
        """Give guidance to one of the calling run's own children that still runs (seed 003).

        Args:
            identity: The parent run.
            child_run_id: The child.
            text: The guidance.

        Returns:
            ``{"childRunId": ..., "delivery": "stdin" | "queued"}``: written into the child's running
            turn, or queued for its run context and a follow-up.

        Raises:
            InvalidRequestError: not a running child of this run (another parent's, ended, unknown).
            ConflictError: the parent is not live or is stopping, or the child is ending.
        """
        ...

    async def resolve_secrets(
        self, identity: RunIdentity, tool_id: str, names: Sequence[str]
    ) -> Mapping[str, str]:
        """Resolve vault entries for one call of ``tool_id`` (seed 003 "Authenticate with a vault
        credential"), as the user the call acts for (``identity.call_author``).

        Called after the call's permission checks, only when its ``env`` holds placeholders. The
        values go into that one invocation's ``env`` and nowhere else; the host may remember them
        to mask them in its logs.

        Returns:
            ``{name: value}`` for every name.

        Raises:
            OctipusError: an entry is unknown, refused to this user, or ``tool_id`` is outside its
                tool allowlist; the message names that entry (never a guess at another name).
        """
        ...

    def shell_terms(self, identity: RunIdentity) -> ShellTerms:
        """How the shell commands of a call of ``identity`` run: the daemon's shell sandbox
        (``security.shellSandbox`` and the runner it found) and whether this run shares the host's
        services with its own commands (its ``hostServices``, never inherited by its children)."""
        ...

    def background_jobs(self, identity: RunIdentity) -> BackgroundJobs:
        """The background shell commands of ``identity``'s run (``shell__run_background``); they all
        end when the run ends.

        Raises:
            ConflictError: the caller has no live run to keep them in (a call started by hand, a run
                that is ending).
        """
        ...

    def pipeline_access(self, identity: RunIdentity) -> PipelineAccess:
        """The pipelines' service, with ``identity``'s run as the caller (its user, session and
        workspace: the bridge tools act only on that session's pipelines).

        Raises:
            PipelinesUnavailableError: the daemon has no pipelines' service.
        """
        ...

    def monitor_access(self, identity: RunIdentity) -> MonitorAccess:
        """The monitors' service, with ``identity``'s run as the caller (its user, session and
        workspace: the bridge tools act only on that session's monitors, and a monitor wakes it).

        Raises:
            MonitorsUnavailableError: the daemon has no monitors' service.
        """
        ...

    async def record(self, identity: RunIdentity, kind: str, data: dict[str, Any]) -> None:
        """Append an event to the run's event stream.

        Kinds the bridge emits: ``tool_call_started``, ``tool_call_finished`` and
        ``tool_call_denied`` (see :mod:`octipusd.bridge.server` for their data).
        """
        ...

    async def run_action(
        self,
        identity: RunIdentity,
        tool_id: str,
        arguments: dict[str, Any],
        body: Body,
        timeout_seconds: float | None,
    ) -> Executed:
        """Run the body of a mutating tool call inside the action journal's execution boundary.

        ``started`` is recorded before ``body`` runs and the outcome after it (seed 000, see
        :class:`octipusd.journal.executor.ActionJournal`).

        Returns:
            How the call ended (a failure of the body is a result).

        Raises:
            Exception: the journal could not record the call, so ``body`` did not run; the
                bridge answers with the error.
        """
        ...
