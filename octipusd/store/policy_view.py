"""The in-memory view of what a permission decision reads: stored rules, live grants, flow labels.

One daemon owns a database (the store lock, :mod:`octipusd.store.lock`, refuses a second one), so
the only writer of ``permission_rules``, ``permission_grants`` and ``sessions.flow_label`` is this
process's :class:`~octipusd.store.Store`. Its methods that change them record the change on a
:class:`PolicyChange` and the view publishes it once their transaction has committed: a write that
fails (or raises) leaves the view as it was, and a decision taken after a write returned sees it.
The permission gate reads the view instead of the database on every call; the database stays the
authority for grant usage (``Store.use_grant`` is still one conditional ``UPDATE``; the view only
follows its result).

Rules and grants are one immutable :class:`PolicyEntries`, replaced whole on each change, so a
reader (also on the event loop) never waits: it reads one attribute. Changes (and the first load)
are serialised by :attr:`PolicyView.lock`, held across the writer's transaction, so the view applies
them in the order they committed.

Flow labels only ever gain flags (FACTS.md §9), so a label is cached per session and merged by
union; a label read from the database is cached only when no label changed while it was read.
At most :data:`FLOW_LABEL_CACHE_SESSIONS` sessions are cached; the oldest entry is dropped first
and read again when needed.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from octipusd.store.records import PermissionGrant, PermissionRule

__all__ = ["FLOW_LABEL_CACHE_SESSIONS", "PolicyChange", "PolicyEntries", "PolicyView", "grant_live"]

#: How many sessions' flow labels the view keeps in memory (sessions).
FLOW_LABEL_CACHE_SESSIONS = 4096


def grant_live(grant: PermissionGrant, now: datetime) -> bool:
    """Whether a grant still applies at ``now``: the filter of ``Store.list_grants`` (not revoked,
    not expired, not used up)."""
    return (
        grant.revoked_at is None
        and (grant.expires_at is None or grant.expires_at > now)
        and (grant.max_uses is None or grant.uses < grant.max_uses)
    )


@dataclass(frozen=True, slots=True)
class PolicyEntries:
    """One published state of the stored rules and grants.

    Attributes:
        version: Grows by one with each published change (readers may cache what they derive).
        rules: The stored rules, oldest first (``created_at``, ``id``): the order they are evaluated in.
        grants: The grants neither revoked nor used up, oldest first; those expired since they were
            published are still here, so a reader filters them with :meth:`live_grants`.
    """

    version: int
    rules: tuple[PermissionRule, ...]
    grants: tuple[PermissionGrant, ...]

    def live_grants(self, now: datetime) -> tuple[tuple[PermissionGrant, ...], datetime | None]:
        """The grants live at ``now`` and the earliest instant one of them expires (None: never)."""
        live = tuple(g for g in self.grants if grant_live(g, now))
        expiries = [g.expires_at for g in live if g.expires_at is not None]
        return live, min(expiries) if expiries else None


class PolicyChange:
    """What one write did to the rules and grants, applied to the view once it has committed."""

    def __init__(self) -> None:
        self._steps: list[Callable[[dict[str, PermissionRule], dict[str, PermissionGrant]], None]] = []

    def __bool__(self) -> bool:
        return bool(self._steps)

    def put_rule(self, rule: PermissionRule) -> None:
        """A rule was stored."""

        def step(rules: dict[str, PermissionRule], _grants: dict[str, PermissionGrant]) -> None:
            rules[rule.id] = rule

        self._steps.append(step)

    def drop_rule(self, rule_id: str) -> None:
        """A rule was deleted."""

        def step(rules: dict[str, PermissionRule], _grants: dict[str, PermissionGrant]) -> None:
            rules.pop(rule_id, None)

        self._steps.append(step)

    def put_grant(self, grant: PermissionGrant) -> None:
        """A grant was stored or changed (a revoked or used-up one leaves the view)."""

        def step(_rules: dict[str, PermissionRule], grants: dict[str, PermissionGrant]) -> None:
            grants[grant.id] = grant

        self._steps.append(step)

    def drop_grants(self, grant_ids: Iterable[str]) -> None:
        """Grants were deleted."""
        ids = tuple(grant_ids)

        def step(_rules: dict[str, PermissionRule], grants: dict[str, PermissionGrant]) -> None:
            for grant_id in ids:
                grants.pop(grant_id, None)

        self._steps.append(step)

    def count_use(self, grant_id: str) -> None:
        """One use of a grant was counted in the database."""

        def step(_rules: dict[str, PermissionRule], grants: dict[str, PermissionGrant]) -> None:
            grant = grants.get(grant_id)
            if grant is not None:
                grants[grant_id] = dataclasses.replace(grant, uses=grant.uses + 1)

        self._steps.append(step)

    def applied(self, entries: PolicyEntries, now: datetime) -> PolicyEntries:
        """``entries`` with this change, grants no longer live at ``now`` removed."""
        rules = {r.id: r for r in entries.rules}
        grants = {g.id: g for g in entries.grants}
        for step in self._steps:
            step(rules, grants)
        return PolicyEntries(
            version=entries.version + 1,
            rules=tuple(sorted(rules.values(), key=lambda r: (r.created_at, r.id))),
            grants=tuple(
                sorted((g for g in grants.values() if grant_live(g, now)), key=lambda g: (g.created_at, g.id))
            ),
        )


class PolicyView:
    """The view itself: see the module docstring. Thread-safe.

    Attributes:
        lock: Serialises changes and the first load; a writer holds it across its transaction
            (acquired with the store's statement timeout, see ``Store._policy_change``).
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._entries: PolicyEntries | None = None
        self._labels: OrderedDict[str, frozenset[str]] = OrderedDict()
        self._labels_lock = threading.Lock()
        self._label_writes = 0

    # rules and grants ----------------------------------------------------------------------

    @property
    def entries(self) -> PolicyEntries | None:
        """The current rules and grants, or None before the first load (no I/O, never waits)."""
        return self._entries

    def load(self, rules: Iterable[PermissionRule], grants: Iterable[PermissionGrant]) -> PolicyEntries:
        """Publish the first state, read from the database by the caller while holding :attr:`lock`."""
        entries = PolicyEntries(version=1, rules=tuple(rules), grants=tuple(grants))
        self._entries = entries
        return entries

    def publish(self, change: PolicyChange, now: datetime) -> None:
        """Apply a committed change (the caller holds :attr:`lock`); nothing before the first load."""
        if change and self._entries is not None:
            self._entries = change.applied(self._entries, now)

    # flow labels ---------------------------------------------------------------------------

    def flow_label(self, session_id: str) -> str | None:
        """The session's cached flow label, or None when it is not cached (no I/O)."""
        with self._labels_lock:
            flags = self._labels.get(session_id)
            if flags is None:
                return None
            self._labels.move_to_end(session_id)
        return ",".join(sorted(flags))

    def label_writes(self) -> int:
        """A counter of label changes: read it before reading a label from the database."""
        return self._label_writes

    def remember_label(self, session_id: str, label: str, *, read_after: int | None = None) -> None:
        """Cache a label: a committed write's result (``read_after`` None), or a label read from the
        database after :meth:`label_writes` returned ``read_after`` (kept only if no label changed since)."""
        flags = frozenset(f for f in label.split(",") if f)
        with self._labels_lock:
            if read_after is None:
                self._label_writes += 1
            elif read_after != self._label_writes:
                return  # a write landed while it was read: the next decision reads it again
            self._labels[session_id] = self._labels.get(session_id, frozenset()) | flags
            self._labels.move_to_end(session_id)
            while len(self._labels) > FLOW_LABEL_CACHE_SESSIONS:
                self._labels.popitem(last=False)

    def forget_label(self, session_id: str) -> None:
        """Drop a deleted session's label."""
        with self._labels_lock:
            self._label_writes += 1
            self._labels.pop(session_id, None)
