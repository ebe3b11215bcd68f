"""The argv that confines one shell command: :func:`confine`.

Under bubblewrap a command gets (issue 17 item 5): every namespace of its own (``--unshare-all``:
no network, its own PIDs, IPC and host name), the host's network only with ``network`` or the
run's host services (``--share-net``); the whole file system read-only (``--ro-bind / /``), a fresh
``/dev``, its own ``/proc`` and a private ``/tmp`` (tmpfs); the workspace bound read-write and its
cwd; the Docker sockets masked (``/dev/null`` bound over them) unless the run shares the host's
services; and the hidden paths (:func:`~octipusd.sandbox.daemon_hidden_paths`: what the daemon
keeps for itself, the user's runtime folder and the host's buses) masked even read-only: an empty
read-only tmpfs over a folder, ``/dev/null`` over a file. A folder that holds the workspace is not
masked (the command must reach its workspace); the files listed in it still are. A Docker socket
inside a masked folder (rootless Docker's in the runtime folder) is bound back into the tmpfs for a
run that shares the host's services. ``--die-with-parent`` and the
PID namespace end every process of the command when the runner ends: stopping the runner's process
group (the shell tool's timeout and cancellation) ends its background jobs too.

The environment is not passed on the command line (``--setenv`` would show a vault value to anyone
reading ``/proc/PID/cmdline``): the caller starts the runner with exactly the command's environment,
which bubblewrap hands on unchanged; :data:`SANDBOX_TMPDIR` replaces ``TMPDIR``.

Firejail, the second choice, gets the same terms with its own options (``--read-only=/``,
``--read-write``, ``--private-tmp``, ``--net=none``, ``--blacklist``), except that a Docker socket
inside a masked folder stays masked for a run sharing the host's services.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from octipusd.errors import SandboxUnavailableError
from octipusd.settings_security import ShellSandboxMode
from octipusd.toolkit import RunnerKind, SandboxRunner, ShellSandbox, ShellTerms

__all__ = ["SANDBOX_TMPDIR", "bwrap_argv", "confine", "firejail_argv", "masked_paths", "passed_sockets"]

#: ``TMPDIR`` of a confined command: its private ``/tmp``.
SANDBOX_TMPDIR: Final = "/tmp"


def confine(terms: ShellTerms, *, workspace: Path, cwd: Path, network: bool) -> tuple[str, ...]:
    """The runner's argv to put before ``/bin/sh -c COMMAND``, or ``()`` to run it unconfined.

    Args:
        terms: The caller's :class:`~octipusd.toolkit.ShellTerms`.
        workspace: The run's workspace (or the child's worktree), bound read-write.
        cwd: The command's directory, inside ``workspace``.
        network: The call asked for the network (``network: true``).

    Returns:
        ``()`` when the sandbox is ``off``, or ``auto`` without a runner (the daemon warned once at
        start-up); else the runner's argv, ending with ``--``.

    Raises:
        SandboxUnavailableError: ``security.shellSandbox=required`` and no runner works here.
    """
    sandbox = terms.sandbox
    runner = sandbox.runner
    if sandbox.mode is ShellSandboxMode.OFF:
        return ()
    if runner is None:
        if sandbox.mode is ShellSandboxMode.REQUIRED:
            raise SandboxUnavailableError(
                "security.shellSandbox=required and no sandbox runner works on this machine "
                f"({sandbox.unavailable}); install bubblewrap (/usr/bin/bwrap) or firejail, or set "
                "security.shellSandbox to auto or off"
            )
        return ()
    host = terms.host_services
    if runner.kind is RunnerKind.BWRAP:
        return bwrap_argv(runner, sandbox, workspace=workspace, cwd=cwd, network=network or host, host=host)
    return firejail_argv(runner, sandbox, workspace=workspace, network=network or host, host=host)


def masked_paths(sandbox: ShellSandbox, workspace: Path, *, host: bool) -> list[tuple[Path, bool]]:
    """``(path, is_folder)`` of each existing path to mask: the hidden ones (a folder holding the
    workspace excepted), then the Docker sockets unless ``host``; symlinks resolved, each once, none
    inside a folder already masked (its mount point could not be made in the read-only tmpfs) nor
    in the host's ``/tmp`` outside the workspace (the private ``/tmp`` hides it already)."""
    root = workspace.resolve()
    found: dict[Path, bool] = {}
    for path in [*sandbox.hidden, *(() if host else sandbox.docker_sockets)]:
        if path.exists():
            real = path.resolve()
            folder = real.is_dir()
            private = real.is_relative_to(SANDBOX_TMPDIR) and not real.is_relative_to(root)
            if not private and not (folder and root.is_relative_to(real)):
                found.setdefault(real, folder)
    folders = [path for path, folder in found.items() if folder]
    return [
        (path, folder)
        for path, folder in found.items()
        if not any(path != other and path.is_relative_to(other) for other in folders)
    ]


def passed_sockets(sandbox: ShellSandbox, folder: Path, *, host: bool) -> list[Path]:
    """The Docker sockets inside the masked ``folder`` that a run sharing the host's services gets
    back (rootless Docker's and podman's live in the masked runtime folder); none unless ``host``."""
    if not host:
        return []
    found = [path.resolve() for path in sandbox.docker_sockets if path.exists()]
    return [path for path in dict.fromkeys(found) if path.is_relative_to(folder)]


def bwrap_argv(
    runner: SandboxRunner, sandbox: ShellSandbox, *, workspace: Path, cwd: Path, network: bool, host: bool
) -> tuple[str, ...]:
    """bubblewrap's argv for one command (see the module docstring), ending with ``--``."""
    root = str(workspace.resolve())
    argv = [str(runner.path), "--die-with-parent", "--unshare-all"]
    if network:
        argv.append("--share-net")
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", SANDBOX_TMPDIR]
    argv += ["--bind", root, root]
    for path, folder in masked_paths(sandbox, workspace, host=host):
        if folder:
            argv += ["--tmpfs", str(path)]
            for socket in passed_sockets(sandbox, path, host=host):
                argv += ["--bind", str(socket), str(socket)]
            argv += ["--remount-ro", str(path)]
        else:
            argv += ["--ro-bind", "/dev/null", str(path)]
    argv += ["--chdir", str(cwd), "--"]
    return tuple(argv)


def firejail_argv(
    runner: SandboxRunner, sandbox: ShellSandbox, *, workspace: Path, network: bool, host: bool
) -> tuple[str, ...]:
    """firejail's argv for one command (the same terms as bubblewrap's), ending with ``--``."""
    root = str(workspace.resolve())
    argv = [str(runner.path), "--quiet", "--noprofile", "--private-tmp", "--private-dev"]
    argv += ["--read-only=/", f"--read-write={root}"]
    if not network:
        argv.append("--net=none")
    argv += [f"--blacklist={path}" for path, _ in masked_paths(sandbox, workspace, host=host)]
    argv.append("--")
    return tuple(argv)
