"""How one run handles its vendor's events (:class:`VendorEvents`, owned by its supervisor).

Each event is queued for storage first (unless it is a kind that is never stored; the events of one
read of the vendor's output are committed together, :meth:`VendorEvents.stored`), then acted on: a session
announcement keeps the vendor's session id, saved for reuse as soon as the vendor answers in it; a
permission request is relayed; a native tool use is shown to the flow guard; a cancelled control request stops its wait; a failure the adapter found
(a bridge not connected) fails the run, or, while the vendor still connects to the bridge, only if
the vendor never lists the bridge's tools; an acknowledged or refused guidance updates the run's
guidance ledger; a result is kept and ends the input unless guidance still waits for its answer.

The turn's final result (the one after which no guidance waits) ends the turn
(:meth:`~octipusd.runtime.invocation.Attempt.end_turn`): the vendor has ``RunLimits.result_grace_s``
to exit before it is stopped, and whatever it prints afterwards is dropped and counted, but for
what its adapter declares its protocol sends then (``Adapter.after_result``). A vendor that takes
the launch prompt only after that result (``StreamParser.prompt_pending``: Claude first answers the
notifications of background work its earlier process left) goes on with the turn: that result
answered something else. After a stop began every event is dropped and counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import anyio.abc

from octipusd.adapter import (
    ControlCancelEvent,
    PermissionRequestEvent,
    ResultEvent,
    RunFailureEvent,
    SessionEvent,
    StatusEvent,
    StdinWriteEvent,
    SteeringAckEvent,
    TextEvent,
    ThinkingEvent,
    ToolUseEvent,
    UsageEvent,
    VendorEvent,
)
from octipusd.runtime.events import NOT_STORED
from octipusd.runtime.levels import budget_tokens
from octipusd.runtime.relay import BRIDGE_PREFIX
from octipusd.runtime.reuse import keep_confirmed
from octipusd.store.aio import in_thread
from octipusd.store.event_writer import PendingEvent

if TYPE_CHECKING:
    from octipusd.bridge.server import Bridge
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = ["ANSWERS", "VendorEvents"]

#: The events by which a vendor answers in its session (what confirms it; a result only when it is
#: not an error).
ANSWERS = (TextEvent, ThinkingEvent, ToolUseEvent, ResultEvent)


class VendorEvents:
    """The vendor-event handling of one run.

    Args:
        supervisor: The run.
    """

    def __init__(self, supervisor: RunSupervisor) -> None:
        self._run = supervisor
        self._unsettled: list[PendingEvent] = []

    async def handle(self, event: VendorEvent, tg: anyio.abc.TaskGroup) -> None:
        """Queue one vendor event for storage and act on it; after a stop began, drop it (counted).

        The event is queued ahead of anything the action stores or publishes (the writer keeps
        their order); :meth:`stored` waits for its commit.
        """
        run = self._run
        attempt = run.attempt
        if attempt.stopping is not None:
            attempt.discarded += 1
            return
        if not self._in_turn(event):
            return
        if event.kind not in NOT_STORED:
            self._unsettled.append(run.services.hub.emit_vendor_soon(run.run.id, event))
        if run.observer is not None:
            run.observer(event)
        process, adapter = attempt.process, run.adapter
        assert process is not None and adapter is not None
        if isinstance(event, SessionEvent | ToolUseEvent | StdinWriteEvent):
            await self.stored()  # its action waits on other work: publish what came before first
        if isinstance(event, SessionEvent):
            await self._on_session(event, tg)
        elif isinstance(event, PermissionRequestEvent):
            tg.start_soon(run.relay.relay, event)
        elif isinstance(event, ToolUseEvent) and not event.name.startswith(BRIDGE_PREFIX):
            # the flow guard watches the tool-use stream, so auto-allowed reads count too (seed 003)
            await run.services.gate.observe(run.relay.context(), f"cli-native:{event.name}", event.input)
        elif isinstance(event, ControlCancelEvent):
            run.relay.cancel(event.request_id)  # the vendor abandoned it: answer nothing (sources.md §1.6)
        elif isinstance(event, RunFailureEvent):  # e.g. the adapter saw the bridge not connected
            if event.unless_bridge_answers and run.bridge is not None:
                attempt.bridge_pending = event.reason
                tg.start_soon(self._fail_unless_bridge_answers, run.bridge, event.reason, tg)
            elif run.failure is None:
                run.failure = event.reason
                run.stop_vendor(tg, event.reason)
        elif isinstance(event, StatusEvent) and event.status.startswith("cold_start:") and run.run.resumed:
            # the vendor answered the resume with another conversation: the stored one is gone (seed
            # 003 "Cold fallback"); stop before the turn runs there, the turn is retried cold
            attempt.session_missing = event.status
            run.stop_vendor(tg, "the resumed vendor session is gone; retrying the turn cold")
        elif isinstance(event, StdinWriteEvent):
            if attempt.session_missing is None:
                for line in event.lines:
                    await process.write_line(line)
        elif isinstance(event, SteeringAckEvent):
            if event.refused is None:
                run.steering.acknowledge(event.text)
            else:
                run.steering.refuse(event.text)
                await self.end_input_if_answered()
        elif isinstance(event, ResultEvent):
            attempt.accept_result(event)
            run.steering.on_result(event)
            if event.session_id and not event.is_error:
                attempt.confirmed = event.session_id
            await self.end_input_if_answered()
            if not attempt.input_ended and run.steering.unacknowledged():
                tg.start_soon(self._end_input_unless_acknowledged)
        await self._keep_if_answered(event)
        self._check_token_budget(tg)

    def _in_turn(self, event: VendorEvent) -> bool:
        """Whether the event belongs to the run: everything before the turn's final result; after it,
        what the adapter declares the vendor's protocol sends then (its usage counts), and everything
        from the moment the vendor takes the launch prompt, when it had not yet at that result (the
        turn goes on). The rest is counted in :attr:`~octipusd.runtime.invocation.Attempt.after_result`."""
        run = self._run
        attempt, adapter = run.attempt, run.adapter
        assert adapter is not None
        if attempt.exit_by is None:
            return True
        if attempt.before_prompt and attempt.parser is not None and not attempt.parser.prompt_pending():
            attempt.reopen()
            return True
        if not adapter.after_result(event):
            attempt.after_result += 1
            return False
        if isinstance(event, UsageEvent):
            attempt.frozen_usage = attempt.usage() + event.usage
        return True

    async def _keep_if_answered(self, event: VendorEvent) -> None:
        """Save the vendor session once the vendor answered in it (an assistant message, or a result
        that is not an error; seed 003), not only at the run's end: a daemon killed afterwards
        leaves it for the next turn. An init alone confirms nothing, but for a pipeline stage worker:
        its key is its attempt's alone, and a resume of the attempt after a restart continues the
        conversation the worker was in, answered or not (seed 003 "Attempts"). Codex may announce
        its thread only after answering, which then saves it."""
        run = self._run
        attempt = run.attempt
        answers = isinstance(event, ANSWERS) and not (isinstance(event, ResultEvent) and event.is_error)
        if answers or (isinstance(event, SessionEvent) and run.stage is not None):
            attempt.answered = True
        confirmed = attempt.confirmed
        if (
            attempt.answered
            and confirmed is not None
            and confirmed != attempt.kept
            and attempt.session_missing is None
            and attempt.stopping is None
            and run.reuse is not None
        ):
            attempt.kept = confirmed
            await keep_confirmed(run, run.reuse)

    async def _end_input_unless_acknowledged(self) -> None:
        """After a result, guidance written to the vendor but not acknowledged holds its input open
        at most ``RunLimits.guidance_ack_s``: then the input ends and the guidance, never applied,
        goes to a follow-up (a vendor that never replays it cannot keep the run running)."""
        run = self._run
        attempt = run.attempt
        await anyio.sleep(run.services.limits.guidance_ack_s)
        if attempt is run.attempt and not attempt.input_ended and run.steering.unacknowledged():
            await self._end_turn()
            await run.notice(
                f"the vendor did not acknowledge the guidance within {run.services.limits.guidance_ack_s:g} s "
                "of its result; its input was ended and the guidance waits for a follow-up"
            )

    async def end_input_if_answered(self) -> None:
        """End the vendor's input once its turn is over: a result arrived and no guidance written to it
        still waits for its acknowledgement or its answer (seed 003; the vendor may fold guidance into
        the running request or take it as one more turn, so results are not counted per message)."""
        attempt = self._run.attempt
        if attempt.exit_by is not None or attempt.results_seen == 0 or self._run.steering.awaiting_answer():
            return
        await self._end_turn()

    async def _end_turn(self) -> None:
        """The last result is the turn's final one: end the turn and the vendor's input."""
        attempt = self._run.attempt
        before_prompt = attempt.parser is not None and attempt.parser.prompt_pending()
        attempt.end_turn(self._run.services.limits.result_grace_s, before_prompt=before_prompt)
        if attempt.process is not None:
            await attempt.process.close_stdin()

    async def stored(self) -> None:
        """Wait until every event handled so far is committed (and published): one commit for all.

        Raises:
            StoreError: they could not be stored.
        """
        unsettled, self._unsettled = self._unsettled, []
        for pending in unsettled:
            await self._run.services.hub.settle(pending)

    async def _on_session(self, event: SessionEvent, tg: anyio.abc.TaskGroup) -> None:
        """The vendor announced its session: keep the id; a failed bridge fails the run."""
        run = self._run
        if event.session_id:
            previous = run.attempt.confirmed
            if previous is not None and previous != event.session_id:  # another conversation, unanswered
                run.attempt.answered = False
            run.attempt.confirmed = event.session_id
            if run.run.vendor_session_id != event.session_id:  # vendor-assigned (Codex, Vibe) or replaced
                run.run = await in_thread(
                    run.services.store.update_run, run.run.id, vendor_session_id=event.session_id
                )

    async def _fail_unless_bridge_answers(self, bridge: Bridge, reason: str, tg: anyio.abc.TaskGroup) -> None:
        """The vendor still connects to the bridge: fail the run only if it has not listed the
        bridge's tools within ``RunLimits.bridge_connect_grace_s``."""
        run = self._run
        grace = run.services.limits.bridge_connect_grace_s
        if await bridge.wait_listed(grace) or run.failure is not None or run.attempt.stopping is not None:
            return
        run.failure = f"{reason}; the bridge saw no handshake from the vendor within {grace:g} s"
        run.stop_vendor(tg, run.failure)

    async def check_bridge_answered(self) -> None:
        """At the invocation's end: a vendor that announced its bridge as still connecting and never
        listed its tools could not use Octipus tools, however it ended."""
        run = self._run
        reason, bridge = run.attempt.bridge_pending, run.bridge
        if reason is None or bridge is None or run.failure is not None:
            return
        if not await bridge.wait_listed(0):
            run.failure = f"{reason}; the vendor ended without completing its handshake with the bridge"

    def _check_token_budget(self, tg: anyio.abc.TaskGroup) -> None:
        """Stop a child that used more tokens than its ``tokenBudget``, or a pipeline stage worker
        more than its step's ``maxTokens`` (seed 003: the key is then dropped). Counted over the
        whole run (its ended invocations, a cold retry's or a follow-up's predecessors, and the one
        streaming now): input, output and cache writes, not cache reads
        (:func:`~octipusd.runtime.levels.budget_tokens` says why)."""
        run = self._run
        budget = run.token_budget
        if budget is None or run.budget_exceeded:
            return
        # the event being handled belongs to the invocation streaming now, not accounted yet
        used = budget_tokens(run.invocation.spent() + run.attempt.usage())
        if used > budget:
            run.budget_exceeded = True
            who = "stage worker" if run.stage is not None else "child"
            run.failure = run.failure or (
                f"the {who} exceeded its token budget ({used} tokens of input, output and cache writes "
                f"used, budget {budget})"
            )
            run.stop_vendor(tg, run.failure)
