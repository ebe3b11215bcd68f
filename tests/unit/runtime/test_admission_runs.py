"""Admission of real runs in the daemon's composition (``build_runs``): real store, gate, approvals,
bridge, launcher and stub CLI processes; only the host's available memory is the test's (the
:class:`~octipusd.runtime.admission.HostProbe` seam), the vendor trees' resident memory is measured.

Shown here: a run under the memory floor starts once memory frees (nothing else changes); a run
awaiting approval counts its measured memory, not the estimate; a parent waiting on its children
does not block them at a cap of 1, and a detached child waits for its parent to collect it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.adapter import load_adapters
from octipusd.app import build_runs
from octipusd.journal.executor import ActionJournal
from octipusd.journal.operator import RecoveryOperator
from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.runner.executables import Resolution
from octipusd.runner.transport import VendorLauncher
from octipusd.runtime.admission import PsutilProbe
from octipusd.runtime.events import EventHub
from octipusd.runtime.manager import RunManager
from octipusd.settings import RUN_MEMORY_MIB, AgentSettings, Settings
from octipusd.store.records import Run, RunStatus
from octipusd.store.repository import Store
from octipusd.testing.harness import write_python_stub
from octipusd.testing.stub_cli import CLAUDE_INIT, SCRIPT_ENV, claude_result
from octipusd.toolkit import ChildRequest

pytestmark = pytest.mark.anyio

ADAPTER = "claude-code"
FLOOR = 1024
INIT = CLAUDE_INIT
RESULT = claude_result(tokens=1)
ASK = {
    "type": "control_request",
    "request_id": "perm-1",
    "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {"command": "make deploy"}},
}


class SetMemory(PsutilProbe):
    """The real probe, but the available memory is the test's."""

    def __init__(self, available_mib: float) -> None:
        self.available = available_mib
        self.read = anyio.Event()

    def available_memory_mib(self) -> float:
        self.read.set()
        return self.available

    async def checked_again(self, runs: RunManager) -> None:
        """Make admission check its queue once more and wait until it has read the memory."""
        self.read = anyio.Event()
        runs.services.admission.changed()
        await self.read.wait()


@asynccontextmanager
async def _daemon(
    store: Store, tmp_path: Path, agent: AgentSettings, actions: Sequence[dict[str, Any]], probe: SetMemory
) -> AsyncIterator[RunManager]:
    script = tmp_path / "stub.json"
    script.write_text(json.dumps(list(actions)))
    binary = write_python_stub(
        tmp_path / "bin" / "claude", "octipusd.testing.stub_cli", {SCRIPT_ENV: str(script)}
    )
    hub = EventHub(store)
    runs, _gate = build_runs(
        Settings(agent=agent),
        store=store,
        hub=hub,
        broker=ApprovalBroker(store, 300),
        policy=Policy.from_setting(None),
        adapters={ADAPTER: load_adapters()[ADAPTER]},
        resolutions={ADAPTER: Resolution(ADAPTER, "claude", str(binary), None, "/usr/bin:/bin")},
        data_dir=tmp_path / "data",
        owner="test-owner",
        base_env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        journal=ActionJournal(store, "test-owner"),
        operator=RecoveryOperator(store, lambda _tool: None, hub.emit_optional),
        connectors=None,
        config_notices=None,
        launcher=VendorLauncher(),
        probe=probe,
    )
    async with anyio.create_task_group() as tg:
        runs.bind(tg)
        try:
            yield runs
        finally:
            with anyio.CancelScope(shield=True):
                await runs.shutdown("the test ended")
            tg.cancel_scope.cancel()


async def _until(runs: RunManager, run_id: str, what: str, check: Any) -> Run:
    """Poll the stored run until ``check`` holds (30 s at most)."""
    deadline = anyio.current_time() + 30
    while anyio.current_time() < deadline:
        run = runs.services.store.get_run(run_id)
        if check(run):
            return run
        await anyio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}: {runs.services.store.get_run(run_id)}")


def _session(runs: RunManager, tmp_path: Path) -> str:
    return runs.services.store.create_session(workspace=str(tmp_path), adapter=ADAPTER).id


def _release(tmp_path: Path, run: Run) -> None:
    (tmp_path / f"release-{run.vendor_session_id}").write_text("go")


def _working(run: Run) -> bool:
    return run.status == RunStatus.RUNNING and run.vendor_session_id is not None


