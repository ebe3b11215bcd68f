"""The admission rule (pure), the queue's order and withdrawals, and the host probe on real processes."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.lowlevel
import psutil
import pytest

from octipusd.runtime.admission import (
    RUN_DESCRIPTORS,
    RUN_MEMORY_MIB,
    SPARE_DESCRIPTORS,
    UNLIMITED_NOFILE_TARGET,
    Admission,
    AdmissionLimits,
    Pressure,
    PsutilProbe,
    default_max_runs,
    expected_growth_mib,
    limits_from_settings,
    refusal,
)
from octipusd.settings import AgentSettings

FLOOR = 1024
LIMITS = AdmissionLimits(max_runs=2, min_free_memory_mib=FLOOR)
ROOM = 10_000  # descriptors


def _pressure(
    working: int = 0, available: float = 100_000.0, growth: float = 0.0, fds: int = ROOM
) -> Pressure:
    return Pressure(working=working, available_mib=available, growth_mib=growth, free_descriptors=fds)


def test_the_cap_counts_working_runs() -> None:
    assert refusal(_pressure(working=1), LIMITS) is None
    refused = refusal(_pressure(working=2), LIMITS)
    assert refused is not None and refused.kind == "slots"
    assert "agent.maxConcurrentRuns = 2" in refused.message


def test_the_memory_check_counts_the_new_run_and_what_working_runs_still_grow() -> None:
    exact = FLOOR + RUN_MEMORY_MIB + 300.0
    assert refusal(_pressure(available=exact, growth=300.0), LIMITS) is None
    refused = refusal(_pressure(available=exact, growth=301.0), LIMITS)
    assert refused is not None and refused.kind == "memory"
    assert f"agent.minFreeMemoryMiB = {FLOOR}" in refused.message and "MiB available" in refused.message
    under_floor = refusal(_pressure(available=FLOOR - 1.0), LIMITS)
    assert under_floor is not None and under_floor.kind == "memory"


def test_a_floor_of_zero_turns_the_memory_check_off() -> None:
    off = AdmissionLimits(max_runs=2, min_free_memory_mib=0)
    assert refusal(_pressure(available=0.0, growth=10 * RUN_MEMORY_MIB), off) is None


def test_descriptor_headroom_below_a_run_and_the_spare_refuses() -> None:
    needed = RUN_DESCRIPTORS + SPARE_DESCRIPTORS
    assert refusal(_pressure(fds=needed), LIMITS) is None
    refused = refusal(_pressure(fds=needed - 1), LIMITS)
    assert refused is not None and refused.kind == "descriptors" and "LimitNOFILE" in refused.message


def test_growth_is_the_estimate_less_what_a_run_holds_never_negative() -> None:
    assert expected_growth_mib([None, 0.0, 1000.0, 5000.0], 1792) == 1792 + 1792 + 792 + 0


def test_the_default_cap_is_memory_over_the_estimate_at_least_one() -> None:
    assert default_max_runs(24_105) == 13
    assert default_max_runs(1_000) == 1
    assert limits_from_settings(AgentSettings(), total_memory_mib=8 * 1024).max_runs == 4
    chosen = limits_from_settings(
        AgentSettings(maxConcurrentRuns=7, minFreeMemoryMiB=0), total_memory_mib=1.0
    )
    assert (chosen.max_runs, chosen.min_free_memory_mib) == (7, 0)


# ---------------------------------------------------------------------- the queue, with fake runs


class FakeProbe:
    """The host as the test sets it."""

    def __init__(self, available: float = 100_000.0, resident: dict[int, float] | None = None) -> None:
        self.available = available
        self.resident = resident or {}
        self.measured: list[list[int]] = []

    def available_memory_mib(self) -> float:
        return self.available

    def resident_mib(self, pids: Sequence[int]) -> dict[int, float]:
        self.measured.append(list(pids))
        return {pid: self.resident[pid] for pid in pids if pid in self.resident}

    def free_descriptors(self) -> int:
        return ROOM


@dataclass
class FakeRun:
    admission_id: str
    waiting: bool = False
    vendor_pid: int | None = None

    def __post_init__(self) -> None:
        self.reasons: list[str] = []

    async def show_queued(self, reason: str) -> None:
        self.reasons.append(reason)


@asynccontextmanager
async def _admission(limits: AdmissionLimits, probe: FakeProbe) -> AsyncIterator[Admission]:
    admission = Admission(limits, probe)
    async with anyio.create_task_group() as tg:
        tg.start_soon(admission.run)
        yield admission
        tg.cancel_scope.cancel()


async def _settle() -> None:
    for _ in range(20):
        await anyio.lowlevel.checkpoint()


@pytest.mark.anyio
async def test_queued_runs_start_in_order_as_slots_free() -> None:
    async with _admission(AdmissionLimits(max_runs=1, min_free_memory_mib=0), FakeProbe()) as admission:
        first = FakeRun("a")
        assert await admission.wait(first)
        started: list[str] = []
        runs = [FakeRun(name) for name in "bcd"]

        async def queue(run: FakeRun) -> None:
            if await admission.wait(run):
                started.append(run.admission_id)

        async with anyio.create_task_group() as tg:
            for run in runs:
                tg.start_soon(queue, run)
                await _settle()
            assert admission.queued() == ["b", "c", "d"] and started == []
            assert all(r.reasons and "maxConcurrentRuns = 1" in r.reasons[0] for r in runs)
            for count, holder in enumerate((first, *runs[:2]), start=1):
                admission.release(holder)
                await _settle()
                assert started == ["b", "c", "d"][:count], started
            admission.release(runs[2])


@pytest.mark.anyio
async def test_a_waiting_run_holds_no_slot_and_a_withdrawn_one_never_starts() -> None:
    async with _admission(AdmissionLimits(max_runs=1, min_free_memory_mib=0), FakeProbe()) as admission:
        parent = FakeRun("parent")
        assert await admission.wait(parent)
        outcome: dict[str, bool] = {}

        async def queue(run: FakeRun) -> None:
            outcome[run.admission_id] = await admission.wait(run)

        stopped, child = FakeRun("stopped"), FakeRun("child")
        async with anyio.create_task_group() as tg:
            tg.start_soon(queue, stopped)
            await _settle()
            tg.start_soon(queue, child)
            await _settle()
            admission.withdraw(stopped)
            await _settle()
            assert outcome == {"stopped": False}
            parent.waiting = True  # e.g. spawn_child: it waits on its child
            admission.changed()
        assert outcome == {"stopped": False, "child": True}
        assert admission.queued() == []


@pytest.mark.anyio
async def test_measured_memory_replaces_the_estimate_only_when_the_bound_refuses() -> None:
    probe = FakeProbe(available=FLOOR + RUN_MEMORY_MIB + 100.0, resident={41: RUN_MEMORY_MIB - 50.0})
    limits = AdmissionLimits(max_runs=10, min_free_memory_mib=FLOOR)
    async with _admission(limits, probe) as admission:
        assert await admission.wait(FakeRun("first"))  # nothing works yet: the bound admits
        assert probe.measured == []
        admission.release(FakeRun("first"))
        grown = FakeRun("grown", vendor_pid=41)  # holds all but 50 MiB of the estimate
        assert await admission.wait(grown)
        with anyio.fail_after(5):
            assert await admission.wait(FakeRun("next"))
        assert probe.measured == [[41]]


@pytest.mark.anyio
async def test_a_cancelled_wait_leaves_the_queue() -> None:
    async with _admission(AdmissionLimits(max_runs=1, min_free_memory_mib=0), FakeProbe()) as admission:
        holder = FakeRun("holder")
        assert await admission.wait(holder)
        with anyio.move_on_after(0.2):
            await admission.wait(FakeRun("gone"))
        admission.release(holder)
        with anyio.fail_after(5):
            assert await admission.wait(FakeRun("later"))
        assert admission.queued() == []


# ---------------------------------------------------------------------- the real probe


def test_the_resident_memory_of_a_tree_includes_its_children() -> None:
    # both live until their (shared) stdin closes
    child = "x = bytearray(64 << 20); import sys; sys.stdin.read()"
    code = f"import subprocess, sys; subprocess.Popen([sys.executable, '-c', {child!r}]); sys.stdin.read()"
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE)
    try:
        probe, gone = PsutilProbe(), 2**22 + 7
        deadline = time.monotonic() + 10
        resident: dict[int, float] = {}
        while time.monotonic() < deadline and resident.get(parent.pid, 0.0) <= 64:
            resident = probe.resident_mib([parent.pid, gone])
            time.sleep(0.05)
        assert resident.get(parent.pid, 0.0) > 64, resident  # the child's 64 MiB bytearray counts
        assert gone not in resident
        assert probe.available_memory_mib() > 0 and probe.free_descriptors() > 0
    finally:
        for proc in psutil.Process(parent.pid).children(recursive=True):
            proc.kill()
        parent.kill()
        parent.communicate()


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one() -> None:
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    low = 256
    target = UNLIMITED_NOFILE_TARGET if hard == resource.RLIM_INFINITY else hard
    code = (
        "import resource; from octipusd.runtime.admission import raise_descriptor_limit; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({low}, {hard})); "
        "print(*raise_descriptor_limit(), *resource.getrlimit(resource.RLIMIT_NOFILE))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=os.environ, check=True
    )
    before, after, soft, now_hard = (int(v) for v in out.stdout.split())
    assert (before, after, soft, now_hard) == (low, target, target, hard), out.stdout


@pytest.mark.anyio
async def test_a_failed_check_is_logged_and_the_queue_still_moves(caplog: pytest.LogCaptureFixture) -> None:
    class Failing(FakeRun):
        async def show_queued(self, reason: str) -> None:
            raise RuntimeError("the store is down")

    async with _admission(AdmissionLimits(max_runs=1, min_free_memory_mib=0), FakeProbe()) as admission:
        holder = FakeRun("holder")
        assert await admission.wait(holder)
        outcome: list[bool] = []

        async def queue() -> None:
            outcome.append(await admission.wait(Failing("next")))

        async with anyio.create_task_group() as tg:
            tg.start_soon(queue)
            await _settle()
            admission.release(holder)
        assert outcome == [True]
    assert any("admission check failed" in r.message and r.exc_info for r in caplog.records)
