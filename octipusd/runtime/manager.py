"""Runs and turns: the entry points the API calls, over the registry of live runs.

Data flow of one run (DESIGN.md "The data flow of one run"): :meth:`RunManager.post_turn` stores
the run and the turn's user message and starts a
:class:`~octipusd.runtime.supervisor.RunSupervisor`, which plans the turn, opens its bridge,
spawns the vendor, turns its stream into events and stores the final status.

One Octipus session has at most one live root run, so one vendor conversation is never resumed
in two processes at once: a second turn while one is live is refused with a clear message. Turn
execution and maintenance (compaction) of a session are serialized by a per-session lock.
``/clear`` and ``/compact`` are Octipus's own commands, recorded as finished runs.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from octipusd.errors import ConflictError, InvalidRequestError
from octipusd.policy.spaces import check_space_model, check_space_turn
from octipusd.runtime.compaction import CompactionReport, describe_compaction
from octipusd.runtime.planning import model_row
from octipusd.runtime.services import RunRegistry, RunServices
from octipusd.runtime.steering import submit
from octipusd.runtime.supervisor import RunSupervisor
from octipusd.store.aio import in_thread
from octipusd.store.records import Run, RunStatus, Session

__all__ = ["CLEAR_COMMAND", "COMPACT_COMMAND", "RunManager"]

log = logging.getLogger("octipusd.runtime")

#: The turn text that clears a session (seed 003 "What invalidates a stored session").
CLEAR_COMMAND = "/clear"
#: The turn text that compacts a session now (seed 003 "Compaction"), instead of the vendor's own.
COMPACT_COMMAND = "/compact"


class RunManager:
    """The registry of this daemon's live runs and the entry points the API calls.

    Args:
        services: The collaborators every run shares.
        registry: The live runs (shared with the permission gate's event sink).
    """

    def __init__(self, services: RunServices, registry: RunRegistry) -> None:
        self.services = services
        self.registry = registry
        self._post_lock = anyio.Lock()
        self._accepting = True

    def bind(self, task_group: anyio.abc.TaskGroup) -> None:
        """Attach the daemon's task group, in which runs execute (and queued runs are admitted)."""
        self.registry.bind(task_group)
        task_group.start_soon(self.services.admission.run)

    def live_runs(self) -> list[str]:
        """Ids of the runs executing now."""
        return self.registry.ids()

    async def shutdown(self, reason: str) -> None:
        """Stop accepting turns, interrupt every live run and wait (bounded) for them to end.

        Args:
            reason: Stored as each run's reason (status ``interrupted``).
        """
        self._accepting = False
        live = list(self.registry)
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for item in live:
                    tg.start_soon(item.stop, RunStatus.INTERRUPTED, reason)
            with anyio.move_on_after(self.services.limits.shutdown_grace_s):
                for item in live:
                    await item.done.wait()

    async def post_turn(
        self,
        session_id: str,
        prompt: str,
        *,
        plan: bool = False,
        author: str | None = None,
        host_services: bool = False,
        attended: bool | None = None,
    ) -> Run:
        """Create a run for a new turn of a session and start it in the background.

        Args:
            session_id: The session.
            prompt: The turn's text.
            plan: Run this turn in plan mode: it overrides the row's permission mode for this
                invocation only (seed 003 "Permissions and limits").
            author: Who posts it (a space member's name); None means the daemon's user.
            host_services: The run's own shell commands share the host's services under the shell
                sandbox (persisted with the run, shown in its ``run_status`` event; its children do
                not inherit it).
            attended: False makes this turn unattended in an attended session (a schedule's turn,
                a monitor's wake-up: an ASK is refused as "review required" and notifies, nothing is
                granted); None (or True) follows the session: a turn is never made attended in an
                unattended session.

        Raises:
            NotFoundError: no such session, or (in a space) the author is not a member.
            InvalidRequestError: the prompt is empty.
            ForbiddenError: in a space, the author's role may not run the CLI agent.
            ConflictError: the session already has a live run, the daemon is stopping, the
                space is archived, or the session's model may not serve the space.
        """
        if not prompt.strip():
            raise InvalidRequestError("prompt is empty; give the text of the turn")
        if not self._accepting or not self.registry.bound:
            raise ConflictError("octipusd is shutting down; start it again and repeat the turn")
        command = prompt.strip().split(maxsplit=1)
        if command[0] in (CLEAR_COMMAND, COMPACT_COMMAND):
            return await self._command_turn(
                session_id, author, command[0], command[1] if len(command) > 1 else None
            )
        store = self.services.store
        async with self._post_lock:
            session = await in_thread(store.get_session, session_id)
            if session.space_id is not None:
                await self._check_space(session, author or self.services.user)
            busy = self.registry.of_session(session_id)
            if busy is not None:
                raise ConflictError(
                    f"session {session_id} already has a live run {busy.run.id}; wait for it to finish "
                    f"or stop it (octipusctl runs stop {busy.run.id}) before the next turn"
                )
            run = await in_thread(
                store.create_run,
                session_id=session_id,
                prompt=prompt,
                owner=self.services.owner,
                plan_mode=plan,
                author=author,
                host_services=host_services,
            )
            message = await in_thread(
                store.append_message,
                session_id,
                role="user",
                text=prompt,
                run_id=run.id,
                adapter=None,
                generation=session.clear_generation,
            )
            supervisor = RunSupervisor(
                self.services,
                self.registry,
                run,
                attended=session.attended and attended is not False,
                generation=session.clear_generation,
                user_seq=message.seq if message is not None else None,
            )
            self.registry.add(supervisor)
        try:
            queued: dict[str, object] = {"status": str(RunStatus.QUEUED), "turn_index": run.turn_index}
            if run.host_services:
                queued["host_services"] = True
            await self.services.hub.emit(run.id, "run_status", queued)
            self.registry.start_soon(supervisor.execute)
        except BaseException:  # the run never started: it must not block the session's next turn
            await supervisor.abandon("the turn could not be started")
            raise
        return run

    async def _command_turn(self, session_id: str, author: str | None, command: str, rest: str | None) -> Run:
        """A ``/clear`` or ``/compact`` turn: Octipus's own command, recorded as a finished run
        without spawning a vendor (a vendor's own ``/compact`` would rewrite a conversation
        Octipus keeps the transcript of)."""
        services = self.services
        current = await in_thread(services.store.get_session, session_id)
        if current.space_id is not None:  # the same roles as any other turn in a space
            await self._check_space(current, author or services.user)
        if command == CLEAR_COMMAND:
            session = await self.clear_session(session_id)
            text = (
                f"conversation cleared (generation {session.clear_generation}); the next turn starts a new "
                "vendor conversation without the earlier messages"
            )
        else:
            live = self.registry.of_session(session_id)
            if live is not None:
                raise ConflictError(
                    f"session {session_id} has a live run {live.run.id}; /compact runs between turns: wait for "
                    "it to finish (or use octipusctl sessions compact, which waits)"
                )
            report = await self.compact_session(session_id, keep_turns=services.compaction_keep_turns)
            text = describe_compaction(report)
        if rest:  # the vendor's own /compact would rewrite the conversation Octipus keeps
            text += f" (the words after {command} were not used: Octipus's own {command} takes none)"
        run = await in_thread(
            services.store.create_run,
            session_id=session_id,
            prompt=f"{command} {rest}" if rest else command,
            owner=services.owner,
            author=author,
        )
        await services.hub.emit(run.id, "notice", {"message": text})
        final = await in_thread(
            services.store.finish_run,
            run.id,
            status=RunStatus.SUCCEEDED,
            reason=None,
            exit_code=None,
            result_text=text,
        )
        await services.hub.emit(
            run.id, "run_status", {"status": str(final.status), "reason": None, "final": True}
        )
        services.hub.notify(run.id)
        return final

    async def clear_session(self, session_id: str) -> Session:
        """``/clear``: start a new clear generation of the session (seed 003).

        Every stored vendor record of the session (the root's and every child task key) is
        dropped and the earlier messages leave the transcript, in one transaction. A turn still
        running keeps going, but nothing it saves afterwards is kept (its generation is old).

        Raises:
            NotFoundError: no such session.
        """
        session = await in_thread(self.services.store.clear_session, session_id)
        for live in self.registry:
            if live.session_id == session_id:
                await live.notice(
                    "the session was cleared (/clear); this run's vendor session will not be reused"
                )
        return session

    async def compact_session(self, session_id: str, *, keep_turns: int = 2) -> CompactionReport:
        """Compact the session's transcript into a checkpoint (seed 003 "Compaction").

        Waits for a running turn of the session to end first: turn execution and maintenance are
        serialized within this process.

        Raises:
            NotFoundError: no such session.
            InvalidRequestError: ``keep_turns`` is negative.
        """
        if keep_turns < 0:
            raise InvalidRequestError(f"keep_turns must be 0 or more, got {keep_turns}")
        await in_thread(self.services.store.get_session, session_id)
        async with self.registry.session_lock(session_id):
            return await self.services.compact(session_id, keep_turns)

    async def continue_unattended(self, session_id: str, text: str) -> dict[str, str]:
        """Continue a session with the daemon's own work (a schedule's slot, a monitor's wake-up):
        steer its live root run (:meth:`steer`: never queued behind its turn), else post an
        unattended turn (:meth:`post_turn` with ``attended=False``: an ASK in it is refused as
        "review required" and notified, nothing is granted).

        Returns:
            ``{"mode": "steer", "run_id", "delivery": "stdin" | "queued"}`` or ``{"mode": "turn", "run_id"}``.

        Raises:
            ConflictError: The session is between the two (its run ending as it is steered, a run
                starting as the turn is posted), or the daemon is stopping.
            NotFoundError, ForbiddenError, InvalidRequestError: As :meth:`post_turn`.
        """
        if self.registry.of_session(session_id, roots_only=True) is not None:
            steered = await self.steer(session_id, text)
            return {"mode": "steer", "run_id": str(steered["run_id"]), "delivery": str(steered["delivery"])}
        run = await self.post_turn(session_id, text, attended=False)
        return {"mode": "turn", "run_id": run.id}

    async def steer(self, session_id: str, text: str) -> dict[str, Any]:
        """Deliver user guidance to the session's live root run (:func:`~octipusd.runtime.steering.submit`).

        Vendors that take live guidance get it on stdin at once (Claude: a stream-json user
        message; Codex app-server: ``turn/steer``): event ``steering_submitted``. Otherwise it is
        queued (event ``steering_queued``): the run context of Octipus tool responses carries it and a
        follow-up invocation sends it; what is never applied is reported when the run completes
        (``guidance_pending``, seed 003 "Plans, feedback and delegation"). A pending
        ``collect_children`` wait returns at once; no child is cancelled or steered.

        Returns:
            ``{"run_id": ..., "delivery": "stdin" | "queued"}``.

        Raises:
            InvalidRequestError: empty text.
            ConflictError: the session has no live run (post a turn instead), or it is ending.
        """
        if not text.strip():
            raise InvalidRequestError("guidance text is empty")
        live = self.registry.of_session(session_id, roots_only=True)
        if live is None:
            raise ConflictError(
                f"session {session_id} has no live run to steer; send the guidance as the next turn "
                f"(octipusctl run --session {session_id} ...)"
            )
        ending = live.ending or live.steering.closed
        if ending is not None:
            raise ConflictError(
                f"run {live.run.id} of session {session_id} is ending ({ending}); send the guidance "
                "as the next turn once it ended"
            )
        return {"run_id": live.run.id, "delivery": await submit(live, text)}

    async def stop(self, run_id: str, reason: str = "stopped by the user") -> Run:
        """Stop a live run (status ``cancelled``); a finished run is returned unchanged.

        Waits (bounded) for the run to be finished before answering.

        Raises:
            NotFoundError: no such run.
        """
        live = self.registry.get(run_id)
        if live is None:
            return await in_thread(self.services.store.get_run, run_id)
        await live.stop(RunStatus.CANCELLED, reason)
        with anyio.move_on_after(self.services.limits.stop_wait_s):
            await live.done.wait()
        return await in_thread(self.services.store.get_run, run_id)

    async def _check_space(self, session: Session, author: str) -> None:
        """Refuse a turn the space's roles or its model row do not allow (read fresh each time)."""
        assert session.space_id is not None
        store = self.services.store
        space = await in_thread(store.get_space, session.space_id)
        check_space_turn(space, author)
        check_space_model(space, await model_row(store, session), self.services.adapters.get(session.adapter))
