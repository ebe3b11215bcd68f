"""Vendor session reuse: fingerprints and the resume-or-cold decision (seed 003 "Session reuse").

The stored vendor session of an Octipus session is keyed by adapter name (a child task's by
``<adapter>::<lineage key>``, see :mod:`octipusd.runtime.children`). It is resumed only
when its fingerprint still matches (model, provider identity, permission mode, plan mode,
workspace, stable instructions, tool schemas) and the workspace still exists: Claude's resume
is scoped to the working directory (observed.md §1.7), so a moved workspace starts cold
before anything is spawned.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from octipusd.store.records import VendorSession
from octipusd.toolkit import ToolSpec

#: The parts of a session fingerprint, in the order it names them, with how a notice calls each.
FINGERPRINT_PARTS: Mapping[str, str] = MappingProxyType(
    {
        "adapter": "the adapter",
        "model": "the model",
        "provider": "the provider",
        "permission_mode": "the permission or plan mode",
        "workspace": "the workspace",
        "instructions": "the stable instructions",
        "role": "the role",
        "tools": "the tool schemas",
    }
)
#: Hex digits of each part's digest (64 bits: an accidental collision is never a concern).
PART_DIGEST_HEX = 16


def tool_schema(spec: ToolSpec) -> dict[str, Any]:
    """The schema of one tool as the bridge publishes it (name, description, input schema and
    read-only hint), for a root's fingerprint (seed 003: "Root CLI fingerprints include the full
    tool schemas")."""
    return {
        "name": spec.name,
        "description": spec.description,
        "input_schema": spec.input_schema,
        "read_only": spec.read_only,
    }


def fingerprint(
    *,
    adapter: str,
    model: str | None,
    permission_mode: str,
    workspace: Path,
    instructions: str | None,
    tools: Sequence[Mapping[str, Any]],
    provider: str | None = None,
    role: str | None = None,
) -> str:
    """Return the fingerprint of what a vendor conversation depends on.

    Each part is hashed on its own (SHA-256 of its canonical JSON: sorted keys, so neither the
    order of keys nor the order of tools matters), so that a changed fingerprint can say what
    changed (:func:`changed_parts`).

    Args:
        adapter: Adapter name.
        model: Model name (None = vendor default).
        permission_mode: The Octipus permission mode of the row.
        workspace: The run's working directory (absolute).
        instructions: Stable system instructions, or None.
        tools: What the fingerprint covers of each tool the run offers: a root's full schemas
            (:func:`tool_schema`), a keyed child's tool ids (``{"name": ...}``, seed 003).
        provider: Configured provider identity (endpoint), or None.
        role: A child agent's role (seed 003: a keyed child's fingerprint covers its role); None
            for a root.

    Returns:
        ``part=digest`` for each of :data:`FINGERPRINT_PARTS`, separated by spaces.
    """
    values: dict[str, Any] = {
        "adapter": adapter,
        "model": model,
        "provider": provider,
        "permission_mode": permission_mode,
        "workspace": str(workspace),
        "instructions": instructions,
        "role": role,
        "tools": sorted(_canonical(tool) for tool in tools),
    }
    return " ".join(f"{name}={_digest(values[name])}" for name in FINGERPRINT_PARTS)


def changed_parts(stored: str, current: str) -> list[str] | None:
    """The parts (:data:`FINGERPRINT_PARTS` names) in which two fingerprints differ, or None when
    ``stored`` is not of :func:`fingerprint`'s form (a record saved by an older version)."""
    old, new = _parts(stored), _parts(current)
    if old is None or new is None:
        return None
    return [name for name in FINGERPRINT_PARTS if old.get(name) != new.get(name)]


def _parts(value: str) -> dict[str, str] | None:
    pairs = [item.partition("=") for item in value.split(" ")]
    parts = {name: digest for name, sep, digest in pairs if sep}
    return parts if len(parts) == len(pairs) and parts.keys() == FINGERPRINT_PARTS.keys() else None


def _canonical(value: Any) -> str:
    """Canonical JSON of ``value``: sorted keys, no insignificant whitespace; mappings that are
    not dicts are written as objects, anything else JSON cannot hold as its ``str``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_plain)


def _plain(value: Any) -> Any:
    return dict(value) if isinstance(value, Mapping) else str(value)


def _digest(value: Any) -> str:
    return hashlib.sha256(_canonical(value).encode()).hexdigest()[:PART_DIGEST_HEX]


#: ``metadata.cliAgent`` keys that identify the provider or transport a conversation lives at.
PROVIDER_KEYS = ("baseUrl", "transport", "authTokenEnv")


def provider_identity(options: Mapping[str, Any]) -> str | None:
    """The configured provider identity of a launch (endpoint, transport), for the fingerprint.

    Returns:
        A stable JSON text of the provider keys present in ``options``, or None when none is.
    """
    chosen = {k: options[k] for k in PROVIDER_KEYS if k in options}
    return json.dumps(chosen, sort_keys=True) if chosen else None


@dataclass(frozen=True)
class ResumePlan:
    """What the next launch does with the vendor conversation.

    Attributes:
        vendor_session_id: The id to resume or to start with (None: the vendor assigns one).
        resume: True to resume ``vendor_session_id``.
        notice: Why a stored conversation is not resumed, for the run's events; None otherwise.
    """

    vendor_session_id: str | None
    resume: bool
    notice: str | None = None


def plan_resume(
    stored: VendorSession | None, current_fingerprint: str, workspace: Path, new_id: str | None
) -> ResumePlan:
    """Decide between resuming the stored vendor session and a cold start.

    Args:
        stored: The stored record for this session and adapter, or None.
        current_fingerprint: :func:`fingerprint` of this launch.
        workspace: The launch's working directory.
        new_id: A freshly minted id for a cold start (None when the vendor assigns it).

    Returns:
        The :class:`ResumePlan`.
    """
    if stored is None:
        return ResumePlan(new_id, False)
    if stored.cwd != str(workspace) or not workspace.is_dir():
        return ResumePlan(
            new_id,
            False,
            f"workspace moved ({stored.cwd} -> {workspace}); starting a new vendor conversation",
        )
    if stored.fingerprint != current_fingerprint:
        return ResumePlan(new_id, False, _changed_notice(stored.fingerprint, current_fingerprint))
    return ResumePlan(stored.vendor_session_id, True)


def _changed_notice(stored: str, current: str) -> str:
    """Why a stored conversation with another fingerprint is not resumed, naming what changed."""
    changed = changed_parts(stored, current)
    if not changed:
        what = "the launch settings changed (the stored conversation was saved by an earlier version)"
    else:
        names = [FINGERPRINT_PARTS[name] for name in changed]
        what = (names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]) + " changed"
    return f"{what}; starting a new vendor conversation"
