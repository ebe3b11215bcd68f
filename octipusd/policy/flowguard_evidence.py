"""The flow guard's evidence: the :class:`Classification` of one call, the :class:`Findings` that
accumulate it, and :func:`is_credential_path`. Pure; see :mod:`octipusd.policy.flowguard`."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from octipusd.policy import flowguard_tables as tables
from octipusd.policy.flowguard_tables import Egress, FlowFlag

__all__ = ["Classification", "Findings", "is_credential_path"]

_EGRESS_RANK: Final[Mapping[Egress, int]] = {Egress.NONE: 0, Egress.READ: 1, Egress.WRITE: 2}


@dataclass(frozen=True)
class Classification:
    """The static contract of one call: what it reads and whether it sends data out.

    Attributes:
        flags: The flags this call sets (FACTS.md §9 "Classification examples").
        egress: Whether the call can carry data out (:class:`Egress`).
        reasons: Short human reasons, in the order found, without duplicates
            (``"cat reads .env (credentials)"``, ``"curl -d sends data out"``).
        tool_id: The classified tool id (named in escalation reasons).
        sources: ``(flag, what set it)`` for each flag in :attr:`flags`: the credential path
            or command for ``secret`` (``".env"``, ``"printenv"``), the tool id otherwise.
    """

    flags: frozenset[FlowFlag] = frozenset()
    egress: Egress = Egress.NONE
    reasons: tuple[str, ...] = ()
    tool_id: str = ""
    sources: tuple[tuple[FlowFlag, str], ...] = ()

    def source(self, flag: FlowFlag) -> str | None:
        """Return what set ``flag`` in this call, or None if the call does not set it."""
        for candidate, source in self.sources:
            if candidate is flag:
                return source
        return None


class Findings:
    """Mutable accumulator behind one :func:`~octipusd.policy.flowguard.classify` call."""

    def __init__(self) -> None:
        self.flags: dict[FlowFlag, str] = {}
        self.egress = Egress.NONE
        self.reasons: list[str] = []

    def taint(self, flag: FlowFlag, source: str, reason: str) -> None:
        self.flags.setdefault(flag, source)
        self._reason(reason)

    def send(self, egress: Egress, reason: str) -> None:
        if _EGRESS_RANK[egress] > _EGRESS_RANK[self.egress]:
            self.egress = egress
        self._reason(reason)

    def _reason(self, reason: str) -> None:
        if reason not in self.reasons:
            self.reasons.append(reason)

    def result(self, tool_id: str) -> Classification:
        return Classification(
            flags=frozenset(self.flags),
            egress=self.egress,
            reasons=tuple(self.reasons),
            tool_id=tool_id,
            sources=tuple(self.flags.items()),
        )


# ------------------------------------------------------------------------ credential paths

_GLOB_CHARS: Final = re.compile(r"[*?\[\]]")


def is_credential_path(path: str) -> bool:
    """Tell whether reading ``path`` exposes credential material (FACTS.md §9 "read .env").

    Matching is on path segments, case-insensitive; ``~`` and ``$HOME`` need no expansion.
    Credentials: ``.env`` and ``.env.<x>`` (not ``.env.example``/``.sample``/``.template``/
    ``.dist``); ``id_rsa``/``id_dsa``/``id_ecdsa``/``id_ed25519``; any file under ``.ssh/``
    except ``*.pub``, ``known_hosts``, ``authorized_keys`` and ``config``; ``*.pem``, ``*.key``,
    ``*.p12``, ``*.pfx``; ``.netrc``, ``.npmrc``, ``.pypirc``, ``.git-credentials``, ``.pgpass``,
    ``.vault-token``, ``credentials.json``, ``.credentials.json``, ``.claude.json``,
    ``kubeconfig``; anything under ``.aws/``, ``.azure/``, ``.config/gcloud/``, ``.config/gh/``,
    ``.kube/``, ``.gnupg/``, ``.password-store/``, ``Library/Keychains/``;
    ``.docker/config.json``, ``.codex/auth.json``, ``/proc/<pid>/environ``. A wildcard pattern
    (``**/.env*``, ``*.pem``) counts when it can match such a name and its last segment has at
    least two literal characters (so ``*`` and ``*.*`` do not).

    Args:
        path: A file path or glob pattern, as written in the call.

    Returns:
        True when the path (or a file the pattern can match) is credential material.
    """
    text = path.strip().replace("\\", "/")
    parts = [part.lower() for part in text.split("/") if part not in ("", ".")]
    if not parts:
        return False
    if _credential_parts(parts):
        return True
    base = parts[-1]
    if not _GLOB_CHARS.search(base) or len(_GLOB_CHARS.sub("", base)) < 2:
        return False
    return any(fnmatch.fnmatchcase(sample, base) for sample in tables.CREDENTIAL_SAMPLES)


def _credential_parts(parts: Sequence[str]) -> bool:
    base = parts[-1]
    if base == ".env":
        return True
    if base.startswith(".env."):
        suffixes = (_GLOB_CHARS.sub("", suffix) for suffix in base.split(".")[2:])
        return not any(suffix in tables.ENV_TEMPLATE_SUFFIXES for suffix in suffixes)
    if (
        tables.SSH_KEY_NAME.match(base)
        or base in tables.CREDENTIAL_FILES
        or base.endswith(tables.CREDENTIAL_EXTENSIONS)
    ):
        return True
    if ".ssh" in parts:
        inside = parts[len(parts) - parts[::-1].index(".ssh") :]
        if not inside:
            return True  # the directory itself (grep -r ~/.ssh)
        return not (inside[-1].endswith(".pub") or inside[-1] in tables.SSH_PUBLIC_FILES)
    if len(parts) >= 3 and base == "environ" and parts[-3] == "proc":
        return True
    for sequence in tables.CREDENTIAL_DIRS:
        width = len(sequence)
        if any(tuple(parts[i : i + width]) == sequence for i in range(len(parts) - width + 1)):
            return True
    return any(tuple(parts[-len(tail) :]) == tail for tail in tables.CREDENTIAL_TAILS)
