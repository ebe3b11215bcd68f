"""The policy as of now: the configured rules plus the store's rules and live grants.

:class:`LivePolicy` builds the :class:`~octipusd.policy.engine.Policy` every decision uses from
the store's in-memory view (:class:`~octipusd.store.policy_view.PolicyView`), which every write
of a rule or grant updates once committed, so a rule added or a grant revoked applies to the
next call; a stored rule or grant that cannot be loaded is skipped (:attr:`LivePolicy.skipped`).
It also spends grants: an ALLOW that rests on a scoped grant counts one use of it,
exactly once (:meth:`~octipusd.store.Store.use_grant`), whoever makes the call -- an agent
through the permission gate, or a person by hand (seed 001).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from octipusd.errors import RuleSyntaxError
from octipusd.policy.engine import Policy, PolicyDecision
from octipusd.policy.grants import Grant
from octipusd.policy.rules import Level, Rule, parse_rule
from octipusd.store.aio import in_thread
from octipusd.store.policy_view import PolicyEntries
from octipusd.store.records import PermissionGrant, PermissionRule
from octipusd.store.repository import Store

__all__ = ["GRANT_RETRIES", "LivePolicy", "UseGrant"]

log = logging.getLogger("octipusd.policy")

#: How many times a decision is re-taken when the grant it rested on was used up meanwhile.
GRANT_RETRIES = 3

#: ``async (grant id) -> counted``: count one use of a grant, exactly once; False when the grant no
#: longer applies (used up, expired or revoked).
UseGrant = Callable[[str], Awaitable[bool]]


def _rule(record: PermissionRule) -> Rule:
    return parse_rule(record.rule, record.level)


def _grant(record: PermissionGrant) -> Grant:
    return Grant(
        id=record.id,
        tool_id=record.tool_id,
        matcher=record.matcher,
        level=Level(record.level),
        session_id=record.session_id,
        workspace=record.workspace,
        expires_at=record.expires_at,
        max_uses=record.max_uses,
        uses=record.uses,
        revoked_at=record.revoked_at,
        created_by=record.created_by,
        note=record.note,
    )


@dataclass(frozen=True, slots=True)
class _Derived:
    """The policy built from one published :class:`PolicyEntries`, valid until ``expires``."""

    entries: PolicyEntries
    expires: datetime | None
    policy: Policy


class LivePolicy:
    """The rules and grants in force now, and the grant usage they imply.

    Args:
        store: The store (stored rules, grants, their in-memory view).
        base: The configured policy (``permissions.rules`` or the built-in defaults).
        clock: Current time (aware UTC) for the rules' matching; tests pass a fake one.
    """

    def __init__(self, store: Store, base: Policy, clock: Callable[[], datetime] | None = None) -> None:
        self.store = store
        self.base = base
        self._clock = clock
        self._derived: _Derived | None = None
        self._rules: dict[str, Rule] = {}
        self._grants: dict[PermissionGrant, Grant] = {}
        #: "stored rule ID" / "grant ID" -> why it cannot be loaded (it is skipped, logged once).
        self.skipped: dict[str, str] = {}

    async def current(self) -> Policy:
        """The policy with the stored rules and active grants as of now.

        Read from the store's in-memory view (the database only the first time); the policy built
        from one state of the view is reused until the view changes or one of its grants expires
        (by the store's clock, as :meth:`~octipusd.store.Store.list_grants` filters them).

        Raises:
            StoreError: the first read of the rules and grants failed.
        """
        entries = self.store.policy_view.entries
        if entries is None:
            entries = await in_thread(self.store.policy_entries)
        now = self.store.now()
        derived = self._derived
        if (
            derived is None
            or derived.entries is not entries
            or (derived.expires is not None and now >= derived.expires)
        ):
            derived = self._derive(entries, now)
        return derived.policy

    def _derive(self, entries: PolicyEntries, now: datetime) -> _Derived:
        """Build (and keep) the policy of ``entries`` at ``now``, reusing the rules and grants
        already converted for an earlier state."""
        live, expires = entries.live_grants(now)
        skipped: dict[str, str] = {}
        rules: dict[str, Rule] = {}
        for r in entries.rules:
            try:
                rules[r.id] = self._rules[r.id] if r.id in self._rules else _rule(r)
            except RuleSyntaxError as exc:
                skipped[f"stored rule {r.id}"] = f"{r.level} {r.rule!r}: {exc.problem}"
        grants: dict[PermissionGrant, Grant] = {}
        for g in live:
            try:
                grants[g] = self._grants[g] if g in self._grants else _grant(g)
            except ValueError as exc:  # Grant's own refusal of a malformed stored grant
                skipped[f"grant {g.id}"] = f"{g.level} {g.tool_id!r}: {exc}"
        for name in skipped.keys() - self.skipped.keys():
            log.warning("%s cannot be loaded and is skipped (%s); remove it", name, skipped[name])
        self._rules, self._grants, self.skipped = rules, grants, skipped
        policy = self.base.with_entries(stored=list(rules.values()), grants=list(grants.values()))
        self._derived = _Derived(entries, expires, policy)
        return self._derived

    async def evaluate(
        self,
        tool_id: str,
        arguments: Mapping[str, Any],
        *,
        action: str | None,
        session_id: str,
        workspace: str,
    ) -> PolicyDecision:
        """The rules' decision for one call, without any side effect (no grant use counted)."""
        policy = await self.current()
        now = self._clock() if self._clock is not None else None
        return policy.decide(
            tool_id, dict(arguments), action, session_id=session_id, workspace=workspace, now=now
        )

    async def spend(self, decision: PolicyDecision, use: UseGrant | None = None) -> bool:
        """Count one use of the grant ``decision`` rests on, exactly once (with ``use``, by default
        :meth:`~octipusd.store.Store.use_grant`).

        Returns:
            True when the decision stands (it rests on no grant, or the use was counted); False
            when its grant was used up, expired or revoked since it was read (decide again).

        Raises:
            StoreError: the use could not be written.
        """
        if decision.level is not Level.ALLOW or decision.grant_id is None:
            return True
        if use is not None:
            return await use(decision.grant_id)
        return await in_thread(self.store.use_grant, decision.grant_id)

    async def decide_and_spend(
        self,
        tool_id: str,
        arguments: Mapping[str, Any],
        *,
        action: str | None,
        session_id: str,
        workspace: str,
        spend: bool = True,
        record: Callable[[PolicyDecision], Awaitable[None]] | None = None,
        use: UseGrant | None = None,
    ) -> PolicyDecision:
        """The rules' decision for a call about to be made, with its grant's use counted.

        The one home of grant spending for every caller: an agent's call (the permission gate)
        and a hand-started one (:class:`~octipusd.runtime.actions.ActionService`). An ALLOW
        resting on a grant used up, expired or revoked by the time its use is counted is decided
        again (the grant no longer applies), at most :data:`GRANT_RETRIES` times.

        When every retry lost its grant to concurrent calls, the call needs a person: the result
        is an ASK, for both callers. Not an ALLOW: no call may run on a use that was not counted.
        Not a DENY: the rules allowed the call every time, only the counting was lost, and a
        denial would say the call is forbidden (an agent is told not to work around denials, and
        a hand-started invocation would end for good). As any ASK, it waits for an attended
        person's approval (after which the rules are checked again) or, in an unattended run,
        is refused for review.

        Args:
            tool_id: The tool called.
            arguments: Its input.
            action: The action name (for ``cli-native:<Tool>``, the tool name), or None.
            session_id: The session calling.
            workspace: The session's workspace.
            spend: False when the caller asks a person whatever the rules allow (a questionnaire,
                the flow guard's ASK): the decision is taken once and nothing is spent.
            record: Called with every decision taken, in order, before its use is counted (the
                gate emits each as a ``policy_decision`` event), and with the final ASK.
            use: Counts the grant's use instead of :meth:`~octipusd.store.Store.use_grant` (a
                hand-started call counts it in the transaction that records its decision).

        Raises:
            StoreError: the rules could not be read or the use could not be written.
            Whatever ``use`` raises.
        """
        for _ in range(GRANT_RETRIES + 1):
            decision = await self.evaluate(
                tool_id, arguments, action=action, session_id=session_id, workspace=workspace
            )
            if record is not None:
                await record(decision)
            if not spend or await self.spend(decision, use):
                return decision
        asked = replace(
            decision,
            level=Level.ASK,
            grant_id=None,
            explanation=f"grant {decision.grant_id} was used up by concurrent calls ({decision.explanation})",
        )
        if record is not None:
            await record(asked)
        return asked
