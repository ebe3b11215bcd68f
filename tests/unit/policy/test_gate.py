"""The permission gate with a real store (SQLite and PostgreSQL) and a real approval broker.

Seed 003 "Permissions and limits" (rules, AskUserQuestion, the flow guard paragraph, shared
spaces) and FACTS.md §3 (deny wins, re-check after an approval, unattended ASK refused) and §9
(the flow guard only turns ALLOW into ASK; unattended refusals start ``Approval required: flow
guard:``).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import pytest
from octipus_codex import CodexAdapter

from octipusd.adapter import load_adapters
from octipusd.app import tool_aliases
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.flowguard import FlowGuardMode
from octipusd.policy.gate import PermissionGate, native_flow_id
from octipusd.policy.live import GRANT_RETRIES
from octipusd.policy.questionnaire import CANCEL_MESSAGE
from octipusd.store import Store
from octipusd.store.records import ApprovalStatus
from octipusd.toolkit import CallContext, GateResult

pytestmark = pytest.mark.anyio

#: Longest wait for something the gate does in a concurrent task (seconds).
WITHIN = 15.0

QUESTIONS: dict[str, Any] = {
    "questions": [
        {
            "question": "Which databases?",
            "header": "DB",
            "options": [
                {"label": "Postgres", "description": "the server"},
                {"label": "SQLite", "description": "the file"},
            ],
            "multiSelect": True,
        }
    ]
}


class Recorder:
    """The gate's ``emit``: records ``(run_id, kind, data)`` and lets a test wait for a kind."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any]]] = []
        self._changed = anyio.Condition()

    async def __call__(self, run_id: str, kind: str, data: dict[str, Any]) -> None:
        self.events.append((run_id, kind, data))
        async with self._changed:
            self._changed.notify_all()

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The data of every recorded event of ``kind``, in order."""
        return [data for _, k, data in self.events if k == kind]

    def kinds(self) -> list[str]:
        return [k for _, k, _ in self.events]

    async def wait_for(self, kind: str, count: int = 1) -> dict[str, Any]:
        """Wait (bounded) until ``count`` events of ``kind`` were emitted; return the last of them."""
        with anyio.fail_after(WITHIN):
            async with self._changed:
                while len(self.of(kind)) < count:
                    await self._changed.wait()
        return self.of(kind)[count - 1]


@dataclass
class Bench:
    """A store with one session and one run, and a gate factory over them."""

    store: Store
    session_id: str
    run_id: str
    workspace: str
    emit: Recorder = field(default_factory=Recorder)
    waiting: list[int] = field(default_factory=list)

    def gate(self, *, timeout: float = 30.0, flow_guard: FlowGuardMode = FlowGuardMode.ASK) -> PermissionGate:
        broker = ApprovalBroker(self.store, timeout_seconds=timeout)
        return PermissionGate(
            self.store,
            broker,
            self.emit,
            Policy.from_setting(None),
            flow_guard=flow_guard,
            tool_aliases=CodexAdapter.tool_aliases,
        )

    def ctx(self, *, attended: bool = True, space: bool = False) -> CallContext:
        async def on_waiting(delta: int) -> None:
            self.waiting.append(delta)

        return CallContext(
            run_id=self.run_id,
            session_id=self.session_id,
            workspace=self.workspace,
            attended=attended,
            on_waiting=on_waiting,
            space=space,
        )

    def rule(self, level: str, text: str) -> None:
        self.store.add_rule(level=level, rule=text, created_by="operator")

    def label(self) -> set[str]:
        return {f for f in self.store.get_session(self.session_id).flow_label.split(",") if f}


@pytest.fixture
def bench(store: Store, tmp_path: Path) -> Bench:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    session = store.create_session(workspace=str(workspace), adapter="codex")
    run = store.create_run(session_id=session.id, prompt="work", owner="test")
    return Bench(store=store, session_id=session.id, run_id=run.id, workspace=str(workspace))


@dataclass
class Pending:
    """A ``decide`` running in a task: its approval (once requested) and its result (once done)."""

    approval: dict[str, Any]
    done: anyio.Event
    results: list[GateResult]

    async def result(self) -> GateResult:
        with anyio.fail_after(WITHIN):
            await self.done.wait()
        (result,) = self.results
        return result


@pytest.fixture
async def tasks() -> AsyncIterator[anyio.abc.TaskGroup]:
    async with anyio.create_task_group() as tg:
        yield tg
        tg.cancel_scope.cancel()  # a failed test must not wait for a decide still asking


async def start_decide(
    tg: anyio.abc.TaskGroup,
    bench: Bench,
    decide: Callable[[], Awaitable[GateResult]],
    *,
    approvals_before: int = 0,
) -> Pending:
    """Start ``decide`` in ``tg`` and wait until it has asked for an approval."""
    results: list[GateResult] = []
    done = anyio.Event()

    async def run() -> None:
        results.append(await decide())
        done.set()

    tg.start_soon(run)
    requested = await bench.emit.wait_for("approval_requested", approvals_before + 1)
    return Pending(requested, done, results)


# ------------------------------------------------------------------------------ rules


async def test_stored_deny_beats_the_default_allow(bench: Bench) -> None:
    gate = bench.gate()
    ctx = bench.ctx()
    args = {"file_path": "/etc/hosts"}
    allowed = await gate.decide(ctx, "cli-native:Read", args, action="Read")
    assert allowed.allowed, allowed
    assert bench.emit.of("policy_decision")[-1]["tier"] == "defaults"

    bench.rule("deny", "cli-native:Read")
    denied = await gate.decide(ctx, "cli-native:Read", args, action="Read")
    assert not denied.allowed
    assert denied.reason.startswith("denied by Octipus policy: "), denied
    assert "rule cli-native:Read" in denied.reason and "stored rule" in denied.reason, denied
    decision = bench.emit.of("policy_decision")[-1]
    assert decision["level"] == "deny" and decision["rule"] == "cli-native:Read", decision
    assert decision["tier"] == "new" and decision["tool_id"] == "cli-native:Read", decision
    assert decision["subject"] == "/etc/hosts" and "cli-native:Read" in decision["explanation"]
    assert bench.store.list_approvals(run_id=bench.run_id) == []
    assert all(run_id == bench.run_id for run_id, _, _ in bench.emit.events)


# ------------------------------------------------------------------------------ approvals


async def test_attended_ask_is_approved(bench: Bench, tasks: anyio.abc.TaskGroup) -> None:
    gate = bench.gate()
    args = {"command": "make build"}
    pending = await start_decide(
        tasks, bench, lambda: gate.decide(bench.ctx(), "cli-native:Bash", args, action="Bash")
    )
    approval = bench.store.get_approval(pending.approval["approval_id"])
    assert approval.status is ApprovalStatus.PENDING and approval.kind == "tool"
    assert approval.tool_id == "cli-native:Bash" and approval.subject == "make build"
    assert approval.reason == "CLI: Bash"
    assert approval.explanation and "default level of cli-native:Bash" in approval.explanation
    assert approval.input == args
    assert bench.waiting == [1]  # awaiting_approval is shown while the person decides
    assert not pending.done.is_set()

    await gate.broker.answer(approval.id, approve=True, decided_by="alice")
    result = await pending.result()
    assert result.allowed and result.reason == "approved by alice" and result.approval_id == approval.id
    assert not result.expired
    assert bench.waiting == [1, -1]
    decided = bench.emit.of("approval_decided")[-1]
    assert decided["outcome"] == "approved" and decided["decided_by"] == "alice"


async def test_attended_ask_denied_returns_the_reason(bench: Bench, tasks: anyio.abc.TaskGroup) -> None:
    gate = bench.gate()
    pending = await start_decide(
        tasks, bench, lambda: gate.decide(bench.ctx(), "shell__run", {"command": "make deploy"})
    )
    assert pending.approval["reason"] == "Octipus tool shell__run"
    await gate.broker.answer(
        pending.approval["approval_id"], approve=False, decided_by="bob", reason="not on Fridays"
    )
    result = await pending.result()
    assert not result.allowed and not result.expired
    assert result.reason == "denied by bob: not on Fridays"
    assert bench.store.get_approval(pending.approval["approval_id"]).status is ApprovalStatus.DENIED


async def test_unanswered_approval_expires(bench: Bench) -> None:
    gate = bench.gate(timeout=0.3)
    with anyio.fail_after(WITHIN):
        result = await gate.decide(bench.ctx(), "cli-native:Bash", {"command": "make"}, action="Bash")
    assert not result.allowed and result.expired and result.approval_id is not None
    assert "was not answered within 0.3 s" in result.reason, result
    assert bench.store.get_approval(result.approval_id).status is ApprovalStatus.EXPIRED
    assert bench.waiting == [1, -1]
    assert bench.emit.of("approval_decided")[-1]["outcome"] == "expired"


async def test_deny_added_while_the_approval_was_open_wins(bench: Bench, tasks: anyio.abc.TaskGroup) -> None:
    gate = bench.gate()
    pending = await start_decide(
        tasks, bench, lambda: gate.decide(bench.ctx(), "cli-native:Bash", {"command": "make"}, action="Bash")
    )
    bench.rule("deny", "cli-native:Bash(make:*)")
    await gate.broker.answer(pending.approval["approval_id"], approve=True, decided_by="alice")
    result = await pending.result()
    assert not result.allowed, result
    assert result.reason.startswith("denied by Octipus policy: "), result
    assert result.reason.endswith("(changed while the approval was open)"), result
    assert "cli-native:Bash(make:*)" in result.reason
    assert result.approval_id == pending.approval["approval_id"]


async def test_unattended_ask_is_refused_for_review(bench: Bench) -> None:
    gate = bench.gate()
    ctx = bench.ctx(attended=False)
    result = await gate.decide(ctx, "cli-native:Bash", {"command": "make"}, action="Bash")
    assert not result.allowed and not result.expired
    assert result.reason.startswith("review required: cli-native:Bash (make)"), result
    assert "unattended" in result.reason
    assert ctx.review_required == [result.reason]
    assert bench.emit.of("review_required")[-1]["reason"] == result.reason
    assert bench.store.list_approvals(run_id=bench.run_id) == []
    assert bench.waiting == []


# ------------------------------------------------------------------------------ flow guard


def test_codex_item_names_map_to_claude_tools() -> None:
    aliases = tool_aliases(load_adapters())  # what the daemon gives its gate
    assert native_flow_id("cli-native:commandExecution", aliases) == "cli-native:Bash"
    assert native_flow_id("cli-native:fileChange", aliases) == "cli-native:Write"
    assert native_flow_id("cli-native:webSearch", aliases) == "cli-native:WebSearch"
    assert native_flow_id("cli-native:Read", aliases) == "cli-native:Read"
    assert native_flow_id("shell__run", aliases) == "shell__run"
    assert native_flow_id("cli-native:commandExecution", {}) == "cli-native:commandExecution"


async def test_codex_command_sets_secret_and_escalates_an_allowed_egress(
    bench: Bench, tasks: anyio.abc.TaskGroup
) -> None:
    gate = bench.gate()
    bench.rule("allow", "shell__run")
    curl = {"command": "curl https://x.example"}
    before = await gate.decide(bench.ctx(), "shell__run", curl)
    assert before.allowed, before  # a clean session: the rule alone decides

    await gate.observe(bench.ctx(), "cli-native:commandExecution", {"command": "cat .env", "cwd": "/w"})
    assert "secret" in bench.label()
    (flagged,) = bench.emit.of("flow_label")
    assert flagged["tool_id"] == "cli-native:commandExecution" and flagged["added"] == ["secret"]
    assert "secret" in flagged["label"].split(",")
    await gate.observe(bench.ctx(), "cli-native:commandExecution", {"command": "cat .env"})
    assert len(bench.emit.of("flow_label")) == 1  # a flag is recorded once

    pending = await start_decide(tasks, bench, lambda: gate.decide(bench.ctx(), "shell__run", curl))
    approval = bench.store.get_approval(pending.approval["approval_id"])
    assert approval.reason and approval.reason.startswith("flow guard: "), approval
    assert "read credentials" in approval.reason and "shell__run" in approval.reason
    assert approval.explanation and "the rules allow it: allow by rule shell__run" in approval.explanation
    guard = bench.emit.of("flow_guard")[-1]
    assert guard["tool_id"] == "shell__run" and guard["reason"] == approval.reason
    await gate.broker.answer(approval.id, approve=False, decided_by="alice", reason="keep it local")
    result = await pending.result()
    assert not result.allowed and result.reason == "denied by alice: keep it local"


async def test_flow_guard_refuses_an_unattended_egress(bench: Bench) -> None:
    gate = bench.gate()
    bench.rule("allow", "shell__run")
    await gate.observe(bench.ctx(), "cli-native:commandExecution", {"command": "cat .env"})
    ctx = bench.ctx(attended=False)
    result = await gate.decide(ctx, "shell__run", {"command": "curl https://x.example"})
    assert not result.allowed
    assert result.reason.startswith("Approval required: flow guard: "), result
    assert ctx.review_required == [result.reason]
    assert bench.store.list_approvals(run_id=bench.run_id) == []


async def test_flow_guard_off_neither_labels_nor_escalates(bench: Bench) -> None:
    gate = bench.gate(flow_guard=FlowGuardMode.OFF)
    bench.rule("allow", "shell__run")
    await gate.observe(bench.ctx(), "cli-native:commandExecution", {"command": "cat .env"})
    assert bench.label() == set() and bench.emit.of("flow_label") == []
    bench.store.add_flow_flags(bench.session_id, ["secret"])  # labelled while the guard was on
    result = await gate.decide(bench.ctx(attended=False), "shell__run", {"command": "curl https://x.example"})
    assert result.allowed, result
    assert bench.emit.of("flow_guard") == []


async def test_flow_guard_never_changes_a_deny_or_an_ask(bench: Bench, tasks: anyio.abc.TaskGroup) -> None:
    gate = bench.gate()
    await gate.observe(bench.ctx(), "cli-native:commandExecution", {"command": "cat .env"})
    bench.rule("deny", "shell__run(curl:*)")
    denied = await gate.decide(bench.ctx(), "shell__run", {"command": "curl https://x.example"})
    assert not denied.allowed and denied.reason.startswith("denied by Octipus policy: "), denied
    assert bench.store.list_approvals(run_id=bench.run_id) == []
    # an ASK stays an ordinary ASK (the guard only turns ALLOW into ASK)
    pending = await start_decide(
        tasks, bench, lambda: gate.decide(bench.ctx(), "shell__run", {"command": "wget https://x.example"})
    )
    assert pending.approval["reason"] == "Octipus tool shell__run"
    assert bench.emit.of("flow_guard") == []
    await gate.broker.answer(pending.approval["approval_id"], approve=False, decided_by="alice")
    assert not (await pending.result()).allowed


async def test_an_allowed_call_labels_the_session(bench: Bench) -> None:
    gate = bench.gate()
    bench.rule("allow", "shell__run")
    result = await gate.decide(bench.ctx(), "shell__run", {"command": "cat .env"})
    assert result.allowed
    assert bench.label() == {"secret"}
    assert bench.emit.of("flow_label")[-1]["tool_id"] == "shell__run"


# ------------------------------------------------------------------------------ grants


async def test_a_one_use_grant_allows_once(bench: Bench, tasks: anyio.abc.TaskGroup) -> None:
    gate = bench.gate()
    grant = bench.store.create_grant(
        tool_id="shell__run", matcher="make:*", level="allow", created_by="alice", max_uses=1
    )
    args = {"command": "make test"}
    first = await gate.decide(bench.ctx(attended=False), "shell__run", args)
    assert first.allowed, first
    assert f"grant {grant.id}" in first.reason
    assert bench.store.get_grant(grant.id).uses == 1
    assert bench.emit.of("policy_decision")[-1]["grant_id"] == grant.id

    ctx = bench.ctx(attended=False)
    refused = await gate.decide(ctx, "shell__run", args)
    assert not refused.allowed and refused.reason.startswith("review required: shell__run"), refused
    assert bench.store.get_grant(grant.id).uses == 1

    pending = await start_decide(tasks, bench, lambda: gate.decide(bench.ctx(), "shell__run", args))
    assert "default level of shell__run" in pending.approval["explanation"]
    await gate.broker.answer(pending.approval["approval_id"], approve=False, decided_by="alice")
    assert not (await pending.result()).allowed


async def test_two_concurrent_calls_on_the_last_use_of_a_grant(bench: Bench) -> None:
    gate = bench.gate()
    grant = bench.store.create_grant(tool_id="shell__run", level="allow", created_by="alice", max_uses=1)
    # both calls read the grant before either counts its use: the conditional UPDATE decides
    barrier = threading.Barrier(2, timeout=WITHIN)
    use_grant = bench.store.use_grant

    def racing_use(grant_id: str) -> bool:
        barrier.wait()
        return use_grant(grant_id)

    bench.store.use_grant = racing_use  # type: ignore[method-assign]
    results: list[GateResult] = []
    contexts = [bench.ctx(attended=False), bench.ctx(attended=False)]

    async def call(ctx: CallContext) -> None:
        results.append(await gate.decide(ctx, "shell__run", {"command": "make test"}))

    with anyio.fail_after(WITHIN):
        async with anyio.create_task_group() as tg:
            for ctx in contexts:
                tg.start_soon(call, ctx)
    allowed = [r for r in results if r.allowed]
    refused = [r for r in results if not r.allowed]
    assert len(allowed) == 1 and len(refused) == 1, results
    assert f"grant {grant.id}" in allowed[0].reason
    assert refused[0].reason.startswith("review required: shell__run"), refused
    assert bench.store.get_grant(grant.id).uses == 1
    grant_decisions = [d for d in bench.emit.of("policy_decision") if d["grant_id"] == grant.id]
    assert len(grant_decisions) == 2  # both rested on the grant; the loser decided again


async def test_a_call_whose_grant_keeps_losing_to_concurrent_calls_needs_a_person(
    bench: Bench, tasks: anyio.abc.TaskGroup
) -> None:
    """Every use counted loses (the grant looks live each time it is read): after the retries
    the call is an ASK, as a hand-started call's is (LivePolicy.decide_and_spend), never a denial."""
    gate = bench.gate()
    grant = bench.store.create_grant(tool_id="shell__run", level="allow", created_by="alice", max_uses=5)
    bench.store.use_grant = lambda grant_id: False  # type: ignore[method-assign]
    args = {"command": "make test"}

    refused = await gate.decide(bench.ctx(attended=False), "shell__run", args)
    assert not refused.allowed and refused.reason.startswith("review required: shell__run"), refused
    decisions = bench.emit.of("policy_decision")
    assert [d["grant_id"] for d in decisions] == [grant.id] * (GRANT_RETRIES + 1) + [None]
    assert decisions[-1]["level"] == "ask"
    assert f"grant {grant.id} was used up by concurrent calls" in decisions[-1]["explanation"]

    pending = await start_decide(tasks, bench, lambda: gate.decide(bench.ctx(), "shell__run", args))
    assert "used up by concurrent calls" in pending.approval["explanation"]
    await gate.broker.answer(pending.approval["approval_id"], approve=True, decided_by="alice")
    assert (await pending.result()).allowed
    assert bench.store.get_grant(grant.id).uses == 0


