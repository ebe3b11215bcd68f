"""The composition root's security parts: the shell sandbox, the vault, and the resolver of MCP
servers' vault placeholders (split from :mod:`octipusd.app`, which composes them)."""

from __future__ import annotations

import getpass
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from octipusd.connectors.registry import ConnectorSecrets
from octipusd.runtime.private import daemon_private_paths
from octipusd.sandbox import RunnerSearch, daemon_hidden_paths, docker_sockets
from octipusd.settings import Settings
from octipusd.store.aio import in_thread
from octipusd.store.repository import Store
from octipusd.toolkit import ShellSandbox
from octipusd.vault import SecretLogFilter, Vault, VaultKeys, install_log_filter

__all__ = ["LOG_FILTER", "connector_secrets", "find_sandbox", "open_vault"]

log = logging.getLogger("octipusd")

#: The daemon's one log filter masking resolved vault values (installed on every handler).
LOG_FILTER = SecretLogFilter()


def find_sandbox(settings: Settings, data_dir: Path, config_file: Path | None) -> ShellSandbox:
    """The shell sandbox of ``security.shellSandbox`` (:class:`~octipusd.sandbox.RunnerSearch`, once
    per daemon), hiding from commands the daemon's private paths
    (:func:`~octipusd.runtime.private.daemon_private_paths`, which the permission gate protects too)
    and what else :func:`~octipusd.sandbox.daemon_hidden_paths` adds (the runtime folder, the buses)."""
    hidden = daemon_hidden_paths(daemon_private_paths(settings, data_dir, config_file), os.environ)
    search = RunnerSearch(hidden=hidden, docker_sockets=docker_sockets(os.environ))
    return search.find(settings.security.shellSandbox)


def connector_secrets(vault: Vault, user: str) -> ConnectorSecrets:
    """Resolve the placeholders of an MCP server's ``env`` and ``headers`` as ``user``, the daemon's
    (the operator who configured the server), for the tool pattern ``<server>.*``: an entry must list it
    (or a pattern matching it, e.g. ``*``) in its tool allowlist."""

    async def resolve(server: str, names: Sequence[str]) -> Mapping[str, str]:
        return await vault.resolve(user, f"{server}.*", names)

    return resolve


async def open_vault(store: Store, data_dir: Path) -> Vault:
    """The vault, its key under ``data_dir`` (or systemd's credential) checked, a rotation a stopped
    daemon left pending finished, and the log filter on the daemon's handlers.

    Raises:
        VaultKeyError: the key file is open to group or others, unreadable or not a key.
    """
    vault = Vault(store, VaultKeys(data_dir), daemon_user=getpass.getuser())
    await in_thread(vault.start)
    install_log_filter(LOG_FILTER)
    log.info("vault: key %s", vault.key_source.describe())
    return vault
