"""The seam between the bridge (and its tools) and the daemon's runtime.

The runtime implements :class:`ToolHost`; the bridge only calls it. Tests and the benchmark
use :class:`octipusd.bridge.fakes.FakeToolHost`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from octipusd.bridge.identity import RunIdentity

if TYPE_CHECKING:
    from octipusd.journal.executor import Body, Executed


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
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any]
    ) -> AuthorizationResult:
        """Decide whether ``tool_id`` may run with ``arguments`` (permission rules, flow guard).

        May wait for a person in an attended run (seed 003: at most five minutes in a managed
        run; the host enforces that limit). ``arguments`` are already stripped of identity keys.
        """
        ...

    async def get_work_plan(self, identity: RunIdentity) -> dict[str, Any] | None:
        """Return the session's durable work plan, or None if there is none."""
        ...

    async def save_work_plan(self, identity: RunIdentity, plan: dict[str, Any]) -> dict[str, Any]:
        """Persist a validated work plan and return it as stored (it may gain an id)."""
        ...

    async def run_context(self, identity: RunIdentity) -> dict[str, Any]:
        """Return the fresh run context: plan, complete feedback history, queued guidance
        (and pending children). JSON-serializable."""
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
