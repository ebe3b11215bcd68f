"""Scoped grants: operator-issued permission entries with conditions, expiry and usage limits.

Seed 003 "Permissions and limits": "legacy scoped grants keep their conditions, expiry and usage
limits". A grant is a rule (``toolId(matcher)`` at a level, with the matcher syntax of
:mod:`octipusd.policy.rules`, FACTS.md §3) that applies only while it is live:

* not revoked (any ``revoked_at`` revokes it, whenever it was recorded);
* not expired: ``now < expires_at`` when ``expires_at`` is set;
* not used up: ``uses < max_uses`` when ``max_uses`` is set (the caller counts a use each time
  an ALLOW grant lets a call through; see ``PolicyDecision.grant_id``);
* its conditions hold: ``session_id`` (only calls of that session) and ``workspace`` (only
  calls whose workspace is that path or below it; paths are compared lexically as POSIX paths
  after normalising ``.``/``..``, without touching the filesystem).

A grant's tool id covers a call's tool id like a rule's does (``*``, exact, or the tool's
``<family>``), and a grant for exactly ``cli-native`` (the legacy aggregate identity) covers
every ``cli-native:<Tool>`` call. Which tier a grant belongs to is decided by
:mod:`octipusd.policy.engine`. Pure: no clock is read here, ``now`` is always passed in.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from datetime import datetime
from pathlib import PurePosixPath

from octipusd.policy.rules import LEGACY_CLI_NATIVE_ID, Level, Rule, legacy_identity


def _require_aware(name: str, value: datetime | None) -> None:
    if value is not None and (value.tzinfo is None or value.utcoffset() is None):
        raise ValueError(f"{name} must be a timezone-aware datetime (UTC), got naive {value.isoformat()}")


def workspace_contains(root: str, path: str) -> bool:
    """Whether ``path`` is ``root`` or below it.

    Args:
        root: The grant's workspace path.
        path: The call's workspace path.

    Returns:
        True when ``path`` equals ``root`` or lies under it, compared lexically as POSIX paths after
        ``posixpath.normpath`` (so ``/repo/a/../b`` is under ``/repo`` and ``/repository`` is not).
    """
    base = PurePosixPath(posixpath.normpath(root))
    target = PurePosixPath(posixpath.normpath(path))
    return target == base or target.is_relative_to(base)


@dataclass(frozen=True, kw_only=True)
class Grant:
    """One scoped grant (seed 003: legacy scoped grants keep conditions, expiry and usage limits).

    Attributes:
        id: The grant's id (unique in the store).
        tool_id: The tool id it covers: ``cli-native:Bash``, ``shell__run``, a family such as
            ``shell``, ``*``, or the legacy aggregate ``cli-native``.
        level: The level the grant gives when it applies (usually ALLOW).
        created_by: Who issued it (shown in explanations).
        matcher: The matcher (FACTS.md §3 syntax: None, ``""`` or ``*`` = anything, ``x:*`` = prefix,
            else exact).
        session_id: Condition: only calls of this session; None = any session.
        workspace: Condition: only calls whose workspace is this path or below it; None = any.
        expires_at: Aware UTC expiry; the grant stops applying at this instant. None = never.
        max_uses: Usage limit; None = unlimited.
        uses: How many calls the grant has let through so far.
        revoked_at: When it was revoked; None = not revoked.
        note: Free text from the operator.

    Raises:
        ValueError: ``level`` is not allow/ask/deny, ``tool_id`` is empty or contains whitespace or
            ``(``/``)``, a datetime is naive, or ``max_uses``/``uses`` is negative.
    """

    id: str
    tool_id: str
    level: Level
    created_by: str
    matcher: str | None = None
    session_id: str | None = None
    workspace: str | None = None
    expires_at: datetime | None = None
    max_uses: int | None = None
    uses: int = 0
    revoked_at: datetime | None = None
    note: str | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "level", Level(self.level))
        except ValueError:
            raise ValueError(
                f"grant {self.id!r}: unknown level {self.level!r}; expected allow, ask or deny"
            ) from None
        if not self.tool_id or any(c.isspace() or c in "()" for c in self.tool_id):
            raise ValueError(
                f"grant {self.id!r}: tool id {self.tool_id!r} must be non-empty, without spaces or parentheses"
            )
        _require_aware(f"grant {self.id!r}: expires_at", self.expires_at)
        _require_aware(f"grant {self.id!r}: revoked_at", self.revoked_at)
        if self.max_uses is not None and self.max_uses < 0:
            raise ValueError(f"grant {self.id!r}: max_uses must be >= 0, got {self.max_uses}")
        if self.uses < 0:
            raise ValueError(f"grant {self.id!r}: uses must be >= 0, got {self.uses}")

    @property
    def text(self) -> str:
        """The grant as rule text: ``toolId(matcher)`` or a bare ``toolId``."""
        return self.tool_id if self.matcher is None else f"{self.tool_id}({self.matcher})"

    @property
    def rule(self) -> Rule:
        """The grant's tool id, matcher and level as a :class:`~octipusd.policy.rules.Rule`."""
        return Rule(level=self.level, tool_id=self.tool_id, matcher=self.matcher, text=self.text)

    @property
    def is_legacy(self) -> bool:
        """Whether the grant is for the legacy aggregate id ``cli-native``."""
        return self.tool_id == LEGACY_CLI_NATIVE_ID

    @property
    def remaining_uses(self) -> int | None:
        """Uses left before the limit (never negative), or None when unlimited."""
        return None if self.max_uses is None else max(self.max_uses - self.uses, 0)

    def covers(self, tool_id: str) -> bool:
        """Whether the grant's tool id covers a call of ``tool_id`` under either of its identities.

        ``*``, the exact id or the tool's family (as :meth:`Rule.applies_to`), or the legacy
        ``cli-native`` for a ``cli-native:<Tool>`` call.
        """
        if self.is_legacy and legacy_identity(tool_id) == LEGACY_CLI_NATIVE_ID:
            return True
        return self.rule.applies_to(tool_id)

    def inapplicable_reason(
        self,
        tool_id: str,
        subject: str,
        *,
        session_id: str | None,
        workspace: str | None,
        now: datetime,
    ) -> str | None:
        """Say why the grant does not apply to a call, or None when it does.

        Args:
            tool_id: The call's tool id.
            subject: The call's subject (:func:`octipusd.policy.rules.subject_of`).
            session_id: The call's session, if known.
            workspace: The call's workspace path, if known.
            now: The decision instant (aware).

        Returns:
            None when the grant applies; else a short reason such as ``"expired at ..."``,
            ``"revoked at ..."``, ``"used 3 of 3"``, ``"only for session s1"``,
            ``"only in workspace /repo"``, ``"tool id does not cover X"``,
            ``"matcher does not accept 'y'"``. Checks run in that order of liveness first.

        Raises:
            ValueError: ``now`` is naive.
        """
        _require_aware("now", now)
        if self.revoked_at is not None:
            return f"revoked at {self.revoked_at.isoformat()}"
        if self.expires_at is not None and now >= self.expires_at:
            return f"expired at {self.expires_at.isoformat()}"
        if self.max_uses is not None and self.uses >= self.max_uses:
            return f"used {self.uses} of {self.max_uses}"
        if not self.covers(tool_id):
            return f"tool id {self.tool_id} does not cover {tool_id}"
        if self.session_id is not None and session_id != self.session_id:
            return f"only for session {self.session_id} (call: {session_id or 'no session'})"
        if self.workspace is not None and (
            workspace is None or not workspace_contains(self.workspace, workspace)
        ):
            return f"only in workspace {self.workspace} (call: {workspace or 'no workspace'})"
        if not self.rule.matches_subject(subject):
            return f"matcher {self.matcher!r} does not accept {subject!r}"
        return None

    def applies(
        self,
        tool_id: str,
        subject: str,
        *,
        session_id: str | None,
        workspace: str | None,
        now: datetime,
    ) -> bool:
        """Whether the grant applies to a call (live, covering, conditions hold, matcher accepts).

        Args and errors as :meth:`inapplicable_reason`.
        """
        return (
            self.inapplicable_reason(tool_id, subject, session_id=session_id, workspace=workspace, now=now)
            is None
        )

    def describe(self) -> str:
        """One line for people, e.g. ``grant g1 allow cli-native:Bash(git:*) [session s1; in /repo;
        until 2025-01-01T00:00:00+00:00; 2 of 3 uses left; by alice]``."""
        parts: list[str] = []
        if self.session_id is not None:
            parts.append(f"session {self.session_id}")
        if self.workspace is not None:
            parts.append(f"in {self.workspace}")
        if self.expires_at is not None:
            parts.append(f"until {self.expires_at.isoformat()}")
        if self.max_uses is not None:
            parts.append(f"{self.remaining_uses} of {self.max_uses} uses left")
        if self.revoked_at is not None:
            parts.append(f"revoked {self.revoked_at.isoformat()}")
        parts.append(f"by {self.created_by}")
        if self.note:
            parts.append(f"note: {self.note}")
        return f"grant {self.id} {self.level} {self.text} [{'; '.join(parts)}]"


def grant_order_key(grant: Grant) -> tuple[bool, str, str]:
    """Sort key making grant evaluation independent of the order grants are given in.

    Unlimited grants come before grants with a usage limit (so an ALLOW that an unlimited grant
    also gives does not use up a limited one), then by id, then by the grant's full repr (a total
    order over distinct grants).
    """
    return (grant.max_uses is not None, grant.id, repr(grant))
