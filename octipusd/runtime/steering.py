"""Steering: user guidance for a session's running root, never silently lost (seed 003 "Plans,
feedback and delegation").

Each guidance message is one :class:`GuidanceItem` in the run's :class:`Guidance` ledger:

* written to the vendor's stdin (Claude: a stream-json user message; Codex app-server:
  ``turn/steer``): ``submitted`` (event ``steering_submitted``), then ``delivered`` once the vendor
  acknowledges it (Claude replays it, ``--replay-user-messages``; Codex accepts the request: event
  ``steering_delivered``), then ``answered`` by the next result. A turn ends when the vendor's last
  result arrives, however the vendor folded the guidance in: after a result, the vendor's input ends
  only when no guidance is still unacknowledged or acknowledged-and-unanswered
  (:meth:`Guidance.awaiting_answer`);
* not written (no live input, the turn not taking it now, a failed write) or not acknowledged
  before the vendor exited, or refused: ``queued``. The run context of Octipus tool responses
  carries it, and when the vendor finished, :func:`follow_up` invokes the vendor session again with
  it (Claude and Codex, ``Adapter.follows_up``), up to ``RunLimits.follow_ups`` times within the
  run's remaining budget, one extra iteration of the turn budget per steering message;
* still queued when no follow-up is possible: the run completes with its result plus a visible
  note naming how many items were not applied, and emits ``guidance_pending`` then
  (:func:`report_unapplied`).

The text of every item joins the session history (:func:`store_guidance`): what reached the vendor
before the turn's answer, what did not after it, so the next user message carries it.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from octipusd.adapter import LaunchRequest, ResultEvent
from octipusd.errors import OctipusError
from octipusd.runtime.feedback import unhandled_plan_feedback as count_unhandled
from octipusd.runtime.invocation import Attempt
from octipusd.runtime.outcome import result_failed, result_failure
from octipusd.runtime.sessions import ResumePlan
from octipusd.store.aio import in_thread

if TYPE_CHECKING:
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = [
    "Guidance",
    "GuidanceItem",
    "GuidanceState",
    "follow_up",
    "follow_up_prompt",
    "report_unapplied",
    "store_guidance",
    "submit",
    "unhandled_plan_feedback",
]

log = logging.getLogger("octipusd.runtime")


class GuidanceState(enum.StrEnum):
    """Where one guidance message is."""

    QUEUED = "queued"  # not with the vendor: the run context carries it; a follow-up sends it
    SUBMITTED = "submitted"  # written to the vendor's stdin, not acknowledged yet
    DELIVERED = "delivered"  # acknowledged; the vendor's next result answers it
    ANSWERED = "answered"  # acknowledged before a result, or sent as a follow-up's prompt


@dataclass
class GuidanceItem:
    """One guidance message of a run."""

    text: str
    state: GuidanceState


@dataclass
class Guidance:
    """The guidance ledger of one run.

    Attributes:
        items: Every guidance message of the run, in arrival order.
        turns_used: Vendor iterations the run's results reported (one per result that reports none).
        follow_ups: Follow-up invocations made.
        children_asked: A follow-up already asked the agent to collect the children it left (one
            bounded follow-up for them, issue 15).
        closed: Why no more guidance is taken (the run decided its last invocation), or None.
        why_not: Why no follow-up could send the guidance left, once that was decided.
    """

    items: list[GuidanceItem] = field(default_factory=list)
    turns_used: int = 0
    follow_ups: int = 0
    children_asked: bool = False
    closed: str | None = None
    why_not: str | None = None

    def add(self, text: str, state: GuidanceState) -> GuidanceItem:
        """Record a guidance message (``submitted`` before its write, ``queued`` when none is made)."""
        item = GuidanceItem(text, state)
        self.items.append(item)
        return item

    def _first(self, text: str, state: GuidanceState) -> GuidanceItem | None:
        return next((i for i in self.items if i.state == state and i.text == text), None)

    def acknowledge(self, text: str) -> None:
        """The vendor acknowledged the submitted guidance ``text``."""
        item = self._first(text, GuidanceState.SUBMITTED)
        if item is not None:
            item.state = GuidanceState.DELIVERED

    def refuse(self, text: str) -> None:
        """The vendor refused the submitted guidance ``text``: it is queued again."""
        item = self._first(text, GuidanceState.SUBMITTED)
        if item is not None:
            item.state = GuidanceState.QUEUED

    def on_result(self, result: ResultEvent) -> None:
        """A result answers every acknowledged item; its iterations count against the turn budget."""
        self.turns_used += result.turns if result.turns is not None else 1
        for item in self.items:
            if item.state == GuidanceState.DELIVERED:
                item.state = GuidanceState.ANSWERED

    def awaiting_answer(self) -> bool:
        """Whether guidance written to the vendor still waits for its acknowledgement or its result."""
        return any(i.state in (GuidanceState.SUBMITTED, GuidanceState.DELIVERED) for i in self.items)

    def unacknowledged(self) -> bool:
        """Whether guidance written to the vendor has not been acknowledged yet."""
        return any(i.state == GuidanceState.SUBMITTED for i in self.items)

    def vendor_exited(self) -> None:
        """The vendor process ended: what it never acknowledged is kept for a follow-up (seed 003)."""
        for item in self.items:
            if item.state == GuidanceState.SUBMITTED:
                item.state = GuidanceState.QUEUED

    def queued(self) -> list[str]:
        """The texts not with the vendor (the run context's queued guidance)."""
        return [i.text for i in self.items if i.state == GuidanceState.QUEUED]

    def unapplied(self) -> list[GuidanceItem]:
        """The items that never reached the vendor (queued, or submitted and not acknowledged)."""
        return [i for i in self.items if i.state in (GuidanceState.QUEUED, GuidanceState.SUBMITTED)]


async def submit(run: RunSupervisor, text: str) -> str:
    """Give guidance to a live run: written to its vendor when the running turn takes it, else queued.

    Returns:
        ``"stdin"`` (event ``steering_submitted``) or ``"queued"`` (event ``steering_queued``).
    """
    attempt = run.attempt
    parser, process = attempt.parser, attempt.process
    live_input = process is not None and process.returncode is None and not attempt.input_ended
    steering = parser.steer(text) if parser is not None and live_input else None
    delivery = "queued"
    if steering is None:
        run.steering.add(text, GuidanceState.QUEUED)
    else:
        assert process is not None
        item = run.steering.add(text, GuidanceState.SUBMITTED)  # before the write: a result meanwhile waits
        written = True
        for line in steering.lines:
            written = written and await process.write_line(line)
        if written:
            delivery = "stdin"
        else:  # stdin closed meanwhile (the turn ended): kept for a follow-up
            item.state = GuidanceState.QUEUED
            await run.events.end_input_if_answered()
    kind = "steering_submitted" if delivery == "stdin" else "steering_queued"
    await run.services.hub.emit(run.run.id, kind, {"text": text, "delivery": delivery})
    run.delegation.interrupt_collect()
    return delivery


async def unhandled_plan_feedback(run: RunSupervisor) -> int:
    """The hook of plan feedback (issue 14 item 2): how many feedback items of the session's root work
    plan the agent has not handled yet; they warrant a follow-up invocation like guidance does.

    Returns:
        The session's pending feedback items (new, or reopened by a person's reply); a root run
        only asks.
    """
    return await count_unhandled(run.services.store, run.session_id)


def follow_up_prompt(texts: list[str], feedback: int, children: list[str] | None = None) -> str:
    """The prompt of a follow-up invocation: the guidance not applied yet, unhandled feedback, and
    the children the agent started and did not collect."""
    parts = []
    if texts:
        parts.append(
            "[Octipus] The user sent guidance while you worked that has not reached you yet; apply it now:"
        )
        parts += [f"{n}. {text}" for n, text in enumerate(texts, 1)]
    if feedback:
        parts.append(
            f"[Octipus] {feedback} feedback item{'s' if feedback != 1 else ''} on the work plan "
            f"{'are' if feedback != 1 else 'is'} not handled yet: read get_cli_run_context, apply "
            f"{'it' if feedback == 1 else 'them'} and mark {'it' if feedback == 1 else 'them'} with update_work_plan."
        )
    if children:
        parts.append(
            f"[Octipus] You finished without collecting {len(children)} child agent"
            f"{'s' if len(children) != 1 else ''} you started ({', '.join(children)}): call collect_children "
            "now and use the results in your final answer; children still running after this turn are cancelled."
        )
    return "\n".join(parts)


def _blocked(run: RunSupervisor, request: LaunchRequest) -> tuple[str | None, int | None]:
    """Why no follow-up can run now (None: it can), and the turn limit it gets."""
    adapter, limits, attempt, steering = run.adapter, run.services.limits, run.attempt, run.steering
    assert adapter is not None
    if run.ending is not None:
        return f"the run is ending ({run.ending})", None
    if not adapter.follows_up(request.options):
        return f"{adapter.display_name} takes no follow-up invocations", None
    if attempt.result is None or result_failed(attempt.result) or not attempt.confirmed:
        return "the vendor's turn did not end with a result in a confirmed session", None
    if steering.follow_ups >= limits.follow_ups:
        return f"the follow-up limit of {limits.follow_ups} was reached", None
    limit = run.timeout if run.timeout is not None else limits.run_timeout_s
    if run.active_s >= limit:
        return f"the active-work budget of {limit:g} s is spent", None
    if request.turn_limit is None:
        return None, None
    remaining = request.turn_limit + len(steering.items) - steering.turns_used  # one per steering message
    if remaining <= 0:
        return f"the turn budget of {request.turn_limit} (plus one per steering message) is spent", None
    return None, remaining


async def follow_up(run: RunSupervisor, request: LaunchRequest) -> str | None:
    """After the vendor finished: invoke its session again while guidance (or unhandled root-plan
    feedback) remains and the budget allows (seed 003), then stop taking guidance.

    Each follow-up resumes the session the vendor confirmed, with the guidance as its prompt, in
    the same bridge; its usage adds to the run's, and its answer follows the earlier ones. A
    follow-up that ends without a successful result (or cannot start) does not undo what came
    before: the run keeps the earlier result and its verdict, a notice says what happened, and the
    guidance it carried is named as not applied.

    Returns:
        Why no (further) follow-up was possible while guidance remained, or None.

    Raises:
        OctipusError: Only when a stop or a failure of the run itself ended the follow-up.
    """
    steering = run.steering
    while True:
        steering.vendor_exited()
        items = steering.unapplied()
        feedback = await unhandled_plan_feedback(run) if run.is_root_turn else 0
        children = [] if steering.children_asked else run.delegation.uncollected()
        if not items and not feedback and not children:
            steering.closed = "the run is ending"
            return None
        why_not, turn_limit = _blocked(run, request)
        if why_not is not None:
            steering.closed, steering.why_not = "the run is ending", why_not
            if children:  # no turn to collect them in: their results join the answer
                await run.delegation.append_uncollected(run.attempt)
            return why_not
        steering.follow_ups += 1
        steering.children_asked = steering.children_asked or bool(children)
        for item in items:
            item.state = GuidanceState.ANSWERED  # its prompt carries them
        await run.notice(
            f"follow-up invocation {steering.follow_ups} of at most {run.services.limits.follow_ups}: "
            f"{len(items)} guidance item{'s' if len(items) != 1 else ''} and {feedback} feedback item"
            f"{'s' if feedback != 1 else ''} remained when the vendor finished"
            + (
                f", and {len(children)} uncollected child{'ren' if len(children) != 1 else ''}"
                if children
                else ""
            ),
            follow_up=steering.follow_ups,
            guidance=[i.text for i in items],
        )
        request = await _follow_up_request(run, request, items, feedback, turn_limit, children)
        failed = await _invoke_follow_up(run, request)
        if failed is not None:
            for item in items:
                item.state = GuidanceState.QUEUED  # it never took effect: named at the end
            steering.closed = "the run is ending"
            steering.why_not = f"follow-up invocation {steering.follow_ups} failed: {failed}"
            return steering.why_not


async def _follow_up_request(
    run: RunSupervisor,
    request: LaunchRequest,
    items: list[GuidanceItem],
    feedback: int,
    turn_limit: int | None,
    children: list[str],
) -> LaunchRequest:
    """The launch of a follow-up: the confirmed session resumed, the guidance as its prompt."""
    confirmed = run.attempt.confirmed
    assert confirmed is not None
    request = dataclasses.replace(
        request,
        prompt=follow_up_prompt([i.text for i in items], feedback, children),
        vendor_session_id=confirmed,
        resume=True,
        turn_limit=turn_limit if turn_limit is not None else request.turn_limit,
        thread_usage=None,
    )
    if run.adapter is not None and run.adapter.usage_is_cumulative(request):
        request = dataclasses.replace(request, thread_usage=await run.invocation.thread_usage(request))
    return request


async def _invoke_follow_up(run: RunSupervisor, request: LaunchRequest) -> str | None:
    """Run one follow-up invocation (its accounting sums the run's).

    Returns:
        None when it ended with a successful result (or a stop or failure of the run ended it, which
        decides the run as usual); otherwise why it failed, after the earlier invocation's result
        was put back as the run's.

    Raises:
        OctipusError: The invocation could not start while the run was being stopped.
    """
    earlier = run.attempt
    assert earlier.confirmed is not None
    run.attempt = Attempt(confirmed=earlier.confirmed, answers=list(earlier.answers))
    try:
        await run.invocation.run(request, ResumePlan(earlier.confirmed, True))
    except OctipusError as exc:
        if run.stop_status is not None:
            raise
        failed: str | None = exc.message
    else:
        if run.stop_status is not None:
            return None
        result = run.attempt.result
        failed = run.failure or (
            "it ended without a result"
            if result is None
            else result_failure(result)
            if result_failed(result)
            else None
        )
    if failed is None:
        return None
    run.attempt, run.failure = earlier, None  # the follow-up never undoes the answer before it
    await run.notice(
        f"follow-up invocation {run.steering.follow_ups} ended without an answer ({failed}); the run keeps "
        "the result of the invocation before it",
        follow_up_failed=run.steering.follow_ups,
    )
    return failed


async def report_unapplied(run: RunSupervisor) -> str | None:
    """At the run's end: name the guidance that was not applied (event ``guidance_pending``), and
    the root plan's feedback still pending when no (further) follow-up could handle it.

    Returns:
        The note appended to the run's result, or None when nothing was left.
    """
    steering = run.steering
    why = steering.why_not or run.ending
    steering.closed = steering.closed or "the run is ending"
    steering.vendor_exited()
    texts = [i.text for i in steering.unapplied()]
    notes = []
    if texts:
        count = len(texts)
        notes.append(
            f"[Octipus] {count} guidance item{'s' if count != 1 else ''} {'were' if count != 1 else 'was'} not "
            f"applied{f' ({why})' if why else ''}; {'they are' if count != 1 else 'it is'} in the session "
            f"history and the next message carries {'them' if count != 1 else 'it'}."
        )
        await run.services.hub.emit(
            run.run.id,
            "guidance_pending",
            {"count": count, "texts": texts, "reason": why, "message": notes[0]},
        )
    feedback = await unhandled_plan_feedback(run) if run.is_root_turn and steering.why_not else 0
    if feedback:
        notes.append(
            f"[Octipus] {feedback} feedback item{'s' if feedback != 1 else ''} on the work plan "
            f"{'are' if feedback != 1 else 'is'} still pending ({steering.why_not}); the agent sees "
            f"{'them' if feedback != 1 else 'it'} in its run context on the next turn."
        )
        await run.notice(notes[-1], feedback_pending=feedback)
    return "\n\n".join(notes) or None


async def store_guidance(run: RunSupervisor, *, delivered: bool) -> None:
    """Add the run's guidance to the session history (a root run): ``delivered`` the items that
    reached the vendor (stored before the turn's answer), else the others (after it, so the next
    user message carries them, seed 003 "What resume actually saves")."""
    if run.parent is not None:
        return
    reached = (GuidanceState.DELIVERED, GuidanceState.ANSWERED)
    texts = [i.text for i in run.steering.items if (i.state in reached) == delivered]
    if texts:
        await in_thread(_append_guidance, run, texts)


def _append_guidance(run: RunSupervisor, texts: list[str]) -> None:
    for text in texts:
        run.services.store.append_message(
            run.session_id, role="user", text=text, run_id=run.run.id, adapter=None, generation=run.generation
        )
