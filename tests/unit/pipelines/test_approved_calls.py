"""Approvals inside a pipeline at the depth where they live (issue 28 items 1-2): the real store
(SQLite and PostgreSQL), the real permission gate and approval broker.

* how a stage worker gave up (:func:`~octipusd.runtime.stage_runs.gave_up`);
* the blocked call raised again (:class:`BlockedCalls`): a ``pipeline_call`` approval with the call's
  tool, subject and input, announced; ``pendingApproval``; a request not of this attempt's worker
  parks on a plain "continue the stage" question;
* its approval becomes ``metadata.approvedCalls`` in the deciding transaction (not on a denial, nor
  for a stopped pipeline);
* the allowance's scope through the gate: that pipeline, node, attempt and hostServices, the same
  tool, action and arguments (``description`` and ``timeout`` ignored; a different cwd, env, network,
  useShell or file content asks); not the root agent nor a child (no stage of theirs); a DENY rule
  wins; it survives a restart's pause and ends when the pipeline stops, fails or completes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from octipusd.pipelines.approved_calls import ApprovedCalls, BlockedCalls, args_digest
from octipusd.pipelines.asking import PIPELINE_TOOL_ID, Questions
from octipusd.pipelines.stages import StageResult, StageVerdict, attempt_end
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.gate import PermissionGate
from octipusd.runtime.stage_runs import gave_up
from octipusd.store import Store
from octipusd.store.pipeline_records import AttemptStatus, NodeStatus, PipelineStatus
from octipusd.store.records import ApprovalStatus, Run, RunStatus
from octipusd.toolkit import CallContext, StageTag

pytestmark = pytest.mark.anyio

BASH = "cli-native:Bash"
CALL = {"command": "npm test", "description": "run the tests", "timeout": 60000}


class Recorder:
    """An ``emit``: keeps ``(run_id, kind, data)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []

    async def __call__(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        self.events.append((run_id, kind, data))

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [d for _, k, d in self.events if k == kind]


@dataclass
class Bench:
    """A running one-stage pipeline whose worker run (attempt ``tag``) is waiting on ``CALL``."""

    store: Store
    workspace: str
    pipeline_id: str
    session_id: str
    tag: StageTag
    run: Run
    emit: Recorder = field(default_factory=Recorder)

    def worker_run(self, *, host_services: bool = False, tag: StageTag | None = None) -> Run:
        return self.store.create_run(
            session_id=self.session_id,
            prompt="work",
            owner="test",
            host_services=host_services,
            stage=tag or self.tag,
        )

    def blocked(self, run: Run, *, tool_id: str = BASH, args: dict[str, Any] | None = None) -> str:
        """``run`` waits on an approval of ``tool_id`` that expires; the run fails: it gave up."""
        approval = self.store.create_approval(
            run_id=run.id,
            session_id=self.session_id,
            tool_id=tool_id,
            subject=str((args or CALL).get("command")),
            reason="CLI: Bash",
            input=args or CALL,
            explanation="ask by the default level",
            vendor_request_id="req-1",
            expires_at=None,
        )
        self.store.resolve_approval_if_pending(approval.id, status=ApprovalStatus.EXPIRED, reason="no answer")
        self.store.finish_run(run.id, status=RunStatus.FAILED, reason=f"approval {approval.id} expired")
        return approval.id

    def steps(self) -> BlockedCalls:
        return BlockedCalls(self.store, Questions(self.store), self.emit)

    async def raise_again(self, blocked: str | None) -> str:
        verdict = {"attemptId": self.tag.attempt_id, "blocked": blocked, "error": "it expired"}
        return await self.steps().raise_again(self.pipeline_id, "n0", None, "work", verdict)

    def gate(self) -> PermissionGate:
        gate = PermissionGate(
            self.store, ApprovalBroker(self.store, timeout_seconds=30.0), self.emit, Policy.from_setting(None)
        )
        gate.add_allowance(ApprovedCalls(self.store))
        return gate

    def ctx(
        self, *, stage: StageTag | None = None, host_services: bool = False, root: bool = False
    ) -> CallContext:
        """A stage worker's call context (``root``: the root agent's, no stage); unattended, so a
        call that would ask is refused at once ("review required") instead of waiting."""
        return CallContext(
            run_id=self.run.id,
            session_id=self.session_id,
            workspace=self.workspace,
            attended=False,
            stage=None if root else (stage or self.tag),
            host_services=host_services,
        )

    def metadata(self) -> dict[str, Any]:
        return self.store.get_pipeline(self.pipeline_id).metadata

    async def approved(self) -> str:
        """The worker's blocked call raised again and approved by ann; the allowance's approval id."""
        request = await self.raise_again(self.blocked(self.run))
        self.store.decide_approval(request, approve=True, decided_by="ann")
        return request


@pytest.fixture
def bench(store: Store, tmp_path: Path) -> Bench:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session = store.create_session(workspace=str(workspace), adapter="claude-code")
    pipeline = store.create_pipeline(
        session_id=session.id,
        user="ann",
        workspace=str(workspace),
        name="guarded",
        template_id=None,
        template={"name": "guarded", "steps": []},
        params={},
        graph={"nodes": [{"key": "n0", "name": "work"}]},
        nodes=[("n0", "step")],
    )
    store.set_pipeline_status(pipeline.id, PipelineStatus.RUNNING)
    attempt = store.start_pipeline_attempt(
        pipeline.id, node_key="n0", stage="work", item_id=None, start_reason="first", generation=1
    )
    tag = StageTag(pipeline.id, "n0", "work", None, attempt.id)
    run = store.create_run(session_id=session.id, prompt="work", owner="test", stage=tag)
    return Bench(store, str(workspace), pipeline.id, session.id, tag, run)


# ------------------------------------------------------------------ the worker gave up


async def test_a_failed_worker_with_an_unanswered_approval_gave_up_on_it(bench: Bench) -> None:
    blocked = bench.blocked(bench.run)
    assert gave_up(bench.store, bench.store.get_run(bench.run.id)) == (True, blocked)
    stopped = bench.worker_run()
    bench.store.finish_run(stopped.id, status=RunStatus.CANCELLED, reason="stopped by ann")
    assert gave_up(bench.store, bench.store.get_run(stopped.id)) == (False, None)
    plain = bench.worker_run()
    bench.store.finish_run(plain.id, status=RunStatus.FAILED, reason="crashed")
    assert gave_up(bench.store, bench.store.get_run(plain.id)) == (False, None)


def test_a_worker_that_gave_up_leaves_its_attempt_to_be_continued() -> None:
    verdict = StageVerdict(StageResult.AWAITING_APPROVAL, error="it expired", blocked="a1")
    assert StageVerdict.from_json(verdict.to_json()) == verdict
    assert StageResult.AWAITING_APPROVAL.graph_outcome is None
    end = attempt_end(verdict)
    assert end.status is AttemptStatus.INTERRUPTED and end.keep_text


# ------------------------------------------------------------------ the blocked call raised again


async def test_the_blocked_call_is_raised_again_as_a_permission_request(bench: Bench) -> None:
    blocked = bench.blocked(bench.run)
    request = await bench.raise_again(blocked)
    approval = bench.store.get_approval(request)
    assert (approval.kind, approval.tool_id, approval.subject, approval.input) == (
        "pipeline_call",
        BASH,
        "npm test",
        CALL,
    )
    assert approval.status is ApprovalStatus.PENDING and approval.expires_at is None
    assert approval.run_id == bench.run.id
    # the person sees why the gate asked first (a flow guard's warning is not lost on the way)
    assert (approval.reason or "").endswith("; first asked: CLI: Bash"), approval.reason
    pipeline = bench.store.get_pipeline(bench.pipeline_id)
    assert pipeline.status is PipelineStatus.AWAITING_APPROVAL
    pending = pipeline.metadata["pendingApproval"]
    assert {k: pending[k] for k in ("requestId", "stage", "item", "toolName", "subject", "kind")} == {
        "requestId": request,
        "stage": "work",
        "item": None,
        "toolName": BASH,
        "subject": "npm test",
        "kind": "tool_call",
    }
    assert "it expired" in pending["reason"]
    assert pipeline.metadata["blockedCall"]["argsDigest"] == args_digest({"command": "npm test"})
    assert "approvedCalls" not in pipeline.metadata  # nothing is allowed before the person answers
    (node,) = bench.store.pipeline_snapshot(bench.pipeline_id, history=False).nodes
    assert node.status is NodeStatus.AWAITING_APPROVAL
    (announced,) = bench.emit.of("approval_requested")
    assert announced["approval_id"] == request and announced["kind"] == "pipeline_call"


@pytest.mark.parametrize("whose", ["another attempt", "no request", "a questionnaire"])
async def test_a_request_not_of_this_attempts_worker_parks_on_a_plain_question(
    bench: Bench, whose: str
) -> None:
    if whose == "another attempt":
        other = bench.worker_run(tag=StageTag(bench.pipeline_id, "n0", "work", None, "other-attempt"))
        blocked: str | None = bench.blocked(other)
    elif whose == "a questionnaire":
        question = bench.store.create_approval(
            run_id=bench.run.id,
            session_id=bench.session_id,
            tool_id="cli-native:AskUserQuestion",
            subject=None,
            reason="questions",
            input={"questions": []},
            explanation=None,
            vendor_request_id=None,
            expires_at=None,
            kind="questionnaire",
        )
        blocked = question.id
    else:
        blocked = None
    request = await bench.raise_again(blocked)
    approval = bench.store.get_approval(request)
    assert approval.tool_id == PIPELINE_TOOL_ID and approval.kind == "tool"
    metadata = bench.metadata()
    assert metadata["pendingApproval"]["kind"] == "continue_stage"
    assert "continue the stage" in metadata["pendingApproval"]["reason"]
    assert "blockedCall" not in metadata
    bench.store.decide_approval(request, approve=True, decided_by="ann")
    assert "approvedCalls" not in bench.metadata()  # nothing pre-approved


# ------------------------------------------------------------------ the decision


async def test_approving_stores_the_allowance_in_the_deciding_transaction(bench: Bench) -> None:
    request = await bench.raise_again(bench.blocked(bench.run))
    decided = bench.store.decide_approval(request, approve=True, decided_by="ann")
    metadata = bench.metadata()  # read right after the decision: nothing else wrote it
    (allowance,) = metadata["approvedCalls"]
    assert allowance == {
        "approvalId": request,
        "pipelineId": bench.pipeline_id,
        "nodeKey": "n0",
        "attemptId": bench.tag.attempt_id,
        "toolId": BASH,
        "action": "Bash",
        "argsDigest": args_digest({"command": "npm test"}),
        "hostServices": False,
        "decidedBy": "ann",
        "decidedAt": allowance["decidedAt"],
    }
    assert decided.decided_at is not None and allowance["decidedAt"].startswith(
        decided.decided_at.isoformat()[:19]
    )
    assert "blockedCall" not in metadata


@pytest.mark.parametrize("how", ["denied", "stopped first"])
async def test_a_denial_or_a_stopped_pipeline_allows_nothing(bench: Bench, how: str) -> None:
    request = await bench.raise_again(bench.blocked(bench.run))
    if how == "stopped first":
        bench.store.set_pipeline_status(bench.pipeline_id, PipelineStatus.STOPPED)
    bench.store.decide_approval(request, approve=how != "denied", decided_by="ann")
    assert not bench.metadata().get("approvedCalls")
    refused = await bench.gate().decide(bench.ctx(), BASH, CALL, action="Bash")
    assert not refused.allowed and "review required" in refused.reason


# ------------------------------------------------------------------ the allowance through the gate


async def test_the_same_call_of_the_same_attempt_runs_without_asking(bench: Bench) -> None:
    request = await bench.approved()
    gate = bench.gate()
    relabelled = {"command": "npm test", "description": "again", "timeout": 5}  # ignored keys
    for args in (CALL, relabelled, {"command": "npm test"}):
        allowed = await gate.decide(bench.ctx(), BASH, args, action="Bash")
        assert allowed.allowed, allowed
        assert request in allowed.reason and "ann" in allowed.reason
    assert bench.emit.of("policy_decision")[-1]["tier"] == "allowance"
    assert bench.store.list_approvals(status="pending") == []  # no second prompt


async def test_a_deny_rule_wins_over_the_allowance(bench: Bench) -> None:
    await bench.approved()
    bench.store.add_rule(level="deny", rule="cli-native:Bash(npm test)", created_by="operator")
    denied = await bench.gate().decide(bench.ctx(), BASH, CALL, action="Bash")
    assert not denied.allowed and denied.reason.startswith("denied by Octipus policy"), denied


@pytest.mark.parametrize(
    "change",
    [
        {"command": "npm test 2>&1"},
        {"cwd": "sub"},
        {"env": {"CI": "1"}},
        {"network": True},
        {"useShell": True},
    ],
)
async def test_other_arguments_ask_again(bench: Bench, change: dict[str, Any]) -> None:
    await bench.approved()
    refused = await bench.gate().decide(bench.ctx(), BASH, {**CALL, **change}, action="Bash")
    assert not refused.allowed and "review required" in refused.reason, refused


async def test_different_file_contents_ask_again(bench: Bench) -> None:
    write = {"file_path": "notes.txt", "content": "one"}
    request = await bench.raise_again(bench.blocked(bench.run, tool_id="cli-native:Write", args=write))
    bench.store.decide_approval(request, approve=True, decided_by="ann")
    gate = bench.gate()
    assert (await gate.decide(bench.ctx(), "cli-native:Write", write, action="Write")).allowed
    other = await gate.decide(bench.ctx(), "cli-native:Write", {**write, "content": "two"}, action="Write")
    assert not other.allowed


@pytest.mark.parametrize(
    "who",
    [
        "the root agent or a child",
        "another attempt",
        "another node",
        "another pipeline",
        "host services",
        "another session",
    ],
)
async def test_only_the_stage_worker_of_that_attempt_has_it(bench: Bench, who: str) -> None:
    await bench.approved()
    tag = bench.tag
    contexts = {
        "the root agent or a child": bench.ctx(root=True),  # a child a stage spawned has no stage either
        "another attempt": bench.ctx(stage=StageTag(tag.pipeline_id, "n0", "work", None, "a2")),
        "another node": bench.ctx(stage=StageTag(tag.pipeline_id, "n1", "work", None, tag.attempt_id)),
        "another pipeline": bench.ctx(stage=StageTag("p2", "n0", "work", None, tag.attempt_id)),
        "host services": bench.ctx(host_services=True),
        # a stage tag naming this pipeline from another session's run (as the gate commands check)
        "another session": dataclasses.replace(
            bench.ctx(),
            session_id=bench.store.create_session(workspace=bench.workspace, adapter="claude-code").id,
        ),
    }
    refused = await bench.gate().decide(contexts[who], BASH, CALL, action="Bash")
    assert not refused.allowed and "review required" in refused.reason, refused
    other_tool = await bench.gate().decide(bench.ctx(), "shell__run", {"command": "npm test"})
    assert not other_tool.allowed  # the same command through another tool asks


async def test_the_allowance_survives_a_restart_and_ends_with_the_run(bench: Bench) -> None:
    await bench.approved()
    gate = bench.gate()
    assert bench.store.reconcile_interrupted_pipelines() == [bench.pipeline_id]  # a restart pauses it
    assert bench.metadata()["approvedCalls"]
    assert not (await gate.decide(bench.ctx(), BASH, CALL, action="Bash")).allowed  # paused: no worker
    bench.store.set_pipeline_status(bench.pipeline_id, PipelineStatus.RUNNING)  # resumed
    assert (await gate.decide(bench.ctx(), BASH, CALL, action="Bash")).allowed
    bench.store.set_pipeline_status(bench.pipeline_id, PipelineStatus.STOPPED)
    assert "approvedCalls" not in bench.metadata()
    bench.store.set_pipeline_status(bench.pipeline_id, PipelineStatus.RUNNING)  # resumed after a stop
    assert not (await gate.decide(bench.ctx(), BASH, CALL, action="Bash")).allowed


async def test_approved_after_a_stop_and_resume_the_call_is_allowed(bench: Bench) -> None:
    request = await bench.raise_again(bench.blocked(bench.run))
    bench.store.set_pipeline_status(bench.pipeline_id, PipelineStatus.STOPPED)
    bench.store.set_pipeline_status(
        bench.pipeline_id, PipelineStatus.AWAITING_APPROVAL
    )  # resumed: asked again
    bench.store.decide_approval(request, approve=True, decided_by="ann")
    assert (await bench.gate().decide(bench.ctx(), BASH, CALL, action="Bash")).allowed