# ------------------------------------------------------------------------------ questionnaire


async def test_questionnaire_always_asks_and_returns_the_answers(
    bench: Bench, tasks: anyio.abc.TaskGroup
) -> None:
    gate = bench.gate()
    bench.rule("allow", "cli-native:AskUserQuestion")
    pending = await start_decide(
        tasks,
        bench,
        lambda: gate.decide(bench.ctx(), "cli-native:AskUserQuestion", QUESTIONS, action="AskUserQuestion"),
    )
    approval = bench.store.get_approval(pending.approval["approval_id"])
    assert approval.kind == "questionnaire" and pending.approval["kind"] == "questionnaire"
    assert approval.reason == "CLI: AskUserQuestion (questionnaire)"
    assert approval.questions is not None
    assert "Which databases?" in str(approval.questions) and "the file" in str(approval.questions)
    await gate.broker.answer(
        approval.id, approve=True, decided_by="alice", answers={"Which databases?": ["Postgres", "SQLite"]}
    )
    result = await pending.result()
    assert result.allowed, result
    assert result.updated_input is not None
    assert result.updated_input["answers"] == {"Which databases?": "Postgres, SQLite"}
    assert result.updated_input["questions"] == QUESTIONS["questions"]


async def test_questionnaire_cancelled(bench: Bench, tasks: anyio.abc.TaskGroup) -> None:
    gate = bench.gate()
    pending = await start_decide(
        tasks, bench, lambda: gate.decide(bench.ctx(), "cli-native:AskUserQuestion", QUESTIONS)
    )
    await gate.broker.answer(pending.approval["approval_id"], approve=False, decided_by="alice")
    result = await pending.result()
    assert not result.allowed and result.reason == CANCEL_MESSAGE and result.updated_input is None


