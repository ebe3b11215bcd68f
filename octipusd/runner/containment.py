"""Process containment: every descendant of a vendor ends with its run, whatever it did.

A vendor's tree may leave its process group and session (``setsid``) and clear its environment
(``env -i``), so neither ``killpg`` nor the ``OCTIPUS_RUN_ID`` marker finds it. Two mechanisms,
chosen once at daemon start-up by :func:`choose_containment`:

``cgroup``
    Each run gets its own cgroup (v2) under the daemon's own cgroup when it is writable (a
    delegated cgroup under systemd, or a writable cgroup v2 root). The vendor joins it before it
    execs (a ``/bin/sh`` wrapper writes its own pid to ``cgroup.procs`` and then ``exec``\\ s the
    vendor), so nothing it starts can be outside; a stop writes ``cgroup.kill`` (or freezes the
    cgroup and SIGKILLs each member) and removes the cgroup.
``subreaper``
    The daemon becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``), so orphans of a vendor's
    tree are re-parented to the daemon rather than to init. A stop walks the vendor's descendants,
    the processes carrying its marker, every process it saw before, and the daemon's own orphaned
    children that left their session and carry no other run's marker, and it reaps the zombies
    re-parented to the daemon that it first saw with another parent or in the vendor's session
    (never a child the daemon spawned itself: its owner waits for it). Weaker: an orphan whose intermediate exited before any
    walk, that cleared its environment and that coexists with another live run may be attributed
    to the run that ends first (it is stopped either way); and an orphan that left the vendor's
    session before any walk saw it is not reaped (its zombie cannot be told from a child the daemon
    spawned elsewhere, whose owner waits for it).

Each launch asks its :class:`Containment` for a :class:`RunCage` (one per vendor process).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import logging
import os
import re
import signal
import subprocess
import time
from enum import StrEnum
from pathlib import Path
from typing import Protocol

import psutil

from octipusd.errors import ConfigError
from octipusd.settings import ContainmentSetting
from octipusd.toolkit import RUN_MARKER  # marks every process of a run (value: the run id)

log = logging.getLogger(__name__)

#: Seconds to wait for a killed cgroup to become empty before removing it.
CGROUP_EMPTY_TIMEOUT = 2.0
#: Seconds between two looks at a cgroup that is emptying or freezing, or at processes ending.
CGROUP_POLL_INTERVAL = 0.01
#: Seconds of slack when comparing a process's start time with its run's (clock granularity).
START_TIME_SLACK = 0.05
#: ``prctl`` option number of ``PR_SET_CHILD_SUBREAPER`` (linux/prctl.h).
PR_SET_CHILD_SUBREAPER = 36
#: Where the kernel lists mounts and the calling process's cgroups.
MOUNTINFO = Path("/proc/self/mountinfo")
PROC_CGROUP = Path("/proc/self/cgroup")

#: Exit code of the joining wrapper when it could not join the cgroup (the vendor never ran).
JOIN_FAILED_EXIT = 126
_JOIN_OR_FAIL = f'echo 0 > "$1" || {{ echo "octipus: could not join the run\'s cgroup $1" >&2; exit {JOIN_FAILED_EXIT}; }}; '
#: The joining wrapper: ``$1`` is the cgroup's ``cgroup.procs``, the rest is the vendor's argv. It
#: never runs the vendor outside the cgroup: a failed join exits :data:`JOIN_FAILED_EXIT`.
_JOIN = _JOIN_OR_FAIL + 'shift; exec "$@"'
#: What the joining wrapper writes first on its stderr once it joined (when asked to announce it).
JOINED = b"octipus: joined\n"
#: The same, announcing the join on stderr before the vendor runs.
_JOIN_ANNOUNCED = _JOIN_OR_FAIL + f'echo "{JOINED.decode().strip()}" >&2; shift; exec "$@"'


class ProcessContainment(StrEnum):
    """How the daemon keeps a run's processes together (reported by ``octipusctl health``)."""

    CGROUP = "cgroup"
    SUBREAPER = "subreaper"


