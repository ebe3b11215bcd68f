"""A pipeline's gate commands (issue 28 item 4): listed from the stages' ``verifyCommand`` resolved
from the run's parameters; stored on the pipeline in the transaction that approves a stage approval
(SQLite and PostgreSQL); the allowance lets each exact command run without asking only in its own
stage of that pipeline while it walks the approved generation; a DENY rule still wins."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from octipusd.pipelines.gate_commands import (
    GateCommand,
    GateCommandAllowance,
    approved_command,
    gate_commands,
)
from octipusd.pipelines.graph import compile_graph
from octipusd.pipelines.templates import parse_template
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.gate import PermissionGate
from octipusd.store import Store
from octipusd.store.pipeline_records import (
    APPROVED_GATE_COMMANDS_KEY,
    PIPELINE_TOOL_ID,
    STAGE_APPROVAL_KIND,
    Pipeline,
    PipelineStatus,
)
from octipusd.toolkit import CallContext, StageTag

pytestmark = pytest.mark.anyio

TEMPLATE: dict[str, Any] = {
    "name": "gated",
    "parameters": [{"key": "suite", "inputType": "string"}, {"key": "target", "requirement": "optional"}],
    "steps": [
        {"name": "plan", "topic": "planning", "producesPlan": True},
        {
            "name": "implement",
            "topic": "coding",
            "loopOverPlan": True,
            "requiresApproval": True,
            "verifyCommand": "npm test -- {{ param.suite }}",
        },
        {
            "name": "verify",
            "topic": "qa",
            "stageType": "qa_validation",
            "loopOverPlan": True,
            "verifyCommand": "make check{{param.target}}",
        },
        {"name": "ask", "stageType": "human_input"},
        {"name": "report", "topic": "writing", "verifyCommand": "grep -q done {{previousOutput}}"},
    ],
}
NPM = "npm test -- unit"


def test_the_gate_commands_are_the_verify_commands_resolved_from_the_parameters() -> None:
    graph = compile_graph(parse_template(TEMPLATE))
    listed = gate_commands(graph, {"suite": "unit"})
    # n0 plan, n1 foreach, n2 implement, n3 verify, n4 ask, n5 report: the optional parameter without
    # a value renders empty; the command using a stage's output is not known in advance
    assert listed == (GateCommand("n2", "implement", NPM), GateCommand("n3", "verify", "make check"))
    assert gate_commands(graph, {"suite": "e2e", "target": " all"})[1].command == "make check all"
    assert listed[0].to_json() == {"nodeKey": "n2", "stage": "implement", "command": NPM}


@pytest.mark.parametrize(
    ("tool_id", "arguments", "expected"),
    [
        ("shell__run", {"command": NPM}, NPM),
        ("shell__run", {"command": NPM, "timeout": 60, "description": "tests"}, NPM),
        ("shell__run", {"command": NPM, "cwd": None, "env": {}, "network": False}, NPM),
        ("shell__run", {"command": NPM, "cwd": "sub"}, None),
        ("shell__run", {"command": NPM, "env": {"CI": "1"}}, None),
        ("shell__run", {"command": NPM, "network": True}, None),
        ("shell__run", {"command": NPM, "useShell": True}, None),
        ("shell__run", {"command": NPM, "other": 1}, None),
        ("cli-native:Bash", {"command": NPM, "description": "run the tests", "timeout": 120000}, NPM),
        ("cli-native:Bash", {"command": NPM, "run_in_background": True}, None),
        ("cli-native:Write", {"command": NPM}, None),
        ("shell__run", {"command": ["npm", "test"]}, None),
    ],
)
def test_only_the_command_as_the_only_argument_counts(
    tool_id: str, arguments: dict[str, Any], expected: str | None
) -> None:
    assert approved_command(tool_id, arguments) == expected


# ------------------------------------------------------------------ the store (both backends)


def running_pipeline(store: Store, session_id: str | None = None) -> Pipeline:
    if session_id is None:
        session_id = store.create_session(workspace="/tmp/ws", adapter="claude-code").id
    template = parse_template(TEMPLATE)
    graph = compile_graph(template)
    return store.create_pipeline(
        session_id=session_id,
        user="ann",
        workspace="/tmp/ws",
        name="gated",
        template_id=None,
        template=template.to_envelope(),
        params={"suite": "unit"},
        graph={"nodes": [n.to_json() for n in graph.nodes]},
        nodes=[(n.key, n.kind.value) for n in graph.nodes],
        status=PipelineStatus.RUNNING,
    )


def stage_approval(
    store: Store,
    pipeline: Pipeline,
    *,
    commands: tuple[tuple[str, str], ...] = (("n2", NPM), ("n3", "make check")),
    tool_id: str = PIPELINE_TOOL_ID,
    run_id: str | None = None,
    session_id: str | None = None,
) -> str:
    listed = [{"nodeKey": n, "stage": "s", "command": c} for n, c in commands]
    return store.create_approval(
        run_id=run_id,
        session_id=session_id or pipeline.session_id,
        tool_id=tool_id,
        subject="pipeline gated: stage implement",
        reason="Approve stage implement",
        input={"pipelineId": pipeline.id, "kind": STAGE_APPROVAL_KIND, "gateCommands": listed},
        explanation=None,
        vendor_request_id=None,
        expires_at=None,
    ).id


def approved(store: Store, pipeline_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = store.get_pipeline(pipeline_id).metadata.get(APPROVED_GATE_COMMANDS_KEY, [])
    return found


def test_approving_a_stage_approval_stores_its_gate_commands_with_the_decision(store: Store) -> None:
    pipeline = running_pipeline(store)
    approval = stage_approval(store, pipeline)
    before = datetime.now(UTC)
    store.decide_approval(approval, approve=True, decided_by="ann")
    entries = approved(store, pipeline.id)
    assert [(e["nodeKey"], e["command"]) for e in entries] == [("n2", NPM), ("n3", "make check")]
    first = entries[0]
    assert set(first) == {"nodeKey", "command", "approvalId", "decidedBy", "decidedAt", "generation"}
    assert (first["approvalId"], first["decidedBy"], first["generation"]) == (approval, "ann", 0)
    assert datetime.fromisoformat(first["decidedAt"]) >= before.replace(microsecond=0)

    # a later approval of the same walk adds to them (the same command once); a newer walk's
    # approval drops the older walk's entries
    store.decide_approval(
        stage_approval(store, pipeline, commands=(("n2", NPM), ("n5", "ls"))), approve=True, decided_by="bob"
    )
    assert [(e["nodeKey"], e["command"], e["decidedBy"]) for e in approved(store, pipeline.id)] == [
        ("n3", "make check", "ann"),
        ("n2", NPM, "bob"),
        ("n5", "ls", "bob"),
    ]
    store.set_pipeline_status(pipeline.id, PipelineStatus.STOPPED)
    store.claim_pipeline_walk(pipeline.id, expect=[PipelineStatus.STOPPED], workflow_id="w.g1")
    store.decide_approval(
        stage_approval(store, pipeline, commands=(("n3", "x"),)), approve=True, decided_by="c"
    )
    assert [(e["command"], e["generation"]) for e in approved(store, pipeline.id)] == [("x", 1)]


def test_a_denial_or_an_approval_that_is_not_the_pipelines_own_stores_nothing(store: Store) -> None:
    pipeline = running_pipeline(store)
    other = store.create_session(workspace="/tmp/other", adapter="claude-code")
    run = store.create_run(session_id=pipeline.session_id, prompt="work", owner="test")
    store.decide_approval(stage_approval(store, pipeline), approve=False, decided_by="ann")
    # a tool call whose arguments look like a stage approval, of a run or another tool
    store.decide_approval(stage_approval(store, pipeline, run_id=run.id), approve=True, decided_by="ann")
    store.decide_approval(
        stage_approval(store, pipeline, tool_id="shell__run"), approve=True, decided_by="ann"
    )
    # another session's approval naming this pipeline
    store.decide_approval(
        stage_approval(store, pipeline, session_id=other.id), approve=True, decided_by="ann"
    )
    assert approved(store, pipeline.id) == []


# ------------------------------------------------------------------ the allowance


def ctx_of(pipeline: Pipeline, node: str = "n2", *, pipeline_id: str | None = None) -> CallContext:
    tag = StageTag(pipeline_id or pipeline.id, node, "implement", None, "attempt-1")
    return CallContext(
        run_id="run-1", session_id=pipeline.session_id, workspace="/tmp/ws", attended=False, stage=tag
    )


async def test_the_allowance_holds_in_its_own_stage_of_its_pipeline_while_it_walks(store: Store) -> None:
    pipeline = running_pipeline(store)
    store.decide_approval(stage_approval(store, pipeline), approve=True, decided_by="ann")
    allowance = GateCommandAllowance(store)
    bash = {"command": NPM, "description": "run the tests"}
    why = await allowance.allows(ctx_of(pipeline), "cli-native:Bash", bash, None)
    assert why is not None and "approved by ann" in why, why
    assert await allowance.allows(ctx_of(pipeline), "shell__run", {"command": NPM, "timeout": 30}, None)
    # a changed command, another stage, no stage (the root, a child), another pipeline: not covered
    assert (
        await allowance.allows(ctx_of(pipeline), "cli-native:Bash", {"command": f"{NPM} 2>&1"}, None) is None
    )
    assert await allowance.allows(ctx_of(pipeline, "n3"), "shell__run", {"command": NPM}, None) is None
    root = CallContext(run_id="r", session_id=pipeline.session_id, workspace="/tmp/ws", attended=True)
    assert await allowance.allows(root, "shell__run", {"command": NPM}, None) is None
    another = running_pipeline(store, pipeline.session_id)
    assert await allowance.allows(ctx_of(another), "shell__run", {"command": NPM}, None) is None
    # awaiting another approval: it still holds; paused: it no longer does
    store.set_pipeline_status(pipeline.id, PipelineStatus.AWAITING_APPROVAL)
    assert await allowance.allows(ctx_of(pipeline), "shell__run", {"command": NPM}, None)
    store.set_pipeline_status(pipeline.id, PipelineStatus.PAUSED)
    assert await allowance.allows(ctx_of(pipeline), "shell__run", {"command": NPM}, None) is None
    # resumed: a new walk, which its own stage approval has to approve again
    store.claim_pipeline_walk(pipeline.id, expect=[PipelineStatus.PAUSED], workflow_id="w.g1")
    assert await allowance.allows(ctx_of(pipeline), "shell__run", {"command": NPM}, None) is None


async def test_the_gate_lets_an_approved_gate_command_run_and_a_deny_rule_still_wins(store: Store) -> None:
    pipeline = running_pipeline(store)
    store.decide_approval(stage_approval(store, pipeline), approve=True, decided_by="ann")
    events: list[tuple[str, dict[str, Any]]] = []

    async def emit(run_id: str, kind: str, data: dict[str, Any]) -> None:
        events.append((kind, data))

    def gate(policy: Policy) -> PermissionGate:
        made = PermissionGate(store, ApprovalBroker(store, 5), emit, policy)
        made.add_allowance(GateCommandAllowance(store))
        return made

    asks = gate(Policy.from_setting(None))  # the defaults ask for a shell command
    allowed = await asks.decide(ctx_of(pipeline), "shell__run", {"command": NPM})
    assert allowed.allowed and "gate command of stage implement" in allowed.reason, allowed
    assert ("policy_decision", {**events[-1][1], "tier": "allowance"}) == events[-1]
    refused = await asks.decide(ctx_of(pipeline), "shell__run", {"command": f"{NPM} 2>&1"})
    assert not refused.allowed and refused.reason.startswith("review required"), refused
    denies = gate(Policy.from_setting({"deny": ["shell__run(npm test:*)"]}))
    denied = await denies.decide(ctx_of(pipeline), "shell__run", {"command": NPM})
    assert not denied.allowed and denied.reason.startswith("denied by Octipus policy"), denied
