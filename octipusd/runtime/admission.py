"""Admission control: whether the host has room for one more vendor CLI, and the queue of runs that wait.

A vendor CLI costs far more than Octipus (a Claude Code process is commonly 1.5-2 GB resident, and
hosts that ran them without a cap went down), so a run starts only when there is room for it.
Otherwise it waits in status ``queued`` with its ``reason`` saying why (a ``run_status`` event
carries it too), and the queued runs start in the order they reached the queue: none overtakes the
oldest.

The rule. A run is admitted when all three hold:

1. **Slots.** Fewer than ``agent.maxConcurrentRuns`` admitted runs are *working*. A run that waits
   (an approval, or its children through ``spawn_child`` or ``collect_children``) is not working
   and holds no slot while it waits: a parent waiting on its children never blocks them, even at a
   cap of 1, and a child is a run like any other (it queues too). When its wait ends a run goes on
   at once (an approved call is not held back), so for a while more runs than the cap may work;
   no run is admitted until fewer than the cap do.
2. **Memory** (off when ``agent.minFreeMemoryMiB`` is 0). Each working run is counted as growing
   to :data:`RUN_MEMORY_MIB`; each waiting run counts its measured resident memory (the vendor's
   process tree, psutil) and nothing more. The run is admitted when the memory available now
   (psutil ``virtual_memory().available``), less what the working runs are still expected to grow
   (:data:`RUN_MEMORY_MIB` minus what each holds, never below 0), less :data:`RUN_MEMORY_MIB` for
   the new run, is at least ``agent.minFreeMemoryMiB``.
3. **Descriptors.** At least :data:`RUN_DESCRIPTORS` plus :data:`SPARE_DESCRIPTORS` file descriptors
   are free under the daemon's soft ``RLIMIT_NOFILE`` (raised to the hard limit at start-up by
   :func:`raise_descriptor_limit`).

What it costs a run admitted at once: one read of ``/proc/meminfo`` and one listing of
``/proc/self/fd`` on the event loop, no store write, no event. Resident memory is measured (one
scan of the process table, in a thread) only when the bound that counts every working run at the
full estimate refuses. A queued run is checked again when a run ends, starts waiting, or every
:data:`QUEUE_RECHECK_S` (available memory changes on its own).

A stop of a queued run (a person's, or its parent ending, or a daemon shutdown) withdraws it: it
ends ``cancelled`` (``interrupted`` at shutdown) and no vendor process is ever spawned.
"""

from __future__ import annotations

import logging
import os
import resource
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import anyio
import psutil

from octipusd.settings import DEFAULT_MIN_FREE_MEMORY_MIB, RUN_MEMORY_MIB, AgentSettings

__all__ = [
    "QUEUE_RECHECK_S",
    "RUN_DESCRIPTORS",
    "SPARE_DESCRIPTORS",
    "UNLIMITED_NOFILE_TARGET",
    "Admission",
    "AdmissionLimits",
    "Candidate",
    "HostProbe",
    "Pressure",
    "PsutilProbe",
    "Refusal",
    "default_max_runs",
    "expected_growth_mib",
    "limits_from_settings",
    "raise_descriptor_limit",
    "refusal",
]

log = logging.getLogger("octipusd.runtime.admission")

#: File descriptors one run is counted as needing: about 5 held while it runs (its pipes, its
#: bridge's listener and connection), the rest the transient ones of its start and its connectors.
RUN_DESCRIPTORS = 16
#: File descriptors always kept free for the daemon itself (API connections, the store, logs).
SPARE_DESCRIPTORS = 64
#: Seconds between two checks of the queue while a run waits in it and nothing else changed.
QUEUE_RECHECK_S = 2.0
#: What a soft ``RLIMIT_NOFILE`` is raised to when the hard limit is unlimited (Linux's default
#: ``fs.nr_open``), in descriptors.
UNLIMITED_NOFILE_TARGET = 1_048_576

_MIB = 1024 * 1024


