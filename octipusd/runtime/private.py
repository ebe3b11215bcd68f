"""The daemon's private paths: what neither an agent's tool call nor a shell command may reach.

Composed once at start-up (:func:`daemon_private_paths`) and handed to both the shell sandbox,
which masks them from Octipus's shell commands, and the permission gate, which refuses a call that
names them (:mod:`octipusd.policy.protected`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from octipusd.settings import Settings, default_config_path, socket_path
from octipusd.store.engine import default_sqlite_url, sqlite_file
from octipusd.vault import key_files

__all__ = ["daemon_private_paths"]

#: The files SQLite keeps beside a database file (write-ahead log, shared memory, rollback journal).
SQLITE_COMPANIONS: Final = ("-wal", "-shm", "-journal")


def daemon_private_paths(
    settings: Settings,
    data_dir: Path,
    config_file: Path | None,
    environ: Mapping[str, str] | None = None,
) -> tuple[Path, ...]:
    """The daemon's private folders and files, existing or not, each once.

    The socket folder and socket (a command runs as the daemon's user, so the API's peer check
    would let it in), the data folder, the vault key files and systemd's credentials folder
    (``$CREDENTIALS_DIRECTORY``) (:func:`~octipusd.vault.key_files`), the SQLite database files
    (the default one in the data folder, or ``database.url``'s), and the settings file. The files
    inside the data folder are listed on their own too: the gate and the sandbox leave a folder
    holding an agent's workspace open, never these files.

    Args:
        settings: The daemon's settings (``daemon.socket``, ``database.url``).
        data_dir: The daemon's data folder.
        config_file: The ``--config`` file, or None for the default settings file.
        environ: The environment (``$CREDENTIALS_DIRECTORY``, the XDG folders); the process's when None.
    """
    env = os.environ if environ is None else environ
    sock = socket_path(settings, env)
    paths = [sock.parent, sock, data_dir, *key_files(data_dir, env)]
    database = sqlite_file(settings.database.url or default_sqlite_url())
    if database is not None:
        paths += [database, *(Path(f"{database}{suffix}") for suffix in SQLITE_COMPANIONS)]
    paths.append(config_file or default_config_path(env))
    return tuple(dict.fromkeys(paths))