async def test_questionnaire_unattended_is_refused(bench: Bench) -> None:
    gate = bench.gate()
    bench.rule("allow", "cli-native:AskUserQuestion")
    ctx = bench.ctx(attended=False)
    result = await gate.decide(ctx, "cli-native:AskUserQuestion", QUESTIONS)
    assert not result.allowed
    assert result.reason.startswith("review required: AskUserQuestion"), result
    assert ctx.review_required == [result.reason]
    assert bench.store.list_approvals(run_id=bench.run_id) == []


async def test_questionnaire_denied_by_rule_is_not_asked(bench: Bench) -> None:
    gate = bench.gate()
    bench.rule("deny", "cli-native:AskUserQuestion")
    result = await gate.decide(bench.ctx(), "cli-native:AskUserQuestion", QUESTIONS)
    assert not result.allowed and result.reason.startswith("denied by Octipus policy: "), result
    assert bench.store.list_approvals(run_id=bench.run_id) == []
    assert "approval_requested" not in bench.emit.kinds()


async def test_malformed_questionnaire_is_refused(bench: Bench) -> None:
    gate = bench.gate()
    result = await gate.decide(bench.ctx(), "cli-native:AskUserQuestion", {"questions": []})
    assert not result.allowed
    assert result.reason.startswith("the questionnaire cannot be shown: "), result
    assert "no questions" in result.reason
    assert bench.store.list_approvals(run_id=bench.run_id) == []


