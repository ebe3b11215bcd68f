"""What one stage attempt means (``octipusd.pipelines.stages``), through real stage runs.

Real store (SQLite and PostgreSQL), event hub, permission gate, journal and bridge, a real git
workspace for the counters and a real shell for ``verifyCommand``; the vendor is a replay of
Claude's stream (:mod:`octipusd.testing.replay`), as in ``test_stage_runs``.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.pipelines.graph import Outcome, compile_graph
from octipusd.pipelines.stages import StageContext, StageExecutor, StageResult, StageVerdict
from octipusd.pipelines.templates import Template, parse_template
from octipusd.runtime.manager import RunManager
from octipusd.runtime.stage_runs import StageHandle, StageRuns
from octipusd.store.pipeline_item_store import ItemDraft
from octipusd.store.pipeline_records import AttemptStatus, PipelineItem
from octipusd.store.records import RunStatus
from octipusd.store.repository import Store
from octipusd.testing.replay import Recording
from tests.unit.runtime.test_supervisor import ADAPTER, _daemon, _init, _result, _text

pytestmark = pytest.mark.anyio

#: Rules that let the verify command run (the default asks a person).
ALLOW_SHELL = {"allow": ["shell(*)"]}

TEMPLATE: dict[str, Any] = {
    "name": "ship",
    "description": "ship the feature",
    "parameters": [{"key": "file", "inputType": "string", "requirement": "required"}],
    "steps": [
        {"name": "plan", "topic": "planning", "producesPlan": True},
        {"name": "implement", "topic": "coding", "loopOverPlan": True, "producesArtifacts": True},
        {
            "name": "verify",
            "topic": "qa",
            "stageType": "qa_validation",
            "loopOverPlan": True,
            "readOnly": True,
            "verifyCommand": "cat {{param.file}}",
        },
        {"name": "report", "topic": "writing"},
    ],
}
PLAN, IMPLEMENT, VERIFY, REPORT = 0, 1, 2, 3
NODES = {PLAN: "n0", IMPLEMENT: "n2", VERIFY: "n3", REPORT: "n4"}


def _handoff(**data: Any) -> str:
    return f"```json\n{json.dumps(data)}\n```"


def _answer(text: str, delay: float = 0.0) -> Callable[[str], Recording]:
    def script(sid: str) -> Recording:
        return Recording.of(
            [_init(sid), _text(sid, "working"), _result(sid, text, tokens=3)], delays=[0, 0, delay]
        )

    return script


class _Pipeline:
    """A pipeline of :data:`TEMPLATE` in a git workspace, and its stage executor."""

    def __init__(
        self, store: Store, runs: RunManager, workspace: Path, template: dict[str, Any] = TEMPLATE
    ) -> None:
        self.store = store
        self.template: Template = parse_template(template)
        graph = compile_graph(self.template)
        session = store.create_session(workspace=str(workspace), adapter=ADAPTER)
        self.record = store.create_pipeline(
            session_id=session.id,
            user="ann",
            workspace=str(workspace),
            name="ship",
            template_id=None,
            template=self.template.to_envelope(),
            params={"file": "out.txt"},
            graph=graph.to_json(),
            nodes=[(n.key, n.kind.value) for n in graph.nodes],
        )
        self.executor = StageExecutor(StageRuns(runs.services, runs.registry))

    def item(self, title: str = "add out.txt") -> PipelineItem:
        return self.store.add_pipeline_items(self.record.id, [ItemDraft(title, "write it", "cat works")])[0]

    def context(self, index: int, item: PipelineItem | None = None, **changes: Any) -> StageContext:
        step = self.template.steps[index]
        attempt = self.store.start_pipeline_attempt(
            self.record.id,
            node_key=NODES[index],
            stage=step.name,
            item_id=item.id if item else None,
            start_reason="first",
            generation=0,
        )
        return StageContext(self.record, self.template, NODES[index], index, item, attempt, **changes)

    async def execute(self, ctx: StageContext, on_started: Any = None) -> StageVerdict:
        with anyio.fail_after(60):
            return await self.executor.execute(ctx, on_started=on_started)

    def prompt(self, verdict: StageVerdict) -> str:
        assert verdict.run_id is not None
        return self.store.get_run(verdict.run_id).prompt


def _workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    return workspace


async def test_a_standard_stage_without_a_handoff_delivers_its_whole_answer(
    store: Store, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    async with _daemon(store, tmp_path, [_answer("The report: all shipped.")]) as (runs, _launcher):
        pipe = _Pipeline(store, runs, workspace)
        ctx = pipe.context(REPORT, previous_output="the diff of item 1", description="ship it")
        verdict = await pipe.execute(ctx)
    assert verdict.outcome is StageResult.OK and verdict.outcome.graph_outcome is Outcome.SUCCEEDED
    assert verdict.output == "The report: all shipped." and verdict.error is None
    assert verdict.tokens == 6 and verdict.counters == {
        "changedFiles": 0,
        "commandsRun": 0,
        "diskChanged": False,
    }
    prompt = pipe.prompt(verdict)
    assert prompt.startswith("Execute: report\n\nship it\n\nthe diff of item 1")
    assert "## Handoff" in prompt and '"status": "done"' in prompt and "INCOMPLETE" not in prompt
    attempt = store.pipeline_snapshot(pipe.record.id).attempts[0]
    assert attempt.status is AttemptStatus.SUCCEEDED and attempt.result == "The report: all shipped."
    assert attempt.run_ids == [verdict.run_id] and attempt.tokens == 6
    assert store.get_pipeline(pipe.record.id).tokens_used == 6
    assert StageVerdict.from_json(json.loads(json.dumps(verdict.to_json()))) == verdict


async def test_a_qa_stage_passes_with_its_verify_command_result_in_its_prompt(
    store: Store, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    (workspace / "out.txt").write_text("the artefact\n")
    answer = "Looks right.\n" + _handoff(status="pass", summary="meets acceptance")
    async with _daemon(store, tmp_path, [_answer(answer)], rules=ALLOW_SHELL) as (runs, _launcher):
        pipe = _Pipeline(store, runs, workspace)
        verdict = await pipe.execute(pipe.context(VERIFY, pipe.item()))
    assert verdict.outcome is StageResult.QA_PASS and verdict.output == "Looks right."
    prompt = pipe.prompt(verdict)
    assert "## Plan item\nTitle: add out.txt\nDetail: write it\nAcceptance: cat works" in prompt
    assert "`cat out.txt`\nRESULT: exit 0\nOutput (its end):\nthe artefact" in prompt
    assert verdict.verify is not None and verdict.verify["ran"] and verdict.verify["passed"]
    verify_run = store.get_run(verdict.verify["runId"])  # the command ran as a run of the attempt
    worker = store.get_run(verdict.run_id or "")
    assert verify_run.status == RunStatus.SUCCEEDED and verify_run.prompt == "verifyCommand: cat out.txt"
    assert verify_run.pipeline_attempt_id == worker.pipeline_attempt_id is not None
    actions = store.list_actions(run_id=verify_run.id, tool="shell__run", limit=10)
    assert [a.pipeline_id for a in actions] == [pipe.record.id]  # journaled like a shell__run call


async def test_a_qa_stage_fails_with_its_issues_and_is_told_the_command_failed(
    store: Store, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    answer = _handoff(status="fail", summary="no file", issues=["out.txt is missing", "no test"])
    async with _daemon(store, tmp_path, [_answer(answer)], rules=ALLOW_SHELL) as (runs, _launcher):
        pipe = _Pipeline(store, runs, workspace)
        verdict = await pipe.execute(pipe.context(VERIFY, pipe.item()))
    assert verdict.outcome is StageResult.QA_FAIL and verdict.outcome.graph_outcome is Outcome.QA_FAILED
    assert verdict.issues == ("out.txt is missing", "no test")
    prompt = pipe.prompt(verdict)
    assert "RESULT: FAILED (exited 1)" in prompt and "out.txt" in prompt.split("RESULT: FAILED")[1]
    assert verdict.verify is not None and verdict.verify["ran"] and not verdict.verify["passed"]
    assert store.pipeline_snapshot(pipe.record.id).attempts[0].status is AttemptStatus.SUCCEEDED


async def test_a_verify_command_does_not_run_without_the_shell_tool(store: Store, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    template = json.loads(json.dumps(TEMPLATE))
    template["steps"][VERIFY]["toolIds"] = ["get_work_plan"]
    async with _daemon(store, tmp_path, [_answer(_handoff(status="pass"))], rules=ALLOW_SHELL) as (runs, _l):
        pipe = _Pipeline(store, runs, workspace, template)
        verdict = await pipe.execute(pipe.context(VERIFY, pipe.item()))
    assert verdict.outcome is StageResult.QA_PASS  # the stage does not fail for it
    assert "RESULT: could not run (the stage does not hold the shell tool" in pipe.prompt(verdict)
    assert [r.id for r in store.list_runs(session_id=pipe.record.session_id)] == [verdict.run_id]


async def test_failed_evidence_gates_are_a_contract_failure_and_on_a_qa_stage_an_audit_gate(
    store: Store, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    (workspace / "out.txt").write_text("x")
    scripts = [_answer(_handoff(status="done")), _answer(_handoff(status="pass"), delay=1.0)]

    async def touch(_handle: StageHandle) -> None:  # the auditor "changes" a file while it runs
        (workspace / "touched.txt").write_text("y")

    async with _daemon(store, tmp_path, scripts, rules=ALLOW_SHELL) as (runs, _launcher):
        pipe = _Pipeline(store, runs, workspace)
        item = pipe.item()
        implement = await pipe.execute(pipe.context(IMPLEMENT, item))
        audit = await pipe.execute(pipe.context(VERIFY, item), on_started=touch)
    assert implement.outcome is StageResult.CONTRACT_FAILURE and implement.outcome.graph_outcome is None
    assert implement.error is not None and "producesArtifacts" in implement.error
    assert audit.outcome is StageResult.AUDIT_GATE_FAILED
    assert audit.outcome.graph_outcome is Outcome.AUDIT_GATE_FAILED
    assert audit.error is not None and "readOnly" in audit.error
    first = store.pipeline_snapshot(pipe.record.id).attempts[0]
    assert first.status is AttemptStatus.FAILED and first.retry_reason == implement.error


async def test_a_handoff_saying_stopped_is_a_contract_failure(store: Store, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)
    answer = _handoff(status="done", summary="ran out of time", stopped=True)
    async with _daemon(store, tmp_path, [_answer(answer)]) as (runs, _launcher):
        pipe = _Pipeline(store, runs, workspace)
        verdict = await pipe.execute(pipe.context(REPORT))
    assert verdict.outcome is StageResult.CONTRACT_FAILURE and verdict.output is None
    assert verdict.error == "the worker reported stopped: true: ran out of time"


async def test_a_plan_stage_adds_its_items_and_fails_when_the_plan_stays_empty(
    store: Store, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    items = [{"title": "known"}, {"title": "new one", "detail": "d", "acceptance": "a"}]
    scripts = [_answer("Plan:\n" + _handoff(status="done", items=items)), _answer(_handoff(status="done"))]
    async with _daemon(store, tmp_path, scripts) as (runs, _launcher):
        pipe = _Pipeline(store, runs, workspace)
        known = pipe.item("known")
        planned = await pipe.execute(pipe.context(PLAN))
        empty = _Pipeline(store, runs, workspace)
        nothing = await empty.execute(empty.context(PLAN))
    assert planned.outcome is StageResult.OK and planned.output == "Plan:"
    after = store.list_pipeline_items(pipe.record.id)
    assert [(i.title, i.created_by_node_key) for i in after] == [("known", None), ("new one", "n0")]
    assert planned.items == (after[1].id,) and after[0].id == known.id
    assert "plan__add_items" in pipe.prompt(planned)
    assert nothing.outcome is StageResult.CONTRACT_FAILURE
    assert nothing.error is not None and "the pipeline has no items" in nothing.error


async def test_a_resumed_attempt_is_handed_its_incomplete_text_and_then_loses_it(
    store: Store, tmp_path: Path
) -> None:
    workspace = _workspace(tmp_path)
    async with _daemon(store, tmp_path, [_answer("Done now.")]) as (runs, _launcher):
        pipe = _Pipeline(store, runs, workspace)
        first = pipe.context(REPORT)
        store.save_incomplete_text(first.attempt.id, "half of the report")
        store.finish_pipeline_attempt(first.attempt.id, AttemptStatus.INTERRUPTED)
        attempt = store.reopen_pipeline_attempt(first.attempt.id, reason="resume")
        ctx = StageContext(pipe.record, pipe.template, "n4", REPORT, None, attempt, resume=True)
        verdict = await pipe.execute(ctx)
    prompt = pipe.prompt(verdict)
    assert "INCOMPLETE: your text so far in this attempt" in prompt and "half of the report" in prompt
    assert verdict.outcome is StageResult.OK and verdict.output == "Done now."
    stored = store.pipeline_snapshot(pipe.record.id).attempts[0]
    assert stored.incomplete_text is None and stored.result == "Done now."


async def test_a_crashed_worker_is_a_failed_attempt_that_keeps_its_text(store: Store, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)

    def crash(sid: str) -> Recording:
        return Recording.of(
            [_init(sid), _text(sid, "partial work"), _result(sid, "", error="the API failed")]
        )

    async with _daemon(store, tmp_path, [crash]) as (runs, _launcher):
        pipe = _Pipeline(store, runs, workspace)
        verdict = await pipe.execute(pipe.context(IMPLEMENT, pipe.item()))
    assert verdict.outcome is StageResult.FAILED and verdict.outcome.graph_outcome is Outcome.ERROR
    assert verdict.error is not None and "the API failed" in verdict.error and verdict.output is None
    attempt = store.pipeline_snapshot(pipe.record.id).attempts[0]
    assert attempt.status is AttemptStatus.FAILED and attempt.error == verdict.error
    assert attempt.incomplete_text == "partial work"  # a resume continues this attempt


async def test_a_stopped_stage_is_stopped_and_keeps_its_text(store: Store, tmp_path: Path) -> None:
    workspace = _workspace(tmp_path)

    def slow(sid: str) -> Recording:
        return Recording.of([_init(sid), _text(sid, "half way"), _result(sid, "never")], delays=[0, 0, 60.0])

    def said(run_id: str) -> bool:
        return any(e.data.get("text") for e in store.list_events(run_id, after_seq=0, limit=100))

    async def stop(handle: StageHandle) -> None:
        with anyio.fail_after(30):
            while not said(handle.run_id):  # noqa: ASYNC110 - polls the store
                await anyio.sleep(0.02)
        await handle.stop("stopped by the walker")

    async with _daemon(store, tmp_path, [slow]) as (runs, _launcher):
        pipe = _Pipeline(store, runs, workspace)
        verdict = await pipe.execute(pipe.context(REPORT), on_started=stop)
    assert verdict.outcome is StageResult.STOPPED and verdict.error == "stopped by the walker"
    attempt = store.pipeline_snapshot(pipe.record.id).attempts[0]
    assert attempt.status is AttemptStatus.STOPPED and attempt.incomplete_text == "half way"
