"""The monitors' seam shared by the service, the bridge tools, the API and the clients (FACTS.md §7).

The monitors' service (:class:`octipusd.monitors.service.MonitorService`, layer 3) satisfies
:class:`MonitorOps`; the bridge tools (:mod:`octipusd.tools.monitor`) reach it through
:meth:`octipusd.toolkit.ToolHost.monitor_access`, which binds the calling run's identity as the
caller (the same shape as the pipelines': :class:`~octipusd.toolkit.pipelines.PipelineCaller`): no
tool imports the service, no owner comes from arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from octipusd.errors import MonitorsUnavailableError
from octipusd.toolkit.identity import RunIdentity
from octipusd.toolkit.pipelines import PipelineCaller

__all__ = ["EVENT_TYPE_NAMES", "MonitorAccess", "MonitorOps", "monitor_access"]

#: The event types an event source may watch: the owner's session's own events
#: (``octipusd/monitors/spec.py`` describes each one's fields).
EVENT_TYPE_NAMES: tuple[str, ...] = ("pipeline_status", "run_finished")


class MonitorOps(Protocol):
    """The monitors' use cases every surface calls (implemented by ``MonitorService``).

    Each answers a JSON-ready document (camelCase keys). A bridge caller (with a session) acts on
    its own session's monitors only; a person (no session) on their user's. Unknown ids raise
    :class:`~octipusd.errors.NotFoundError`, another owner's :class:`~octipusd.errors.ForbiddenError`,
    bad input :class:`~octipusd.errors.InvalidRequestError` naming the field, a move the monitor's
    status does not allow (or the session's limit) :class:`~octipusd.errors.ConflictError`.
    """

    async def create(self, arguments: dict[str, Any], caller: PipelineCaller) -> dict[str, Any]:
        """Check ``monitor__create``'s arguments, store the monitor ``armed`` and start its workflow."""
        ...

    async def list(self, caller: PipelineCaller, *, active_only: bool = False) -> list[dict[str, Any]]:
        """The caller's monitors, newest first."""
        ...

    async def pause(self, monitor_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """Pause an armed monitor (its deadline does not move)."""
        ...

    async def resume(self, monitor_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """Arm a paused monitor again."""
        ...

    async def cancel(self, monitor_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """Cancel a monitor that has not fired."""
        ...


@dataclass(frozen=True)
class MonitorAccess:
    """What a bridge call reaches the monitors with: the service and the calling run as its caller."""

    ops: MonitorOps
    caller: PipelineCaller


def monitor_access(ops: MonitorOps | None, identity: RunIdentity) -> MonitorAccess:
    """``ops`` with the run of ``identity`` as the caller: its user, session and workspace.

    Raises:
        MonitorsUnavailableError: ``ops`` is None (the daemon has no monitors' service).
    """
    if ops is None:
        raise MonitorsUnavailableError("this daemon cannot run monitors: it has no monitors' service")
    caller = PipelineCaller(
        user=identity.user, session_id=identity.session_id, workspace=str(identity.workspace)
    )
    return MonitorAccess(ops, caller)
