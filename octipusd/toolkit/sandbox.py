"""What a shell tool needs to know to confine one command: :class:`ShellTerms`.

The daemon finds its sandbox runner once (:mod:`octipusd.sandbox`) and describes it as a
:class:`ShellSandbox`; each :class:`~octipusd.toolkit.ToolHost` answers
:meth:`~octipusd.toolkit.ToolHost.shell_terms` with that sandbox and whether the calling run shares
the host's services (seed 003 "Host services for gate commands"). Plain frozen data: the argv is
built by :func:`octipusd.sandbox.confine`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from octipusd.settings_security import ShellSandboxMode

__all__ = ["NO_SANDBOX", "RunnerKind", "SandboxRunner", "ShellSandbox", "ShellTerms"]


class RunnerKind(enum.StrEnum):
    """A sandbox runner program, in the order they are preferred (FACTS.md §4)."""

    BWRAP = "bwrap"
    FIREJAIL = "firejail"


@dataclass(frozen=True)
class SandboxRunner:
    """A runner that was found and passed its probe.

    Attributes:
        kind: Which program it is.
        path: Its absolute path (in ``/usr/bin``, ``/usr/local/bin`` or ``/bin``, never from PATH).
    """

    kind: RunnerKind
    path: Path


@dataclass(frozen=True)
class ShellSandbox:
    """The daemon's shell sandbox, found once at start-up.

    Attributes:
        mode: ``security.shellSandbox``.
        runner: The runner commands are wrapped in; None when none was found or none works here.
        unavailable: Why there is no runner (empty when there is one); health shows it.
        hidden: Folders and files a command must not reach even read-only
            (:func:`octipusd.sandbox.hidden.daemon_hidden_paths`: the daemon's runtime folder and
            socket, its data folder, the vault key and database files, its settings file, the user
            and system buses, the ssh agent); each is masked when it exists, except a folder that
            holds the command's workspace (its known sockets and files are then masked one by one).
        docker_sockets: The Docker sockets masked unless a run shares the host's services.
    """

    mode: ShellSandboxMode = ShellSandboxMode.OFF
    runner: SandboxRunner | None = None
    unavailable: str = ""
    hidden: tuple[Path, ...] = ()
    docker_sockets: tuple[Path, ...] = field(default=(Path("/var/run/docker.sock"), Path("/run/docker.sock")))

    @property
    def in_force(self) -> bool:
        """Whether commands run inside the runner (the mode is not ``off`` and a runner works)."""
        return self.mode is not ShellSandboxMode.OFF and self.runner is not None


#: The sandbox of a daemon with ``security.shellSandbox = off``.
NO_SANDBOX = ShellSandbox()


@dataclass(frozen=True)
class ShellTerms:
    """How one call's shell commands run (:meth:`~octipusd.toolkit.ToolHost.shell_terms`).

    Attributes:
        sandbox: The daemon's sandbox.
        host_services: The calling run shares the host network and the Docker socket with its own
            shell commands (its ``hostServices``; agents it spawns do not inherit it). No effect
            while the sandbox is not in force.
    """

    sandbox: ShellSandbox = NO_SANDBOX
    host_services: bool = False
