"""Child agents of one run (seed 003 "Plans, feedback and delegation").

A child is a run of its own (``parent_run_id``, ``role``, ``resume_key``) on the session's
adapter and model, in the parent's permission and plan mode, with its own bridge and the child
tool set, executed by a :class:`~octipusd.runtime.supervisor.RunSupervisor` whose parent is this
run. A waiting ``spawn_child`` or ``collect_children`` is a delegation wait (excluded from the
active-work time). Children still pending when the parent ends are cancelled. User guidance for
the run interrupts a pending ``collect_children`` wait without cancelling or steering any child
(seed 003): the call returns at once with the guidance, the children stay pending.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio

from octipusd.errors import ConflictError, InvalidRequestError
from octipusd.runtime.child_task import ChildTask, new_child
from octipusd.runtime.invocation import Attempt
from octipusd.runtime.levels import admit_child
from octipusd.runtime.outcome import result_failed
from octipusd.runtime.steering import submit
from octipusd.store.records import RunStatus
from octipusd.toolkit import ChildRequest

if TYPE_CHECKING:
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = ["Delegation"]


class Delegation:
    """The children of one run, their summaries, and the waits for them.

    Attributes:
        waiting: Delegation waits in progress (the watchdog does not count their time).
        summary: This run's own summary for its parent, once it ended.
        summary_ready: Set when :attr:`summary` is.
    """

    def __init__(self, supervisor: RunSupervisor) -> None:
        self._run = supervisor
        self._children: list[RunSupervisor] = []
        self._detached: dict[str, RunSupervisor] = {}
        self.waiting = 0
        self._collect_waits: set[anyio.CancelScope] = set()
        self._interrupted: set[anyio.CancelScope] = set()  # waits that guidance ended
        self.summary: dict[str, Any] | None = None
        self.summary_ready = anyio.Event()

    def live_children(self) -> list[RunSupervisor]:
        """The children still running."""
        return list(self._children)

    def interrupt_collect(self) -> None:
        """User guidance arrived: end the pending ``collect_children`` waits now (children go on)."""
        for scope in self._collect_waits:
            self._interrupted.add(scope)
            scope.cancel()

    def pending(self) -> list[dict[str, Any]]:
        """The still-pending children, as the run context lists them."""
        return [{"childRunId": c.run.id, "role": c.role, "status": str(c.run.status)} for c in self._children]

    def _refuse_if_stopping(self) -> None:
        """A parent being stopped gets no child result to act on (its children were stopped too)."""
        parent = self._run
        if parent.stop_status is not None:
            raise ConflictError(
                f"run {parent.run.id} is being stopped ({parent.stop_reason}); its children were stopped with it"
            )

    async def spawn(self, request: ChildRequest) -> dict[str, Any]:
        """Run one child agent to its end, or start it detached (``spawn_child``).

        Returns:
            The child's summary, or ``{"childRunId", "role", "status": "running", "detached": true}``.

        Raises:
            ConflictError: the parent run is not live or is stopping.
            InvalidRequestError: a limit of ``swarm.levelDefaults`` refuses the child (depth, fan-out,
                uncollected detached children, token budget or time limit; :func:`admit_child`).
        """
        parent = self._run
        if parent.registry.get(parent.run.id) is None or parent.ending is not None:
            why = parent.ending or "it ended"
            raise ConflictError(f"run {parent.run.id} is not live ({why}); a child needs a running parent")
        request = admit_child(  # the child level's token budget and time limit applied
            parent.services.swarm.levelDefaults,
            depth=parent.depth,
            alive=len(self._children),
            uncollected_detached=len(self._detached),
            request=request,
        )
        child = await new_child(parent, request)
        run = child.run
        self._children.append(child)
        started = False
        try:
            await parent.services.hub.emit(
                parent.run.id,
                "child_spawned",
                {
                    "child_run_id": run.id,
                    "role": request.role,
                    "resume_key": request.resume_key,
                    "detach": request.detach,
                },
            )
            if request.detach:
                self._detached[run.id] = child
                parent.registry.start_soon(self._run_child, child)
                started = True
                return {"childRunId": run.id, "role": request.role, "status": "running", "detached": True}
            self.waiting += 1
            parent.services.admission.changed()  # a run waiting on its children holds no slot
            try:
                started = True
                summary = await self._run_child(child)
            finally:
                self.waiting -= 1
        finally:
            if not started:  # cancelled or failed before the child ran: it must not stay registered
                with contextlib.suppress(ValueError):
                    self._children.remove(child)
                self._detached.pop(run.id, None)
                await child.abandon("its parent's spawn_child call ended before the child started")
        self._refuse_if_stopping()
        return summary

    async def _run_child(self, child: RunSupervisor) -> dict[str, Any]:
        """Run a spawned child to its end (:class:`~octipusd.runtime.child_task.ChildTask`: its tree,
        setup, attempts and gates, worktree finish) and return the summary it published."""
        return await ChildTask(child, self._track, self._untrack).run()

    def _track(self, child: RunSupervisor) -> None:
        """A contract retry of a child starts: it is live (stopped with this run, listed pending,
        counted in the fan-out) in place of the attempt it replaces."""
        self._children.append(child)

    def _untrack(self, child: RunSupervisor) -> None:
        """An attempt of a child is over: it ended, or a retry replaced it, or its task ended."""
        with contextlib.suppress(ValueError):
            self._children.remove(child)

    async def collect(self, child_run_ids: Sequence[str] | None, timeout_seconds: float) -> dict[str, Any]:
        """Wait for detached children and hand out their summaries, each once (``collect_children``).

        Children still running at the deadline, or when user guidance interrupts the wait, are listed
        as pending; an interrupted answer carries ``interrupted`` and the queued guidance.

        Raises:
            ConflictError: the run is not live (or is stopping).
            InvalidRequestError: an id that is not an uncollected detached child of this run.
        """
        parent = self._run
        if parent.registry.get(parent.run.id) is None:
            raise ConflictError(f"run {parent.run.id} is not live")
        targets = list(child_run_ids) if child_run_ids is not None else list(self._detached)
        unknown = [cid for cid in targets if cid not in self._detached]
        if unknown:
            raise InvalidRequestError(
                f"childRunIds: {', '.join(unknown)} is not an uncollected detached child of this run "
                f"(uncollected: {', '.join(self._detached) or 'none'})"
            )
        self.waiting += 1
        parent.services.admission.changed()  # its queued children may start now
        scope = anyio.move_on_after(timeout_seconds)
        self._collect_waits.add(scope)
        try:
            with scope:
                for cid in targets:
                    await self._detached[cid].delegation.summary_ready.wait()
        finally:
            self._collect_waits.discard(scope)
            self.waiting -= 1
        interrupted = scope in self._interrupted
        self._interrupted.discard(scope)
        self._refuse_if_stopping()
        children: list[dict[str, Any]] = []
        pending: list[dict[str, Any]] = []
        for cid in targets:
            child = self._detached[cid]
            if child.delegation.summary is not None:
                children.append(child.delegation.summary)
                del self._detached[cid]
            else:
                pending.append({"childRunId": cid, "role": child.role, "status": str(child.run.status)})
        if interrupted:
            return {
                "children": children,
                "pending": pending,
                "interrupted": "user guidance arrived; the children go on: handle the guidance, then collect "
                "them again (or steer_child one of them)",
                "guidance": parent.steering.queued(),
            }
        return {"children": children, "pending": pending}

    async def steer(self, child_run_id: str, text: str) -> dict[str, Any]:
        """Give guidance to one of this run's own children that still runs (``steer_child``).

        It reaches the child as user guidance reaches a root run
        (:func:`~octipusd.runtime.steering.submit`): into the child's running turn where its vendor
        takes live input, else queued in its run context and for a follow-up; a pending
        ``collect_children`` wait of the child returns. The guidance is the child's, never stored in
        the session's history.

        Returns:
            ``{"childRunId": ..., "delivery": "stdin" | "queued"}``.

        Raises:
            ConflictError: this run is not live or is stopping, or the child is ending.
            InvalidRequestError: ``child_run_id`` is not a child of this run that still runs.
        """
        parent = self._run
        if parent.registry.get(parent.run.id) is None:
            raise ConflictError(f"run {parent.run.id} is not live")
        self._refuse_if_stopping()
        child = next((c for c in self._children if c.run.id == child_run_id), None)
        if child is None:
            running = ", ".join(c.run.id for c in self._children) or "none"
            raise InvalidRequestError(
                f"childRunId: {child_run_id} is not a child of this run that still runs (its running "
                f"children: {running}); a parent steers only its own children, and an ended child's "
                "result is collected with collect_children"
            )
        ending = child.ending or child.steering.closed
        if ending is not None:
            raise ConflictError(
                f"child run {child_run_id} is ending ({ending}); collect its result with collect_children"
            )
        return {"childRunId": child_run_id, "delivery": await submit(child, text)}

    def uncollected(self) -> list[str]:
        """The detached children whose results the run has not collected (running or ended)."""
        return list(self._detached)

    async def append_uncollected(self, attempt: Attempt) -> None:
        """The vendor ended without collecting its detached children and no follow-up turn can: wait
        for them (at most ``RunLimits.children_end_s``) and add their results to the run's answer
        (issue 15: an adapter that reports only at completion gets them appended). Children still
        running then are cancelled by :meth:`end_children`; a failed answer gets nothing."""
        if attempt.result is None or result_failed(attempt.result) or not self._detached:
            return
        with anyio.move_on_after(self._run.services.limits.children_end_s):
            for child in list(self._detached.values()):
                await child.delegation.summary_ready.wait()
        lines = []
        for cid, child in list(self._detached.items()):
            summary = child.delegation.summary
            if summary is None:
                lines.append(f"- {cid} ({child.role}): still running; it is cancelled as the run ends")
                continue
            del self._detached[cid]  # handed out here, once
            outcome = summary.get("result") or summary.get("reason") or "no answer"
            lines.append(f"- {cid} ({child.role}, {summary['status']}): {outcome}")
        attempt.answers.append(
            "[Octipus] Results of the child agents the run did not collect:\n" + "\n".join(lines)
        )

    async def end_children(self) -> None:
        """At the parent's end: cancel the pending children (seed 003) and report the uncollected."""
        parent = self._run
        pending = list(self._children)
        for child in pending:
            await child.stop(
                RunStatus.CANCELLED, f"its parent run {parent.run.id} ended before collecting it"
            )
        if pending:
            with anyio.move_on_after(parent.services.limits.children_end_s):
                for child in pending:
                    await child.delegation.summary_ready.wait()
        uncollected = [
            c.delegation.summary for c in self._detached.values() if c.delegation.summary is not None
        ]
        if uncollected:
            await parent.services.hub.emit(parent.run.id, "children_uncollected", {"children": uncollected})
