"""What one stage attempt means (issue 27 items 2-4), independent of the durable engine.

The walker's step calls :meth:`StageExecutor.execute` with a :class:`StageContext` (an attempt it
already started or reopened in the store) and gets a :class:`StageVerdict` back. One call:

1. a QA stage's ``verifyCommand`` (rendered with the parameters) runs first, in the session's
   workspace through the shell tool's path (:func:`~octipusd.runtime.gates.run_gates`: rules,
   recovery review, journal), only when the stage holds the shell tool; it runs as a run of its
   own (a ``runs`` row of the attempt, prompt ``verifyCommand: <command>``) because the journal and
   the policy's events belong to a run and the worker's run does not exist yet. Its outcome goes in
   the auditor's prompt: ``RESULT: exit 0``, ``RESULT: FAILED`` with the output's end, or that it
   could not run (the stage does not fail for that; the auditor decides);
2. the prompt (:func:`build_prompt`): the step's rendered prompt, the plan item, a QA bounce's
   issues, a contract retry's reason, the RESULT, a resumed attempt's INCOMPLETE text (never
   reported as output), and the handoff contract (:mod:`octipusd.pipelines.handoff`);
3. the worker runs through :class:`~octipusd.runtime.stage_runs.StageRuns` (the step's model,
   toolIds, maxTokens, hostServices; the context's resume flag); its text so far is saved as the
   attempt's INCOMPLETE text every 15 s and when it fails;
4. the judgement (:func:`judge`): the handoff, the evidence gates, the plan items;
5. the attempt is finished in the store (:func:`attempt_end`): ``execute`` owns the attempt's end,
   the walker only decides where to go next.

Outcomes (:class:`StageResult`) and how they map to the graph (:meth:`StageResult.graph_outcome`):

* ``ok`` (a standard stage delivered) and ``qa_pass`` -> ``succeeded``; ``qa_fail`` (issues for
  the implementer) -> ``qa_failed``;
* ``audit_gate_failed``: a QA stage's evidence gate failed (the audit itself is not to be trusted:
  it changed files while ``readOnly``, ran no command while ``runsCommands``) -> ``audit_gate_failed``
  (the graph goes back to the QA node). A failed ``verifyCommand`` is the auditor's evidence, not a
  gate: FACTS.md §6 hands it to the auditor, whose ``fail`` bounces the work to the implementer;
* ``contract_failure``: the attempt ended but broke the stage's contract (a QA or ``producesPlan``
  stage without a valid handoff, ``stopped: true``, a standard stage reporting ``fail``, a failed
  evidence gate of a non-QA stage, a ``producesPlan`` stage leaving no items). No graph outcome:
  the walker retries the same node and item with :attr:`StageVerdict.error` as the retry reason
  (a new attempt, up to ``maxRetries``), then treats it as ``error``;
* ``failed`` (the worker crashed or could not start) -> ``error``; ``stopped`` and ``interrupted``
  -> no graph outcome: the walker parks the pipeline, and its resume continues the same attempt;
* ``awaiting_approval``: the worker gave up on a person's answer (issue 28: an approval expired, or
  its CLI went away while one waited) -> no graph outcome: the walk asks the person again
  (:mod:`octipusd.pipelines.approved_calls`) and their approval continues the same attempt.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import anyio

from octipusd.errors import ConflictError, OctipusError
from octipusd.pipelines.evidence import check_evidence
from octipusd.pipelines.graph import Outcome
from octipusd.pipelines.handoff import Handoff, HandoffStatus, contract_text, parse_handoff
from octipusd.pipelines.prompts import render_command, render_prompt
from octipusd.pipelines.templates import ParameterValue, Step, Template
from octipusd.runtime.gates import GateCaller, run_gates
from octipusd.runtime.planning import stage_tools
from octipusd.runtime.stage_runs import StageCounters, StageHandle, StageOutcome, StageRequest, StageRuns
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_item_store import ItemDraft
from octipusd.store.pipeline_records import AttemptStatus, Pipeline, PipelineAttempt, PipelineItem
from octipusd.store.records import RunStatus
from octipusd.toolkit import GateSpec, RunIdentity
from octipusd.tools import SHELL_RUN

__all__ = [
    "AttemptEnd",
    "OnStarted",
    "StageContext",
    "StageExecutor",
    "StageResult",
    "StageVerdict",
    "VerifyResult",
    "attempt_end",
    "build_prompt",
    "judge",
]

log = logging.getLogger("octipusd.pipelines.stages")

#: Told the live handle once the worker started (the walker keeps it to stop the stage).
OnStarted = Callable[[StageHandle], Awaitable[None]]
#: Asked right before a worker starts: a reason it may not (the pipeline was stopped), or None.
MayStart = Callable[[], Awaitable[str | None]]


class StageResult(StrEnum):
    """What one stage attempt came to (see the module docstring)."""

    OK = "ok"
    QA_PASS = "qa_pass"
    QA_FAIL = "qa_fail"
    AUDIT_GATE_FAILED = "audit_gate_failed"
    CONTRACT_FAILURE = "contract_failure"
    FAILED = "failed"
    STOPPED = "stopped"
    INTERRUPTED = "interrupted"
    AWAITING_APPROVAL = "awaiting_approval"

    @property
    def graph_outcome(self) -> Outcome | None:
        """The :class:`~octipusd.pipelines.graph.Outcome` to walk the graph with, or None where the
        walker decides itself: ``contract_failure`` (retry the node and item in place, ``error``
        once the retries ran out), ``stopped`` and ``interrupted`` (park; resume the attempt),
        ``awaiting_approval`` (ask the person again; their approval resumes the attempt)."""
        return _GRAPH_OUTCOMES.get(self)


_GRAPH_OUTCOMES: dict[StageResult, Outcome] = {
    StageResult.OK: Outcome.SUCCEEDED,
    StageResult.QA_PASS: Outcome.SUCCEEDED,
    StageResult.QA_FAIL: Outcome.QA_FAILED,
    StageResult.AUDIT_GATE_FAILED: Outcome.AUDIT_GATE_FAILED,
    StageResult.FAILED: Outcome.ERROR,
}


@dataclass(frozen=True)
class StageContext:
    """Everything one stage attempt needs (the walker builds it inside its step).

    Attributes:
        pipeline: The pipeline's record (session, workspace, user, parameter values).
        template: Its parsed template.
        node_key: The stage's graph node (``"n2"``).
        step_index: The template step it runs (not a ``human_input`` one: the walker asks a person).
        item: The plan item of a loop body's stage, or None.
        attempt: The attempt, already started or reopened in the store by the walker.
        resume: Continue the attempt's vendor conversation (a resume after a stop, failure or restart).
        previous_output: The previous stage's output (``{{previousOutput}}``).
        qa_issues: A QA bounce's issues, handed to the implementer.
        retry_reason: Why the stage runs again after a contract failure or a gate (a new attempt).
        description: ``{{description}}`` when the step has none (the pipeline's task), or None.
    """

    pipeline: Pipeline
    template: Template
    node_key: str
    step_index: int
    item: PipelineItem | None
    attempt: PipelineAttempt
    resume: bool = False
    previous_output: str | None = None
    qa_issues: tuple[str, ...] = ()
    retry_reason: str | None = None
    description: str | None = None

    @property
    def step(self) -> Step:
        """The template step."""
        return self.template.steps[self.step_index]


@dataclass(frozen=True)
class VerifyResult:
    """A QA stage's ``verifyCommand`` outcome, as the auditor is told it.

    Attributes:
        command: The rendered command.
        ran: It ran (its exit status or timeout is known); False: it could not run.
        passed: It exited 0.
        text: The ``RESULT: ...`` section of the auditor's prompt.
        run_id: The run it ran as, or None when it did not get that far.
    """

    command: str
    ran: bool
    passed: bool
    text: str
    run_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready (``command``, ``ran``, ``passed``, ``text``, ``runId``)."""
        return {
            "command": self.command,
            "ran": self.ran,
            "passed": self.passed,
            "text": self.text,
            "runId": self.run_id,
        }


@dataclass(frozen=True)
class StageVerdict:
    """What :meth:`StageExecutor.execute` returns: JSON-able (:meth:`to_json`, :meth:`from_json`).

    Attributes:
        outcome: :class:`StageResult`.
        output: The stage's output (``ok``, ``qa_pass``, ``qa_fail``): the answer without its handoff
            block, else the handoff's summary; None otherwise (INCOMPLETE text never is output).
        issues: A QA stage's issues (``qa_fail``), for the implementer's next attempt.
        items: Ids of the plan items the handoff added (``producesPlan``).
        counters: The run's counters (``changedFiles``, ``commandsRun``, ``diskChanged``), or None.
        tokens: Tokens the worker used.
        run_id: The worker's run, or None when it never started.
        error: Why it did not deliver (the retry reason of a ``contract_failure`` or
            ``audit_gate_failed``; the failure, stop or interruption), else None.
        verify: The ``verifyCommand`` outcome (:meth:`VerifyResult.to_json`), or None.
        blocked: The approval an ``awaiting_approval`` worker gave up on, or None.
    """

    outcome: StageResult
    output: str | None = None
    issues: tuple[str, ...] = ()
    items: tuple[str, ...] = ()
    counters: dict[str, Any] | None = None
    tokens: int = 0
    run_id: str | None = None
    error: str | None = None
    verify: dict[str, Any] | None = None
    blocked: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready, for the walker's checkpoint."""
        return {
            "outcome": self.outcome.value,
            "output": self.output,
            "issues": list(self.issues),
            "items": list(self.items),
            "counters": self.counters,
            "tokens": self.tokens,
            "runId": self.run_id,
            "error": self.error,
            "verify": self.verify,
            "blocked": self.blocked,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> StageVerdict:
        """The inverse of :meth:`to_json`."""
        return cls(
            outcome=StageResult(raw["outcome"]),
            output=raw.get("output"),
            issues=tuple(raw.get("issues") or ()),
            items=tuple(raw.get("items") or ()),
            counters=raw.get("counters"),
            tokens=int(raw.get("tokens") or 0),
            run_id=raw.get("runId"),
            error=raw.get("error"),
            verify=raw.get("verify"),
            blocked=raw.get("blocked"),
        )


def counters_json(counters: StageCounters) -> dict[str, Any]:
    """A run's counters as the attempt and the verdict record them."""
    return {
        "changedFiles": counters.changed_files,
        "commandsRun": counters.commands_run,
        "diskChanged": counters.disk_changed,
    }


# ------------------------------------------------------------------ the prompt


def build_prompt(ctx: StageContext, verify: VerifyResult | None = None) -> str:
    """The worker's prompt: the step's rendered prompt, then the sections that apply (pure)."""
    step = ctx.step
    values: Mapping[str, ParameterValue] = ctx.pipeline.params
    parts = [render_prompt(ctx.template, ctx.step_index, values, ctx.previous_output, ctx.description)]
    if ctx.item is not None:
        item = ctx.item
        lines = ["## Plan item", f"Title: {item.title}"]
        lines += [f"Detail: {item.detail}"] if item.detail else []
        lines += [f"Acceptance: {item.acceptance}"] if item.acceptance else []
        parts.append("\n".join(lines))
    if ctx.qa_issues:
        issues = "\n".join(f"- {issue}" for issue in ctx.qa_issues)
        parts.append(f"## QA issues to fix\nThe last review of this work found:\n{issues}")
    if ctx.retry_reason:
        parts.append(
            f"## Why this stage runs again\nThe last attempt did not meet the contract: {ctx.retry_reason}"
        )
    if verify is not None:
        parts.append(f"## verifyCommand\n`{verify.command}`\n{verify.text}")
    incomplete = ctx.attempt.incomplete_text if ctx.resume else None
    if incomplete:
        parts.append(
            "## INCOMPLETE\nINCOMPLETE: your text so far in this attempt, which was cut off; continue"
            f" from it, do not start over. It is not your answer.\n<<<\n{incomplete}\n>>>"
        )
    parts.append(contract_text(qa=step.is_qa, produces_plan=step.produces_plan))
    return "\n\n".join(p for p in parts if p)


# ------------------------------------------------------------------ the judgement


@dataclass(frozen=True)
class Judgement:
    """A succeeded run judged, before the plan items are stored (:func:`judge`).

    Attributes:
        outcome: ok, qa_pass, qa_fail, audit_gate_failed or contract_failure.
        output: The stage's output (see :attr:`StageVerdict.output`).
        issues: A QA failure's issues.
        error: The contract failure's or gate's reason.
        handoff: The checked handoff, or None.
    """

    outcome: StageResult
    output: str | None = None
    issues: tuple[str, ...] = ()
    error: str | None = None
    handoff: Handoff | None = None


def judge(step: Step, answer: str, counters: StageCounters) -> Judgement:
    """Judge a succeeded worker's answer (pure): the handoff first, then the evidence gates (whether
    or not the worker wrote a handoff: an answer without one never passes a stage that changed
    nothing it had to), then the handoff's status. A ``producesPlan`` stage's item count is checked
    by the caller."""
    parsed = parse_handoff(answer)
    handoff = parsed.handoff
    if handoff is None and (step.is_qa or step.produces_plan):
        return Judgement(StageResult.CONTRACT_FAILURE, error=f"no valid handoff: {parsed.problem}")
    if handoff is not None and handoff.stopped:
        why = f": {handoff.summary}" if handoff.summary else ""
        return Judgement(StageResult.CONTRACT_FAILURE, error=f"the worker reported stopped: true{why}")
    evidence = check_evidence(step, counters)
    if not evidence.passed:
        failed = StageResult.AUDIT_GATE_FAILED if step.is_qa else StageResult.CONTRACT_FAILURE
        return Judgement(failed, error=f"evidence gate failed: {evidence.reason}", handoff=handoff)
    if handoff is None:
        return Judgement(StageResult.OK, output=parsed.prose)
    output = parsed.prose or handoff.summary
    if step.is_qa:
        if handoff.status is HandoffStatus.PASS:
            return Judgement(StageResult.QA_PASS, output=output, handoff=handoff)
        if handoff.status is HandoffStatus.FAIL:
            issues = handoff.issues or (
                handoff.summary or "the review failed the work without naming an issue",
            )
            return Judgement(StageResult.QA_FAIL, output=output, issues=issues, handoff=handoff)
        return Judgement(
            StageResult.CONTRACT_FAILURE, error='a QA stage must answer status "pass" or "fail", not "done"'
        )
    if handoff.status is HandoffStatus.FAIL:
        problems = "; ".join(handoff.issues) or handoff.summary or "no reason given"
        return Judgement(StageResult.CONTRACT_FAILURE, error=f"the worker reported fail: {problems}")
    return Judgement(StageResult.OK, output=output, handoff=handoff)


@dataclass(frozen=True)
class AttemptEnd:
    """How the store records an attempt's end (:meth:`~octipusd.store.Store.finish_pipeline_attempt`)."""

    status: AttemptStatus
    result: str | None = None
    error: str | None = None
    retry_reason: str | None = None
    keep_text: bool = False


def attempt_end(verdict: StageVerdict) -> AttemptEnd:
    """The attempt's record for a verdict: delivered (ok, qa_pass, qa_fail) is ``succeeded`` with the
    output; a contract failure or gate is ``failed`` with the retry reason (the next attempt is a new
    one); a crash is ``failed`` keeping its INCOMPLETE text (a resume continues it); a stop or an
    interruption keeps it too."""
    outcome, error = verdict.outcome, verdict.error
    if outcome in (StageResult.OK, StageResult.QA_PASS, StageResult.QA_FAIL):
        return AttemptEnd(AttemptStatus.SUCCEEDED, result=verdict.output)
    if outcome in (StageResult.CONTRACT_FAILURE, StageResult.AUDIT_GATE_FAILED):
        return AttemptEnd(AttemptStatus.FAILED, error=error, retry_reason=error)
    if outcome is StageResult.FAILED:
        return AttemptEnd(AttemptStatus.FAILED, error=error, keep_text=True)
    if outcome is StageResult.AWAITING_APPROVAL:  # the person's approval continues it
        return AttemptEnd(AttemptStatus.INTERRUPTED, error=error, keep_text=True)
    status = AttemptStatus.STOPPED if outcome is StageResult.STOPPED else AttemptStatus.INTERRUPTED
    return AttemptEnd(status, error=error)


# ------------------------------------------------------------------ the executor


class StageExecutor:
    """Runs stage attempts (see the module docstring); built once, beside the walker.

    Args:
        runs: The stage runs (its services: the store, the permission gate, the journal).
    """

    def __init__(self, runs: StageRuns) -> None:
        self.runs = runs
        self.store = runs.services.store

    async def execute(
        self,
        ctx: StageContext,
        *,
        on_started: OnStarted | None = None,
        may_start: MayStart | None = None,
    ) -> StageVerdict:
        """Run one stage attempt to its end and record that end on the attempt.

        Args:
            ctx: The attempt (started or reopened in the store by the caller).
            on_started: Told the live handle once the worker's run started (to stop it); a failure
                of it stops the worker and propagates.
            may_start: Asked right before the worker starts (after the ``verifyCommand``): a reason
                (the pipeline was stopped meanwhile) ends the attempt ``stopped`` without a worker.

        Returns:
            The :class:`StageVerdict`; the attempt is finished in the store with it
            (:func:`attempt_end`). A worker that crashed or could not start is ``failed`` with its
            reason; a daemon not serving runs is ``interrupted``.

        Raises:
            StoreError: The store failed recording the attempt's run or end (the attempt stays
                ``running``; a restart's reconciliation pauses it).
            Cancellation: the worker is stopped first; the attempt is left to the caller.
        """
        verify = await self._verify(ctx) if ctx.step.is_qa and ctx.step.verify_command else None
        stopping = await may_start() if may_start is not None else None
        try:
            if stopping is not None:
                raise _NotStarted(stopping)
            handle = await self.runs.start(self._request(ctx, build_prompt(ctx, verify)), self._saver(ctx))
        except _NotStarted as exc:
            verdict = StageVerdict(StageResult.STOPPED, error=exc.message)
        except OctipusError as exc:  # a session, model or daemon problem: the attempt did not start
            result = StageResult.INTERRUPTED if isinstance(exc, ConflictError) else StageResult.FAILED
            verdict = StageVerdict(result, error=f"the stage could not start: {exc.message}")
        else:
            outcome = await self._wait(ctx, handle, on_started)
            verdict = await self._verdict(ctx, outcome)
        if verify is not None:
            verdict = dataclasses.replace(verdict, verify=verify.to_json())
        await self._finish(ctx, verdict)
        return verdict

    def _request(self, ctx: StageContext, prompt: str) -> StageRequest:
        step, attempt = ctx.step, ctx.attempt
        return StageRequest(
            pipeline_id=ctx.pipeline.id,
            session_id=ctx.pipeline.session_id,
            node_key=ctx.node_key,
            stage=step.name,
            item_id=ctx.item.id if ctx.item is not None else None,
            attempt_id=attempt.id,
            attempt_number=attempt.number,
            prompt=prompt,
            model=step.model,
            tool_ids=step.tool_ids,
            max_tokens=step.max_tokens,
            host_services=step.host_services,
            resume=ctx.resume,
        )

    def _saver(self, ctx: StageContext) -> Callable[[str], Awaitable[None]]:
        """Save the worker's text so far as the attempt's INCOMPLETE text; a resumed attempt keeps
        its earlier text before the new (the run starts its text afresh, the attempt does not)."""
        attempt_id, store = ctx.attempt.id, self.store
        earlier = ctx.attempt.incomplete_text if ctx.resume else None

        async def save(text: str) -> None:
            whole = f"{earlier}\n\n{text}" if earlier else text
            await in_thread(store.save_incomplete_text, attempt_id, whole)

        return save

    async def _wait(
        self, ctx: StageContext, handle: StageHandle, on_started: OnStarted | None
    ) -> StageOutcome:
        """Record the run on the attempt, hand out the handle, wait for the end; stop it when
        cancelled or when recording or handing out fails."""
        try:
            await in_thread(self.store.add_attempt_run, ctx.attempt.id, handle.run_id)
            if on_started is not None:
                await on_started(handle)
            return await handle.wait()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await handle.stop("the pipeline's walk ended while the stage ran")
            raise

    async def _verdict(self, ctx: StageContext, outcome: StageOutcome) -> StageVerdict:
        """The verdict of an ended worker run (the plan items of a ``producesPlan`` stage stored)."""
        common: dict[str, Any] = {
            "counters": counters_json(outcome.counters),
            "tokens": outcome.tokens,
            "run_id": outcome.run_id,
        }
        if outcome.status is RunStatus.CANCELLED:
            return StageVerdict(
                StageResult.STOPPED, error=outcome.reason or "the stage was stopped", **common
            )
        if outcome.status is RunStatus.INTERRUPTED:
            reason = outcome.reason or "the daemon stopped while the stage ran"
            return StageVerdict(StageResult.INTERRUPTED, error=reason, **common)
        if outcome.gave_up:  # the pipeline never fails for that (seed 003): the person is asked again
            reason = outcome.reason or "the worker gave up waiting for an approval"
            return StageVerdict(
                StageResult.AWAITING_APPROVAL, error=reason, blocked=outcome.blocked, **common
            )
        if outcome.status is not RunStatus.SUCCEEDED:
            reason = outcome.reason or f"the stage's run ended {outcome.status.value}"
            return StageVerdict(StageResult.FAILED, error=reason, **common)
        judged = judge(ctx.step, outcome.text or "", outcome.counters)
        items: tuple[str, ...] = ()
        if ctx.step.produces_plan and judged.handoff is not None and judged.outcome is StageResult.OK:
            items, problem = await self._plan(ctx, judged.handoff)
            if problem is not None:
                return StageVerdict(StageResult.CONTRACT_FAILURE, error=problem, **common)
        return StageVerdict(judged.outcome, judged.output, judged.issues, items, error=judged.error, **common)

    async def _plan(self, ctx: StageContext, handoff: Handoff) -> tuple[tuple[str, ...], str | None]:
        """Store the handoff's items (titles already on the plan skipped); the ids added, or why the
        stage failed its contract (an item the store refuses; no item on the plan at all)."""
        drafts = [ItemDraft(i.title, i.detail, i.acceptance) for i in handoff.items]
        pipeline_id = ctx.pipeline.id
        try:
            added = await in_thread(
                lambda: self.store.add_pipeline_items(
                    pipeline_id, drafts, node_key=ctx.node_key, skip_known_titles=True
                )
            )
        except OctipusError as exc:
            if exc.http_status != 400:  # the store failed: not the worker's doing
                raise
            return (), f"the handoff's items were refused: {exc.message}"
        if not await in_thread(self.store.list_pipeline_items, pipeline_id):
            return (), (
                "the stage must produce a plan but the pipeline has no items; list them in the"
                " handoff's items or add them with plan__add_items"
            )
        return tuple(i.id for i in added), None

    async def _finish(self, ctx: StageContext, verdict: StageVerdict) -> None:
        end = attempt_end(verdict)
        await in_thread(
            lambda: self.store.finish_pipeline_attempt(
                ctx.attempt.id,
                end.status,
                result=end.result,
                error=end.error,
                retry_reason=end.retry_reason,
                counters=verdict.counters,
                tokens=verdict.tokens,
                keep_text=end.keep_text,
            )
        )

    # ------------------------------------------------------------------ verifyCommand

    def holds_shell(self, step: Step) -> bool:
        """Whether the stage's worker holds the shell tool (its toolIds; empty: the defaults, which do)."""
        tools, _unknown = stage_tools(step.tool_ids, self.runs.services.swarm.levelDefaults)
        return any(t.name == SHELL_RUN.name for t in tools)

    async def _verify(self, ctx: StageContext) -> VerifyResult | None:
        """Run a QA stage's ``verifyCommand`` as a run of the attempt (module docstring, step 1);
        what could not run is said in the result, never raised (but cancellation)."""
        command = render_command(ctx.step, ctx.pipeline.params)
        if command is None:
            return None
        if not self.holds_shell(ctx.step):
            return _not_run(command, "the stage does not hold the shell tool (its toolIds)", None)
        services, pipeline = self.runs.services, ctx.pipeline
        request = self._request(ctx, f"verifyCommand: {command}")
        try:
            session = await in_thread(services.store.get_session, pipeline.session_id)
            run = await in_thread(
                lambda: services.store.create_run(
                    session_id=pipeline.session_id,
                    prompt=request.prompt,
                    owner=services.owner,
                    host_services=request.host_services,
                    stage=request.tag,
                )
            )
        except OctipusError as exc:
            return _not_run(command, f"Octipus could not record it: {exc.message}", None)
        identity = RunIdentity(
            run_id=run.id,
            session_id=session.id,
            user=services.user,
            worker_id=f"stage:{run.id}",
            workspace=Path(pipeline.workspace),
            attended=session.attended,
            stage=request.tag,
        )
        caller = GateCaller(identity, space=session.space_id is not None, host_services=request.host_services)
        result: VerifyResult | None = None
        try:
            await in_thread(lambda: services.store.update_run(run.id, status=RunStatus.RUNNING.value))
            gate = GateSpec(name="verifyCommand", commands=(command,), retryable=False)
            verdict = await run_gates(services, caller, tree=Path(pipeline.workspace), gates=[gate])
            result = _verify_result(command, verdict.results[0], run.id)
        except OctipusError as exc:  # the store failed marking it running: it did not run
            result = _not_run(command, f"Octipus could not run it: {exc.message}", run.id)
        finally:
            with anyio.CancelScope(shield=True):
                await self._end_verify_run(run.id, result)
        return result

    async def _end_verify_run(self, run_id: str, result: VerifyResult | None) -> None:
        """End the verify command's run: succeeded when it passed, else failed with the RESULT."""
        status = RunStatus.SUCCEEDED if result is not None and result.passed else RunStatus.FAILED
        reason = None if status is RunStatus.SUCCEEDED else (result.text if result else "cancelled")
        try:
            await in_thread(
                lambda: self.store.finish_run(
                    run_id, status=status, reason=reason, result_text=result.text if result else None
                )
            )
            await self.runs.services.hub.emit(run_id, "run_status", {"status": str(status), "final": True})
        except OctipusError as exc:  # the verdict stands; the run's record is behind (logged)
            log.warning("verify run %s: recording its end failed: %s", run_id, exc.message)


class _NotStarted(OctipusError):
    """The worker may not start (the pipeline was stopped before it)."""


def _not_run(command: str, why: str, run_id: str | None) -> VerifyResult:
    text = f"RESULT: could not run ({why}). Judge the work without it."
    return VerifyResult(command, ran=False, passed=False, text=text, run_id=run_id)


def _verify_result(command: str, gate: Mapping[str, Any], run_id: str) -> VerifyResult:
    """The auditor's RESULT from the gate's result (``run_gates``): exit 0, FAILED, or not run."""
    status, code, why = gate.get("status"), gate.get("exitCode"), str(gate.get("reason") or "")
    output = str(gate.get("output") or "")
    tail = f"\nOutput (its end):\n{output}" if output else ""
    if status == "passed":
        return VerifyResult(command, ran=True, passed=True, text=f"RESULT: exit 0{tail}", run_id=run_id)
    if status == "failed" and (code is not None or why.startswith("timed out")):
        return VerifyResult(
            command, ran=True, passed=False, text=f"RESULT: FAILED ({why}){tail}", run_id=run_id
        )
    return _not_run(command, why or "unknown", run_id)
