"""A child's command scorer gates (``octipusd.runtime.gates``) on a real git repository.

Real store (SQLite and PostgreSQL), real permission gate, recovery review and journal, real
``/bin/sh`` subprocesses through ``shell__run``'s handler: each test shows one rule of the verdict
(seed 003 "Permissions and limits", command scorers) with commands that really pass or fail.
"""

from __future__ import annotations

import dataclasses
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.app import build_runs
from octipusd.journal.executor import ActionJournal
from octipusd.journal.operator import RecoveryOperator
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.runner.transport import VendorLauncher
from octipusd.runtime.events import EventHub
from octipusd.runtime.gates import (
    GATE_OUTPUT_TAIL_CHARS,
    GateCaller,
    GateVerdict,
    caller_of,
    run_gates,
    run_setup_command,
)
from octipusd.runtime.services import RunRegistry, RunServices
from octipusd.runtime.supervisor import RunSupervisor
from octipusd.sandbox import RunnerSearch
from octipusd.settings import Settings
from octipusd.settings_security import ShellSandboxMode
from octipusd.store.records import Run
from octipusd.store.repository import Store
from octipusd.toolkit import NO_SANDBOX, CallContext, RunIdentity, ShellSandbox, StageTag
from octipusd.tools import parse_child_request
from octipusd.tools.gate_args import parse_gates

pytestmark = pytest.mark.anyio

#: Rules that let every shell command run, except the ones a test denies.
ALLOW_SHELL: Mapping[str, Any] = {"allow": ["shell(*)"], "deny": ["shell(git push:*)"]}
#: A test's own deadline (seconds): a gate that hangs fails the test instead of the suite.
DEADLINE_S = 60