def default_max_runs(total_memory_mib: float) -> int:
    """The default of ``agent.maxConcurrentRuns``: the machine's memory divided by
    :data:`RUN_MEMORY_MIB`, at least 1."""
    return max(1, int(total_memory_mib // RUN_MEMORY_MIB))


def limits_from_settings(agent: AgentSettings, total_memory_mib: float | None = None) -> AdmissionLimits:
    """The limits of ``agent.maxConcurrentRuns`` (unset: :func:`default_max_runs` of the machine's
    memory, psutil ``virtual_memory().total`` unless given) and ``agent.minFreeMemoryMiB``."""
    cap = agent.maxConcurrentRuns
    if cap is None:
        total = float(psutil.virtual_memory().total) / _MIB if total_memory_mib is None else total_memory_mib
        cap = default_max_runs(total)
    return AdmissionLimits(max_runs=cap, min_free_memory_mib=agent.minFreeMemoryMiB)


@dataclass(frozen=True)
class AdmissionLimits:
    """The limits admission applies, each in its unit.

    Attributes:
        max_runs: ``agent.maxConcurrentRuns``: working runs at once.
        min_free_memory_mib: ``agent.minFreeMemoryMiB``: MiB a new run must leave available (0: no
            memory check).
        run_memory_mib: What one vendor CLI is counted as growing to (MiB).
        run_descriptors: Descriptors one run is counted as needing.
        spare_descriptors: Descriptors always kept free for the daemon.
    """

    max_runs: int
    min_free_memory_mib: int = DEFAULT_MIN_FREE_MEMORY_MIB
    run_memory_mib: int = RUN_MEMORY_MIB
    run_descriptors: int = RUN_DESCRIPTORS
    spare_descriptors: int = SPARE_DESCRIPTORS


@dataclass(frozen=True)
class Pressure:
    """What the host holds when a run asks to start.

    Attributes:
        working: Admitted runs that are working (not waiting for an approval or children).
        available_mib: Memory available now (psutil ``virtual_memory().available``), MiB.
        growth_mib: What the working runs are still expected to grow, MiB (:func:`expected_growth_mib`).
        free_descriptors: Descriptors free under the soft ``RLIMIT_NOFILE``.
    """

    working: int
    available_mib: float
    growth_mib: float
    free_descriptors: int


@dataclass(frozen=True)
class Refusal:
    """Why a run may not start now.

    Attributes:
        kind: Which check refused (``slots``, ``memory``, ``descriptors``).
        message: The reason shown on the queued run.
    """

    kind: Literal["slots", "memory", "descriptors"]
    message: str


def expected_growth_mib(resident_mib: Iterable[float | None], run_memory_mib: int) -> float:
    """What working runs are still expected to grow: per run ``run_memory_mib`` minus what it holds
    (None: not measured, counted as holding nothing), never below 0."""
    return sum(max(0.0, run_memory_mib - (held or 0.0)) for held in resident_mib)


def refusal(pressure: Pressure, limits: AdmissionLimits) -> Refusal | None:
    """The admission rule (this module's docstring), pure: None admits the run."""
    if pressure.working >= limits.max_runs:
        return Refusal(
            "slots",
            f"queued: {pressure.working} run(s) working, the most at once (agent.maxConcurrentRuns = "
            f"{limits.max_runs}); it starts when one ends or waits",
        )
    if limits.min_free_memory_mib > 0:
        left = pressure.available_mib - pressure.growth_mib - limits.run_memory_mib
        if left < limits.min_free_memory_mib:
            return Refusal(
                "memory",
                f"queued: not enough memory: {pressure.available_mib:.0f} MiB available, "
                f"{pressure.growth_mib:.0f} MiB still expected for the working runs and "
                f"{limits.run_memory_mib} MiB for this one would leave {left:.0f} MiB, under "
                f"agent.minFreeMemoryMiB = {limits.min_free_memory_mib}; it starts when there is room",
            )
    needed = limits.run_descriptors + limits.spare_descriptors
    if pressure.free_descriptors < needed:
        return Refusal(
            "descriptors",
            f"queued: {pressure.free_descriptors} file descriptors free under the soft RLIMIT_NOFILE, "
            f"fewer than the {needed} a run needs with the daemon's spare; raise LimitNOFILE= or wait",
        )
    return None


class HostProbe(Protocol):
    """Reads what the host holds (the seam of admission; :class:`PsutilProbe` is the real one)."""

    def available_memory_mib(self) -> float:
        """Memory available now, MiB."""
        ...

    def resident_mib(self, pids: Sequence[int]) -> dict[int, float]:
        """Resident memory of each process tree rooted at ``pids``, MiB (a gone pid is left out)."""
        ...

    def free_descriptors(self) -> int:
        """Descriptors this process may still open under its soft ``RLIMIT_NOFILE``."""
        ...


class PsutilProbe:
    """The host as psutil and ``/proc`` show it."""

    def available_memory_mib(self) -> float:
        """psutil ``virtual_memory().available``, MiB."""
        return float(psutil.virtual_memory().available) / _MIB

    def resident_mib(self, pids: Sequence[int]) -> dict[int, float]:
        """Sum the RSS of each tree from one scan of the process table."""
        parents: dict[int, int] = {}
        rss: dict[int, int] = {}
        for proc in psutil.process_iter(["ppid", "memory_info"]):
            info = proc.info
            memory = info.get("memory_info")
            parents[proc.pid] = info.get("ppid") or 0
            rss[proc.pid] = memory.rss if memory is not None else 0
        children: dict[int, list[int]] = {}
        for pid, ppid in parents.items():
            children.setdefault(ppid, []).append(pid)
        out: dict[int, float] = {}
        for root in pids:
            if root not in rss:
                continue
            total, stack = 0, [root]
            while stack:
                pid = stack.pop()
                total += rss.get(pid, 0)
                stack.extend(children.get(pid, ()))
            out[root] = total / _MIB
        return out

    def free_descriptors(self) -> int:
        """The soft limit less the entries of ``/proc/self/fd``."""
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return UNLIMITED_NOFILE_TARGET
        return soft - len(os.listdir("/proc/self/fd"))


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise the soft ``RLIMIT_NOFILE`` to the hard limit (each run holds descriptors; 200 runs held
    about 1,000). A hard limit of unlimited raises it to :data:`UNLIMITED_NOFILE_TARGET`.

    Returns:
        The soft limit before and after (equal when it could not or need not change; logged).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = UNLIMITED_NOFILE_TARGET if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the soft RLIMIT_NOFILE from %d to %d: %s", soft, target, exc)
            return soft, soft
        log.info("file descriptors: soft RLIMIT_NOFILE raised from %d to %d", soft, target)
        return soft, target
    return soft, soft


class Candidate(Protocol):
    """A run as admission sees it (:class:`~octipusd.runtime.supervisor.RunSupervisor`)."""

    @property
    def admission_id(self) -> str:
        """The run's id."""
        ...

    @property
    def waiting(self) -> bool:
        """Whether it waits (an approval, or its children) instead of working."""
        ...

    @property
    def vendor_pid(self) -> int | None:
        """Its vendor process, once started and not reaped."""
        ...

    async def show_queued(self, reason: str) -> None:
        """Store and publish why it is queued."""
        ...


class _Ticket:
    """One run in the queue."""

    def __init__(self, run: Candidate) -> None:
        self.run = run
        self.decided = anyio.Event()
        self.admitted = False
        self.shown: str | None = None  # the kind of refusal last shown on the run


class Admission:
    """The runs admitted now and the queue of those waiting for room.

    Args:
        limits: The limits.
        probe: Reads memory and descriptors (a fake in tests).
    """

    def __init__(self, limits: AdmissionLimits, probe: HostProbe | None = None) -> None:
        self.limits = limits
        self.probe: HostProbe = probe if probe is not None else PsutilProbe()
        self._holders: dict[str, Candidate] = {}
        self._queue: deque[_Ticket] = deque()
        self._tickets: dict[str, _Ticket] = {}
        self._changed = anyio.Event()

    def queued(self) -> list[str]:
        """Ids of the queued runs, oldest first."""
        return [t.run.admission_id for t in self._queue if not t.decided.is_set()]

    async def wait(self, run: Candidate) -> bool:
        """Admit ``run`` now if there is room and nobody queues; else queue it until there is.

        Returns:
            True once admitted (call :meth:`release` when it ends); False when it was withdrawn
            (:meth:`withdraw`) before that.

        Raises:
            Cancelled: the caller was cancelled; the run leaves the queue unadmitted.
        """
        if not self._queue and refusal(self._pressure(), self.limits) is None:
            self._holders[run.admission_id] = run
            return True
        ticket = _Ticket(run)
        self._tickets[run.admission_id] = ticket
        self._queue.append(ticket)
        self._changed.set()
        try:
            await ticket.decided.wait()
        except BaseException:  # cancelled: it leaves the queue, and a slot just given is freed
            if ticket.admitted:
                self.release(run)
            raise
        finally:
            ticket.decided.set()  # the pump drops decided tickets
            self._tickets.pop(run.admission_id, None)
        return ticket.admitted

    def withdraw(self, run: Candidate) -> None:
        """Take a queued run out of the queue (it was stopped): its :meth:`wait` returns False."""
        ticket = self._tickets.get(run.admission_id)
        if ticket is not None and not ticket.admitted:
            ticket.decided.set()
            self.changed()

    def release(self, run: Candidate) -> None:
        """The run ended: its slot is free; idempotent."""
        if self._holders.pop(run.admission_id, None) is not None:
            self.changed()

    def changed(self) -> None:
        """Something may have freed room (a run started waiting): check the queue (no-op when empty)."""
        if self._queue:
            self._changed.set()

    async def run(self) -> None:
        """Admit queued runs as room frees, in order; runs until cancelled (the daemon's task group).

        A check that fails (the store refusing a queued run's reason, a probe error) is logged with
        its traceback and tried again after :data:`QUEUE_RECHECK_S`; the loop itself never ends.
        """
        while True:
            if self._queue:
                with anyio.move_on_after(QUEUE_RECHECK_S):
                    await self._changed.wait()
            else:
                await self._changed.wait()
            self._changed = anyio.Event()
            try:
                await self._pump()
            except Exception:  # one failed check (the store, a probe) must not end admission: retried
                log.exception("admission check failed; the queue is checked again in %g s", QUEUE_RECHECK_S)

    async def _pump(self) -> None:
        """Admit from the head of the queue while there is room; show why the rest wait."""
        while self._queue:
            head = self._queue[0]
            if head.decided.is_set():
                self._queue.popleft()
                continue
            refused = await self._check()
            if head.decided.is_set():
                continue
            if refused is None:
                self._queue.popleft()
                self._holders[head.run.admission_id] = head.run
                head.admitted = True
                head.decided.set()
                continue
            for ticket in list(self._queue):
                if ticket.shown != refused.kind and not ticket.decided.is_set():
                    ticket.shown = refused.kind
                    await ticket.run.show_queued(refused.message)
            return

    def _pressure(self, growth_mib: float | None = None) -> Pressure:
        working = sum(1 for held in self._holders.values() if not held.waiting)
        memory = self.limits.min_free_memory_mib > 0
        return Pressure(
            working=working,
            available_mib=self.probe.available_memory_mib() if memory else 0.0,
            growth_mib=working * self.limits.run_memory_mib if growth_mib is None else growth_mib,
            free_descriptors=self.probe.free_descriptors(),
        )

    async def _check(self) -> Refusal | None:
        """The rule with the full estimate per working run; on a memory refusal, again with their
        measured resident memory."""
        refused = refusal(self._pressure(), self.limits)
        if refused is None or refused.kind != "memory":
            return refused
        pids = [run.vendor_pid for run in self._holders.values() if not run.waiting]
        if not any(pid is not None for pid in pids):
            return refused
        measured = await anyio.to_thread.run_sync(self.probe.resident_mib, [p for p in pids if p is not None])
        resident = [measured.get(pid) if pid is not None else None for pid in pids]
        growth = expected_growth_mib(resident, self.limits.run_memory_mib)
        return refusal(self._pressure(growth), self.limits)
