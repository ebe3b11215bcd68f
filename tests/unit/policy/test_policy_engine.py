"""The precedence engine (seed 003 "Permissions and limits", FACTS.md §3): concrete cases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from octipusd.policy.engine import Policy, PolicyDecision
from octipusd.policy.grants import Grant, grant_order_key, workspace_contains
from octipusd.policy.rules import LEGACY_CLI_NATIVE_ID, Level, Rule, RuleSet, legacy_identity, parse_rule

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def allow(text: str) -> Rule:
    return parse_rule(text, Level.ALLOW)


def ask(text: str) -> Rule:
    return parse_rule(text, Level.ASK)


def deny(text: str) -> Rule:
    return parse_rule(text, Level.DENY)


def grant(tool_id: str, matcher: str | None = None, level: Level = Level.ALLOW, **kw: Any) -> Grant:
    kw.setdefault("id", "g1")
    kw.setdefault("created_by", "alice")
    return Grant(tool_id=tool_id, matcher=matcher, level=level, **kw)


def bash(command: str) -> dict[str, Any]:
    return {"command": command}


def decide(policy: Policy, tool_id: str, arguments: dict[str, Any], **kw: Any) -> PolicyDecision:
    kw.setdefault("now", NOW)
    return policy.decide(tool_id, arguments, **kw)


# ------------------------------------------------------------------ existing callers


def test_identities() -> None:
    assert legacy_identity("cli-native:Bash") == LEGACY_CLI_NATIVE_ID == "cli-native"
    assert legacy_identity("cli-native") is None
    assert legacy_identity("shell__run") is None
    assert legacy_identity("server.tool") is None


def test_from_setting_none_keeps_the_builtin_behaviour() -> None:
    policy = Policy.from_setting(None)
    assert policy.rules.builtin and policy.rules == RuleSet.defaults()
    read = policy.decide("cli-native:Read", {"file_path": "/etc/hosts"}, action="Read")
    assert read == PolicyDecision(
        Level.ALLOW,
        "allow by rule cli-native:Read(*) (built-in default)",
        tier="defaults",
        rule="cli-native:Read(*)",
        source="built-in",
    )
    bash_call = policy.decide("cli-native:Bash", bash("ls"))
    assert (bash_call.level, bash_call.tier, bash_call.rule, bash_call.grant_id) == (
        Level.ASK,
        "default-level",
        None,
        None,
    )
    assert bash_call.explanation == "ask by the default level of cli-native:Bash (no rule matched)"
    assert policy.decide("get_work_plan", {}).level is Level.ALLOW
    mkfs = policy.decide("shell__run", bash("mkfs /dev/sda"))
    assert mkfs.level is Level.DENY and mkfs.tier == "defaults" and mkfs.rule == "shell(mkfs:*)"


def test_positional_ruleset_constructor_and_positional_decision_still_work() -> None:
    policy = Policy(RuleSet.from_setting({"allow": ["shell(git:*)"]}))
    decision = PolicyDecision(Level.ASK, "why")
    assert (decision.level, decision.explanation, decision.tier) == (Level.ASK, "why", "default-level")
    assert not policy.rules.builtin
    assert policy.decide("shell__run", {"command": "git log"}).explanation == (
        "allow by rule shell(git:*) (permissions.rules)"
    )


def test_policy_without_arguments_uses_the_defaults() -> None:
    assert Policy().rules == RuleSet.defaults()
    assert Policy(RuleSet.defaults()).decide("cli-native:Grep", {}).tier == "defaults"


# ------------------------------------------------------------------ seed 003, sentence by sentence


def test_default_rule_set_allows_read_only_tools_everything_else_asks() -> None:
    policy = Policy()
    for tool in ("Read", "Glob", "Grep", "LS", "NotebookRead", "WebFetch", "WebSearch", "TodoWrite"):
        assert decide(policy, f"cli-native:{tool}", {}).level is Level.ALLOW
    for tool in ("Bash", "Edit", "Write", "mcp__other__tool"):
        assert decide(policy, f"cli-native:{tool}", {}).level is Level.ASK


def test_operator_rules_replace_the_defaults_and_can_add_per_tool_entries() -> None:
    assert decide(Policy.from_setting({}), "cli-native:Read", {}).tier == "default-level"
    policy = Policy.from_setting({"allow": ["cli-native:Read(*)"]})
    d = decide(policy, "cli-native:Read", {"file_path": "/x"})
    assert (d.level, d.tier, d.source) == (Level.ALLOW, "new", "configured")
    assert decide(policy, "cli-native:Grep", {}).level is Level.ASK


def test_rules_match_arguments() -> None:
    policy = Policy.from_setting({"allow": ["cli-native:Bash(git:*)"]})
    git = decide(policy, "cli-native:Bash", bash("git status"))
    assert (git.level, git.rule) == (Level.ALLOW, "cli-native:Bash(git:*)")
    assert decide(policy, "cli-native:Bash", bash("rm -rf x")).level is Level.ASK


def test_a_legacy_denial_wins_over_a_per_tool_allow() -> None:
    policy = Policy.from_setting({"allow": ["cli-native:Bash(*)"]}, stored=[deny("cli-native(rm:*)")])
    d = decide(policy, "cli-native:Bash", bash("rm -rf /tmp/x"))
    assert (d.level, d.tier, d.rule, d.source) == (Level.DENY, "legacy", "cli-native(rm:*)", "stored")
    assert d.explanation == (
        "deny by rule cli-native(rm:*) (stored rule, legacy cli-native identity; "
        "a denial under either identity wins)"
    )
    assert decide(policy, "cli-native:Bash", bash("ls")).level is Level.ALLOW


def test_a_per_tool_denial_wins_over_a_legacy_allow() -> None:
    policy = Policy.from_setting({"allow": ["cli-native"]}, stored=[deny("cli-native:Bash(rm:*)")])
    d = decide(policy, "cli-native:Bash", bash("rm -rf /"))
    assert d.level is Level.DENY and d.tier == "new"
    assert (
        d.explanation
        == "deny by rule cli-native:Bash(rm:*) (stored rule; a denial under either identity wins)"
    )
    assert decide(policy, "cli-native:Edit", {"file_path": "/a"}).level is Level.ALLOW


def test_a_legacy_deny_grant_wins_over_a_per_tool_allow_grant() -> None:
    policy = Policy(
        grants=[
            grant("cli-native:Bash", id="new"),
            grant("cli-native", "curl:*", Level.DENY, id="old"),
        ]
    )
    d = decide(policy, "cli-native:Bash", bash("curl evil"))
    assert (d.level, d.tier, d.grant_id, d.source) == (Level.DENY, "legacy", None, "grant")
    assert "grant old cli-native(curl:*)" in d.explanation
    assert decide(policy, "cli-native:Bash", bash("ls")).grant_id == "new"


def test_legacy_scoped_grants_keep_their_conditions_expiry_and_usage_limits() -> None:
    legacy = grant(
        "cli-native",
        "git:*",
        id="legacy-1",
        session_id="s1",
        workspace="/repo",
        expires_at=NOW + timedelta(hours=1),
        max_uses=3,
        uses=2,
    )
    policy = Policy.from_setting({}, grants=[legacy])
    ok = dict(session_id="s1", workspace="/repo/sub")
    d = decide(policy, "cli-native:Bash", bash("git push"), **ok)
    assert (d.level, d.tier, d.grant_id) == (Level.ALLOW, "legacy", "legacy-1")
    assert (
        "grant legacy-1 cli-native(git:*)" in d.explanation and "legacy cli-native identity" in d.explanation
    )
    refused = [
        decide(policy, "cli-native:Bash", bash("git push"), session_id="s2", workspace="/repo"),
        decide(policy, "cli-native:Bash", bash("git push"), session_id="s1", workspace="/elsewhere"),
        decide(policy, "cli-native:Bash", bash("git push"), session_id=None, workspace="/repo"),
        decide(policy, "cli-native:Bash", bash("git push"), **ok, now=NOW + timedelta(hours=1)),
        decide(
            policy.with_entries(grants=[_replace(legacy, uses=3)]), "cli-native:Bash", bash("git push"), **ok
        ),
        decide(
            policy.with_entries(grants=[_replace(legacy, revoked_at=NOW)]),
            "cli-native:Bash",
            bash("git"),
            **ok,
        ),
        decide(policy, "cli-native:Bash", bash("rm x"), **ok),
    ]
    for d in refused:
        assert (d.level, d.tier, d.grant_id) == (Level.ASK, "default-level", None)


def test_a_per_tool_ask_takes_precedence_over_a_legacy_allow() -> None:
    policy = Policy(stored=[allow("cli-native"), ask("cli-native:Bash")])
    d = decide(policy, "cli-native:Bash", bash("ls"))
    assert (d.level, d.tier, d.rule) == (Level.ASK, "new", "cli-native:Bash")
    assert d.explanation == (
        "ask by rule cli-native:Bash (stored rule; takes precedence over the legacy cli-native policy "
        "allow by rule cli-native)"
    )
    assert decide(policy, "cli-native:Edit", {}).level is Level.ALLOW


def test_a_per_tool_allow_takes_precedence_over_a_legacy_ask() -> None:
    policy = Policy.from_setting({"allow": ["cli-native:Bash(git:*)"], "ask": ["cli-native"]})
    assert decide(policy, "cli-native:Bash", bash("git status")).tier == "new"
    assert decide(policy, "cli-native:Bash", bash("git status")).level is Level.ALLOW
    legacy = decide(policy, "cli-native:Bash", bash("make"))
    assert (legacy.level, legacy.tier, legacy.source) == (Level.ASK, "legacy", "configured")


def test_a_legacy_ask_takes_precedence_over_the_read_tool_defaults() -> None:
    assert decide(Policy(), "cli-native:Read", {"file_path": "/a"}).level is Level.ALLOW
    policy = Policy(stored=[ask("cli-native")])
    d = decide(policy, "cli-native:Read", {"file_path": "/a"})
    assert (d.level, d.tier, d.rule) == (Level.ASK, "legacy", "cli-native")
    assert d.explanation == (
        "ask by rule cli-native (stored rule, legacy cli-native identity; takes precedence over the "
        "built-in default allow by rule cli-native:Read(*))"
    )
    # a legacy ASK grant likewise
    g = Policy(grants=[grant("cli-native", None, Level.ASK)])
    assert decide(g, "cli-native:WebFetch", {"url": "https://x"}).level is Level.ASK


def test_a_per_tool_stored_allow_beats_a_legacy_ask_under_the_defaults() -> None:
    policy = Policy(stored=[ask("cli-native"), allow("cli-native:Read(/home/*)")])
    assert decide(policy, "cli-native:Read", {"file_path": "/home/me"}).level is Level.ASK  # exact matcher
    policy = Policy(stored=[ask("cli-native"), allow("cli-native:Read(/home/:*)")])
    d = decide(policy, "cli-native:Read", {"file_path": "/home/me"})
    assert (d.level, d.tier) == (Level.ALLOW, "new")


# ------------------------------------------------------------------ sources, `*`, families


def test_a_stored_deny_wins_over_a_configured_allow() -> None:
    policy = Policy.from_setting({"allow": ["shell(*)"]}, stored=[deny("shell__run(rm:*)")])
    d = decide(policy, "shell__run", bash("rm -rf build"))
    assert (d.level, d.source) == (Level.DENY, "stored")
    assert d.explanation == "deny by rule shell__run(rm:*) (stored rule; a denial wins)"
    assert decide(policy, "shell__run", bash("make")).level is Level.ALLOW


def test_a_builtin_default_deny_wins_over_a_stored_allow() -> None:
    policy = Policy(stored=[allow("shell__run")])
    d = decide(policy, "shell__run", bash("mkfs.ext4 /dev/sdb"))
    assert (d.level, d.tier, d.source) == (Level.DENY, "defaults", "built-in")
    assert decide(policy, "shell__run", bash("sudo ls")).tier == "new"  # stored allow beats default ask


def test_star_tool_id_covers_every_tool_in_the_new_tier() -> None:
    policy = Policy(stored=[deny("*(secret:*)"), allow("*")])
    for tool_id in ("cli-native:Bash", "shell__run", "server.tool", "cli-native"):
        assert decide(policy, tool_id, bash("secret stuff")).level is Level.DENY
        d = decide(policy, tool_id, bash("ok"))
        assert (d.level, d.tier) == (Level.ALLOW, "new")
    # `*` is per-tool, not legacy: it beats a legacy ASK
    assert (
        decide(policy.with_entries(stored=[ask("cli-native"), allow("*")]), "cli-native:Read", {}).tier
        == "new"
    )


def test_legacy_entries_do_not_touch_other_tools() -> None:
    policy = Policy.from_setting({}, stored=[deny("cli-native")], grants=[grant("cli-native")])
    assert decide(policy, "shell__run", bash("ls")).tier == "default-level"
    assert decide(policy, "server.tool", {}).tier == "default-level"
    assert decide(policy, "cli-native:Anything", {}).level is Level.DENY
    # the bare id `cli-native` is a tool id of its own, with one identity
    bare = decide(policy, "cli-native", {})
    assert (bare.level, bare.tier) == (Level.DENY, "new")
    assert bare.explanation.endswith("(stored rule; a denial wins)")


def test_family_rules_and_grants() -> None:
    policy = Policy.from_setting({}, grants=[grant("shell", "make:*", id="fam")])
    d = decide(policy, "shell__run", bash("make test"))
    assert (d.level, d.grant_id) == (Level.ALLOW, "fam")
    assert decide(policy, "filesystem__read", {"command": "make"}).tier == "default-level"


# ------------------------------------------------------------------ grants


def test_an_allow_grant_is_preferred_over_an_allow_rule_so_its_use_is_counted() -> None:
    policy = Policy(
        stored=[allow("cli-native:Bash(git:*)")], grants=[grant("cli-native:Bash", "git:*", id="g7")]
    )
    d = decide(policy, "cli-native:Bash", bash("git status"))
    assert (d.level, d.grant_id, d.source, d.rule) == (Level.ALLOW, "g7", "grant", "cli-native:Bash(git:*)")
    assert d.explanation == "allow by grant g7 cli-native:Bash(git:*) (scoped grant by alice)"


def test_a_deny_or_ask_grant_carries_no_use_to_count() -> None:
    policy = Policy.from_setting({}, grants=[grant("server.tool", level=Level.ASK, id="a")])
    d = decide(policy, "server.tool", {})
    assert (d.level, d.grant_id, d.source) == (Level.ASK, None, "grant")
    policy = Policy.from_setting({}, grants=[grant("server.tool", level=Level.DENY, id="d")])
    assert decide(policy, "server.tool", {}).grant_id is None


def test_a_grant_allow_loses_to_any_deny_and_within_its_tier_beats_ask() -> None:
    policy = Policy(stored=[ask("cli-native:Bash")], grants=[grant("cli-native:Bash")])
    assert decide(policy, "cli-native:Bash", bash("x")).level is Level.ALLOW
    policy = policy.with_entries(stored=[deny("cli-native(x)")])
    assert decide(policy, "cli-native:Bash", bash("x")).level is Level.DENY


def test_grant_expiry_is_exclusive_at_the_instant() -> None:
    g = grant("server.tool", expires_at=NOW)
    policy = Policy.from_setting({}, grants=[g])
    assert decide(policy, "server.tool", {}, now=NOW - timedelta(microseconds=1)).grant_id == "g1"
    assert decide(policy, "server.tool", {}, now=NOW).grant_id is None


def test_grant_usage_limit() -> None:
    for uses, max_uses, live in [(0, 1, True), (1, 1, False), (4, 5, True), (0, 0, False), (99, None, True)]:
        g = grant("server.tool", uses=uses, max_uses=max_uses)
        assert g.applies("server.tool", "tool", session_id=None, workspace=None, now=NOW) is live
        assert g.remaining_uses == (None if max_uses is None else max(max_uses - uses, 0))


def test_a_revoked_grant_never_applies_even_if_revoked_later() -> None:
    g = grant("server.tool", revoked_at=NOW + timedelta(days=1))
    assert g.inapplicable_reason("server.tool", "x", session_id=None, workspace=None, now=NOW) == (
        f"revoked at {(NOW + timedelta(days=1)).isoformat()}"
    )


@pytest.mark.parametrize(
    ("call_workspace", "applies"),
    [
        ("/repo", True),
        ("/repo/", True),
        ("/repo/src/pkg", True),
        ("/repo/a/../b", True),
        ("/repository", False),
        ("/repo/../etc", False),
        ("/", False),
        (None, False),
    ],
)
def test_grant_workspace_condition(call_workspace: str | None, applies: bool) -> None:
    g = grant("server.tool", workspace="/repo")
    assert g.applies("server.tool", "x", session_id=None, workspace=call_workspace, now=NOW) is applies


def test_workspace_contains() -> None:
    assert workspace_contains("/", "/anything")
    assert workspace_contains("/a/b/", "/a/b/c")
    assert not workspace_contains("/a/b", "/a/bc")


def test_grant_session_condition() -> None:
    g = grant("server.tool", session_id="s1")
    assert g.applies("server.tool", "x", session_id="s1", workspace=None, now=NOW)
    assert not g.applies("server.tool", "x", session_id="s2", workspace=None, now=NOW)
    assert not g.applies("server.tool", "x", session_id=None, workspace=None, now=NOW)


def test_grant_covers_and_matches() -> None:
    g = grant("cli-native", "git:*")
    assert g.is_legacy and g.covers("cli-native:Bash") and not g.covers("shell__run")
    assert g.covers("cli-native")  # the bare id is a tool id of its own: covered exactly
    assert g.applies("cli-native:Bash", "gitk", session_id=None, workspace=None, now=NOW)
    assert not g.applies("cli-native:Bash", "hg", session_id=None, workspace=None, now=NOW)
    assert not grant("cli-native:Bash").covers("cli-native:Read")
    assert grant("*").covers("server.tool")


def test_grant_validation() -> None:
    naive = datetime(2026, 1, 1)
    with pytest.raises(ValueError, match="expires_at must be a timezone-aware"):
        grant("x", expires_at=naive)
    with pytest.raises(ValueError, match="revoked_at must be a timezone-aware"):
        grant("x", revoked_at=naive)
    with pytest.raises(ValueError, match="max_uses must be >= 0"):
        grant("x", max_uses=-1)
    with pytest.raises(ValueError, match="uses must be >= 0"):
        grant("x", uses=-1)
    with pytest.raises(ValueError, match="tool id"):
        grant("shell run")
    with pytest.raises(ValueError, match="unknown level"):
        grant("x", level="maybe")  # type: ignore[arg-type]
    assert grant("x", level="deny").level is Level.DENY  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="now must be a timezone-aware"):
        grant("x").applies("x", "x", session_id=None, workspace=None, now=naive)
    with pytest.raises(ValueError, match="now must be a timezone-aware"):
        Policy().decide("x", {}, now=naive)


def test_grant_describe() -> None:
    g = grant(
        "cli-native:Bash",
        "git:*",
        id="g9",
        session_id="s1",
        workspace="/repo",
        expires_at=NOW,
        max_uses=3,
        uses=1,
        note="release week",
    )
    assert g.describe() == (
        "grant g9 allow cli-native:Bash(git:*) [session s1; in /repo; until 2026-03-01T12:00:00+00:00; "
        "2 of 3 uses left; by alice; note: release week]"
    )
    assert grant("server.tool").describe() == "grant g1 allow server.tool [by alice]"


def test_an_unlimited_grant_is_used_before_a_limited_one_whatever_the_order() -> None:
    limited = grant("server.tool", id="a", max_uses=1)
    unlimited = grant("server.tool", id="z")
    for order in ([limited, unlimited], [unlimited, limited]):
        assert decide(Policy(grants=order), "server.tool", {}).grant_id == "z"
    assert sorted([limited, unlimited], key=grant_order_key) == [unlimited, limited]


# ------------------------------------------------------------------ immutability, explain


def test_with_entries_returns_a_new_policy() -> None:
    base = Policy.from_setting({"ask": ["cli-native"]}, stored=[allow("x")], grants=[grant("y")])
    fresh = base.with_entries(stored=[deny("cli-native:Bash")])
    assert fresh is not base and fresh.rules is base.rules
    assert fresh.stored == (deny("cli-native:Bash"),) and fresh.grants == base.grants
    assert base.stored == (allow("x"),)
    assert decide(base, "cli-native:Bash", {}).level is Level.ASK
    assert decide(fresh, "cli-native:Bash", {}).level is Level.DENY
    assert base.with_entries(grants=[]).grants == () and base.with_entries(grants=[]).stored == base.stored
    assert "1 stored" in repr(base)


def test_explain_lists_every_candidate_per_tier() -> None:
    policy = Policy(
        stored=[ask("cli-native"), deny("cli-native:Bash(rm:*)"), allow("shell")],
        grants=[
            grant("cli-native:Bash", "git:*", id="live"),
            grant("cli-native", id="expired", expires_at=NOW - timedelta(seconds=1)),
            grant("server.tool", id="other"),
        ],
    )
    out = policy.explain("cli-native:Bash", bash("git status"), session_id="s1", workspace="/w", now=NOW)
    assert out["identities"] == ["cli-native:Bash", "cli-native"]
    assert out["subject"] == "git status" and out["now"] == NOW.isoformat()
    assert out["configured"] == "built-in defaults" and out["default_level"] == "ask"
    new = out["tiers"]["new"]
    assert [(c["kind"], c["text"], c["applies"], c["chosen"]) for c in new] == [
        ("rule", "cli-native:Bash(rm:*)", False, False),
        ("grant", "cli-native:Bash(git:*)", True, True),
    ]
    assert new[0]["reason"] == "matcher 'rm:*' does not accept 'git status'"
    legacy = out["tiers"]["legacy"]
    assert [(c["source"], c["text"], c["applies"]) for c in legacy] == [
        ("stored", "cli-native", True),
        ("grant", "cli-native", False),
    ]
    assert legacy[1]["reason"].startswith("expired at") and legacy[1]["grant_id"] == "expired"
    assert legacy[0]["identity"] == "cli-native"
    assert out["tiers"]["defaults"] == []  # no built-in rule covers cli-native:Bash
    assert out["decision"]["level"] == "allow" and out["decision"]["grant_id"] == "live"
    assert out["decision"]["tier"] == "new"
    assert out["decision"] == {
        k: v.value if isinstance(v, Level) else v
        for k, v in vars(
            policy.decide("cli-native:Bash", bash("git status"), session_id="s1", workspace="/w", now=NOW)
        ).items()
    }


def test_explain_without_a_hit() -> None:
    out = Policy.from_setting({}).explain("server.tool", {}, now=NOW)
    assert out["tiers"] == {"new": [], "legacy": [], "defaults": []}
    assert out["decision"]["tier"] == "default-level" and out["decision"]["rule"] is None


def _replace(g: Grant, **changes: Any) -> Grant:
    from dataclasses import replace

    return replace(g, **changes)


# ------------------------------------------------------------------ native denials (for the CLI's deny list)


def test_native_denials_collects_every_native_deny_in_order() -> None:
    policy = Policy.from_setting(
        {
            "deny": ["cli-native:Bash(rm:*)", "shell(rm:*)", "cli-native:Read(/w/.env)"],
            "allow": ["cli-native:Edit"],
        },
        stored=[
            deny("cli-native:Write"),
            allow("cli-native:Bash"),
            deny("cli-native:Bash(rm:*)"),
            ask("cli-native:Edit"),
        ],
        grants=[grant("cli-native:WebFetch", "https://x.test/:*", Level.DENY, id="g2")],
    )
    # stored first, then permissions.rules, then grants; duplicates once; other levels and tools left out
    assert policy.native_denials(now=NOW) == [
        "Write",
        "Bash(rm:*)",
        "Read(/w/.env)",
        "WebFetch(https://x.test/:*)",
    ]


def test_native_denials_matcher_forms_and_every_tool_ids() -> None:
    policy = Policy.from_setting(
        {},
        stored=[
            deny("cli-native:Bash(*)"),
            deny("cli-native:Read()"),
            deny("cli-native:Edit(/w/a.txt)"),
            deny("cli-native"),
            deny("cli-native(rm:*)"),
            deny("*"),
            deny("*(/etc/:*)"),
            deny("shell__run"),
            deny("shell"),
            deny("server.tool"),
        ],
    )
    assert policy.native_denials(now=NOW) == ["Bash", "Read", "Edit(/w/a.txt)", "*", "*(rm:*)", "*(/etc/:*)"]


def test_native_denials_are_what_decide_denies() -> None:
    # every text names a call decide() denies: the list never claims more than the relay enforces
    policy = Policy.from_setting(None, stored=[deny("cli-native:Bash(rm:*)"), deny("cli-native(/etc/:*)")])
    assert policy.native_denials(now=NOW) == ["Bash(rm:*)", "*(/etc/:*)"]
    assert decide(policy, "cli-native:Bash", bash("rmdir d")).level is Level.DENY
    assert decide(policy, "cli-native:Read", {"file_path": "/etc/passwd"}).level is Level.DENY
    assert decide(policy, "cli-native:Read", {"file_path": "/w/x"}).level is Level.ALLOW


def test_native_denials_without_native_denies() -> None:
    assert Policy.from_setting(None).native_denials(now=NOW) == []  # the built-in defaults deny shell only
    assert Policy.from_setting({}).native_denials() == []


def test_native_denials_apply_only_grants_in_force() -> None:
    later, earlier = NOW + timedelta(hours=1), NOW - timedelta(hours=1)
    grants = [
        grant("cli-native:Bash", "a:*", Level.DENY, id="live"),
        grant("cli-native:Bash", "b:*", Level.DENY, id="revoked", revoked_at=earlier),
        grant("cli-native:Bash", "c:*", Level.DENY, id="expired", expires_at=NOW),
        grant("cli-native:Bash", "d:*", Level.DENY, id="not-yet-expired", expires_at=later),
        grant("cli-native:Bash", "e:*", Level.DENY, id="used-up", max_uses=2, uses=2),
        grant("cli-native:Bash", "f:*", Level.DENY, id="uses-left", max_uses=2, uses=1),
        grant("cli-native:Bash", "g:*", Level.DENY, id="my-session", session_id="s1"),
        grant("cli-native:Bash", "h:*", Level.DENY, id="other-session", session_id="s2"),
        grant("cli-native:Bash", "i:*", Level.DENY, id="my-workspace", workspace="/repo"),
        grant("cli-native:Bash", "j:*", Level.DENY, id="other-workspace", workspace="/repository"),
        grant("cli-native", None, Level.DENY, id="legacy", session_id="s1"),
        grant("cli-native:Bash", "k:*", Level.ALLOW, id="allow"),
        grant("shell", None, Level.DENY, id="octipus-tool"),
    ]
    policy = Policy.from_setting({}, grants=grants)
    got = policy.native_denials(session_id="s1", workspace="/repo/sub", now=NOW)
    assert sorted(got) == sorted(["Bash(a:*)", "Bash(d:*)", "Bash(f:*)", "Bash(g:*)", "Bash(i:*)", "*"])
    # without a session or a workspace, grants scoped to one do not apply
    assert sorted(policy.native_denials(now=NOW)) == sorted(["Bash(a:*)", "Bash(d:*)", "Bash(f:*)"])
    # each grant kept is one decide() applies to a matching call of the same session and workspace
    for text in got:
        if text.startswith("Bash("):
            command = text[len("Bash(") : -len(":*)")] + " x"
            assert (
                decide(policy, "cli-native:Bash", bash(command), session_id="s1", workspace="/repo/sub").level
                is Level.DENY
            )


def test_native_denials_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        Policy.from_setting({}).native_denials(now=datetime(2026, 3, 1, 12, 0))
