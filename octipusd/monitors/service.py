"""The monitors' service: the one place the bridge tools, the API and ``octipusctl`` go through.

FACTS.md §7 and §5. ``monitor__create`` comes from a root run's bridge (its session is the owner, the
one the monitor wakes); a person (API, ``octipusctl``) lists, pauses, resumes and cancels their
user's monitors, an agent those of its own session. Monitors are personal: creating one in a shared
space's session is refused, and so is a delivery into one. At most
:attr:`MonitorLimits.max_active_per_session` monitors of a session are active at once.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from octipusd.errors import ForbiddenError, MonitorsUnavailableError
from octipusd.monitors.probes import ProbeRegistry
from octipusd.monitors.spec import MonitorLimits, parse_spec
from octipusd.monitors.watch import MonitorWatcher
from octipusd.store.aio import in_thread
from octipusd.store.monitor_records import Monitor, MonitorStatus
from octipusd.store.repository import Store
from octipusd.toolkit import PipelineCaller

__all__ = ["MonitorService", "monitor_document"]

_ARMED, _PAUSED, _READY = MonitorStatus.ARMED, MonitorStatus.PAUSED, MonitorStatus.READY
#: The error of a monitor cancelled at its creation because its workflow could not start.
_NOT_STARTED = "its workflow could not start on the durable engine; create it again"


def _iso(moment: Any) -> str | None:
    return moment.isoformat() if moment is not None else None


def monitor_document(monitor: Monitor) -> dict[str, Any]:
    """The monitor as every surface shows it (camelCase keys)."""
    return {
        "id": monitor.id,
        "sessionId": monitor.session_id,
        "status": monitor.status.value,
        "source": monitor.source,
        "condition": monitor.condition,
        "continuation": monitor.continuation,
        "intervalSeconds": monitor.interval_seconds,
        "deadline": _iso(monitor.deadline_at),
        "checks": monitor.checks,
        "lastObservation": monitor.last_observation,
        "match": monitor.match,
        "fired": monitor.fired,
        "delivery": monitor.delivery,
        "error": monitor.error,
        "pausedAt": _iso(monitor.paused_at),
        "createdAt": _iso(monitor.created_at),
        "endedAt": _iso(monitor.ended_at),
    }


class MonitorService:
    """The monitors' use cases (see the module); satisfies :class:`~octipusd.toolkit.MonitorOps`.

    Args:
        store: The store (the public record).
        probes: The probe-able tools (checked at creation).
        limits: The monitors' limits.
        watcher: The workflows' steps on the engine; None until the composition root wires it
            (creating, pausing, resuming and cancelling then refuse).
    """

    def __init__(
        self,
        store: Store,
        probes: ProbeRegistry,
        limits: MonitorLimits | None = None,
        watcher: MonitorWatcher | None = None,
    ) -> None:
        self.store = store
        self.probes = probes
        self.limits = limits or MonitorLimits()
        self.watcher = watcher

    def _watcher(self) -> MonitorWatcher:
        if self.watcher is None:
            raise MonitorsUnavailableError(
                "this daemon cannot run monitors: its durable engine is not wired in"
            )
        return self.watcher

    async def create(self, arguments: dict[str, Any], caller: PipelineCaller) -> dict[str, Any]:
        """``monitor__create``: check the arguments, store the monitor ``armed``, start its workflow.

        Raises:
            ForbiddenError: The caller is no root run (a monitor wakes a session), or its session is
                in a shared space (monitors are personal).
            InvalidRequestError: A bad field, named (a mutation as a probe, a browser source...).
            ConflictError: The session has the most active monitors already.
            MonitorsUnavailableError: No engine is wired in.
            ConfigError, StoreError: The engine could not start it (the record is then ``cancelled``
                with that reason: it does not count against the session's limit).
        """
        if caller.session_id is None or caller.workspace is None:
            raise ForbiddenError("a monitor is created by an agent's root run: it wakes that run's session")
        session = await in_thread(self.store.get_session, caller.session_id)
        if session.space_id is not None:
            raise ForbiddenError("monitors are personal: they are refused in a shared space (FACTS.md §5)")
        watcher = self._watcher()
        asked = self.store.now()
        spec = parse_spec(arguments, self.probes, asked, self.limits)  # bad input: the engine not loaded
        await watcher.engine.ensure_started()  # an engine that cannot start: nothing written
        if spec.source["kind"] != "time":  # the deadline counts from the start of the watch
            spec = replace(spec, deadline_at=spec.deadline_at + (self.store.now() - asked))
        monitor = await in_thread(
            lambda: self.store.create_monitor(
                session_id=caller.session_id or "",
                user=caller.user,
                workspace=caller.workspace or "",
                source=spec.source,
                condition=spec.condition.to_json() if spec.condition else None,
                continuation=spec.continuation,
                interval_seconds=spec.interval_s,
                deadline_at=spec.deadline_at,
                max_active=self.limits.max_active_per_session,
            )
        )
        try:
            await watcher.start(monitor.id)
        except Exception:  # re-raised: a monitor without its workflow would stay armed for ever
            await in_thread(
                lambda: self.store.move_monitor(
                    monitor.id, MonitorStatus.CANCELLED, expect=(_ARMED,), error=_NOT_STARTED
                )
            )
            raise
        return monitor_document(monitor)

    async def list(self, caller: PipelineCaller, *, active_only: bool = False) -> list[dict[str, Any]]:
        """The caller's monitors, newest first (an agent: its session's)."""
        statuses = [s for s in MonitorStatus if s.active] if active_only else None
        found = await in_thread(
            lambda: self.store.list_monitors(
                user=caller.user,
                session_id=caller.session_id,
                statuses=statuses,
                limit=self.limits.list_limit,
            )
        )
        return [monitor_document(m) for m in found]

    async def owned(self, monitor_id: str, caller: PipelineCaller) -> Monitor:
        """The monitor, if ``caller`` may see and act on it.

        Raises:
            NotFoundError: No such monitor.
            ForbiddenError: Another user's, or (an agent) another session's.
        """
        monitor = await in_thread(self.store.get_monitor, monitor_id)
        if monitor.user != caller.user:
            raise ForbiddenError(f"monitor {monitor_id} belongs to another user")
        if caller.session_id is not None and monitor.session_id != caller.session_id:
            raise ForbiddenError(f"monitor {monitor_id} belongs to another session")
        return monitor

    async def _move(
        self, monitor_id: str, caller: PipelineCaller, to: MonitorStatus, expect: tuple[MonitorStatus, ...]
    ) -> dict[str, Any]:
        await self.owned(monitor_id, caller)
        watcher = self._watcher()
        moved = await in_thread(lambda: self.store.move_monitor(monitor_id, to, expect=expect))
        await watcher.wake(monitor_id)
        return monitor_document(moved)

    async def pause(self, monitor_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """``monitor__pause``: an armed monitor stops checking; its deadline does not move.

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError: It is not ``armed`` (paused already, matched, ended).
        """
        return await self._move(monitor_id, caller, _PAUSED, (_ARMED,))

    async def resume(self, monitor_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """``monitor__resume``: a paused monitor is armed again (a deadline passed meanwhile: it
        times out at once, waking the session with its last observation).

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError: It is not ``paused``.
        """
        return await self._move(monitor_id, caller, _ARMED, (_PAUSED,))

    async def cancel(self, monitor_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """``monitor__cancel``: a monitor that has not been delivered ends ``cancelled``.

        Raises:
            NotFoundError, ForbiddenError: See :meth:`owned`.
            ConflictError: It is being delivered, or it ended.
        """
        return await self._move(monitor_id, caller, MonitorStatus.CANCELLED, (_ARMED, _PAUSED, _READY))
