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
from typing import Any

from octipusd.store.records import VendorSession


def fingerprint(
    *,
    adapter: str,
    model: str | None,
    permission_mode: str,
    workspace: Path,
    instructions: str | None,
    tool_names: Sequence[str],
    provider: str | None = None,
    role: str | None = None,
) -> str:
    """Return the hex SHA-256 fingerprint of what a vendor conversation depends on.

    Args:
        adapter: Adapter name.
        model: Model name (None = vendor default).
        permission_mode: The Octipus permission mode of the row.
        workspace: The run's working directory (absolute).
        instructions: Stable system instructions, or None.
        tool_names: Names of the Octipus tools offered (order does not matter).
        provider: Configured provider identity (endpoint), or None.
        role: A child agent's role (seed 003: a keyed child's fingerprint covers its role); None
            for a root.

    Returns:
        64 hex characters.
    """
    payload = {
        "adapter": adapter,
        "model": model,
        "permission_mode": permission_mode,
        "workspace": str(workspace),
        "instructions": instructions,
        "tools": sorted(tool_names),
        "provider": provider,
        "role": role,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


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
        return ResumePlan(
            new_id, False, "model, permissions or tools changed; starting a new vendor conversation"
        )
    return ResumePlan(stored.vendor_session_id, True)