class RunCage(Protocol):
    """The containment of one vendor process and everything it starts."""

    @property
    def where(self) -> str:
        """What the cage is, for messages (the cgroup folder, or ``walk``)."""
        ...

    def wrap(self, argv: tuple[str, ...], env: dict[str, str], announce: bool = False) -> list[str]:
        """The argv to spawn instead of ``argv`` so the process starts inside the cage.

        A wrapper that joins the cage first writes :data:`JOINED` on its stderr (when ``announce``)
        before it runs ``argv``; it exits :data:`JOIN_FAILED_EXIT` without running it when it cannot
        join. ``argv`` itself is returned when nothing needs joining.
        """
        ...

    def attach(self, pid: int) -> None:
        """Record the spawned leader's pid."""
        ...

    def members(self) -> list[psutil.Process]:
        """Live processes of the cage other than the daemon (the leader included while it runs)."""
        ...

    def kill(self) -> None:
        """SIGKILL every member at once."""
        ...

    def release(self) -> bool:
        """Free the cage once it is empty (reap re-parented zombies); True when nothing is left."""
        ...


class Containment(Protocol):
    """A containment mechanism in force in this daemon."""

    @property
    def mechanism(self) -> ProcessContainment:
        """Its name."""
        ...

    @property
    def detail(self) -> str:
        """Where or why (the cgroup folder, or the reason the cgroup was not used)."""
        ...

    def cage(self, run_id: str) -> RunCage:
        """A new cage for one vendor process of ``run_id``."""
        ...

    def close(self) -> None:
        """At daemon exit: end what is left and remove what the containment made."""
        ...


def _alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    out = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except psutil.Error:
            continue
    return out