async def test_a_run_under_the_memory_floor_starts_once_memory_frees(store: Store, tmp_path: Path) -> None:
    probe = SetMemory(FLOOR + RUN_MEMORY_MIB - 1.0)
    actions = [
        {"read_line": True},
        {"emit": INIT},
        {"wait_for_file": str(tmp_path / "release-$SESSION_ID")},
        {"emit": RESULT},
    ]
    agent = AgentSettings(maxConcurrentRuns=4, minFreeMemoryMiB=FLOOR)
    async with _daemon(store, tmp_path, agent, actions, probe) as runs:
        run = await runs.post_turn(_session(runs, tmp_path), "go")
        queued = await _until(runs, run.id, "queued", lambda r: r.reason is not None)
        assert queued.status == RunStatus.QUEUED and queued.pid is None
        assert "not enough memory" in queued.reason and f"agent.minFreeMemoryMiB = {FLOOR}" in queued.reason
        await probe.checked_again(runs)  # a check with the memory still short leaves it queued
        assert store.get_run(run.id).status == RunStatus.QUEUED
        probe.available = FLOOR + RUN_MEMORY_MIB + 1.0  # memory freed; no run ended
        started = await _until(runs, run.id, "running", _working)
        _release(tmp_path, started)
        final = await _until(runs, run.id, "ended", lambda r: r.status.terminal)
    assert final.status == RunStatus.SUCCEEDED, final.reason


async def test_a_run_awaiting_approval_counts_its_measured_memory_not_the_estimate(
    store: Store, tmp_path: Path
) -> None:
    """Room for one run beyond a floor: a second queues while the first works (it may still grow to
    the estimate), and starts once the first waits for a person (it counts what it holds)."""
    probe = SetMemory(FLOOR + RUN_MEMORY_MIB + 500.0)
    actions = [
        {"read_line": True},
        {"emit": INIT},
        {"wait_for_file": str(tmp_path / "ask-$SESSION_ID")},
        {"emit": ASK},
        {"read_line": True},
        {"wait_for_file": str(tmp_path / "release-$SESSION_ID")},
        {"emit": RESULT},
    ]
    agent = AgentSettings(maxConcurrentRuns=10, minFreeMemoryMiB=FLOOR)
    async with _daemon(store, tmp_path, agent, actions, probe) as runs:
        first = await runs.post_turn(_session(runs, tmp_path), "one")
        working = await _until(runs, first.id, "the first to run", _working)
        second = await runs.post_turn(_session(runs, tmp_path), "two")
        queued = await _until(runs, second.id, "queued", lambda r: r.reason is not None)
        assert "not enough memory" in queued.reason, queued.reason
        (tmp_path / f"ask-{working.vendor_session_id}").write_text("ask")
        await _until(runs, first.id, "the approval", lambda r: r.status == RunStatus.AWAITING_APPROVAL)
        started = await _until(runs, second.id, "the second to run", _working)
        assert store.get_run(first.id).status == RunStatus.AWAITING_APPROVAL
        assert started.reason is None


async def test_a_parent_waiting_on_children_does_not_block_them_at_a_cap_of_one(
    store: Store, tmp_path: Path
) -> None:
    actions = [
        {"read_line": True},
        {"emit": INIT},
        {"wait_for_file": str(tmp_path / "release-$SESSION_ID")},
        {"emit": RESULT},
    ]
    agent = AgentSettings(maxConcurrentRuns=1, minFreeMemoryMiB=0)
    async with _daemon(store, tmp_path, agent, actions, SetMemory(0.0)) as runs:
        root = await runs.post_turn(_session(runs, tmp_path), "lead")
        parent_run = await _until(runs, root.id, "the parent to run", _working)
        parent = runs.registry.get(root.id)
        assert parent is not None
        summaries: list[dict[str, Any]] = []

        async def spawn(detach: bool) -> None:
            summaries.append(await parent.delegation.spawn(ChildRequest("general", "a task", detach=detach)))

        def child_of(index: int) -> Run:
            children = [r for r in store.list_runs(session_id=root.session_id) if r.parent_run_id == root.id]
            return sorted(children, key=lambda r: r.created_at)[index]

        async with anyio.create_task_group() as tg:
            tg.start_soon(spawn, False)  # spawn_child waits: the parent holds no slot meanwhile
            await _until(runs, root.id, "a child", lambda _r: _has_child(store, root))
            child = await _until(runs, child_of(0).id, "the waited child to run", _working)
            _release(tmp_path, child)
        assert summaries[0]["status"] == "succeeded", summaries

        await spawn(True)  # detached: the parent keeps working and keeps its slot
        detached = child_of(1)
        queued = await _until(runs, detached.id, "the detached child queued", lambda r: r.reason is not None)
        assert queued.status == RunStatus.QUEUED and "maxConcurrentRuns = 1" in queued.reason

        async def release_when_running() -> None:
            _release(tmp_path, await _until(runs, detached.id, "the collected child to run", _working))

        async with anyio.create_task_group() as tg:
            tg.start_soon(release_when_running)
            collected = await parent.delegation.collect(None, 30)
        assert [c["status"] for c in collected["children"]] == ["succeeded"], collected
        _release(tmp_path, parent_run)
        final = await _until(runs, root.id, "the parent to end", lambda r: r.status.terminal)
    assert final.status == RunStatus.SUCCEEDED, final.reason


def _has_child(store: Store, root: Run) -> bool:
    return any(r.parent_run_id == root.id for r in store.list_runs(session_id=root.session_id))
