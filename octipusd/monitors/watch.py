"""A monitor's durable workflow and its steps (FACTS.md §7; issue 28 item 7).

::

    loop: check (a step: read the source, judge the condition, record the observation)
            wait  -> a durable timer (the interval, or the deadline while paused), ended early by a
                     message (a pause, resume or cancel wakes it to look again)
            fire  -> leave the loop (a match, or the deadline passed: a timeout)
            end   -> it was cancelled (or ended otherwise): the workflow returns
    claim      (a step: ready, or armed/paused at the deadline, -> delivering)
    deliver    (under the engine's restart guard: never run twice; a delivery cut off by the
                daemon's death is answered "interrupted" at recovery and the monitor is ``blocked``)

Every read and write is a step of :class:`MonitorWatcher`, recorded by the engine, so after a
restart DBOS replays what was done and the timers wait only what is left: monitors survive
restarts. The first workflow's id is the monitor's id. A look (a check and its timer) adds about
three records to its workflow, so after :attr:`MonitorLimits.looks_per_workflow` looks a workflow
starts a fresh one (``<monitor id>.<generation>``, its first step a check of the record) and ends:
a long-lived monitor's records are spread over short workflows, and a restart replays only the
current one. A wake-up is sent to every unfinished workflow of the monitor (the one ending and its
successor alike). An event source and a tool source alike are read at their interval: a pipeline's
end does not wake a monitor early (it is seen at the next check). A ``changed`` condition takes its first good read
as the baseline; a missing field is recorded ``unavailable`` (neither a match nor a change); a probe
that fails is recorded as an ``error`` observation and checked again at the next interval.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from octipusd.durable.engine import DurableEngine, Interrupted, WorkflowDef
from octipusd.errors import ConflictError, ForbiddenError, OctipusError
from octipusd.monitors.conditions import NO_BASELINE, Judgement, Verdict, judge, parse_condition
from octipusd.monitors.delivery import Waker, wake_text
from octipusd.monitors.probes import ProbeRegistry
from octipusd.monitors.spec import MonitorLimits
from octipusd.store.aio import in_thread
from octipusd.store.monitor_records import Monitor, MonitorStatus
from octipusd.store.repository import Store
from octipusd.toolkit import PipelineCaller

__all__ = ["MONITOR_WATCH", "WAKE_TOPIC", "MonitorWatcher", "active_watcher", "install_watcher"]

log = logging.getLogger("octipusd.monitors")

#: The topic of the messages that wake a monitor's timer (a pause, resume or cancel).
WAKE_TOPIC: Final = "monitor.wake"
_ARMED, _PAUSED, _READY = MonitorStatus.ARMED, MonitorStatus.PAUSED, MonitorStatus.READY
_DELIVERING = MonitorStatus.DELIVERING
CUT_OFF = (
    "the delivery was cut off (the daemon stopped while it delivered); it is not delivered again: "
    "look at the session to see whether the wake-up arrived"
)


def owner_of(monitor: Monitor) -> PipelineCaller:
    """The caller a monitor's probes run as: its owner's user, session and workspace."""
    return PipelineCaller(user=monitor.user, session_id=monitor.session_id, workspace=monitor.workspace)


@dataclass
class MonitorWatcher:
    """The steps of the monitors' workflows, on the daemon's engine (see the module).

    Attributes:
        store: The store (the monitors' records).
        engine: The durable engine.
        probes: The probe-able tools.
        waker: Delivers into the owner's session (None: a delivery is ``blocked``, saying why).
        limits: The monitors' limits.
    """

    store: Store
    engine: DurableEngine
    probes: ProbeRegistry
    waker: Waker | None = None
    limits: MonitorLimits = field(default_factory=MonitorLimits)

    async def start(self, monitor_id: str, generation: int = 0) -> str:
        """Start the monitor's workflow of ``generation`` (see the module); its id."""
        workflow_id = monitor_id if generation == 0 else f"{monitor_id}.{generation}"
        looks = self.limits.looks_per_workflow
        await self.engine.start_workflow(MONITOR_WATCH, workflow_id, monitor_id, generation, looks)
        return workflow_id

    async def wake(self, monitor_id: str) -> None:
        """Wake the monitor's timer (every unfinished workflow of it) so it looks at its record
        again (a failure is logged: the timer then looks at its next interval)."""
        try:
            for workflow in await self.engine.list_pending(MONITOR_WATCH.name, id_prefix=monitor_id):
                await self.engine.send(workflow.workflow_id, {"kind": "wake"}, WAKE_TOPIC)
        except Exception:  # the engine's own error types are dbos's; the record is the truth
            log.exception("monitor %s: its workflow could not be woken", monitor_id)

    # ------------------------------------------------------------------ steps

    async def check(self, monitor_id: str) -> dict[str, Any]:
        """One look: ``{"next": "wait", "seconds"}``, ``{"next": "fire"}`` or ``{"next": "end", "status"}``."""
        monitor = await in_thread(self.store.get_monitor, monitor_id)
        now = self.store.now()
        if monitor.status in (_READY, _DELIVERING):
            return {"next": "fire"}
        if not monitor.status.active:
            return {"next": "end", "status": monitor.status.value}
        remaining = (monitor.deadline_at - now).total_seconds()
        if monitor.source.get("kind") == "time":
            if remaining > 0 or monitor.status is _PAUSED:
                return _wait(remaining if remaining > 0 else self.limits.max_deadline_s)
            return await self._matched(
                monitor, {"at": now.isoformat(), "state": "match", "value": {"now": now.isoformat()}}
            )
        if remaining <= 0:
            return {"next": "fire"}
        if monitor.status is _PAUSED:
            return _wait(remaining)
        observation, fields = await self._observe(monitor, now)
        if observation["state"] == Verdict.MATCH:
            return await self._matched(monitor, observation)
        await in_thread(
            lambda: self.store.note_monitor_check(
                monitor_id, expect=(_ARMED,), last_observation=observation, **fields
            )
        )
        return _wait(min(monitor.interval_seconds, remaining))

    async def claim(self, monitor_id: str) -> bool:
        """Claim the delivery: ``ready`` -> ``delivering`` (fired ``match``), ``armed``/``paused`` at
        the deadline -> ``delivering`` (fired ``timeout``); True also when it is ``delivering``
        already (a claim the engine did not record before a restart). False when it ended."""
        monitor = await in_thread(self.store.get_monitor, monitor_id)
        if monitor.status is _DELIVERING:
            return True
        fired = "match" if monitor.status is _READY else "timeout"
        try:
            await in_thread(
                lambda: self.store.move_monitor(
                    monitor_id, _DELIVERING, expect=(_READY, _ARMED, _PAUSED), fired=fired
                )
            )
        except ConflictError:
            return False  # cancelled meanwhile
        return True

    async def deliver(self, monitor_id: str) -> str:
        """Wake the owner's session once; the monitor ends ``completed`` (a match), ``timed_out``
        (the deadline) or ``blocked`` (refused: the error says why). Never raises for a refusal: the
        failure is recorded on the monitor."""
        monitor = await in_thread(self.store.get_monitor, monitor_id)
        try:
            session = await in_thread(self.store.get_session, monitor.session_id)
            if session.space_id is not None:
                raise ForbiddenError("monitors are personal: a monitor's run is refused in a shared space")
            if self.waker is None:
                raise OctipusError("this daemon cannot deliver monitors: it has no run manager")
            fresh = await self._fresh(monitor)
            delivery = await self.waker.wake(monitor.session_id, wake_text(monitor, fresh))
        except OctipusError as exc:
            return await self._blocked(monitor_id, f"the delivery was refused: {exc.message}")
        except Exception as exc:  # recorded as the monitor's error (evidence), with the traceback logged
            log.exception("monitor %s: the delivery failed", monitor_id)
            return await self._blocked(monitor_id, f"the delivery failed: {type(exc).__name__}: {exc}")
        end = MonitorStatus.TIMED_OUT if monitor.fired == "timeout" else MonitorStatus.COMPLETED
        delivery["at"] = self.store.now().isoformat()
        moved = await in_thread(
            lambda: self.store.move_monitor(monitor_id, end, expect=(_DELIVERING,), delivery=delivery)
        )
        log.info(
            "monitor %s delivered (%s) into session %s", monitor_id, delivery["mode"], monitor.session_id
        )
        return moved.status.value

    async def block(self, monitor_id: str) -> str:
        """A delivery cut off (the restart guard answered ``interrupted``): ``blocked``, unless the
        stop came after the delivery's end was recorded (the monitor keeps that end)."""
        monitor = await in_thread(self.store.get_monitor, monitor_id)
        if monitor.status is not _DELIVERING:
            return monitor.status.value
        return await self._blocked(monitor_id, CUT_OFF)

    # ------------------------------------------------------------------ helpers

    async def _blocked(self, monitor_id: str, reason: str) -> str:
        log.warning("monitor %s blocked: %s", monitor_id, reason)
        moved = await in_thread(
            lambda: self.store.move_monitor(
                monitor_id, MonitorStatus.BLOCKED, expect=(_DELIVERING,), error=reason
            )
        )
        return moved.status.value

    async def _matched(self, monitor: Monitor, observation: dict[str, Any]) -> dict[str, Any]:
        try:
            await in_thread(
                lambda: self.store.move_monitor(
                    monitor.id, _READY, expect=(_ARMED,), match=observation, last_observation=observation
                )
            )
        except ConflictError:
            return _wait(0.0)  # paused or cancelled meanwhile: look again
        return {"next": "fire"}

    async def _read(self, name: str, args: dict[str, Any], monitor: Monitor) -> Any:
        return await self.probes.read(name, args, owner_of(monitor))

    async def _observe(self, monitor: Monitor, now: datetime) -> tuple[dict[str, Any], dict[str, Any]]:
        """Read the source and judge it: the observation and the fields to record beside it."""
        at = now.isoformat()
        condition = parse_condition(monitor.condition) if monitor.condition else None
        fields: dict[str, Any] = {}
        try:
            if monitor.source.get("kind") == "event":
                event, cursor = await self._events(monitor, condition)
                if cursor != monitor.cursor:
                    fields["cursor"] = cursor
                if event is not None:
                    return {"at": at, "state": Verdict.MATCH.value, "value": event}, fields
                fallback = monitor.source.get("fallback")
                if fallback is None or condition is None:
                    return {"at": at, "state": Verdict.NO_MATCH.value}, fields
                result = await self._read(fallback["name"], fallback["args"], monitor)
            else:
                result = await self._read(monitor.source["name"], monitor.source["args"], monitor)
        except OctipusError as exc:
            return {"at": at, "state": "error", "error": exc.message}, fields
        except Exception as exc:  # recorded as the observation (evidence), with the traceback logged
            log.exception("monitor %s: its probe failed", monitor.id)
            return {"at": at, "state": "error", "error": f"{type(exc).__name__}: {exc}"}, fields
        assert condition is not None
        baseline = monitor.baseline["value"] if monitor.baseline is not None else NO_BASELINE
        judged = judge(condition, result, baseline)
        if judged.verdict is Verdict.BASELINE:
            fields["baseline"] = {"value": judged.observed}
        return _observation(at, judged, result), fields

    async def _events(self, monitor: Monitor, condition: Any) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """The first new event of the owner's session the condition matches (any, without one), and
        the cursor after what was read."""
        cursor = dict(monitor.cursor)
        if monitor.source["type"] == "pipeline_status":
            events = await in_thread(
                lambda: self.store.session_pipeline_changes(
                    monitor.session_id,
                    after=int(cursor.get("pipelineEvent") or 0),
                    limit=self.limits.events_per_check,
                )
            )
        else:
            ended = cursor.get("runEnded")
            events = await in_thread(
                lambda: self.store.session_runs_ended(
                    monitor.session_id,
                    created_after=monitor.created_at,
                    ended_after=datetime.fromisoformat(ended) if isinstance(ended, str) else None,
                    limit=self.limits.events_per_check,
                )
            )
        for event in events:
            if "cursor" in event:
                cursor["pipelineEvent"] = event.pop("cursor")
            else:
                cursor["runEnded"] = event["at"]
            event = {"type": monitor.source["type"], **event}
            if condition is None or judge(condition, event).verdict is Verdict.MATCH:
                return event, cursor
        return None, cursor

    async def _fresh(self, monitor: Monitor) -> dict[str, Any] | None:
        """A fresh read at delivery (or its error); None for a time source or an event source
        without a fallback tool (nothing to read again)."""
        source = monitor.source
        probe = source if source.get("kind") == "tool" else source.get("fallback")
        at = self.store.now().isoformat()
        if probe is None:
            return {"at": at, "note": "nothing to read again (this source has no tool)"}
        try:
            return {"at": at, "value": await self._read(probe["name"], probe["args"], monitor)}
        except OctipusError as exc:
            return {"at": at, "error": f"the refresh failed: {exc.message}"}
        except Exception as exc:  # delivered beside the match (evidence), with the traceback logged
            log.exception("monitor %s: its refresh failed", monitor.id)
            return {"at": at, "error": f"the refresh failed: {type(exc).__name__}: {exc}"}


def _wait(seconds: float) -> dict[str, Any]:
    return {"next": "wait", "seconds": max(0.0, seconds)}


def _observation(at: str, judged: Judgement, result: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"at": at, "state": judged.verdict.value}
    if judged.verdict is Verdict.UNAVAILABLE:
        out["note"] = "the condition's path is missing from the result: unavailable, not a change"
    else:
        out["observed"] = judged.observed
    out["value"] = result
    return out


#: The watcher the workflows of this process use (set by :func:`install_watcher`).
_ACTIVE: list[MonitorWatcher] = []


def install_watcher(watcher: MonitorWatcher) -> None:
    """Make ``watcher`` the one the monitor workflows of this process reach."""
    _ACTIVE.clear()
    _ACTIVE.append(watcher)


def active_watcher() -> MonitorWatcher:
    """The installed watcher.

    Raises:
        OctipusError: None is installed (the composition root installs it before the engine starts).
    """
    if not _ACTIVE:
        raise OctipusError("no monitor watcher is installed in this process")
    return _ACTIVE[-1]


async def monitor_watch(monitor_id: str, generation: int = 0, looks: int = 0) -> str:
    """The workflow: watch the monitor ``monitor_id`` until it fires or ends, or, after ``looks``
    looks (0: no bound), start its next ``generation`` and end (see the module); returns the
    monitor's final status, or ``continued by <workflow id>``. The bound is an argument, not read
    from the limits, so a recovered workflow replays the same steps."""
    watcher = active_watcher()
    engine = watcher.engine
    look = 0
    while True:
        tick = await engine.step("check", watcher.check, monitor_id)
        if tick["next"] == "end":
            return str(tick["status"])
        if tick["next"] == "fire":
            break
        await engine.wait_for_message(WAKE_TOPIC, float(tick["seconds"]))
        look += 1
        if look == looks:
            return f"continued by {await watcher.start(monitor_id, generation + 1)}"
    if not await engine.step("claim", watcher.claim, monitor_id):
        return "cancelled"
    outcome = await engine.guarded_step("deliver", watcher.deliver, monitor_id)
    if isinstance(outcome, Interrupted):
        return await engine.step("block", watcher.block, monitor_id)
    return outcome.value


#: The monitor workflow, registered with the durable engine at composition.
MONITOR_WATCH: WorkflowDef[[str, int, int], str] = WorkflowDef("octipus.monitor_watch", monitor_watch)