@dataclass
class Child:
    """A child run in the store, and the services its gates run with."""

    services: RunServices
    run: Run
    repo: Path

    def caller(self, *, attended: bool = False) -> GateCaller:
        identity = RunIdentity(
            run_id=self.run.id,
            session_id=self.run.session_id,
            user=self.services.user,
            worker_id=f"child:{self.run.id}",
            workspace=self.repo,
            attended=attended,
        )
        return GateCaller(identity)

    async def gates(self, gates: Sequence[dict[str, Any]], *, tree: Path | None = None) -> GateVerdict:
        with anyio.fail_after(DEADLINE_S):
            return await run_gates(
                self.services, self.caller(), tree=tree or self.repo, gates=parse_gates(list(gates))
            )


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _repo(tmp_path: Path) -> Path:
    """A git repository with one commit: README.md and a sub-directory ``pkg``."""
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "README.md").write_text("hello\n")
    (repo / "pkg" / "mod.txt").write_text("x\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "init")
    return repo


@asynccontextmanager
async def _child(
    store: Store,
    tmp_path: Path,
    rules: Mapping[str, Any] | None = ALLOW_SHELL,
    sandbox: ShellSandbox = NO_SANDBOX,
    parent_host_services: bool = False,
) -> AsyncIterator[Child]:
    hub = EventHub(store)
    runs, _gate = build_runs(
        Settings(),
        store=store,
        hub=hub,
        broker=ApprovalBroker(store, 300),
        policy=Policy.from_setting(rules),
        adapters={},
        resolutions={},
        data_dir=tmp_path / "data",
        owner="test-owner",
        base_env={"PATH": "/usr/bin:/bin"},
        journal=ActionJournal(store, "test-owner"),
        operator=RecoveryOperator(store, lambda _tool: None, hub.emit_optional),
        connectors=None,
        config_notices=None,
        launcher=VendorLauncher(),
        sandbox=sandbox,
    )
    repo = _repo(tmp_path)
    session = store.create_session(workspace=str(repo), adapter="claude-code", attended=False)
    parent = store.create_run(
        session_id=session.id, prompt="parent", owner="test-owner", host_services=parent_host_services
    )
    run = store.create_run(
        session_id=session.id, prompt="child", owner="test-owner", parent_run_id=parent.id, role="coding"
    )
    async with anyio.create_task_group() as tg:
        runs.bind(tg)
        yield Child(runs.services, run, repo)
        tg.cancel_scope.cancel()


# ------------------------------------------------------------------ pass and fail


async def test_a_passing_gate_runs_in_the_tree_through_the_journal(store: Store, tmp_path: Path) -> None:
    async with _child(store, tmp_path) as child:
        verdict = await child.gates([{"name": "clean", "command": "test -f README.md && git status --short"}])
    assert verdict.passed and not verdict.retry and verdict.reason == ""
    assert verdict.results == [
        {
            "name": "clean",
            "command": "test -f README.md && git status --short",
            "status": "passed",
            "exitCode": 0,
            "output": "",
            "reason": "exited 0",
            "required": True,
            "retryable": True,
        }
    ]
    actions = store.list_actions(run_id=child.run.id)
    assert [(a.tool, a.outcome, a.agent) for a in actions] == [
        ("shell__run", "completed", f"child:{child.run.id}")
    ]


async def test_a_failing_gate_retries_with_its_command_exit_code_and_output(
    store: Store, tmp_path: Path
) -> None:
    command = "echo first line; seq 1 2000; echo 'expected 2 got 3' >&2; exit 3"
    async with _child(store, tmp_path) as child:
        verdict = await child.gates([{"name": "unit", "command": command}])
    assert not verdict.passed and verdict.retry
    (result,) = verdict.results
    assert result["status"] == "failed" and result["exitCode"] == 3 and result["reason"] == "exited 3"
    output = result["output"]
    assert output.endswith("2000\n[stderr]\nexpected 2 got 3")  # the end of the output is kept
    assert "first line" not in output and len(output) < GATE_OUTPUT_TAIL_CHARS + 100
    assert "'unit'" in verdict.reason and f"`{command}`: exited 3" in verdict.reason
    assert "expected 2 got 3" in verdict.reason and "Fix the cause" in verdict.reason


async def test_a_timed_out_gate_fails_and_is_not_retried(store: Store, tmp_path: Path) -> None:
    """Its command is journaled uncertain: a retried child's changes would wait for a recovery
    review, so the verdict does not ask for a retry and says why."""
    async with _child(store, tmp_path) as child:
        verdict = await child.gates([{"command": "sleep 30", "timeoutSeconds": 1}])
    assert not verdict.passed and not verdict.retry
    assert verdict.results[0]["reason"].startswith("timed out after 1 s")
    assert "awaits a recovery review" in verdict.reason
    assert [a.outcome for a in store.list_actions(run_id=child.run.id)] == ["uncertain"]


async def test_after_a_timed_out_gate_an_unattended_session_runs_no_further_gate_unreviewed(
    store: Store, tmp_path: Path
) -> None:
    """Seed 000: the timed-out command is uncertain, so the recovery review refuses the next one."""
    async with _child(store, tmp_path) as child:
        verdict = await child.gates([{"command": "sleep 30", "timeoutSeconds": 1}, {"command": "true"}])
    assert [r["status"] for r in verdict.results] == ["failed", "failed"]
    assert "review required" in verdict.results[1]["reason"] and not verdict.retry
    assert [a.outcome for a in store.list_actions(run_id=child.run.id)] == ["uncertain", "not_executed"]


# ------------------------------------------------------------------ what stops the retries


async def test_a_required_non_retryable_failure_stops_retries_despite_a_fixable_one(
    store: Store, tmp_path: Path
) -> None:
    gates = [
        {"name": "unit", "command": "exit 1"},
        {"name": "licence", "command": "test -f LICENSE", "retryable": False},
    ]
    async with _child(store, tmp_path) as child:
        verdict = await child.gates(gates)
        fixable_only = await child.gates(gates[:1])
    assert fixable_only.retry  # the same fixable failure alone retries
    assert not verdict.passed and not verdict.retry
    assert [r["status"] for r in verdict.results] == ["failed", "failed"]
    assert "not retried" in verdict.reason and "'licence' failed and is not retryable" in verdict.reason


async def test_an_unavailable_tree_is_an_environment_failure_never_retried(
    store: Store, tmp_path: Path
) -> None:
    async with _child(store, tmp_path) as child:
        verdict = await child.gates([{"command": "exit 1"}], tree=tmp_path / "gone")
    assert not verdict.passed and not verdict.retry
    assert verdict.results[0]["status"] == "environment_failure"
    assert "is not available" in verdict.results[0]["reason"]
    assert "cannot run in this environment" in verdict.reason
    assert store.list_actions(run_id=child.run.id) == []  # nothing was run


async def test_an_unavailable_directory_is_an_environment_failure_even_beside_a_fixable_one(
    store: Store, tmp_path: Path
) -> None:
    gates = [{"name": "unit", "command": "exit 1"}, {"name": "build", "command": "make -C missing all"}]
    async with _child(store, tmp_path) as child:
        verdict = await child.gates(gates)
    assert not verdict.passed and not verdict.retry
    build = verdict.results[1]
    assert build["status"] == "environment_failure" and build["exitCode"] is None
    assert "'make -C missing': missing is not available in the child's tree" in build["reason"]


async def test_a_switch_through_a_symlink_out_of_the_tree_is_refused_before_it_runs(
    store: Store, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    (outside / ".git").mkdir(parents=True)
    async with _child(store, tmp_path) as child:
        (child.repo / "link").symlink_to(outside)
        verdict = await child.gates([{"command": "git -C link status"}, {"command": "git -C pkg status"}])
    first, second = verdict.results
    assert first["status"] == "environment_failure" and "points outside the child's tree" in first["reason"]
    assert second["status"] == "passed"  # a relative switch inside the tree is fine
    assert len(store.list_actions(run_id=child.run.id)) == 1


async def test_a_program_that_is_not_installed_is_an_environment_failure(
    store: Store, tmp_path: Path
) -> None:
    async with _child(store, tmp_path) as child:
        verdict = await child.gates(
            [
                {"command": "octipus-no-such-tool test"},
                {"command": "timeout 60 octipus-no-such-tool test"},
                {"command": f"{shlex.quote(sys.executable)} -m platform"},  # a module, not a program
            ]
        )
    assert not verdict.retry
    assert [r["status"] for r in verdict.results] == ["environment_failure", "environment_failure", "passed"]
    assert "octipus-no-such-tool is not installed" in verdict.results[1]["reason"]


# ------------------------------------------------------------------ anyOf and optional gates


async def test_a_viable_any_of_alternative_allows_verification(store: Store, tmp_path: Path) -> None:
    gate = {
        "name": "tests",
        "anyOf": ["pnpm -C missing test", "octipus-no-such-tool", "test -f README.md", "exit 9"],
    }
    async with _child(store, tmp_path) as child:
        verdict = await child.gates([gate])
    assert verdict.passed and not verdict.retry
    (result,) = verdict.results
    assert result["status"] == "passed" and result["command"] == "test -f README.md"
    assert [a["status"] for a in result["alternatives"]] == [
        "environment_failure",
        "environment_failure",
        "passed",
        "skipped",
    ]


async def test_an_any_of_gate_fails_fixably_when_a_viable_alternative_ran_and_failed(
    store: Store, tmp_path: Path
) -> None:
    async with _child(store, tmp_path) as child:
        failed = await child.gates([{"anyOf": ["make -C missing test", "echo nope; exit 4"]}])
        unavailable = await child.gates([{"anyOf": ["make -C missing test", "octipus-no-such-tool"]}])
    assert failed.retry and failed.results[0]["status"] == "failed"
    assert failed.results[0]["exitCode"] == 4 and failed.results[0]["output"] == "nope"
    assert not unavailable.retry and unavailable.results[0]["status"] == "environment_failure"


async def test_a_non_required_failure_is_reported_but_does_not_fail(store: Store, tmp_path: Path) -> None:
    async with _child(store, tmp_path) as child:
        verdict = await child.gates(
            [{"name": "unit", "command": "true"}, {"name": "style", "command": "exit 2", "required": False}]
        )
    assert verdict.passed and not verdict.retry
    assert [r["status"] for r in verdict.results] == ["passed", "failed"]
    assert (
        verdict.reason.startswith("Verification passed")
        and "'style' (not required, failed)" in verdict.reason
    )


# ------------------------------------------------------------------ the permission rules


async def test_a_policy_deny_fails_the_gate_with_the_denial_and_nothing_runs(
    store: Store, tmp_path: Path
) -> None:
    async with _child(store, tmp_path) as child:
        verdict = await child.gates([{"name": "publish", "command": "git push origin main"}])
    assert not verdict.passed and not verdict.retry  # a retry cannot lift a denial
    (result,) = verdict.results
    assert result["status"] == "failed" and result["exitCode"] is None
    assert "denied by Octipus policy" in result["reason"] and "git push" in result["reason"]
    assert "'publish' did not run, and a retry of the child cannot change that" in verdict.reason
    assert [a.outcome for a in store.list_actions(run_id=child.run.id)] == ["not_executed"]


async def test_an_ask_in_an_unattended_run_is_refused_at_once(store: Store, tmp_path: Path) -> None:
    async with _child(store, tmp_path, rules=None) as child:  # the defaults: make is an ASK
        with anyio.fail_after(10):  # refused, not waiting for a person
            verdict = await child.gates([{"command": "make --version"}])
    assert not verdict.retry
    assert "review required" in verdict.results[0]["reason"]


async def test_a_stage_gate_commands_permission_check_names_its_stage_and_host_services(
    store: Store, tmp_path: Path
) -> None:
    """A stage's ``verifyCommand`` is checked as that stage attempt's call, with its host services:
    what an allowance (a person's approval ahead) is matched against."""
    seen: list[CallContext] = []

    class Witness:
        async def allows(
            self, ctx: CallContext, tool_id: str, arguments: dict[str, Any], action: str | None
        ) -> str | None:
            seen.append(ctx)
            return "approved ahead"

    tag = StageTag(pipeline_id="p1", node_key="n2", stage="verify", item_id=None, attempt_id="a1")
    async with _child(store, tmp_path, rules=None) as child:  # the defaults: make is an ASK
        child.services.gate.add_allowance(Witness())
        identity = dataclasses.replace(child.caller().identity, stage=tag)
        with anyio.fail_after(DEADLINE_S):
            verdict = await run_gates(
                child.services,
                GateCaller(identity, host_services=True),
                tree=child.repo,
                gates=parse_gates([{"command": "make --version"}]),
            )
    assert verdict.results[0]["status"] == "passed", verdict
    assert [(ctx.stage, ctx.host_services) for ctx in seen] == [(tag, True)]


async def test_an_unparsable_command_fails_without_a_retry(store: Store, tmp_path: Path) -> None:
    async with _child(store, tmp_path) as child:
        verdict = await child.gates([{"command": "if true; then echo x"}])
    assert not verdict.retry and verdict.results[0]["status"] == "failed"
    assert "the shell cannot parse it" in verdict.results[0]["reason"]


# ------------------------------------------------------------------ setup command and caller


async def test_the_setup_command_runs_in_the_tree_and_reports_a_failure(store: Store, tmp_path: Path) -> None:
    async with _child(store, tmp_path) as child:
        ok = await run_setup_command(
            child.services, child.caller(), tree=child.repo, command="touch .ready; pwd"
        )
        bad = await run_setup_command(
            child.services, child.caller(), tree=child.repo, command="echo no >&2; exit 5"
        )
        gone = await run_setup_command(child.services, child.caller(), tree=tmp_path / "gone", command="true")
    assert (child.repo / ".ready").is_file()
    assert ok == {
        "command": "touch .ready; pwd",
        "status": "passed",
        "exitCode": 0,
        "output": str(child.repo),
        "reason": "exited 0",
    }
    assert bad["status"] == "failed" and bad["exitCode"] == 5 and bad["output"] == "no"
    assert gone["status"] == "environment_failure" and gone["exitCode"] is None


async def test_the_caller_of_a_child_that_has_not_started_is_made_from_its_run(
    store: Store, tmp_path: Path
) -> None:
    request = parse_child_request({"role": "coding", "brief": "b", "gates": [{"command": "git status"}]})
    async with _child(store, tmp_path) as child:
        parent_run = store.get_run(child.run.parent_run_id or "")
        parent = RunSupervisor(child.services, RunRegistry(), parent_run, attended=False, generation=0)
        supervisor = parent.child(child.run, request)
        caller = caller_of(supervisor)
        verdict = await run_gates(child.services, caller, tree=child.repo, gates=request.gates)
    assert supervisor.identity is None  # it never started: the identity is made from its run
    assert caller.identity.run_id == child.run.id and caller.identity.worker_id == f"child:{child.run.id}"
    assert caller.identity.session_id == child.run.session_id and not caller.identity.attended
    assert caller.on_waiting == parent.set_waiting
    assert verdict.passed
    assert [a.run_id for a in store.list_actions(session_id=child.run.session_id)] == [child.run.id]


@pytest.mark.parametrize("host_services", [False, True])
async def test_gate_commands_run_in_the_sandbox_with_the_parents_host_services(
    store: Store, tmp_path: Path, host_services: bool
) -> None:
    """Under ``security.shellSandbox`` a gate command cannot write outside its tree, and it reaches
    the network only when the parent run shares the host's services (the child never does)."""
    sandbox = RunnerSearch().find(ShellSandboxMode.REQUIRED)
    assert sandbox.in_force, sandbox.unavailable
    elsewhere = Path(tempfile.mkdtemp(prefix="octipus-gate-test-", dir="/var/tmp"))  # not the private /tmp
    outside = elsewhere / "outside"
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        reach = f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 5)'"
        request = parse_child_request(
            {
                "role": "coding",
                "brief": "b",
                "gates": [
                    {"name": "net", "command": reach},
                    {"name": "disk", "command": f"touch inside && ! touch {outside}"},
                ],
            }
        )
        async with _child(store, tmp_path, sandbox=sandbox, parent_host_services=host_services) as child:
            parent_run = store.get_run(child.run.parent_run_id or "")
            parent = RunSupervisor(child.services, RunRegistry(), parent_run, attended=False, generation=0)
            supervisor = parent.child(child.run, request)
            caller = caller_of(supervisor)
            assert caller.host_services is host_services and child.run.host_services is False
            with anyio.fail_after(DEADLINE_S):
                verdict = await run_gates(child.services, caller, tree=child.repo, gates=request.gates)
    net, disk = verdict.results
    written = outside.exists()
    shutil.rmtree(elsewhere)
    assert disk["status"] == "passed", (disk, verdict.reason)
    assert (child.repo / "inside").exists() and not written
    assert net["status"] == ("passed" if host_services else "failed"), net
