"""The pipeline walk: one durable workflow per walk (issue 27; design "The workflow").

::

    load -> loop: walk the graph until it ends or a stage does not deliver
        completed   -> finish; the workflow returns
        failed / stopped / interrupted (paused) -> park; wait for "resume" (durable); apply it;
                       go on where it stopped (the same attempt, resume=True, when it did not finish)

Deterministic: every read of the store and every effect is a step of :class:`~octipusd.pipelines.
walker.Walker` (a stage attempt under the engine's restart guard), so after a restart DBOS replays
the recorded steps and this code rebuilds the walk's state (:class:`WalkState`: the node, the item,
the traversals of bounded edges per item, the QA issues, the previous output, the attempt to
continue) without running anything again. The way is :func:`~octipusd.pipelines.graph.next_node`'s;
``exhausted`` (retries ran out) and ``human`` nodes ask a person (:mod:`octipusd.pipelines.asking`),
and so does a ``requiresApproval`` stage before it runs (:mod:`octipusd.pipelines.stage_approval`).

A step that raises (the store failed, a bug) ends the walk ``failed`` with the error, resumable;
a replay raises the recorded error again, so this stays deterministic. The walk knows the
pipeline's ``generation`` (read at each boundary and by each stage attempt: a fork replays older
ones) and parks with it: the park of a walk a newer resume claimed writes nothing.

Messages (topic :data:`WAKE_TOPIC`): ``{"kind": "resume", "generation"}`` from the runner (one whose
generation the walk already walked under is stale and dropped), ``{"kind": "answer",
"approvalId", "approved", "by", "reason"}`` when a person answered the walk's question. A stage
step the restart guard answers ``interrupted`` uses its attempt's recorded verdict when that
attempt had finished ``succeeded`` (the process died before the engine recorded the step).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from octipusd.durable.engine import Interrupted, Ran, WorkflowDef
from octipusd.errors import OctipusError
from octipusd.pipelines.graph import (
    EdgeCondition,
    Graph,
    NodeKind,
    Outcome,
    Transition,
    TransitionKind,
    compile_graph,
    next_node,
)
from octipusd.pipelines.stage_approval import ask_stage_approval
from octipusd.pipelines.templates import parse_template
from octipusd.pipelines.walker import Walker, active_walker
from octipusd.store.pipeline_records import PipelineStatus

__all__ = ["PIPELINE_WALK", "WAKE_TOPIC", "End", "WalkState", "pipeline_walk"]

log = logging.getLogger("octipusd.pipelines.walk")

#: The topic of the messages that wake a walk (a resume, a person's answer).
WAKE_TOPIC = "wake"
_PAUSED, _FAILED, _STOPPED = PipelineStatus.PAUSED, PipelineStatus.FAILED, PipelineStatus.STOPPED


@dataclass
class WalkState:
    """Where a walk is; rebuilt by replay (never stored by itself).

    Attributes:
        node: The node to run next.
        item: The plan item of the loop body it is in, or None.
        traversals: How often each bounded edge was taken (for the current item inside a loop).
        contract_retries: Contract failures of the current node and item so far.
        previous: The last delivered output (``{{previousOutput}}``).
        qa_issues: The issues a QA bounce hands the implementer.
        retry_reason: Why the node runs again (a contract failure, a gate).
        start_reason: Why the next attempt starts (``first``, ``next``, ``qa_retry``...).
        continue_attempt: The attempt a resume continues, or None.
        generation: The pipeline's walk generation as last read.
        last_error: The last stage error (the pipeline's error when no edge handles it).
        approved: The ``requiresApproval`` nodes a person approved, each with the generation of the
            walk it was approved in (:mod:`octipusd.pipelines.stage_approval`).
    """

    node: str
    item: str | None = None
    traversals: dict[str, int] = field(default_factory=dict)
    contract_retries: int = 0
    previous: str | None = None
    qa_issues: tuple[str, ...] = ()
    retry_reason: str | None = None
    start_reason: str = "first"
    continue_attempt: str | None = None
    generation: int = 0
    last_error: str | None = None
    approved: dict[str, int] = field(default_factory=dict)

    def carry(self) -> dict[str, Any]:
        """What a stage attempt is handed."""
        return {
            "previousOutput": self.previous,
            "qaIssues": list(self.qa_issues),
            "retryReason": self.retry_reason,
            "startReason": self.start_reason,
        }


@dataclass(frozen=True)
class End:
    """Why a walk stopped short of the end, or that it completed.

    Attributes:
        status: ``completed``, or the resting status: ``failed``, ``stopped``, ``paused``.
        reason: Why (the pipeline's summary; its error when it failed).
        item_failed: A person declined: the current item is ``failed``.
        fresh: The resume starts the node again with fresh retries (a declined question).
        at_end: The walk had reached the end (a stop came first): the resume finishes it.
    """

    status: PipelineStatus
    reason: str | None = None
    item_failed: bool = False
    fresh: bool = False
    at_end: bool = False


class _Walk:
    """One execution of the workflow (see the module)."""

    def __init__(self, walker: Walker, pipeline_id: str) -> None:
        self.w = walker
        self.engine = walker.engine
        self.pid = pipeline_id
        self.graph: Graph
        self.state: WalkState

    async def run(self) -> str:
        """The workflow's body: walk, park, wait for a resume, go on; returns ``completed``."""
        loaded = await self.engine.step("load", self.w.load, self.pid)
        document = loaded["template"]
        template = parse_template(document, max_stages=len(document.get("steps") or ()) or 1)
        self.graph = compile_graph(template)
        self.state = WalkState(node=self.graph.entry, generation=int(loaded["generation"]))
        end = await self._guarded(self._walk)
        while True:
            if end.status is PipelineStatus.COMPLETED:
                finished = await self.engine.step("finish", self.w.finish, self.pid)
                if finished == PipelineStatus.COMPLETED.value:
                    return PipelineStatus.COMPLETED.value
                end = End(PipelineStatus(finished), "stopped as the walk ended", at_end=True)
            parked = await self.engine.step(
                "park",
                self.w.park,
                self.pid,
                end.status.value,
                end.reason,
                self.state.generation,
                end.item_failed,
            )
            await self._wait_resume()
            end = await self._guarded(functools.partial(self._after_resume, end, parked.get("attempt")))

    async def _guarded(self, walk: Callable[[], Awaitable[End | None]]) -> End:
        """``walk``, then walk on; a step that raised (the store failed, a bug) ends the walk
        ``failed`` with the error, resumable. Deterministic: a replay raises the recorded error again.
        The engine's own errors (a workflow that no longer matches its record) are not caught."""
        try:
            end = await walk()
            return end if end is not None else await self._walk()
        except Exception as exc:
            if self.engine.own_error(exc):
                raise
            log.exception("pipeline %s: the walk failed at node %s", self.pid, self.state.node)
            message = exc.message if isinstance(exc, OctipusError) else f"{type(exc).__name__}: {exc}"
            return End(_FAILED, f"the walk failed at stage {self._name()}: {message}")

    async def _after_resume(self, end: End, attempt: str | None) -> End | None:
        """Apply a resume to the walk's state (a step: the queued item edits, the generation); an
        :class:`End` (``completed``) when the walk had reached the end already."""
        state = self.state
        woke = await self.engine.step("resumed", self.w.resumed, self.pid, state.item)
        state.generation = int(woke["generation"])
        if end.at_end:
            return End(PipelineStatus.COMPLETED)
        state.start_reason, state.continue_attempt = "resume", attempt
        if end.fresh or end.status is _FAILED:
            state.traversals = {
                k: v for k, v in state.traversals.items() if not k.startswith(f"{state.node}->")
            }
            state.contract_retries = 0
        if woke["itemGone"]:
            loop = self.graph.node(state.node).loop
            state.node = loop if loop is not None else state.node
            state.item, state.continue_attempt, state.qa_issues = None, None, ()
        return None

    async def _wait_resume(self) -> dict[str, Any]:
        """Wait (durably) for the runner's resume; other messages (a late answer) and stale resumes
        are dropped (:meth:`_fresh`)."""
        while True:
            message = await self.engine.recv(WAKE_TOPIC, self.w.limits.wait_seconds)
            if self._fresh(message):
                assert isinstance(message, dict)
                return message

    def _fresh(self, message: object) -> bool:
        """Whether ``message`` is a resume of a walk newer than the one this walk knows: a resume
        whose claim the walk already walked under (a stop and a resume landed between two steps; the
        next boundary saw ``running`` again) is stale and dropped."""
        if not isinstance(message, dict) or message.get("kind") != "resume":
            return False
        generation = message.get("generation")
        return not isinstance(generation, int) or generation > self.state.generation

    async def _walk(self) -> End:
        """Walk from the current node until the graph ends or a stage does not deliver."""
        state = self.state
        while True:
            checked = await self.engine.step("boundary", self.w.boundary, self.pid, state.node, state.item)
            state.generation = int(checked["generation"])
            status = PipelineStatus(checked["status"])
            if status is not PipelineStatus.RUNNING:
                return End(status if status in (_STOPPED, _FAILED, _PAUSED) else _PAUSED, None)
            if checked["error"]:
                return End(_FAILED, checked["error"])
            kind = self.graph.node(state.node).kind
            if kind is NodeKind.FOREACH:
                result: Outcome | End | None = await self._foreach()
            elif kind is NodeKind.HUMAN:
                result = await self._human()
            elif (denied := await ask_stage_approval(self, self._ask)) is not None:
                result = End(_STOPPED, denied)
            else:
                result = await self._stage()
            if result is None:
                continue  # the same node again (a contract retry)
            if isinstance(result, End):
                return result
            end = await self._take(next_node(self.graph, state.node, result, state.traversals), result)
            if end is not None:
                return end

    async def _foreach(self) -> Outcome:
        picked = await self.engine.step("next_item", self.w.next_item, self.pid, self.state.node)
        item = picked["item"]
        self.state.item = item
        self.state.traversals, self.state.qa_issues = {}, ()
        return Outcome.ITEMS_PENDING if item is not None else Outcome.ITEMS_DONE

    async def _stage(self) -> Outcome | End | None:
        """One stage attempt; its verdict as the graph's outcome (None: retry the node; an
        :class:`End` when the walk parks)."""
        state = self.state
        ran = await self.engine.guarded_step(
            "stage", self.w.run_stage, self.pid, state.node, state.item, state.continue_attempt, state.carry()
        )
        if isinstance(ran, Interrupted):
            settled = await self.engine.step("settled", self.w.settled, self.pid, state.node, state.item)
            if settled is None:
                return End(
                    _PAUSED, "interrupted: the daemon stopped while the stage ran; resume it to continue"
                )
            ran = Ran(settled)
        verdict: dict[str, Any] = ran.value
        state.continue_attempt = None
        state.generation = max(state.generation, int(verdict.get("generation", 0)))
        outcome, error = str(verdict["outcome"]), verdict.get("error")
        if outcome in ("ok", "qa_pass"):
            state.previous, state.retry_reason = verdict.get("output"), None
            return Outcome.SUCCEEDED
        if outcome == "qa_fail":
            state.previous, state.qa_issues = verdict.get("output"), tuple(verdict.get("issues") or ())
            return Outcome.QA_FAILED
        if outcome == "audit_gate_failed":
            state.retry_reason = error
            return Outcome.AUDIT_GATE_FAILED
        if outcome == "contract_failure":
            return self._contract_retry(error)
        state.continue_attempt = str(verdict["attemptId"])
        if outcome == "stopped":
            return End(_STOPPED, error or "stopped")
        if outcome == "interrupted":
            return End(_PAUSED, error or "interrupted")
        state.last_error = f"stage {self._name()} failed: {error}"
        return Outcome.ERROR

    def _contract_retry(self, error: str | None) -> Outcome | None:
        state = self.state
        state.contract_retries += 1
        if state.contract_retries <= self.graph.step(state.node).max_retries:
            state.retry_reason, state.start_reason = error, "contract_retry"
            return None
        state.last_error = (
            f"stage {self._name()} broke its contract {state.contract_retries} times; the last time: {error}"
        )
        return Outcome.ERROR

    def _name(self) -> str:
        return self.graph.node(self.state.node).name

    async def _human(self) -> Outcome | End:
        step = self.graph.step(self.state.node)
        question = {
            "stage": step.name,
            "reason": step.description or f"{step.name}: a person's input is needed",
            "fields": [f.to_json() for f in step.human_fields],
        }
        answer = await self._ask(question)
        if not answer.get("approved"):
            return End(_FAILED, f"stage {step.name}: the person declined", fresh=True)
        self.state.previous = str(answer.get("reason") or "approved")
        return Outcome.SUCCEEDED

    async def _ask(self, question: dict[str, Any]) -> dict[str, Any]:
        """Ask a person (durably) and wait for the answer; a resume meanwhile re-opens the wait."""
        state = self.state
        request = await self.engine.step(
            "ask", self.w.questions.ask, self.pid, state.node, state.item, question
        )
        while True:
            message = await self.engine.recv(WAKE_TOPIC, self.w.limits.wait_seconds)
            if not isinstance(message, dict):
                continue
            if self._fresh(message):
                state.generation = max(state.generation, int(message.get("generation") or 0))
                await self.engine.step("ask_again", self.w.questions.again, self.pid, state.node)
            elif message.get("kind") == "answer" and message.get("approvalId") == request:
                await self.engine.step(
                    "answered", self.w.questions.answered, self.pid, state.node, state.item, message
                )
                return message

    async def _take(self, transition: Transition, outcome: Outcome) -> End | None:
        """Follow ``transition``; an :class:`End` when the walk ends or fails."""
        state = self.state
        if transition.kind is TransitionKind.FINISH:
            await self.engine.step(
                "advance", self.w.advance, self.pid, state.node, state.previous, None, None
            )
            return End(PipelineStatus.COMPLETED)
        if transition.kind is TransitionKind.FAIL:
            return End(_FAILED, state.last_error or f"stage {self._name()} failed")
        if transition.kind is TransitionKind.EXHAUSTED:
            return await self._exhausted(outcome)
        edge = transition.edge
        assert edge is not None and transition.target is not None
        if edge.max_traversals is not None:
            state.traversals[edge.key] = state.traversals.get(edge.key, 0) + 1
        node = self.graph.node(state.node)
        finished = state.item if node.loop is not None and node.loop == transition.target else None
        output = state.previous if node.kind is not NodeKind.FOREACH else None
        if node.kind is not NodeKind.FOREACH:
            await self.engine.step(
                "advance", self.w.advance, self.pid, state.node, output, finished, transition.target
            )
        self._move(edge.condition, transition.target, finished is not None)
        return None

    def _move(self, condition: EdgeCondition, target: str, item_finished: bool) -> None:
        state = self.state
        state.node, state.contract_retries = target, 0
        if item_finished:
            state.item = None
        if condition is EdgeCondition.QA_FAIL:
            state.start_reason = "qa_retry"
        elif condition is EdgeCondition.AUDIT_GATE_FAILED:
            state.start_reason = "audit_retry"
        else:
            state.start_reason, state.qa_issues, state.retry_reason = "next", (), None

    async def _exhausted(self, outcome: Outcome) -> End | None:
        """Retries ran out: ask a person; approved, the work is accepted as it is and the walk goes
        on; declined, the pipeline fails and the item is ``failed`` (resumable with fresh retries)."""
        step = self.graph.step(self.state.node)
        issues = "; ".join(self.state.qa_issues) or self.state.retry_reason or outcome.value
        question = {
            "stage": step.name,
            "reason": f"retries ran out at stage {step.name} ({step.max_retries}); last problem: {issues}. "
            "Approve to accept the work as it is and go on; deny to stop the pipeline (failed).",
            "fields": [],
        }
        answer = await self._ask(question)
        if not answer.get("approved"):
            reason = f"retries ran out at stage {step.name} and the person declined to go on"
            return End(_FAILED, reason, item_failed=True, fresh=True)
        self.state.qa_issues = ()
        return await self._take(next_node(self.graph, self.state.node, Outcome.SUCCEEDED), Outcome.SUCCEEDED)


async def pipeline_walk(pipeline_id: str) -> str:
    """The workflow: walk the pipeline ``pipeline_id`` (see the module); returns ``completed``."""
    return await _Walk(active_walker(), pipeline_id).run()


#: The pipeline walk, registered with the durable engine at composition.
PIPELINE_WALK: WorkflowDef[[str], str] = WorkflowDef("octipus.pipeline_walk", pipeline_walk)
