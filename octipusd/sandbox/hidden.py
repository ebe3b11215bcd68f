"""What the daemon hides from its shell commands: :func:`daemon_hidden_paths`.

A command runs as the daemon's user, and a read-only bind does not stop ``connect()`` on a Unix
socket: every socket the user can reach is a way out of the sandbox (the user's D-Bus session bus
starts ``systemd-run --user``, rootless Docker or podman start containers, an ssh or gpg agent
signs for the user). So besides what the daemon keeps for itself (its socket, data folder,
database, vault key, settings file, systemd credentials) the list holds the user's runtime folder
(``$XDG_RUNTIME_DIR``), every user's (``/run/user``), the system bus (``/run/dbus``) and the ssh
agent's folder. Not all of ``/run``: ``/etc/resolv.conf`` may point into
``/run/systemd/resolve``, and a command given the network needs DNS.

Files are listed on their own as well as their folders: :func:`~octipusd.sandbox.masked_paths`
leaves unmasked a folder that holds the command's workspace, and then still masks each file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

from octipusd.toolkit import NO_SANDBOX

__all__ = ["HOST_BUSES", "RUNTIME_DOCKER_SOCKETS", "RUNTIME_SOCKETS", "daemon_hidden_paths", "docker_sockets"]

#: The host's buses masked for every command (``/var/run/dbus`` is ``/run/dbus`` where
#: ``/var/run`` links to ``/run``: it is masked once).
HOST_BUSES: Final[tuple[Path, ...]] = (Path("/run/user"), Path("/run/dbus"), Path("/var/run/dbus"))
#: Sockets (and socket folders) of the user's services in ``$XDG_RUNTIME_DIR``, masked one by one
#: when the runtime folder holds the workspace (else the whole folder is masked).
RUNTIME_SOCKETS: Final[tuple[str, ...]] = (
    "bus",
    "systemd",
    "docker.sock",
    "podman",
    "gnupg",
    "keyring",
    "gcr",
    "openssh_agent",
    "ssh-agent.socket",
    "pulse",
    "pipewire-0",
    "wayland-0",
)

#: Rootless Docker's and podman's sockets in ``$XDG_RUNTIME_DIR``: Docker sockets too (a run
#: sharing the host's services gets them back).
RUNTIME_DOCKER_SOCKETS: Final[tuple[str, ...]] = ("docker.sock", "podman/podman.sock")


def daemon_hidden_paths(private: Iterable[Path], environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The :attr:`~octipusd.toolkit.ShellSandbox.hidden` list of a daemon (pure: nothing is read).

    Args:
        private: The daemon's private folders and files (its socket folder and socket, data folder,
            vault key files, database files, settings file:
            :func:`octipusd.runtime.private.daemon_private_paths`), hidden first, each on its own.
        environ: The daemon's environment: ``XDG_RUNTIME_DIR`` and ``SSH_AUTH_SOCK`` are read.

    Returns:
        Folders and files, most of them possibly absent (only existing ones are masked): ``private``,
        then the runtime folder and its known sockets, the host's buses, the ssh agent.
    """
    hidden = list(private)
    runtime = environ.get("XDG_RUNTIME_DIR")
    if runtime:
        hidden += [Path(runtime), *(Path(runtime) / name for name in RUNTIME_SOCKETS)]
    hidden += HOST_BUSES
    agent = environ.get("SSH_AUTH_SOCK")
    if agent:
        hidden += [Path(agent).parent, Path(agent)]
    return tuple(dict.fromkeys(hidden))


def docker_sockets(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The :attr:`~octipusd.toolkit.ShellSandbox.docker_sockets` of a daemon: the system's, then
    the rootless ones of ``$XDG_RUNTIME_DIR`` (:data:`RUNTIME_DOCKER_SOCKETS`) when it is set."""
    runtime = environ.get("XDG_RUNTIME_DIR")
    rootless = tuple(Path(runtime) / name for name in RUNTIME_DOCKER_SOCKETS) if runtime else ()
    return (*NO_SANDBOX.docker_sockets, *rootless)
