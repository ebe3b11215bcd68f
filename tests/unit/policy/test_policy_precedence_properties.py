"""Properties of the precedence engine over generated rule sets, grants and calls.

Seed 003 "Permissions and limits": a denial under either identity wins; a new per-tool policy takes
precedence over a non-denying legacy policy; legacy ASK rules take precedence over the read-tool
defaults; legacy scoped grants keep their conditions, expiry and usage limits. The reference model
below is written independently of ``octipusd.policy.engine`` (it re-derives coverage, subjects,
matching and grant liveness from FACTS.md §3 and the seed) so the properties can fail.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings, strategies as st

from octipusd.policy.engine import Policy, PolicyDecision
from octipusd.policy.grants import Grant
from octipusd.policy.native import READ_ONLY_CLI_TOOLS
from octipusd.policy.rules import Level, Rule, RuleSet, default_level

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

CALL_TOOLS = [
    "cli-native:Bash",
    "cli-native:Read",
    "cli-native:WebFetch",
    "cli-native:Edit",
    "shell__run",
    "filesystem__read",
    "server.tool",
    "get_work_plan",
    "cli-native",
]
ENTRY_TOOLS = [*CALL_TOOLS, "cli-native", "cli-native", "*", "shell", "filesystem", "cli-native:Grep"]
MATCHERS = [None, "", "*", "git:*", "git status", "rm:*", "ls", "Read", "Bash", "x:*", "mkfs:*", "run"]
COMMANDS = ["git status", "gitk", "rm -rf x", "ls", "mkfs /dev/sda", "sudo ls", "x", ""]
SESSIONS = [None, "s1", "s2"]
GRANT_WORKSPACES = [None, "/repo", "/repo/sub", "/other"]
WORKSPACES = [*GRANT_WORKSPACES, "/repository", "/repo/../other", "/repo/sub/../x"]
#: grant workspace -> call workspaces at or below it (the reference for the workspace condition)
BELOW = {
    "/repo": {"/repo", "/repo/sub", "/repo/sub/../x"},
    "/repo/sub": {"/repo/sub"},
    "/other": {"/other", "/repo/../other"},
    "/repository": {"/repository"},
    "/repo/../other": {"/other", "/repo/../other"},
    "/repo/sub/../x": {"/repo/sub/../x"},
}
INSTANTS = [None, NOW - timedelta(hours=1), NOW, NOW + timedelta(seconds=1), NOW + timedelta(days=1)]


@dataclass(frozen=True)
class Call:
    tool_id: str
    arguments: dict[str, Any]
    session_id: str | None
    workspace: str | None

    def decide(self, policy: Policy) -> PolicyDecision:
        return policy.decide(
            self.tool_id, self.arguments, session_id=self.session_id, workspace=self.workspace, now=NOW
        )


def _rule(level: Level, tool_id: str, matcher: str | None) -> Rule:
    text = tool_id if matcher is None else f"{tool_id}({matcher})"
    return Rule(level=level, tool_id=tool_id, matcher=matcher, text=text)


levels = st.sampled_from(list(Level))
rules = st.builds(_rule, levels, st.sampled_from(ENTRY_TOOLS), st.sampled_from(MATCHERS))
arguments = st.one_of(
    st.just({}),
    st.builds(lambda c: {"command": c}, st.sampled_from(COMMANDS)),
    st.builds(lambda p: {"file_path": p}, st.sampled_from(["/repo/a", "Read"])),
)
calls = st.builds(
    Call,
    st.sampled_from(CALL_TOOLS),
    arguments,
    st.sampled_from(SESSIONS),
    st.sampled_from(WORKSPACES),
)


@st.composite
def grants(draw: st.DrawFn, call: Call | None = None) -> Grant:
    """A grant; with ``call``, one biased towards covering and applying to that call."""
    tools, sessions, workspaces, matchers = ENTRY_TOOLS, SESSIONS, GRANT_WORKSPACES, MATCHERS
    if call is not None:
        related = [
            call.tool_id,
            "*",
            *(["cli-native"] if _native(call.tool_id) else [call.tool_id.partition("__")[0]]),
        ]
        tools = related * 3 + ENTRY_TOOLS
        sessions = [None, None, call.session_id, "s1"]
        workspaces = [None, None, "/repo", "/other"]
        matchers = [None, "*", _subject(call), *MATCHERS]
    return Grant(
        id=draw(st.sampled_from(["g1", "g2", "g3", "g4"])),
        tool_id=draw(st.sampled_from(tools)),
        matcher=draw(st.sampled_from(matchers)),
        level=draw(levels),
        created_by="op",
        session_id=draw(st.sampled_from(sessions)),
        workspace=draw(st.sampled_from(workspaces)),
        expires_at=draw(st.sampled_from(INSTANTS)),
        max_uses=draw(st.sampled_from([None, None, 0, 1, 2])),
        uses=draw(st.integers(0, 2)),
        revoked_at=draw(st.sampled_from([None, None, None, NOW - timedelta(days=1)])),
    )


configured = st.none() | st.lists(rules, max_size=6).map(RuleSet.from_rules)


@st.composite
def policies(draw: st.DrawFn, call: Call | None = None) -> Policy:
    """A policy; with ``call``, its grants are biased towards applying to that call."""
    if call is None:
        return Policy(
            draw(configured), draw(st.lists(rules, max_size=6)), draw(st.lists(grants(), max_size=5))
        )
    related = [
        call.tool_id,
        "*",
        *(["cli-native"] if _native(call.tool_id) else [call.tool_id.partition("__")[0]]),
    ]
    related_rules = st.builds(
        _rule, levels, st.sampled_from(related), st.sampled_from([None, "*", _subject(call), *MATCHERS])
    )
    return Policy(
        draw(configured | st.lists(related_rules | rules, max_size=6).map(RuleSet.from_rules)),
        draw(st.lists(related_rules | rules, max_size=6)),
        draw(st.lists(live_grants(call) | grants(call) | grants(), max_size=5)),
    )


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Policy, Call]:
    call = draw(calls)
    return draw(policies(call)), call


@st.composite
def live_grants(draw: st.DrawFn, call: Call) -> Grant:
    """A grant that certainly applies to ``call`` (under its own or its legacy identity)."""
    tools = [call.tool_id, "*", *(["cli-native"] if _native(call.tool_id) else [])]
    return Grant(
        id=draw(st.sampled_from(["g1", "g2", "g9"])),
        tool_id=draw(st.sampled_from(tools)),
        matcher=draw(st.sampled_from([None, "*", _subject(call)])),
        level=draw(levels),
        created_by="op",
        session_id=draw(st.sampled_from([None, call.session_id])),
        workspace=draw(st.sampled_from([None, call.workspace])),
        expires_at=draw(st.sampled_from([None, NOW + timedelta(seconds=1)])),
        max_uses=draw(st.sampled_from([None, 3])),
        uses=draw(st.integers(0, 2)),
    )


# ------------------------------------------------------------------ the reference model


def _native(tool_id: str) -> bool:
    return tool_id.startswith("cli-native:")


def _subject(call: Call) -> str:
    for name in ("command", "path", "file_path", "filePath", "url", "query", "message"):
        if call.arguments.get(name):
            return str(call.arguments[name])
    if _native(call.tool_id):
        return call.tool_id[len("cli-native:") :]
    family, sep, action = call.tool_id.partition("__")
    return action if sep and family and action else call.tool_id


def _accepts(matcher: str | None, subject: str, level: Level = Level.ALLOW, command: bool = False) -> bool:
    if matcher in (None, "", "*"):
        return True
    assert matcher is not None
    # A ``command`` subject is matched per simple command (FACTS.md §3 as refined by the
    # per-command matching): a DENY or ASK also catches the command behind a wrapper such as
    # ``sudo``; an ALLOW never looks through one. Of COMMANDS, only "sudo ls" has a wrapper.
    candidates = [subject]
    if command and level is not Level.ALLOW and subject.startswith("sudo "):
        candidates.append(subject.removeprefix("sudo "))
    return any((c.startswith(matcher[:-2]) if matcher.endswith(":*") else c == matcher) for c in candidates)


def _is_command(call: Call) -> bool:
    return bool(call.arguments.get("command"))


def _own(entry_tool: str, call_tool: str) -> bool:
    if entry_tool in ("*", call_tool):
        return True
    if _native(call_tool):
        return False
    family, sep, action = call_tool.partition("__")
    return bool(sep and family and action) and entry_tool == family


def _tier(entry_tool: str, call: Call, builtin: bool) -> str | None:
    if _native(call.tool_id) and entry_tool == "cli-native":
        return "legacy"
    if _own(entry_tool, call.tool_id):
        return "defaults" if builtin else "new"
    return None


def _live(g: Grant, call: Call) -> bool:
    if g.revoked_at is not None:
        return False
    if g.expires_at is not None and g.expires_at <= NOW:
        return False
    if g.max_uses is not None and g.uses >= g.max_uses:
        return False
    if g.session_id is not None and g.session_id != call.session_id:
        return False
    if g.workspace is not None and call.workspace not in BELOW[g.workspace]:
        return False
    return _accepts(g.matcher, _subject(call), g.level, _is_command(call))


def _hits(policy: Policy, call: Call) -> list[tuple[str, Level, Grant | None]]:
    """Every applicable entry as (tier, level, grant or None)."""
    subject = _subject(call)
    out: list[tuple[str, Level, Grant | None]] = []
    for rule, builtin in [(r, False) for r in policy.stored] + [
        (r, policy.rules.builtin) for r in policy.rules.rules
    ]:
        tier = _tier(rule.tool_id, call, builtin)
        if tier is not None and _accepts(rule.matcher, subject, rule.level, _is_command(call)):
            out.append((tier, rule.level, None))
    for g in policy.grants:
        tier = _tier(g.tool_id, call, False)
        if tier is not None and _live(g, call):
            out.append((tier, g.level, g))
    return out


def _reference(policy: Policy, call: Call) -> tuple[Level, str]:
    hits = _hits(policy, call)
    deny = [tier for tier, level, _ in hits if level is Level.DENY]
    if deny:
        return Level.DENY, min(deny, key=["new", "legacy", "defaults"].index)
    for tier in ("new", "legacy", "defaults"):
        levels_here = {level for t, level, _ in hits if t == tier}
        if Level.ALLOW in levels_here:
            return Level.ALLOW, tier
        if Level.ASK in levels_here:
            return Level.ASK, tier
    return default_level(call.tool_id), "default-level"


def _without_denies(policy: Policy) -> Policy:
    kept = tuple(r for r in policy.rules.rules if r.level is not Level.DENY)
    return Policy(
        RuleSet(kept, builtin=policy.rules.builtin),
        [r for r in policy.stored if r.level is not Level.DENY],
        [g for g in policy.grants if g.level is not Level.DENY],
    )


# ------------------------------------------------------------------ properties


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_decision_matches_the_reference_model(scenario: tuple[Policy, Call]) -> None:
    policy, call = scenario
    d = call.decide(policy)
    assert (d.level, d.tier) == _reference(policy, call)
    # a grant's use is counted exactly when an ALLOW grant of the deciding tier let the call through
    allow_grants = [
        g
        for tier, level, g in _hits(policy, call)
        if g is not None and tier == d.tier and level is Level.ALLOW
    ]
    if d.level is Level.ALLOW and allow_grants:
        assert d.grant_id in {g.id for g in allow_grants} and d.source == "grant"
    else:
        assert d.grant_id is None
    if d.tier == "default-level":
        assert d.rule is None and d.source is None
    else:
        assert d.rule is not None and d.rule in d.explanation


@st.composite
def applicable_denies(draw: st.DrawFn, call: Call) -> tuple[list[Rule], list[Grant]]:
    """One DENY entry that certainly applies to ``call``, under its own or its legacy identity."""
    identities = ["*", call.tool_id] + (["cli-native"] if _native(call.tool_id) else [])
    tool_id = draw(st.sampled_from(identities))
    if draw(st.booleans()):
        return [_rule(Level.DENY, tool_id, draw(st.sampled_from([None, "*", _subject(call)])))], []
    g = Grant(
        id="deny",
        tool_id=tool_id,
        level=Level.DENY,
        created_by="op",
        matcher=_subject(call),
        session_id=call.session_id,
        workspace=call.workspace,
        expires_at=NOW + timedelta(minutes=1),
    )
    return [], [g]


@settings(max_examples=200, deadline=None)
@given(st.data(), scenarios())
def test_any_applicable_denial_under_either_identity_wins(
    data: st.DataObject, scenario: tuple[Policy, Call]
) -> None:
    policy, call = scenario
    extra_rules, extra_grants = data.draw(applicable_denies(call))
    where = data.draw(st.sampled_from(["stored", "configured", "grants"]))
    if where == "configured" and extra_rules and not policy.rules.builtin:
        policy = Policy(RuleSet.from_rules([*policy.rules.rules, *extra_rules]), policy.stored, policy.grants)
    else:
        policy = Policy(
            None if policy.rules.builtin else policy.rules,
            [*policy.stored, *extra_rules],
            [*policy.grants, *extra_grants],
        )
    d = call.decide(policy)
    assert d.level is Level.DENY and d.grant_id is None
    assert "a denial" in d.explanation


@settings(max_examples=200, deadline=None)
@given(scenarios(), st.sampled_from([Level.ALLOW, Level.ASK]), st.booleans())
def test_without_a_denial_a_new_tier_hit_decides(
    scenario: tuple[Policy, Call], level: Level, as_grant: bool
) -> None:
    policy, call = scenario
    policy = _without_denies(policy)
    if as_grant:
        policy = policy.with_entries(
            grants=[*policy.grants, Grant(id="new", tool_id=call.tool_id, level=level, created_by="op")]
        )
    else:
        policy = policy.with_entries(stored=[*policy.stored, _rule(level, call.tool_id, None)])
    d = call.decide(policy)
    assert d.tier == "new"
    new_levels = {lv for tier, lv, _ in _hits(policy, call) if tier == "new"}
    assert d.level is (Level.ALLOW if Level.ALLOW in new_levels else Level.ASK)
    if level is Level.ALLOW:
        assert d.level is Level.ALLOW


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(READ_ONLY_CLI_TOOLS),
    arguments,
    st.lists(rules, max_size=6),
    st.lists(grants(), max_size=5),
    st.booleans(),
)
def test_without_denial_or_new_hit_a_legacy_ask_beats_the_read_tool_defaults(
    tool: str, args: dict[str, Any], stored: list[Rule], grant_list: list[Grant], as_grant: bool
) -> None:
    call = Call(f"cli-native:{tool}", args, "s1", "/repo")
    assert RuleSet.defaults().level_for(call.tool_id, args) is Level.ALLOW  # the defaults allow it
    # keep only entries that neither deny, nor hit the new tier, nor allow under the legacy identity
    stored = [r for r in stored if r.level is Level.ASK or _tier(r.tool_id, call, False) is None]
    grant_list = [g for g in grant_list if g.level is Level.ASK or _tier(g.tool_id, call, False) is None]
    stored = [r for r in stored if _tier(r.tool_id, call, False) != "new"]
    grant_list = [g for g in grant_list if _tier(g.tool_id, call, False) != "new"]
    if as_grant:
        grant_list.append(
            Grant(id="legacy", tool_id="cli-native", level=Level.ASK, created_by="op", max_uses=1)
        )
    else:
        stored.append(_rule(Level.ASK, "cli-native", None))
    d = call.decide(Policy(None, stored, grant_list))
    assert (d.level, d.tier, d.grant_id) == (Level.ASK, "legacy", None)


def _make_inapplicable(g: Grant, how: str, call: Call) -> Grant:
    if how == "expired":
        return replace(g, expires_at=NOW - timedelta(seconds=1))
    if how == "expires-now":
        return replace(g, expires_at=NOW)
    if how == "used-up":
        return replace(g, max_uses=g.uses)
    if how == "revoked":
        return replace(g, revoked_at=NOW - timedelta(hours=1))
    assert how == "wrong-session"
    return replace(g, session_id=f"not-{call.session_id}")


@settings(max_examples=250, deadline=None)
@given(
    st.data(),
    scenarios(),
    st.sampled_from(["expired", "expires-now", "used-up", "revoked", "wrong-session"]),
)
def test_an_inapplicable_grant_never_changes_the_decision(
    data: st.DataObject, scenario: tuple[Policy, Call], how: str
) -> None:
    policy, call = scenario
    g = data.draw(live_grants(call))
    assert g.applies(
        call.tool_id, _subject(call), session_id=call.session_id, workspace=call.workspace, now=NOW
    )
    dead = _make_inapplicable(g, how, call)
    assert not dead.applies(
        call.tool_id, _subject(call), session_id=call.session_id, workspace=call.workspace, now=NOW
    )
    with_dead = policy.with_entries(grants=[*policy.grants, dead])
    assert call.decide(with_dead) == call.decide(policy)


@settings(max_examples=300, deadline=None)
@given(st.data(), scenarios())
def test_decisions_are_deterministic_and_independent_of_grant_order(
    data: st.DataObject, scenario: tuple[Policy, Call]
) -> None:
    policy, call = scenario
    policy = policy.with_entries(grants=[*policy.grants, *data.draw(st.lists(live_grants(call), max_size=3))])
    first = call.decide(policy)
    assert call.decide(policy) == first
    shuffled = data.draw(st.permutations(list(policy.grants)))
    assert call.decide(policy.with_entries(grants=shuffled)) == first
    reversed_policy = Policy(
        None if policy.rules.builtin else policy.rules, policy.stored, policy.grants[::-1]
    )
    assert call.decide(reversed_policy) == first
    explained = policy.explain(
        call.tool_id, call.arguments, session_id=call.session_id, workspace=call.workspace, now=NOW
    )
    assert explained["decision"]["level"] == first.level.value
    assert explained["decision"]["explanation"] == first.explanation
    chosen = [c for tier in explained["tiers"].values() for c in tier if c["chosen"]]
    assert len(chosen) == (0 if first.tier == "default-level" else 1)


@settings(max_examples=200, deadline=None)
@given(st.data(), scenarios())
def test_the_decided_level_does_not_depend_on_stored_rule_order(
    data: st.DataObject, scenario: tuple[Policy, Call]
) -> None:
    policy, call = scenario
    shuffled = data.draw(st.permutations(list(policy.stored)))
    a, b = call.decide(policy), call.decide(policy.with_entries(stored=shuffled))
    assert (a.level, a.tier, a.grant_id) == (b.level, b.tier, b.grant_id)


@settings(max_examples=300, deadline=None)
@given(st.data(), scenarios(), st.booleans())
def test_an_allow_grant_is_counted_rather_than_an_equal_allow_rule(
    data: st.DataObject, scenario: tuple[Policy, Call], legacy: bool
) -> None:
    policy, call = scenario
    identity = "cli-native" if legacy and _native(call.tool_id) else call.tool_id
    policy = _without_denies(policy)
    # clear the tiers above the one under test, so the ALLOW lands in the tier that decides
    if identity == "cli-native":
        policy = Policy(
            RuleSet(
                tuple(r for r in policy.rules.rules if _tier(r.tool_id, call, False) != "new"),
                policy.rules.builtin,
            ),
            [r for r in policy.stored if _tier(r.tool_id, call, False) != "new"],
            [g for g in policy.grants if _tier(g.tool_id, call, False) != "new"],
        )
    g = replace(data.draw(live_grants(call)), tool_id=identity, level=Level.ALLOW)
    policy = policy.with_entries(
        stored=[_rule(Level.ALLOW, identity, None), *policy.stored], grants=[*policy.grants, g]
    )
    d = call.decide(policy)
    assert d.level is Level.ALLOW and d.source == "grant" and d.grant_id is not None
    assert any(
        x.id == d.grant_id
        and x.level is Level.ALLOW
        and x.applies(
            call.tool_id, _subject(call), session_id=call.session_id, workspace=call.workspace, now=NOW
        )
        for x in policy.grants
    )


def test_the_workspace_condition_agrees_with_the_reference_on_every_pair() -> None:
    for root in BELOW:
        for workspace in WORKSPACES:
            g = Grant(id="w", tool_id="server.tool", level=Level.ALLOW, created_by="op", workspace=root)
            applies = g.applies("server.tool", "x", session_id=None, workspace=workspace, now=NOW)
            assert applies is (workspace in BELOW[root]), (root, workspace)
