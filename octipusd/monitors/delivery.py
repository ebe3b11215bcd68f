"""How a monitor wakes its owner's session (FACTS.md §7, seed 003's monitor paragraph).

The wake-up continues the owner's session: when its root run is live (busy, e.g. collecting
results), the text is steered into that run (:meth:`RunManager.steer`: on the vendor's stdin, or
queued for its run context; never queued behind its turn); otherwise it is a new turn
(:meth:`RunManager.post_turn`) that runs unattended: an ASK in it is refused and notified
("review required"), nothing is granted. A session between the two (its run ending as it is
steered, starting as a turn is posted) is tried again, up to :attr:`MonitorLimits.delivery_tries`.

The text carries the original match (or, for a timeout, the last observation) beside a fresh
observation read at delivery (or the refresh's error), so an old match is never mistaken for the
current state.
"""

from __future__ import annotations

import json
from typing import Any, Final, Protocol

import anyio

from octipusd.errors import ConflictError
from octipusd.monitors.spec import MonitorLimits
from octipusd.runtime.manager import RunManager
from octipusd.store.monitor_records import Monitor

__all__ = ["SessionWaker", "Waker", "wake_text"]

#: Characters of one observation's JSON in the wake-up text at most.
OBSERVATION_CHARS: Final = 8_000


def _shown(observation: dict[str, Any] | None) -> str:
    if observation is None:
        return "(none)"
    text = json.dumps(observation, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= OBSERVATION_CHARS else text[:OBSERVATION_CHARS] + " ...(cut)"


def wake_text(monitor: Monitor, fresh: dict[str, Any] | None) -> str:
    """The wake-up's text: what fired, the original match or last observation, the fresh one."""
    source = monitor.source
    watched = (
        f"tool {source.get('name')} {json.dumps(source.get('args') or {}, sort_keys=True)}"
        if source.get("kind") == "tool"
        else f"event {source.get('type')}"
        if source.get("kind") == "event"
        else f"time {source.get('at')}"
    )
    condition = json.dumps(monitor.condition, sort_keys=True) if monitor.condition else "none"
    if monitor.fired == "timeout":
        head = f"[Octipus monitor {monitor.id}] timed out at its deadline {monitor.deadline_at.isoformat()} without a match."
        first = f"Last observation: {_shown(monitor.last_observation)}"
    else:
        head = f"[Octipus monitor {monitor.id}] matched."
        first = f"Original match: {_shown(monitor.match)}"
    lines = [
        head,
        f"Watched: {watched}; condition: {condition}.",
        first,
        f"Fresh observation: {_shown(fresh)}",
    ]
    if monitor.continuation:
        lines.append(f"Continuation (what you asked to do now): {monitor.continuation}")
    return "\n".join(lines)


class Waker(Protocol):
    """Delivers a monitor's wake-up into its owner's session (:class:`SessionWaker`)."""

    async def wake(self, session_id: str, text: str) -> dict[str, Any]:
        """Deliver ``text``; answers how (``{"mode", "runId", ...}``).

        Raises:
            OctipusError: The session could not be woken (the monitor is then ``blocked``).
        """
        ...


class SessionWaker:
    """Delivers a wake-up into a session through the run manager (see the module).

    Args:
        runs: The run manager.
        limits: The monitors' limits (the retries).
    """

    def __init__(self, runs: RunManager, limits: MonitorLimits) -> None:
        self.runs = runs
        self.limits = limits

    async def wake(self, session_id: str, text: str) -> dict[str, Any]:
        """Steer the session's live root run, else post an unattended turn; tried again while the
        session is between the two.

        Returns:
            ``{"mode": "steer", "runId", "via": "stdin"|"queued"}`` or ``{"mode": "turn", "runId"}``.

        Raises:
            ConflictError: Every try found the session busy in another way, or the daemon is stopping
                (the last refusal's message).
            NotFoundError, ForbiddenError: The session is gone, or a space's role refuses the turn.
        """
        last: ConflictError | None = None
        for _ in range(self.limits.delivery_tries):
            try:
                woke = await self.runs.continue_unattended(session_id, text)
            except ConflictError as exc:
                last = exc
                await anyio.sleep(self.limits.delivery_retry_s)
                continue
            if woke["mode"] == "steer":
                return {"mode": "steer", "runId": woke["run_id"], "via": woke["delivery"]}
            return {"mode": "turn", "runId": woke["run_id"]}
        assert last is not None
        raise ConflictError(
            f"the session could not be woken after {self.limits.delivery_tries} tries: {last.message}"
        )
