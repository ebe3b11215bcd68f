"""One spawned child from where it works to its summary: its attempts, gates and worktree finish.

Seed 003 "Plans, feedback and delegation", "Optional git worktree per coding child" and the
command scorers of "Permissions and limits". A spawned child is a :class:`ChildTask`: its tree is
decided first (:mod:`octipusd.runtime.child_tree`), ``swarm.worktreeSetupCommand`` runs in a new
worktree, then the child runs. A child that ended ``succeeded`` with gates has them run in its tree
(:mod:`octipusd.runtime.gates`); a fixable failure is retried (``swarm.contractRetries``) as a new
child run of the same parent, in the same tree, with the failure appended to its brief. At the end
its worktree is finished (merged only when it ended ok and passed its gates), the receipt stored on
every attempt's run, and one summary handed to the parent under the first attempt's id.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from octipusd.errors import OctipusError
from octipusd.runtime.child_tree import ChildTree, finish_tree, prepare_tree, tree_notes, watch_tree
from octipusd.runtime.gates import GateVerdict, caller_of, run_gates, run_setup_command
from octipusd.store.aio import in_thread
from octipusd.store.records import Run, RunStatus
from octipusd.toolkit import ChildRequest

if TYPE_CHECKING:
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = ["ChildTask", "new_child"]

log = logging.getLogger("octipusd.runtime.child_task")

_RETRY_NOTE = (
    "\n\n[Octipus] Your previous attempt (run {run}) finished but did not pass its gate checks. Fix "
    "what they report, in the same working tree (your earlier changes are still there), then finish "
    "again:\n{reason}"
)
_SETUP_NOTE = (
    "\n\n[Octipus] The worktree setup command failed before you started ({reason}); dependencies "
    "it installs may be missing."
)


async def new_child(parent: RunSupervisor, request: ChildRequest, tree: Path | None = None) -> RunSupervisor:
    """Store a child run of ``parent`` for ``request`` (status ``queued``) and register its supervisor.

    Raises:
        StoreError: the run could not be stored (nothing is registered).
    """
    store = parent.services.store
    run = await in_thread(
        lambda: store.create_run(
            session_id=parent.session_id,
            prompt=request.brief,
            owner=parent.services.owner,
            plan_mode=parent.run.plan_mode,
            parent_run_id=parent.run.id,
            role=request.role,
        )
    )
    child = parent.child(run, request, tree=tree)
    parent.registry.add(child)
    return child


class ChildTask:
    """The life of one spawned child (see the module).

    Args:
        handle: The first attempt's supervisor; the parent knows the child by its run id.
        track: Called with each retry's supervisor when it starts (the parent lists it as live).
        untrack: Called with each attempt's supervisor when it ended.
    """

    def __init__(
        self,
        handle: RunSupervisor,
        track: Callable[[RunSupervisor], None],
        untrack: Callable[[RunSupervisor], None],
    ) -> None:
        assert handle.parent is not None and handle.child_request is not None, "a child run"
        self.handle = handle
        self.parent: RunSupervisor = handle.parent
        self.brief = handle.child_request.brief
        self._track = track
        self._untrack = untrack
        self.tree = ChildTree()
        self.attempts: list[RunSupervisor] = [handle]
        self.verdict: GateVerdict | None = None
        #: Why Octipus itself could not carry the task on (a store or git failure), or None.
        self.error: str | None = None
        #: The task was cancelled (its parent stopped, the daemon shutting down): nothing is merged.
        self.cancelled = False
        #: Run ids of the attempts that began executing (the others are abandoned at the end).
        self.executed: set[str] = set()
        self.gated = bool(handle.child_request.gates)

    async def run(self) -> dict[str, Any]:
        """Run the child to its end (retries included) and return its summary; shielded at the end.

        Never raises but cancellation: whatever happens, the worktree is finished, the receipt
        stored, the summary set on the handle and published to the parent as ``child_finished``.
        A failure of Octipus itself (a store or git error, a bug) ends the task there: it is
        logged and named in the receipt's notes, and a child that has not run is abandoned.
        """
        handle, parent = self.handle, self.parent
        current = handle
        try:
            with anyio.CancelScope(shield=True):  # its thread cannot be stopped: keep what it made
                self.tree = await prepare_tree(parent, handle.role)
            await anyio.lowlevel.checkpoint()  # a cancel that came meanwhile lands here
            handle.tree = self.tree.path
            await self._announce()
            await self._setup()
            while True:
                self.executed.add(current.run.id)
                await self._execute(current)
                self.verdict = await self._verify(current)
                if not self._retry_due(current):
                    break
                current = await self._retry(current)
        except anyio.get_cancelled_exc_class():
            self.cancelled = True  # whatever it did is committed and kept, never merged
            raise
        except OctipusError as exc:  # recorded on the receipt; the parent still gets a summary
            log.warning("child task of run %s: %s", handle.run.id, exc.message)
            self.error = exc.message
        except Exception as exc:  # a bug must not take the daemon's task group down with it
            log.exception("child task of run %s crashed", handle.run.id)
            self.error = f"internal error: {exc!r}"
        finally:
            with anyio.CancelScope(shield=True):
                summary = await self._end(self.attempts[-1])
        return summary

    async def _end(self, last: RunSupervisor) -> dict[str, Any]:
        """End the task (shielded by the caller): abandon attempts that never ran, conclude, and
        publish the summary; the summary is set on the handle whatever fails."""
        summary: dict[str, Any] = {
            "childRunId": self.handle.run.id,
            "role": self.handle.role,
            "status": str(RunStatus.FAILED),
            "reason": "Octipus failed while ending the child (see the daemon's log)",
        }
        try:
            for attempt in self.attempts:
                if attempt.run.id not in self.executed:
                    await attempt.abandon("its parent's call ended before the child started")
                self._untrack(attempt)
            summary = await self._conclude(last)
        except Exception:  # the parent must still get an answer; the failure is in the log
            log.exception("ending child task %s failed", self.handle.run.id)
        finally:
            self.handle.delegation.summary = summary
            self.handle.delegation.summary_ready.set()
        parent = self.parent
        with contextlib.suppress(OctipusError):
            await parent.services.hub.emit(
                parent.run.id, "child_finished", {"child_run_id": summary["childRunId"], **summary}
            )
        return summary

    async def _announce(self) -> None:
        """A notice on the child's run: the worktree it works in, or why it runs elsewhere."""
        tree, child = self.tree, self.handle
        if tree.worktree is not None:
            wt = tree.worktree
            await child.notice(
                f"works in its own worktree {wt.path} on branch {wt.branch} (base {wt.base_sha[:12]})",
                worktree=wt.id,
            )
        elif tree.skipped is not None:
            await child.notice(f"works in {tree.path or 'the shared tree'}: {tree.skipped}")

    async def _setup(self) -> None:
        """Run ``swarm.worktreeSetupCommand`` in a new worktree; a failure is told to the child."""
        command, worktree = self.parent.services.swarm.worktreeSetupCommand, self.tree.worktree
        if command is None or worktree is None:
            return
        child = self.handle
        setup = self.tree.setup = await run_setup_command(
            child.services, caller_of(child), tree=worktree.path, command=command
        )
        passed = setup.get("status") == "passed"
        await child.notice(
            f"worktree setup command {'passed' if passed else 'failed'}: {command}",
            setup=setup,
        )
        if not passed:
            why = setup.get("reason") or f"exit code {setup.get('exitCode')}"
            note = _SETUP_NOTE.format(reason=why)
            child.brief_note = note

    @staticmethod
    async def _execute(child: RunSupervisor) -> None:
        """Execute ``child``; while it runs in a worktree, halt it if the worktree disappears."""
        path = child.tree
        if path is None:
            await child.execute()
            return
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_tree, child, path)
            await child.execute()
            tg.cancel_scope.cancel()

    async def _verify(self, child: RunSupervisor) -> GateVerdict | None:
        """Run the gates of a child that ended ``succeeded``; None when there is nothing to verify."""
        request = child.child_request
        if request is None or not request.gates or child.run.status != RunStatus.SUCCEEDED:
            return None
        tree = child.tree or (Path(child.identity.workspace) if child.identity is not None else None)
        if tree is None:
            return None
        verdict = await run_gates(child.services, caller_of(child), tree=tree, gates=request.gates)
        state = "passed" if verdict.passed else "failed"
        await child.notice(f"gate checks {state}" + (f": {verdict.reason}" if verdict.reason else ""))
        return verdict

    def _retry_due(self, child: RunSupervisor) -> bool:
        """Whether a failed verification retries the child (``swarm.contractRetries`` not used up)."""
        verdict = self.verdict
        if verdict is None or verdict.passed or not verdict.retry:
            return False
        if len(self.attempts) > self.parent.services.swarm.contractRetries:
            return False
        return self.parent.ending is None and child.stop_status is None

    async def _retry(self, previous: RunSupervisor) -> RunSupervisor:
        """Start the next attempt: a new child run of the parent, in the same tree, told why."""
        parent, verdict = self.parent, self.verdict
        assert previous.child_request is not None and verdict is not None
        request = dataclasses.replace(
            previous.child_request,
            brief=self.brief + _RETRY_NOTE.format(run=previous.run.id, reason=verdict.reason),
        )
        child = await new_child(parent, request, tree=self.tree.path)
        self.attempts.append(child)
        self._untrack(previous)  # one logical child stays listed as alive: its current attempt
        self._track(child)
        retries = self.parent.services.swarm.contractRetries
        await parent.services.hub.emit(
            parent.run.id,
            "child_spawned",
            {"child_run_id": child.run.id, "role": request.role, "retry_of": self.handle.run.id},
        )
        await child.notice(
            f"contract retry {len(self.attempts) - 1} of at most {retries} (swarm.contractRetries) of "
            f"child {self.handle.run.id}: its gates failed",
        )
        return child

    def _gates_note(self, verdict: GateVerdict) -> str:
        """The note of a child that did not pass its gates: which failed, and why it was not retried."""
        failed = [
            f"{r.get('name')} {r.get('status')} ({r.get('reason')})"
            for r in verdict.results
            if r.get("status") != "passed" and r.get("required", True)
        ]
        if verdict.retry:  # it asked for a retry the task could not give
            retries = self.parent.services.swarm.contractRetries
            why = f"no retry left after {len(self.attempts)} attempt(s) (swarm.contractRetries is {retries})"
        else:
            why = verdict.reason.splitlines()[0] if verdict.reason else "not retryable"
        return f"did not pass its gates: {'; '.join(failed) or 'see gates'}; {why}"

    def _not_merged_because(self, final: Run, verified: bool) -> str | None:
        """Why the child's branch was not offered for a merge, or None when it was."""
        if self.cancelled:
            return "the child was stopped before it was done"
        if self.error is not None:
            return "Octipus could not carry the child on"
        if final.status != RunStatus.SUCCEEDED:
            return f"the child ended {final.status}"
        if not verified:
            return "it did not pass its gates"
        return None

    async def _conclude(self, final_attempt: RunSupervisor) -> dict[str, Any]:
        """Finish the worktree, store the receipt on every attempt, build the summary (call shielded)."""
        services = self.parent.services
        final, verdict = final_attempt.run, self.verdict
        succeeded = final.status == RunStatus.SUCCEEDED
        verified = not self.gated or (verdict is not None and verdict.passed)
        ok = succeeded and verified and self.error is None and not self.cancelled
        worktree = await finish_tree(services.worktrees, self.tree, ok=ok)
        notes = tree_notes(worktree, self._not_merged_because(final, verified))
        unverified = None
        if succeeded and not verified:
            unverified = (
                self._gates_note(verdict)
                if verdict is not None
                else "its gate checks did not run to the end (the child was stopped)"
            )
            notes.insert(0, unverified)
        if self.error is not None:
            notes.insert(0, f"Octipus could not carry the child on: {self.error}")
        receipt: dict[str, Any] = {
            "worktree": worktree,
            "worktreeSkipped": self.tree.skipped if self.tree.worktree is None else None,
            "setup": self.tree.setup,
            "gates": verdict.results if verdict is not None else [],
            "attempts": [a.run.id for a in self.attempts],
            "notes": notes,
        }
        receipt = _valid_text(receipt)  # git output may carry bytes that are not UTF-8
        for attempt in self.attempts:
            try:
                stored = await in_thread(services.store.set_run_receipt, attempt.run.id, receipt)
            except OctipusError as exc:  # the summary still reaches the parent; this receipt is lost
                log.warning("storing the receipt of child run %s failed: %s", attempt.run.id, exc.message)
                continue
            if attempt is final_attempt:
                final = stored
        failure = None
        if self.error is not None:
            failure = f"Octipus could not carry the child on: {self.error}"
        elif unverified is not None:
            failure = "it did not pass its gates (see notes and gates)"
        return _summary(self.handle, final_attempt, final, receipt, failure)


