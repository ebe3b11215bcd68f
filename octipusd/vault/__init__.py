"""The vault: named credentials encrypted at rest, resolved into one tool invocation's ``env``
(seed 003 "Authenticate with a vault credential"; issue 17).

* :class:`Vault` (``vault.py``): resolution for a user and a tool (all or nothing, each refusal
  naming the entry), and the operator's administration: add, list, remove, allow, revoke, rotate;
* :class:`VaultKeys` (``keys.py``): the Fernet key from systemd's credential or ``vault.key``
  (0600) in the daemon's data directory, and its crash-safe rotation;
* :class:`SecretLogFilter` (``masking.py``): every value resolved in this process masked as
  ``[REDACTED:NAME]`` in the daemon's log.

The placeholders' grammar, their refusals outside ``env`` and the masking of a call's output are
the tool vocabulary's (:mod:`octipusd.toolkit.secrets`).
"""

from __future__ import annotations

from octipusd.vault.keys import CREDENTIAL_NAME, KEY_FILE_NAME, KeySource, VaultKeys, key_files
from octipusd.vault.masking import RESOLVED, ResolvedValues, SecretLogFilter, install_log_filter
from octipusd.vault.vault import (
    DEFAULT_TOOLS,
    MAX_VALUE_BYTES,
    MIN_VALUE_CHARS,
    NAME_PATTERN,
    Vault,
    VaultStatus,
    tool_allowed,
)

__all__ = [
    "CREDENTIAL_NAME",
    "DEFAULT_TOOLS",
    "KEY_FILE_NAME",
    "MAX_VALUE_BYTES",
    "MIN_VALUE_CHARS",
    "NAME_PATTERN",
    "RESOLVED",
    "KeySource",
    "ResolvedValues",
    "SecretLogFilter",
    "Vault",
    "VaultKeys",
    "VaultStatus",
    "install_log_filter",
    "key_files",
    "tool_allowed",
]
