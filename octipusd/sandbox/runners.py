"""Finding the shell sandbox's runner: bubblewrap, then firejail, in three folders only.

FACTS.md §4: each runner is looked for only in ``/usr/bin``, ``/usr/local/bin`` and ``/bin``,
never on the PATH (a PATH entry the agent can write to must not choose the program that is meant
to confine it). A runner found there is probed once (it runs ``true`` inside a sandbox like the
commands' own): one that exists but cannot work here (no user namespaces, a seccomp filter that
refuses ``unshare``) counts as absent, and why is kept for health.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from octipusd.settings_security import ShellSandboxMode
from octipusd.toolkit import NO_SANDBOX, RunnerKind, SandboxRunner, ShellSandbox

__all__ = ["PROBE_TIMEOUT_SECONDS", "RUNNER_DIRS", "RunnerSearch"]

log = logging.getLogger("octipusd.sandbox")

#: The only folders a runner is looked for in, in this order (FACTS.md §4).
RUNNER_DIRS: Final[tuple[Path, ...]] = (Path("/usr/bin"), Path("/usr/local/bin"), Path("/bin"))
#: Deadline of a runner's probe (seconds).
PROBE_TIMEOUT_SECONDS: Final = 10.0
#: Why no runner is named while the sandbox is off (health shows it).
OFF_REASON: Final = "not looked for: security.shellSandbox is off"
#: Characters of a failed probe's output kept in the reason.
_PROBE_OUTPUT_CHARS: Final = 300

#: The probe of each runner: a sandbox like the commands' own, running ``true``.
_PROBES: Final[dict[RunnerKind, tuple[str, ...]]] = {
    RunnerKind.BWRAP: tuple(
        [
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--unshare-all",
            "--die-with-parent",
            "true",
        ]
    ),
    RunnerKind.FIREJAIL: tuple(["--quiet", "--noprofile", "--net=none", "--private-tmp", "true"]),
}


class RunnerSearch:
    """Finds and probes the runner of ``security.shellSandbox`` (once per daemon).

    Args:
        dirs: The folders searched, in order (:data:`RUNNER_DIRS`; tests point them at an empty or
            a prepared folder).
        hidden: What commands must not reach (:attr:`~octipusd.toolkit.ShellSandbox.hidden`).
        docker_sockets: The Docker sockets masked (:attr:`~octipusd.toolkit.ShellSandbox.docker_sockets`);
            None keeps the default.
        probe_timeout_s: Deadline of each probe (seconds).
    """

    def __init__(
        self,
        dirs: Sequence[Path] = RUNNER_DIRS,
        *,
        hidden: Sequence[Path] = (),
        docker_sockets: Sequence[Path] | None = None,
        probe_timeout_s: float = PROBE_TIMEOUT_SECONDS,
    ) -> None:
        self.dirs = tuple(dirs)
        self.hidden = tuple(hidden)
        self.docker_sockets = None if docker_sockets is None else tuple(docker_sockets)
        self.probe_timeout_s = probe_timeout_s

    def find(self, mode: ShellSandboxMode) -> ShellSandbox:
        """The daemon's :class:`~octipusd.toolkit.ShellSandbox` for ``mode``.

        With ``off`` nothing is looked for (no probe at start-up). Otherwise the first runner (bwrap,
        then firejail) that is an executable file in one of the folders and passes its probe is
        taken. With ``auto`` and none, one warning is logged here (once per
        daemon): commands then run unconfined. Nothing is raised: ``required`` without a runner
        refuses each command (:func:`octipusd.sandbox.confine`).
        """
        docker = NO_SANDBOX.docker_sockets if self.docker_sockets is None else self.docker_sockets
        if mode is ShellSandboxMode.OFF:  # nothing to confine: no probe at start-up
            return ShellSandbox(mode, None, OFF_REASON, self.hidden, docker)
        reasons: list[str] = []
        runner: SandboxRunner | None = None
        for kind in RunnerKind:
            path = self._locate(kind)
            if path is None:
                reasons.append(f"no {kind} in {', '.join(str(d) for d in self.dirs) or 'no folder'}")
                continue
            problem = self._probe(kind, path)
            if problem is None:
                runner = SandboxRunner(kind, path)
                break
            reasons.append(f"{path} cannot work here: {problem}")
        unavailable = "" if runner is not None else "; ".join(reasons)
        found = ShellSandbox(mode, runner, unavailable, self.hidden, docker)
        self._announce(found)
        return found

    def _locate(self, kind: RunnerKind) -> Path | None:
        for folder in self.dirs:
            candidate = folder / kind.value
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return candidate
        return None

    def _probe(self, kind: RunnerKind, path: Path) -> str | None:
        """None when ``path`` ran ``true`` in a sandbox, else why it did not (one line)."""
        try:
            done = subprocess.run(
                [str(path), *_PROBES[kind]],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.probe_timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"its probe did not end within {self.probe_timeout_s:g} s"
        except OSError as exc:
            return f"it could not be started: {exc}"
        if done.returncode == 0:
            return None
        said = " ".join(done.stderr.decode("utf-8", errors="replace").split())[:_PROBE_OUTPUT_CHARS]
        return f"its probe exited {done.returncode}" + (f": {said}" if said else "")

    @staticmethod
    def _announce(found: ShellSandbox) -> None:
        mode = found.mode
        if found.runner is not None:
            log.info("shell sandbox: security.shellSandbox=%s, runner %s", mode, found.runner.path)
        elif mode is ShellSandboxMode.AUTO:
            log.warning(
                "shell sandbox: security.shellSandbox=auto found no runner that works (%s); shell commands "
                "run unconfined (install bubblewrap, or set required to refuse them instead)",
                found.unavailable,
            )
        elif mode is ShellSandboxMode.REQUIRED:
            log.error(
                "shell sandbox: security.shellSandbox=required found no runner that works (%s); every shell "
                "command is refused until one is installed",
                found.unavailable,
            )