def _summary(
    handle: RunSupervisor, last: RunSupervisor, final: Run, receipt: dict[str, Any], failure: str | None
) -> dict[str, Any]:
    """The child's summary for its parent, under the first attempt's id; ``failure``: why the child
    counts as failed although its last run may have succeeded (gates not passed, Octipus failed)."""
    status = str(final.status) if failure is None else str(RunStatus.FAILED)
    reason = final.reason if failure is None else failure
    optional = {
        key: receipt[key] for key in ("worktree", "worktreeSkipped", "gates", "notes") if receipt.get(key)
    }
    attempts = receipt["attempts"]
    return {
        "childRunId": handle.run.id,
        "role": handle.role,
        "status": status,
        "resumed": final.resumed,
        "vendorSessionId": final.vendor_session_id,
        "resumeKey": last.lineage,
        "result": final.result_text,
        "reason": reason,
        **optional,
        **({"attempts": attempts} if len(attempts) > 1 else {}),
    }


def _valid_text(value: Any) -> Any:
    """``value`` (JSON-like) with every string made valid UTF-8 (a lone surrogate becomes ``?``),
    so the stored receipt can always be sent as JSON."""
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")
    if isinstance(value, dict):
        return {_valid_text(k): _valid_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_valid_text(v) for v in value]
    return value
