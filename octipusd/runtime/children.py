"""Child agents: resume keys, their scoping, and the in-process claim on a key.

Seed 003 "Resuming child sessions per role and task": a parent may pass ``resumeKey`` (a task
id) to ``spawn_child``; the spawner scopes it by the parent so unrelated parents in one
session cannot pick up each other's task sessions. The lineage key of a child is
``<parent scope>><child role>:<task id>`` and its vendor session is stored in the session's
reuse records under ``<adapter>::<lineage key>``. The parent scope is:

* a root parent's role (the root is a new worker every turn and must land on the same key
  when it re-spawns the task in a later turn);
* a keyed parent's own lineage key, so grandchildren carry the full lineage;
* nothing for any other parent: its children start cold (and the daemon logs why).

Two concurrent children with one key never share a vendor conversation: a key is claimed in
memory while a child holding it has a live vendor process; the second child starts cold and
saves nothing under the key. The claim guards only agents of this daemon process (as the seed
says of the original).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from octipusd.store.reuse_store import CHILD_KEY_SEPARATOR, MAX_CHILD_SESSIONS, is_child_key

__all__ = [
    "LAZY_DISCOVERY_TOOLS",
    "MAX_CHILD_SESSIONS",
    "ChildScope",
    "KeyClaims",
    "child_scope",
    "is_child_key",
]

log = logging.getLogger("octipusd.runtime.children")

#: Tools discovered lazily by a vendor, left out of a keyed child's fingerprint (seed 003: "tool
#: ids (without the lazy discovery tools)"). Octipus publishes every bridge tool up front, so
#: none of its own tools is lazy; Claude Code's deferred-tool search is named here.
LAZY_DISCOVERY_TOOLS = frozenset({"ToolSearch"})


@dataclass(frozen=True)
class ChildScope:
    """Where a child's resume key lands.

    Attributes:
        lineage: ``<parent scope>><role>:<task id>``, or None when the child starts cold.
        store_key: ``<adapter>::<lineage>``, the reuse record's key, or None.
        ignored_reason: Why a given ``resumeKey`` was ignored (logged), or None.
    """

    lineage: str | None
    store_key: str | None
    ignored_reason: str | None = None


def child_scope(
    *,
    adapter: str,
    supports_resume: bool,
    parent_is_root: bool,
    parent_role: str,
    parent_lineage: str | None,
    role: str,
    resume_key: str | None,
) -> ChildScope:
    """Scope a child's ``resumeKey`` by its parent (seed 003).

    Args:
        adapter: The child's adapter name.
        supports_resume: Whether the adapter (and its transport) can resume a session.
        parent_is_root: The parent is the session's root agent.
        parent_role: The parent's role (``root`` for the root).
        parent_lineage: The parent's own lineage key (a keyed child), or None.
        role: The child's role.
        resume_key: The validated task id, or None (a fresh child).

    Returns:
        The :class:`ChildScope`; ``lineage`` is None when the child starts cold.
    """
    if resume_key is None:
        return ChildScope(None, None)
    if not supports_resume:
        return ChildScope(None, None, f"adapter {adapter} cannot resume a vendor session")
    if parent_is_root:
        scope = parent_role
    elif parent_lineage is not None:
        scope = parent_lineage
    else:
        return ChildScope(
            None,
            None,
            "the parent is a child spawned without a resumeKey, so it has no stable identity to scope "
            "the key by; the child starts cold",
        )
    lineage = f"{scope}>{role}:{resume_key}"
    return ChildScope(lineage, f"{adapter}{CHILD_KEY_SEPARATOR}{lineage}")


class KeyClaims:
    """In-memory claims on child reuse keys: one live agent per key (this process only)."""

    def __init__(self) -> None:
        self._holders: dict[str, str] = {}

    def claim(self, key: str, run_id: str) -> bool:
        """Claim ``key`` for ``run_id``.

        Returns:
            True when the key was free (or already held by ``run_id``); False when another live
            agent holds it.
        """
        holder = self._holders.setdefault(key, run_id)
        return holder == run_id

    def holds(self, key: str, run_id: str) -> bool:
        """Whether ``run_id`` holds ``key``."""
        return self._holders.get(key) == run_id

    def release(self, key: str, run_id: str) -> None:
        """Release ``key`` if ``run_id`` holds it (called once its vendor process has exited)."""
        if self._holders.get(key) == run_id:
            del self._holders[key]