def wait_ended(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait up to ``timeout`` seconds for ``procs`` to end (a zombie has ended); the ones left."""
    deadline = time.monotonic() + timeout
    while (left := _alive(procs)) and time.monotonic() < deadline:
        time.sleep(CGROUP_POLL_INTERVAL)
    return left


def run_processes(run_id: str) -> list[psutil.Process]:
    """Return every live process whose environment carries ``OCTIPUS_RUN_ID=<run_id>``.

    Processes whose environment cannot be read (other users, races) are skipped. An empty
    ``run_id`` matches nothing (it would otherwise match every unmarked process).
    """
    found: list[psutil.Process] = []
    if not run_id:
        return found
    me = os.getpid()
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            if proc.environ().get(RUN_MARKER) == run_id:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


# ----------------------------------------------------------------------------- cgroup


def _cgroup2_base() -> Path:
    """The daemon's own cgroup folder on the cgroup v2 mount.

    Raises:
        OSError: no cgroup v2 mount, or the daemon's cgroup is not on it.
    """
    own = next((line[3:] for line in PROC_CGROUP.read_text().splitlines() if line.startswith("0::")), None)
    if own is None:
        raise OSError(errno.ENOENT, "the daemon has no cgroup v2 membership")
    for line in MOUNTINFO.read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, fstype = left.split(), right.split()[:1]
        if fstype == ["cgroup2"]:
            root, mount = fields[3], fields[4]
            rel = os.path.relpath(own, root) if own.startswith(root) else None
            if rel is not None and not rel.startswith(".."):
                return Path(mount) / rel if rel != "." else Path(mount)
    raise OSError(errno.ENOENT, "no cgroup v2 mount holds the daemon's cgroup")


def _cgroup_procs(folder: Path) -> list[int]:
    """Pids in ``folder`` and its sub-cgroups (a vendor may make some); a cgroup removed while it is
    listed (a concurrent reap: only an empty cgroup can be removed) has none left."""
    pids: list[int] = []
    with contextlib.suppress(OSError):
        for procs in folder.glob("**/cgroup.procs"):
            with contextlib.suppress(OSError, ValueError):
                pids.extend(int(x) for x in procs.read_text().split())
    return sorted(set(pids))


def _populated(folder: Path) -> bool:
    try:
        return "populated 1" in (folder / "cgroup.events").read_text()
    except OSError:
        return False


def _wait_empty(folder: Path, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _populated(folder):
        if time.monotonic() >= deadline:
            return False
        time.sleep(CGROUP_POLL_INTERVAL)
    return True


def _remove_tree(folder: Path) -> bool:
    """rmdir ``folder`` and its sub-cgroups, deepest first; True when it is gone.

    A sub-cgroup removed meanwhile by another release (a run's cage and the daemon's own folder can
    end at once) is skipped: ``os.walk`` ignores a directory that vanished under it.
    """
    for dirpath, _dirs, _files in os.walk(folder, topdown=False):
        sub = Path(dirpath)
        with contextlib.suppress(FileNotFoundError):
            try:
                sub.rmdir()
            except OSError as exc:
                log.warning("could not remove cgroup %s: %s", sub, exc)
    return not folder.exists()


def _clear(folder: Path) -> None:
    """Kill every process under ``folder`` and remove it (a daemon's folder at exit or after a crash)."""
    for sub in [folder, *folder.glob("*/")]:
        _kill_cgroup(sub)
        _wait_empty(sub, CGROUP_EMPTY_TIMEOUT)
    _remove_tree(folder)


def _kill_cgroup(folder: Path) -> None:
    """SIGKILL every process of ``folder``: ``cgroup.kill``, or freeze, kill each, thaw."""
    if not folder.exists():
        return
    kill = folder / "cgroup.kill"
    if kill.exists():
        try:
            kill.write_text("1")
        except OSError as exc:  # removed meanwhile by a concurrent reap (ENODEV): nothing is left in it
            if exc.errno not in (errno.ENOENT, errno.ENODEV):
                raise
        return
    freeze = folder / "cgroup.freeze"
    with contextlib.suppress(OSError):
        freeze.write_text("1")
        deadline = time.monotonic() + CGROUP_EMPTY_TIMEOUT
        while "frozen 1" not in (folder / "cgroup.events").read_text() and time.monotonic() < deadline:
            time.sleep(CGROUP_POLL_INTERVAL)
    for pid in _cgroup_procs(folder):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        freeze.write_text("0")


class CgroupCage:
    """One vendor process's cgroup, ``<daemon folder>/<run id>-<n>``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(mode=0o755)

    @property
    def where(self) -> str:
        """The cgroup folder."""
        return str(self.folder)

    def wrap(self, argv: tuple[str, ...], env: dict[str, str], announce: bool = False) -> list[str]:
        """``/bin/sh`` joins the cgroup (or exits :data:`JOIN_FAILED_EXIT`), says so on stderr when
        ``announce``, then execs ``argv`` (same pid; PWD left as given)."""
        join = _JOIN_ANNOUNCED if announce else _JOIN
        script = join if "PWD" in env else "unset PWD; " + join
        return ["/bin/sh", "-c", script, "octipus-cgroup", str(self.folder / "cgroup.procs"), *argv]

    def attach(self, pid: int) -> None:
        """Nothing to record: the leader joins by itself."""

    def members(self) -> list[psutil.Process]:
        """Live processes of the cgroup."""
        procs = []
        for pid in _cgroup_procs(self.folder):
            with contextlib.suppress(psutil.Error):
                procs.append(psutil.Process(pid))
        return _alive(procs)

    def kill(self) -> None:
        """Kill the whole cgroup at once."""
        _kill_cgroup(self.folder)

    def release(self) -> bool:
        """Wait (bounded) for the cgroup to empty, then remove it."""
        if not self.folder.exists():
            return True
        if not _wait_empty(self.folder, CGROUP_EMPTY_TIMEOUT):
            return False
        return _remove_tree(self.folder)


class CgroupContainment:
    """Run cgroups under ``<own cgroup>/octipus-<daemon pid>``."""

    mechanism = ProcessContainment.CGROUP

    def __init__(self, root: Path) -> None:
        self.root = root
        self._count = 0

    @property
    def detail(self) -> str:
        """The folder holding the run cgroups."""
        return str(self.root)

    def cage(self, run_id: str) -> CgroupCage:
        """A fresh cgroup for one vendor process of ``run_id``."""
        self._count += 1
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)[:80] or "run"
        return CgroupCage(self.root / f"{name}-{self._count}")

    def close(self) -> None:
        """Kill what is left in the run cgroups and remove them and the daemon's folder."""
        _clear(self.root)

    @classmethod
    def create(cls) -> CgroupContainment:
        """Make the daemon's folder and prove a process can join a run cgroup in it.

        Folders left by daemons no longer alive are killed and removed first.

        Raises:
            OSError: no writable cgroup v2, or a process could not join one.
        """
        base = _cgroup2_base()
        for old in base.glob("octipus-*"):
            pid = old.name.removeprefix("octipus-")
            if pid.isdigit() and int(pid) != os.getpid() and not psutil.pid_exists(int(pid)):
                _clear(old)
        root = base / f"octipus-{os.getpid()}"
        root.mkdir(mode=0o755, exist_ok=True)
        containment = cls(root)
        probe = CgroupCage(root / "probe")
        try:
            done = subprocess.run(
                probe.wrap(("/bin/sh", "-c", "cat /proc/self/cgroup"), {}), capture_output=True, check=False
            )
            joined = f"/{probe.folder.name}\n" in done.stdout.decode() and not done.stderr
            if not joined:
                raise OSError(errno.EACCES, f"a process could not join {probe.folder}: {done.stderr!r}")
        except BaseException:
            probe.release()
            _remove_tree(root)
            raise
        probe.release()
        return containment


# ----------------------------------------------------------------------------- subreaper


def set_child_subreaper(on: bool = True) -> None:
    """Make this process a child subreaper (or stop being one).

    Raises:
        OSError: ``prctl`` refused.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_CHILD_SUBREAPER): {os.strerror(err)}")


class SubreaperCage:
    """One vendor's tree, found by walking: its descendants, its marker, what was seen before,
    and the daemon's orphans that left their session."""

    def __init__(self, owner: SubreaperContainment, run_id: str) -> None:
        self._owner = owner
        self._run_id = run_id
        self._leader: psutil.Process | None = None
        self._seen: dict[int, psutil.Process] = {}
        #: Pids first seen with a parent other than the daemon or in the leader's session: the only
        #: ones :meth:`release` reaps.
        self._adopted: set[int] = set()

    @property
    def where(self) -> str:
        """A walk of the tree."""
        return "walk"

    def wrap(self, argv: tuple[str, ...], env: dict[str, str], announce: bool = False) -> list[str]:
        """Unchanged: the daemon is the subreaper (nothing to join)."""
        return list(argv)

    def attach(self, pid: int) -> None:
        """Remember the leader (and keep it out of the orphan sweep of other runs)."""
        with contextlib.suppress(psutil.Error):
            self._leader = psutil.Process(pid)
        self._owner.leaders.add(pid)

    def _orphan(self, proc: psutil.Process, leader: int, since: float) -> bool:
        """A daemon child that no run started directly, that left its session or is in this
        run's group, started after this run, and carries no other run's marker.

        Limitation: nothing tells an orphan that cleared its environment and whose parent exited
        before any walk from a daemon child started elsewhere in its own session (an unmarked
        ``setsid`` orphan of another live run, or a daemon child such as an MCP stdio server): the
        run that stops first takes it (it is stopped either way). Such a process was first seen as
        the daemon's child, so :meth:`release` never reaps it (its zombie stays with the daemon).
        """
        try:
            if proc.pid in self._owner.leaders or proc.create_time() + START_TIME_SLACK < since:
                return False
            marker = proc.environ().get(RUN_MARKER)
            pgid, sid = os.getpgid(proc.pid), os.getsid(proc.pid)
        except (psutil.Error, OSError):
            return False
        return marker in (None, self._run_id) and (sid in (proc.pid, leader) or pgid == leader)

    def _foreign(self, proc: psutil.Process) -> bool:
        """Not a process the daemon spawned itself: seen with another parent, or in the leader's
        session or group (the daemon never starts a process there but the leader)."""
        leader = self._leader.pid if self._leader is not None else None
        if proc.pid == leader:
            return False
        try:
            return proc.ppid() != os.getpid() or leader in (os.getsid(proc.pid), os.getpgid(proc.pid))
        except (psutil.Error, OSError):
            return False

    def members(self) -> list[psutil.Process]:
        """Walk the tree now (and remember it for later walks)."""
        found: dict[int, psutil.Process] = {}
        roots = [p for p in self._seen.values() if _same(p)]
        if self._leader is not None:
            leader, since = self._leader.pid, self._leader.create_time()
            roots.append(self._leader)
            with contextlib.suppress(psutil.Error):
                roots += [c for c in psutil.Process().children() if self._orphan(c, leader, since)]
        roots += run_processes(self._run_id)
        for root in roots:
            found[root.pid] = root
            with contextlib.suppress(psutil.Error):
                found.update((c.pid, c) for c in root.children(recursive=True))
        for pid, proc in found.items():
            if pid not in self._seen and self._foreign(proc):
                self._adopted.add(pid)
        self._seen.update(found)
        return _alive(list(found.values()))

    def kill(self) -> None:
        """SIGKILL the walked tree (stopped first so none forks meanwhile)."""
        procs = self.members()
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    p.send_signal(sig)

    def release(self) -> bool:
        """Reap the zombies re-parented to the daemon; True when none of the tree is alive.

        Only a pid first seen with another parent, or in the leader's session or group, is reaped
        (an orphan the daemon adopted), never one the daemon spawned itself (the leader, a ``shell__run`` shell, an MCP stdio server):
        its owner's ``wait`` would otherwise lose the exit code.
        """
        me = os.getpid()
        for pid in sorted(self._adopted):
            proc = self._seen[pid]
            with contextlib.suppress(psutil.Error, ChildProcessError, OSError):
                if proc.ppid() == me and proc.status() == psutil.STATUS_ZOMBIE:
                    os.waitpid(pid, os.WNOHANG)
        alive = self.members()
        leader_alive = self._leader is not None and any(p.pid == self._leader.pid for p in alive)
        if self._leader is not None and not leader_alive:
            self._owner.leaders.discard(self._leader.pid)
        return not alive


def _same(proc: psutil.Process) -> bool:
    """The process still exists and is the same one (not a reused pid)."""
    with contextlib.suppress(psutil.Error):
        return proc.is_running()
    return False


class SubreaperContainment:
    """The daemon as child subreaper; one per daemon."""

    mechanism = ProcessContainment.SUBREAPER

    def __init__(self, detail: str) -> None:
        self._detail = detail
        self.leaders: set[int] = set()

    @property
    def detail(self) -> str:
        """Why the cgroup is not used."""
        return self._detail

    def cage(self, run_id: str) -> SubreaperCage:
        """A walker for one vendor process of ``run_id``."""
        return SubreaperCage(self, run_id)

    def close(self) -> None:
        """Nothing to remove (the daemon stays a subreaper until it exits)."""

    @classmethod
    def create(cls, detail: str) -> SubreaperContainment:
        """Become a child subreaper.

        Raises:
            OSError: ``prctl`` refused.
        """
        set_child_subreaper(True)
        return cls(detail)


def walking_cage(run_id: str) -> SubreaperCage:
    """A cage that walks the tree without the daemon being a subreaper (when a cgroup failed)."""
    return SubreaperContainment("walk only").cage(run_id)


def choose_containment(setting: ContainmentSetting = "auto") -> Containment:
    """Choose the daemon's containment once, at start-up.

    ``auto`` takes a cgroup when one can be made and joined, otherwise the subreaper;
    ``cgroup`` insists on the cgroup; ``subreaper`` forces the fallback.

    Raises:
        ConfigError: ``cgroup`` was asked for but is not available here (the message says why).
    """
    if setting == "subreaper":
        return SubreaperContainment.create("forced by agent.processContainment")
    try:
        return CgroupContainment.create()
    except OSError as exc:
        if setting == "cgroup":
            raise ConfigError(
                f"agent.processContainment is 'cgroup' but no run cgroup can be made here: {exc}; "
                "run octipusd with a delegated cgroup (systemd Delegate=yes) or set it to auto"
            ) from None
        log.info("process containment: no cgroup (%s); the daemon is a child subreaper", exc)
        return SubreaperContainment.create(f"no cgroup: {exc}")


_default: Containment | None = None


def default_containment() -> Containment:
    """The ``auto`` containment of this process, chosen at the first call (for callers that were
    not given one by the composition root)."""
    global _default
    if _default is None:
        _default = choose_containment("auto")
    return _default
