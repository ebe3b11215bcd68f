"""The permission decision for one tool call: tiers of rules and grants under one or two identities.

Every tool id goes through here: Octipus tools (``shell__run``), MCP connector tools
(``server.tool``) and vendor-native tools (``cli-native:<Tool>``). Protocol facts: FACTS.md §3
(rule syntax, deny-then-allow-then-ask evaluation, built-in defaults, default levels) and seed 003
"Permissions and limits":

    Existing cli-native policies and rules remain effective: a denial under either identity wins,
    and legacy scoped grants keep their conditions, expiry and usage limits. A new per-tool policy
    takes precedence over a non-denying legacy policy; legacy ASK rules still take precedence over
    the new read-tool defaults.

**Identities.** A ``cli-native:<Tool>`` call has two: its per-tool id and the legacy aggregate id
``cli-native`` (:data:`~octipusd.policy.rules.LEGACY_CLI_NATIVE_ID`); an entry for exactly
``cli-native`` covers every native tool. Every other tool id has only its own identity.

**Sources.** ``configured``: the ``permissions.rules`` setting, or the built-in defaults when the
setting is None; ``stored``: rules an operator added at runtime (``octipusctl rules add``);
``grants``: scoped grants (:class:`~octipusd.policy.grants.Grant`), applicable only while live and
while their conditions hold.

**Tiers.**

* ``new``: stored rules and grants covering the call's own id (exact, ``*`` or the tool's family),
  plus configured rules covering it when the operator set ``permissions.rules``;
* ``legacy``: stored rules, grants and configured rules for exactly ``cli-native``, for a
  ``cli-native:<Tool>`` call;
* ``defaults``: built-in default rules covering the call's own id (only when the setting is None);
* ``default-level``: :func:`~octipusd.policy.rules.default_level`.

**Decision.** (a) any applicable DENY in any tier, under either identity, decides DENY; (b) else
the first hit of the ``new`` tier; (c) else the ``legacy`` tier's; (d) else the ``defaults``
tier's; (e) else the default level. Within a tier, levels are evaluated deny, then allow, then ask
(FACTS.md §3) and the first entry in order wins; the order is stored rules, configured rules,
then grants (see :func:`~octipusd.policy.grants.grant_order_key`), except that an applicable ALLOW
grant is preferred over an ALLOW rule so its use is counted (``PolicyDecision.grant_id``).

Pure and immutable: a :class:`Policy` never changes; :meth:`Policy.with_entries` returns a new one
with refreshed stored rules and grants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, Literal

from octipusd.policy.grants import Grant, grant_order_key, workspace_contains
from octipusd.policy.rules import (
    CLI_NATIVE_PREFIX,
    EVALUATION_ORDER,
    LEGACY_CLI_NATIVE_ID,
    Level,
    Rule,
    RuleSet,
    default_action,
    default_level,
    legacy_identity,
    subject_of,
)

#: Where a decision came from: one of the three entry tiers, or the tool's default level.
Tier = Literal["new", "legacy", "defaults", "default-level"]
#: The tiers that hold entries, in precedence order.
EntryTier = Literal["new", "legacy", "defaults"]
#: Where an entry came from.
Source = Literal["stored", "configured", "built-in", "grant"]

ENTRY_TIERS: Final[tuple[EntryTier, ...]] = ("new", "legacy", "defaults")

_ORIGIN: Final[Mapping[str, str]] = {
    "stored": "stored rule",
    "configured": "permissions.rules",
    "built-in": "built-in default",
    "grant": "scoped grant",
}
_TIER_NAME: Final[Mapping[str, str]] = {
    "new": "per-tool policy",
    "legacy": "legacy cli-native policy",
    "defaults": "built-in default",
}


@dataclass(frozen=True)
class Candidate:
    """One entry considered for a call.

    Attributes:
        tier: The tier it belongs to for this call.
        source: ``stored``, ``configured``, ``built-in`` or ``grant``.
        identity: The identity it covers the call under (the call's id, or ``cli-native``).
        level: The entry's level.
        text: The rule text (``cli-native:Bash(git:*)``), or the grant's ``toolId(matcher)``.
        reason: None when the entry applies to the call; else why not (matcher, expiry...).
        grant: The grant, for grant entries.
    """

    tier: EntryTier
    source: Source
    identity: str
    level: Level
    text: str
    reason: str | None
    grant: Grant | None = None

    @property
    def applies(self) -> bool:
        """Whether the entry applies to the call."""
        return self.reason is None

    @property
    def label(self) -> str:
        """``rule <text>`` or ``grant <id> <text>``."""
        if self.grant is not None:
            return f"grant {self.grant.id} {self.text}"
        return f"rule {self.text}"

    def as_dict(self, *, chosen: bool) -> dict[str, Any]:
        """The candidate as JSON-ready data (for ``octipusctl rules explain``).

        Returns:
            ``{"kind": "rule"|"grant", "source", "identity", "level", "text", "applies",
            "reason", "grant_id", "grant", "chosen"}``; ``grant`` is :meth:`Grant.describe`.
        """
        return {
            "kind": "grant" if self.grant is not None else "rule",
            "source": self.source,
            "identity": self.identity,
            "level": str(self.level),
            "text": self.text,
            "applies": self.applies,
            "reason": self.reason if self.reason is not None else "applies",
            "grant_id": self.grant.id if self.grant is not None else None,
            "grant": self.grant.describe() if self.grant is not None else None,
            "chosen": chosen,
        }


@dataclass(frozen=True)
class PolicyDecision:
    """A decision and why.

    Attributes:
        level: allow, ask or deny.
        explanation: One line for people naming what matched and why (shown in approvals, events
            and refusals), e.g. ``deny by rule cli-native:Bash(rm:*) (stored rule; a denial under
            either identity wins)``.
        tier: ``new``, ``legacy``, ``defaults`` or ``default-level``.
        rule: The matched entry's text (a rule's text, or a grant's ``toolId(matcher)``), or None.
        grant_id: The grant whose use the caller must count because it let the call through;
            set only for ALLOW decisions made by a grant.
        source: Where the matched entry came from (``stored``, ``configured``, ``built-in``,
            ``grant``), or None for the default level.
    """

    level: Level
    explanation: str
    tier: Tier = "default-level"
    rule: str | None = None
    grant_id: str | None = None
    source: Source | None = None


@dataclass(frozen=True)
class _Evaluation:
    tool_id: str
    subject: str
    identities: tuple[str, ...]
    tiers: Mapping[EntryTier, tuple[Candidate, ...]]
    chosen: Candidate | None
    decision: PolicyDecision


def _first_hit(candidates: Sequence[Candidate]) -> Candidate | None:
    """The tier's first hit: deny, then allow (grants first), then ask; first in order wins."""
    applicable = [c for c in candidates if c.applies]
    for level in EVALUATION_ORDER:
        at_level = [c for c in applicable if c.level is level]
        if not at_level:
            continue
        if level is Level.ALLOW:
            grants = [c for c in at_level if c.grant is not None]
            if grants:
                return grants[0]
        return at_level[0]
    return None


class Policy:
    """Decides tool calls from configured rules, stored rules and scoped grants.

    Args:
        configured: The ``permissions.rules`` rule set; None (or a built-in set) means the
            built-in defaults (FACTS.md §3).
        stored: Rules added at runtime by an operator, in the order they were added.
        grants: Scoped grants, in any order (evaluation does not depend on it).

    Attributes:
        rules: The configured rule set actually used (the built-in defaults when none was set).
        stored: The stored rules, as a tuple.
        grants: The grants, sorted by :func:`~octipusd.policy.grants.grant_order_key`.
    """

    def __init__(
        self,
        configured: RuleSet | None = None,
        stored: Sequence[Rule] = (),
        grants: Sequence[Grant] = (),
    ) -> None:
        self.rules: RuleSet = configured if configured is not None else RuleSet.defaults()
        self.stored: tuple[Rule, ...] = tuple(stored)
        self.grants: tuple[Grant, ...] = tuple(sorted(grants, key=grant_order_key))

    def __repr__(self) -> str:
        origin = "built-in defaults" if self.rules.builtin else "permissions.rules"
        return (
            f"Policy({origin}: {len(self.rules.rules)} rules, {len(self.stored)} stored, "
            f"{len(self.grants)} grants)"
        )

    @classmethod
    def from_setting(
        cls,
        value: Mapping[str, Any] | None,
        *,
        stored: Sequence[Rule] = (),
        grants: Sequence[Grant] = (),
    ) -> Policy:
        """Build from the ``permissions.rules`` setting (None = built-in defaults).

        Args:
            value: The setting: None, or ``{"allow"?: [...], "deny"?: [...], "ask"?: [...]}``.
            stored: Stored rules (see :class:`Policy`).
            grants: Scoped grants (see :class:`Policy`).

        Raises:
            ValueError: the setting is malformed or a rule does not parse; the message names it
                (:meth:`RuleSet.from_setting`).
        """
        return cls(RuleSet.from_setting(value), stored, grants)

    def with_entries(
        self,
        *,
        stored: Sequence[Rule] | None = None,
        grants: Sequence[Grant] | None = None,
    ) -> Policy:
        """Return a new policy with the same configured rules and new stored rules and/or grants.

        Args:
            stored: The new stored rules; None keeps the current ones.
            grants: The new grants; None keeps the current ones.

        Returns:
            A new :class:`Policy`; this one is unchanged.
        """
        return Policy(
            self.rules,
            self.stored if stored is None else stored,
            self.grants if grants is None else grants,
        )

    def decide(
        self,
        tool_id: str,
        arguments: Mapping[str, Any],
        action: str | None = None,
        *,
        session_id: str | None = None,
        workspace: str | None = None,
        now: datetime | None = None,
    ) -> PolicyDecision:
        """Decide one call (the module docstring gives the precedence).

        Args:
            tool_id: ``cli-native:Bash``, ``shell__run``, ``server.tool``...
            arguments: The call's arguments (the subject is taken from them, FACTS.md §3).
            action: The action name used as the subject when no subject field is present; None
                means :func:`~octipusd.policy.rules.default_action` (the tool name of
                ``cli-native:<Tool>``).
            session_id: The calling session (for session-scoped grants).
            workspace: The call's workspace path (for workspace-scoped grants).
            now: The decision instant, aware; None means the current UTC time.

        Returns:
            The decision. When ``grant_id`` is set the caller must count one use of that grant.

        Raises:
            ValueError: ``now`` is naive.
        """
        return self._evaluate(tool_id, arguments, action, session_id, workspace, now).decision

    def explain(
        self,
        tool_id: str,
        arguments: Mapping[str, Any],
        action: str | None = None,
        *,
        session_id: str | None = None,
        workspace: str | None = None,
        now: datetime | None = None,
    ) -> dict[str, Any]:
        """Explain a decision with every candidate considered (for ``octipusctl rules explain``).

        Args: as :meth:`decide`.

        Returns:
            ``{"tool_id", "identities": [...], "subject", "session_id", "workspace", "now",
            "configured": "permissions.rules"|"built-in defaults", "tiers": {"new": [...],
            "legacy": [...], "defaults": [...]}, "default_level", "decision": {"level", "tier",
            "rule", "grant_id", "source", "explanation"}}``. Each tier lists the entries covering
            the call under that tier's identity, applicable or not, as :meth:`Candidate.as_dict`
            (``chosen`` marks the deciding entry).

        Raises:
            ValueError: ``now`` is naive.
        """
        at = now if now is not None else datetime.now(UTC)
        ev = self._evaluate(tool_id, arguments, action, session_id, workspace, at)
        d = ev.decision
        return {
            "tool_id": tool_id,
            "identities": list(ev.identities),
            "subject": ev.subject,
            "session_id": session_id,
            "workspace": workspace,
            "now": at.isoformat(),
            "configured": "built-in defaults" if self.rules.builtin else "permissions.rules",
            "tiers": {
                tier: [c.as_dict(chosen=c is ev.chosen) for c in ev.tiers[tier]] for tier in ENTRY_TIERS
            },
            "default_level": str(default_level(tool_id)),
            "decision": {
                "level": str(d.level),
                "tier": d.tier,
                "rule": d.rule,
                "grant_id": d.grant_id,
                "source": d.source,
                "explanation": d.explanation,
            },
        }

    def native_denials(
        self,
        *,
        session_id: str | None = None,
        workspace: str | None = None,
        now: datetime | None = None,
    ) -> list[str]:
        """The vendor-native tool denials in force for one session, for the vendor CLI's own deny list.

        A vendor CLI approves some native calls itself (Claude's ``acceptEdits`` mode runs edits and
        common filesystem commands, every mode runs reads) and never relays them, so a DENY that only
        the relay applies would not be enforced for them (seed 003 "Permissions and limits": "a
        denial under either identity wins"). The runtime hands these texts to the adapter
        (``LaunchRequest.denied_native``), which passes them to the CLI as its own deny rules.

        Collected, in this order: stored rules, the configured rules (``permissions.rules`` or the
        built-in defaults), then the grants (in :func:`~octipusd.policy.grants.grant_order_key`
        order); only DENY entries, and of grants only those applicable here: not revoked, not
        expired at ``now`` (``now < expires_at``), not used up (``uses < max_uses``), and whose
        ``session_id`` / ``workspace`` conditions hold for ``session_id`` / ``workspace`` (the
        workspace as :func:`~octipusd.policy.grants.workspace_contains`), the same liveness and
        condition checks as :meth:`Grant.inapplicable_reason`. Entries by tool id:

        * ``cli-native:<Tool>``: ``<Tool>``, or ``<Tool>(<matcher>)`` (e.g. ``Bash(rm:*)``,
          ``Read(/abs/.env)``); a matcher that accepts anything (``*`` or empty) gives the bare
          ``<Tool>``;
        * the legacy ``cli-native`` and the every-tool ``*`` (both cover every ``cli-native:<Tool>``
          call, see the module docstring): ``*``, or ``*(<matcher>)``, meaning that matcher on
          every native tool;
        * any other tool id (Octipus tools, families, MCP connector tools) covers no native call
          and is left out.

        Duplicates are kept once, at their first place. Pure: nothing is read but this policy.

        Args:
            session_id: The session the CLI runs for (session-scoped grants); None applies no
                session-scoped grant.
            workspace: The session's workspace path (workspace-scoped grants); None applies no
                workspace-scoped grant.
            now: The instant of the launch, aware; None means the current UTC time.

        Returns:
            Octipus rule texts without the ``cli-native:`` prefix, e.g.
            ``["Bash(rm:*)", "Write", "*"]``.

        Raises:
            ValueError: ``now`` is naive.
        """
        at = now if now is not None else datetime.now(UTC)
        if at.tzinfo is None or at.utcoffset() is None:
            raise ValueError(f"now must be a timezone-aware datetime (UTC), got naive {at.isoformat()}")
        denials: list[str] = []

        def add(tool_id: str, matcher: str | None) -> None:
            if tool_id in (LEGACY_CLI_NATIVE_ID, "*"):
                name = "*"
            elif tool_id.startswith(CLI_NATIVE_PREFIX) and tool_id != CLI_NATIVE_PREFIX:
                name = tool_id.removeprefix(CLI_NATIVE_PREFIX)
            else:
                return
            text = name if matcher is None or matcher in ("", "*") else f"{name}({matcher})"
            if text not in denials:
                denials.append(text)

        for rule in (*self.stored, *self.rules.rules):
            if rule.level is Level.DENY:
                add(rule.tool_id, rule.matcher)
        for grant in self.grants:
            if grant.level is Level.DENY and self._grant_in_force(grant, session_id, workspace, at):
                add(grant.tool_id, grant.matcher)
        return denials

    @staticmethod
    def _grant_in_force(grant: Grant, session_id: str | None, workspace: str | None, now: datetime) -> bool:
        """Whether a grant is live and its conditions hold: the checks of
        :meth:`Grant.inapplicable_reason` that do not depend on the call (revocation, expiry, usage
        limit, session, workspace)."""
        if grant.revoked_at is not None:
            return False
        if grant.expires_at is not None and now >= grant.expires_at:
            return False
        if grant.max_uses is not None and grant.uses >= grant.max_uses:
            return False
        if grant.session_id is not None and session_id != grant.session_id:
            return False
        return grant.workspace is None or (
            workspace is not None and workspace_contains(grant.workspace, workspace)
        )

    # ------------------------------------------------------------------ evaluation

    def _candidates(
        self,
        tool_id: str,
        subject: str,
        session_id: str | None,
        workspace: str | None,
        now: datetime,
    ) -> dict[EntryTier, list[Candidate]]:
        legacy = legacy_identity(tool_id)
        tiers: dict[EntryTier, list[Candidate]] = {tier: [] for tier in ENTRY_TIERS}

        def place_rule(rule: Rule, source: Source) -> None:
            tier: EntryTier
            if legacy is not None and rule.tool_id == LEGACY_CLI_NATIVE_ID:
                tier, identity = "legacy", legacy
            elif rule.applies_to(tool_id):
                tier, identity = ("defaults" if source == "built-in" else "new"), tool_id
            else:
                return
            reason = (
                None
                if rule.matches_subject(subject)
                else f"matcher {rule.matcher!r} does not accept {subject!r}"
            )
            tiers[tier].append(Candidate(tier, source, identity, rule.level, rule.text, reason))

        for rule in self.stored:
            place_rule(rule, "stored")
        configured_source: Source = "built-in" if self.rules.builtin else "configured"
        for rule in self.rules.rules:
            place_rule(rule, configured_source)
        for grant in self.grants:
            tier: EntryTier
            if legacy is not None and grant.is_legacy:
                tier, identity = "legacy", legacy
            elif grant.rule.applies_to(tool_id):
                tier, identity = "new", tool_id
            else:
                continue
            reason = grant.inapplicable_reason(
                tool_id, subject, session_id=session_id, workspace=workspace, now=now
            )
            tiers[tier].append(Candidate(tier, "grant", identity, grant.level, grant.text, reason, grant))
        return tiers

    def _evaluate(
        self,
        tool_id: str,
        arguments: Mapping[str, Any],
        action: str | None,
        session_id: str | None,
        workspace: str | None,
        now: datetime | None,
    ) -> _Evaluation:
        at = now if now is not None else datetime.now(UTC)
        if at.tzinfo is None or at.utcoffset() is None:
            raise ValueError(f"now must be a timezone-aware datetime (UTC), got naive {at.isoformat()}")
        legacy = legacy_identity(tool_id)
        identities = (tool_id,) if legacy is None else (tool_id, legacy)
        subject = subject_of(arguments, default_action(tool_id) if action is None else action)
        tiers = {
            t: tuple(cs) for t, cs in self._candidates(tool_id, subject, session_id, workspace, at).items()
        }

        def done(chosen: Candidate | None, decision: PolicyDecision) -> _Evaluation:
            return _Evaluation(tool_id, subject, identities, tiers, chosen, decision)

        # (a) a denial under either identity, in any tier, wins
        for tier in ENTRY_TIERS:
            deny = next((c for c in tiers[tier] if c.applies and c.level is Level.DENY), None)
            if deny is not None:
                why = "a denial under either identity wins" if legacy is not None else "a denial wins"
                return done(deny, self._decision(deny, f"{self._origin(deny)}; {why}"))
        # (b)-(d) the first tier with a hit decides
        hits = {tier: _first_hit(tiers[tier]) for tier in ENTRY_TIERS}
        for index, tier in enumerate(ENTRY_TIERS):
            hit = hits[tier]
            if hit is None:
                continue
            note = self._origin(hit)
            below = next((hits[t] for t in ENTRY_TIERS[index + 1 :] if hits[t] is not None), None)
            if below is not None and below.level is not hit.level:
                note += f"; takes precedence over the {_TIER_NAME[below.tier]} {below.level} by {below.label}"
            return done(hit, self._decision(hit, note))
        # (e) the tool's default level
        level = default_level(tool_id)
        return done(
            None, PolicyDecision(level, f"{level} by the default level of {tool_id} (no rule matched)")
        )

    @staticmethod
    def _origin(candidate: Candidate) -> str:
        origin = _ORIGIN[candidate.source]
        if candidate.grant is not None:
            origin += f" by {candidate.grant.created_by}"
        if candidate.tier == "legacy":
            origin += f", legacy {LEGACY_CLI_NATIVE_ID} identity"
        return origin

    @staticmethod
    def _decision(candidate: Candidate, note: str) -> PolicyDecision:
        counted = candidate.grant is not None and candidate.level is Level.ALLOW
        return PolicyDecision(
            level=candidate.level,
            explanation=f"{candidate.level} by {candidate.label} ({note})",
            tier=candidate.tier,
            rule=candidate.text,
            grant_id=candidate.grant.id if counted and candidate.grant is not None else None,
            source=candidate.source,
        )