async def test_deny_added_while_a_questionnaire_was_open_wins(
    bench: Bench, tasks: anyio.abc.TaskGroup
) -> None:
    gate = bench.gate()
    pending = await start_decide(
        tasks, bench, lambda: gate.decide(bench.ctx(), "cli-native:AskUserQuestion", QUESTIONS)
    )
    bench.rule("deny", "cli-native:AskUserQuestion")
    await gate.broker.answer(
        pending.approval["approval_id"],
        approve=True,
        decided_by="alice",
        answers={"Which databases?": ["SQLite"]},
    )
    result = await pending.result()
    assert not result.allowed, result
    assert result.reason.endswith("(changed while the approval was open)"), result
    assert result.updated_input is None


# ------------------------------------------------------------------------------ spaces


async def test_shell_guard_refuses_agent_config_writes_in_a_space(bench: Bench) -> None:
    gate = bench.gate()
    bench.rule("allow", "shell__run")
    args = {"command": "echo x > .claude/settings.json"}
    refused = await gate.decide(bench.ctx(space=True), "shell__run", args)
    assert not refused.allowed
    assert refused.reason.startswith("Octipus shell guard: "), refused
    assert ".claude" in refused.reason
    decision = bench.emit.of("policy_decision")[-1]
    assert decision["level"] == "deny" and decision["explanation"] == refused.reason

    harmless = await gate.decide(bench.ctx(space=True), "shell__run", {"command": "echo x > notes.txt"})
    assert harmless.allowed, harmless
    outside = await gate.decide(bench.ctx(space=False), "shell__run", args)
    assert outside.allowed, outside
