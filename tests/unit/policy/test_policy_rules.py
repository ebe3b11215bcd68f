"""Permission rules (FACTS.md §3): parsing, matching, evaluation order, defaults."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from octipusd.errors import RuleSyntaxError
from octipusd.policy.native import READ_ONLY_CLI_TOOLS
from octipusd.policy.rules import (
    DEFAULT_RULES,
    SUBJECT_FIELDS,
    Level,
    Match,
    Rule,
    RuleSet,
    default_action,
    default_level,
    family_of,
    parse_rule,
    subject_of,
)

# ------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("text", "tool_id", "matcher"),
    [
        ("shell(git:*)", "shell", "git:*"),
        ("shell", "shell", None),
        ("*", "*", None),
        ("*(*)", "*", "*"),
        ("filesystem()", "filesystem", ""),
        ("cli-native:Read(*)", "cli-native:Read", "*"),
        ("cli-native:Bash(git:*)", "cli-native:Bash", "git:*"),
        ("shell(:(){ :|:& };:)", "shell", ":(){ :|:& };:"),
        ("shell(:(){ :|:&};:)", "shell", ":(){ :|:&};:"),
        ("shell(echo (a) (b))", "shell", "echo (a) (b)"),
        ("  shell ( git status )  ", "shell", "git status"),
        ("shell(rm -rf /:*)", "shell", "rm -rf /:*"),
        ("mcp__octipus__get_work_plan", "mcp__octipus__get_work_plan", None),
    ],
)
def test_parse_rule(text: str, tool_id: str, matcher: str | None) -> None:
    rule = parse_rule(text, Level.DENY)
    assert rule == Rule(level=Level.DENY, tool_id=tool_id, matcher=matcher, text=text)


def test_parse_rule_accepts_level_strings() -> None:
    assert parse_rule("shell", "ask").level is Level.ASK


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("(git:*)", "no tool id"),
        ("shell(git:*", "without a closing"),
        ("shell)(", "without a closing"),
        ("shell(x) y", "after its last"),
        ("sh ell", "spaces"),
        ("shell)", "spaces or ')'"),
    ],
)
def test_parse_rule_errors(text: str, message: str) -> None:
    with pytest.raises(RuleSyntaxError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        parse_rule(text, Level.ALLOW)
    if text.strip():
        assert repr(text) in str(info.value)


def test_parse_rule_bad_level() -> None:
    with pytest.raises(RuleSyntaxError, match="'shell' does not parse: unknown rule level") as info:
        parse_rule("shell", "maybe")
    assert info.value.code == "invalid_request"


# ------------------------------------------------------------------ matchers


@pytest.mark.parametrize(
    ("matcher", "subject", "hit"),
    [
        (None, "anything", True),
        ("", "anything", True),
        ("*", "", True),
        ("git:*", "git status", True),
        ("git:*", "gitk", True),  # plain prefix, no word boundary
        ("git:*", "git", True),
        ("git:*", " git status", False),
        ("git:*", "GIT status", False),
        ("git status", "git status", True),
        ("git status", "git status --short", False),
        ("git *", "git status", False),  # no glob: exact text "git *"
        ("a:*:*", "a:*x", True),  # only the final ':*' is the prefix marker
        (":*", "whatever", True),  # empty prefix
    ],
)
def test_matcher(matcher: str | None, subject: str, hit: bool) -> None:
    rule = Rule(Level.ALLOW, "shell", matcher, "t")
    assert rule.matches_subject(subject) is hit


@pytest.mark.parametrize(
    ("rule_tool", "tool_id", "hit"),
    [
        ("*", "shell__run", True),
        ("*", "cli-native:Bash", True),
        ("shell", "shell__run", True),  # family
        ("shell", "shell", True),
        ("shell__run", "shell__run", True),
        ("shell__run", "shell__other", False),
        ("shell", "shellx__run", False),
        ("shell", "filesystem__read", False),
        ("cli-native:Bash", "cli-native:Bash", True),
        ("cli-native:Bash", "cli-native:BashOutput", False),
        ("cli-native:mcp", "cli-native:mcp__octipus__get_work_plan", False),  # no family for native ids
        ("cli-native", "cli-native:Read", False),
    ],
)
def test_tool_id_matching(rule_tool: str, tool_id: str, hit: bool) -> None:
    assert Rule(Level.ALLOW, rule_tool, None, "t").applies_to(tool_id) is hit


def test_family_and_default_action() -> None:
    assert family_of("shell__run") == "shell"
    assert family_of("shell") is None
    assert family_of("__run") is None
    assert family_of("cli-native:mcp__x__y") is None
    assert default_action("cli-native:Bash") == "Bash"
    assert default_action("shell__run") == "run"
    assert default_action("get_work_plan") == "get_work_plan"


# ------------------------------------------------------------------ subject


def test_subject_field_order() -> None:
    args = {name: f"v-{name}" for name in SUBJECT_FIELDS}
    for name in SUBJECT_FIELDS:
        assert subject_of(args, "act") == f"v-{name}"
        del args[name]
    assert subject_of(args, "act") == "act"


@pytest.mark.parametrize("empty", [None, "", 0, False, [], {}])
def test_falsy_subject_values_are_skipped(empty: Any) -> None:
    assert subject_of({"command": empty, "path": "/p"}, "act") == "/p"
    assert subject_of({"command": empty}, "act") == "act"


def test_non_string_subject_is_json() -> None:
    assert subject_of({"command": ["rm", "-rf"]}, "act") == '["rm","-rf"]'
    assert subject_of({"query": 5}, "act") == "5"
    assert subject_of({"url": True}, "act") == "true"


def test_other_fields_are_ignored() -> None:
    assert subject_of({"pattern": "x", "content": "y"}, "Grep") == "Grep"


@settings(max_examples=200, deadline=None)
@given(
    present=st.lists(st.sampled_from(SUBJECT_FIELDS), unique=True, min_size=1),
    values=st.lists(st.text(min_size=1), min_size=len(SUBJECT_FIELDS), max_size=len(SUBJECT_FIELDS)),
    noise=st.dictionaries(st.text(), st.text()),
)
def test_subject_is_first_present_field(present: list[str], values: list[str], noise: dict[str, str]) -> None:
    args: dict[str, Any] = {k: v for k, v in noise.items() if k not in SUBJECT_FIELDS}
    for name, value in zip(present, values, strict=False):
        args[name] = value
    first = min(present, key=SUBJECT_FIELDS.index)
    assert subject_of(args, "act") == args[first]


# ------------------------------------------------------------------ evaluation


def test_deny_then_allow_then_ask_first_hit_wins() -> None:
    rules = RuleSet.from_setting(
        {"ask": ["shell(git push:*)"], "allow": ["shell(git:*)"], "deny": ["shell(git push --force:*)"]}
    )
    assert [r.level for r in rules.rules] == [Level.DENY, Level.ALLOW, Level.ASK]
    m = rules.decide("shell__run", {"command": "git push --force origin"})
    assert m is not None and m.level is Level.DENY
    m = rules.decide("shell__run", {"command": "git push origin"})
    assert m is not None and m.level is Level.ALLOW  # allow is checked before ask
    assert rules.decide("shell__run", {"command": "ls"}) is None


def test_first_rule_within_a_level_wins() -> None:
    rules = RuleSet.from_setting({"allow": ["shell(git:*)", "shell(*)"]})
    m = rules.decide("shell__run", {"command": "git log"})
    assert m is not None and m.rule.text == "shell(git:*)"


def test_match_explain() -> None:
    m = RuleSet.defaults().decide("cli-native:Read", {"file_path": "/etc/hosts"}, action="Read")
    assert m == Match(Level.ALLOW, parse_rule("cli-native:Read(*)", Level.ALLOW), builtin=True)
    assert m.explain() == "allow by rule cli-native:Read(*) (built-in default)"
    m = RuleSet.from_setting({"deny": ["shell(mkfs:*)"]}).decide(
        "shell__run", {"command": "mkfs.ext4 /dev/x"}
    )
    assert m is not None and m.explain() == "deny by rule shell(mkfs:*) (permissions.rules)"


def test_action_is_the_subject_without_fields() -> None:
    rules = RuleSet.from_setting({"allow": ["cli-native:Grep(Grep)", "shell(run)"]})
    assert rules.decide("cli-native:Grep", {"pattern": "x"}) is not None  # default action = tool name
    assert rules.decide("cli-native:Grep", {"pattern": "x"}, action="Other") is None
    assert rules.decide("shell__run", {}) is not None  # default action of shell__run is "run"


def test_level_for_falls_back_to_default_level() -> None:
    rules = RuleSet.from_setting({})
    assert rules.rules == ()
    assert rules.level_for("get_work_plan", {}) is Level.ALLOW
    assert rules.level_for("shell__run", {"command": "ls"}) is Level.ASK
    assert RuleSet.defaults().level_for("shell__run", {"command": "ls -la"}) is Level.ALLOW


@pytest.mark.parametrize(
    ("tool_id", "level"),
    [
        ("cli-native:Bash", Level.ASK),
        ("cli-native:Read", Level.ASK),
        ("cli-native:mcp__octipus__get_work_plan", Level.ASK),
        ("get_cli_run_context", Level.ALLOW),
        ("get_work_plan", Level.ALLOW),
        ("update_work_plan", Level.ALLOW),
        ("shell__run", Level.ASK),
        ("spawn_child", Level.ALLOW),  # delegation: bounded by role, depth and budget
        ("collect_children", Level.ALLOW),
        ("some_other_tool", Level.ASK),
        ("", Level.ASK),
    ],
)
def test_default_level(tool_id: str, level: Level) -> None:
    assert default_level(tool_id) is level


def test_the_pipeline_tools_are_allowed_by_default_like_delegation() -> None:
    # a root agent's create_pipeline never waits for a person (nor is refused unattended) unless a
    # rule says so; the stage workers' own calls pass the policy
    from octipusd.tools.pipeline import PIPELINE_TOOLS, STAGE_TOOLS

    assert {spec.name: default_level(spec.name) for spec in PIPELINE_TOOLS + STAGE_TOOLS} == {
        spec.name: Level.ALLOW for spec in PIPELINE_TOOLS + STAGE_TOOLS
    }
    assert RuleSet.defaults().level_for("create_pipeline", {"template": "x"}) is Level.ALLOW


# ------------------------------------------------------------------ defaults


def test_default_rule_lists_exactly() -> None:
    assert DEFAULT_RULES["allow"] == (
        "shell(git:*)",
        "shell(ls:*)",
        "shell(cat:*)",
        "shell(echo:*)",
        "filesystem(*)",
        "knowledge(*)",
        "websearch(*)",
        "cli-native:Read(*)",
        "cli-native:Glob(*)",
        "cli-native:Grep(*)",
        "cli-native:LS(*)",
        "cli-native:NotebookRead(*)",
        "cli-native:WebFetch(*)",
        "cli-native:WebSearch(*)",
        "cli-native:TodoWrite(*)",
    )
    assert DEFAULT_RULES["deny"][:4] == (
        "shell(rm -rf /:*)",
        "shell(dd if=/dev:*)",
        "shell(mkfs:*)",
        "shell(:(){ :|:& };:)",
    )
    assert DEFAULT_RULES["ask"] == ("shell(sudo:*)", "shell(docker:*)", "shell(systemctl:*)")


@pytest.mark.parametrize(
    ("tool_id", "args", "action", "level"),
    [
        ("shell__run", {"command": "git status"}, None, Level.ALLOW),
        ("shell__run", {"command": "gitk"}, None, Level.ALLOW),
        ("shell__run", {"command": "ls -la"}, None, Level.ALLOW),
        ("shell__run", {"command": "cat /etc/hosts"}, None, Level.ALLOW),
        ("shell__run", {"command": "echo hi"}, None, Level.ALLOW),
        ("shell__run", {"command": "rm -rf /"}, None, Level.DENY),
        ("shell__run", {"command": "rm -rf /home"}, None, Level.DENY),
        ("shell__run", {"command": "dd if=/dev/zero of=x"}, None, Level.DENY),
        ("shell__run", {"command": "mkfs.ext4 /dev/sda1"}, None, Level.DENY),
        ("shell__run", {"command": ":(){ :|:& };:"}, None, Level.DENY),
        ("shell__run", {"command": ":(){ :|:&};:"}, None, Level.DENY),
        ("shell__run", {"command": "sudo ls"}, None, Level.ASK),
        ("shell__run", {"command": "docker ps"}, None, Level.ASK),
        ("shell__run", {"command": "systemctl restart x"}, None, Level.ASK),
        ("filesystem__write", {"path": "/x"}, None, Level.ALLOW),
        ("knowledge__search", {"query": "q"}, None, Level.ALLOW),
        ("websearch__search", {"query": "q"}, None, Level.ALLOW),
        ("cli-native:Read", {"file_path": "/etc/hosts"}, "Read", Level.ALLOW),
        ("cli-native:Grep", {"pattern": "x"}, "Grep", Level.ALLOW),
        ("cli-native:Glob", {"pattern": "*.py"}, None, Level.ALLOW),
        ("cli-native:LS", {"path": "/"}, None, Level.ALLOW),
        ("cli-native:NotebookRead", {"notebook_path": "a.ipynb"}, None, Level.ALLOW),
        ("cli-native:WebFetch", {"url": "https://example.com"}, None, Level.ALLOW),
        ("cli-native:WebSearch", {"query": "x"}, None, Level.ALLOW),
        ("cli-native:TodoWrite", {"todos": []}, None, Level.ALLOW),
    ],
)
def test_default_rules(tool_id: str, args: dict[str, Any], action: str | None, level: Level) -> None:
    m = RuleSet.from_setting(None).decide(tool_id, args, action)
    assert m is not None and m.level is level and m.builtin


@pytest.mark.parametrize(
    ("tool_id", "args"),
    [
        ("cli-native:Bash", {"command": "git status"}),
        ("cli-native:Edit", {"file_path": "a.ts"}),
        ("cli-native:Write", {"file_path": "a.ts"}),
        ("shell__run", {"command": "python x.py"}),
        ("docker__run", {}),
    ],
)
def test_default_rules_leave_these_to_the_default_level(tool_id: str, args: dict[str, Any]) -> None:
    rules = RuleSet.defaults()
    assert rules.decide(tool_id, args) is None
    assert rules.level_for(tool_id, args) is Level.ASK


def test_any_setting_replaces_defaults() -> None:
    rules = RuleSet.from_setting({"allow": ["cli-native:Bash(git:*)"]})
    assert rules.decide("shell__run", {"command": "rm -rf /"}) is None  # built-in deny gone
    assert rules.decide("cli-native:Read", {"file_path": "x"}) is None  # built-in allow gone
    m = rules.decide("cli-native:Bash", {"command": "git status"})
    assert m is not None and m.level is Level.ALLOW and not m.builtin


# ------------------------------------------------------------------ setting validation


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("shell(*)", "must be an object"),
        (["shell(*)"], "must be an object"),
        ({"alow": ["shell(*)"]}, "'alow'"),
        ({"allow": "shell(*)"}, r"permissions\.rules\.allow must be a list"),
        ({"deny": [5]}, r"permissions\.rules\.deny\[0\] is 5"),
        ({"ask": ["shell(ok:*)", "shell(x"]}, r"permissions\.rules\.ask\[1\]: .*'shell\(x'"),
    ],
)
def test_from_setting_errors(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RuleSet.from_setting(value)


def test_from_setting_null_lists_are_empty() -> None:
    assert RuleSet.from_setting({"allow": None, "deny": [], "ask": None}).rules == ()


def test_from_rules_orders_by_level() -> None:
    rs = RuleSet.from_rules([parse_rule("a", "ask"), parse_rule("b", "allow"), parse_rule("c", "deny")])
    assert [r.tool_id for r in rs.rules] == ["c", "b", "a"]


# ------------------------------------------------------------------ properties

tool_ids = st.sampled_from(
    ["shell__run", "shell__exec", "filesystem__read", "cli-native:Bash", "cli-native:Read", "get_work_plan"]
)
rule_tools = st.sampled_from(
    ["*", "shell", "shell__run", "filesystem", "cli-native:Bash", "cli-native:Read", "x"]
)
subjects = st.sampled_from(["git status", "gitk", "rm -rf /", "ls", "", "sudo x", "/etc/hosts"]) | st.text(
    max_size=6
)
matchers = st.none() | st.sampled_from(["", "*", "git:*", "rm -rf /:*", "ls", "sudo:*"]) | st.text(max_size=6)


@st.composite
def rules_(draw: st.DrawFn) -> Rule:
    tool = draw(rule_tools)
    matcher = draw(matchers)
    level = draw(st.sampled_from(list(Level)))
    text = tool if matcher is None else f"{tool}({matcher})"
    return parse_rule(text, level)


args_ = st.dictionaries(
    st.sampled_from([*SUBJECT_FIELDS, "pattern", "content"]), subjects | st.none() | st.integers(), max_size=4
)


@settings(max_examples=300, deadline=None)
@given(st.lists(rules_(), max_size=10), tool_ids, args_, st.none() | st.text(max_size=5))
def test_deny_always_wins_when_a_deny_matches(
    rules: list[Rule], tool_id: str, args: dict[str, Any], action: str | None
) -> None:
    ruleset = RuleSet.from_rules(rules)
    subject = subject_of(args, default_action(tool_id) if action is None else action)
    m = ruleset.decide(tool_id, args, action)
    matching = [r for r in rules if r.matches(tool_id, subject)]
    if any(r.level is Level.DENY for r in matching):
        assert m is not None and m.level is Level.DENY
    elif any(r.level is Level.ALLOW for r in matching):
        assert m is not None and m.level is Level.ALLOW
    elif matching:
        assert m is not None and m.level is Level.ASK
    else:
        assert m is None
    if m is not None:
        assert m.rule in matching and m.level is m.rule.level
        first = next(r for r in ruleset.rules if r.matches(tool_id, subject))
        assert m.rule is first


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["*", "*(*)", "*()", " * ( * ) "]), st.text(), args_, st.none() | st.text())
def test_bare_star_matches_everything(
    text: str, tool_id: str, args: dict[str, Any], action: str | None
) -> None:
    for level in Level:
        m = RuleSet.from_setting({level.value: [text]}).decide(tool_id, args, action)
        assert m is not None and m.level is level


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_characters="()", blacklist_categories=("Z", "Cc")), min_size=1),
    st.text(),
)
def test_matcher_runs_to_last_paren(tool: str, matcher: str) -> None:
    rule = parse_rule(f"{tool}({matcher})", Level.ALLOW)
    assert rule.tool_id == tool.strip()
    assert rule.matcher == matcher.strip()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=8), st.text(max_size=8))
def test_prefix_matcher_is_plain_startswith(prefix: str, rest: str) -> None:
    rule = Rule(Level.ALLOW, "shell", f"{prefix}:*", "t")
    assert rule.matches_subject(prefix + rest)


def test_read_only_tool_list() -> None:
    assert READ_ONLY_CLI_TOOLS == (
        "Read",
        "Glob",
        "Grep",
        "LS",
        "NotebookRead",
        "WebFetch",
        "WebSearch",
        "TodoWrite",
    )


@pytest.mark.parametrize(
    ("tool_id", "hint"),
    [
        ("Bash", "cli-native:Bash(...)"),
        ("read", "cli-native:Read(...)"),
        ("cli-native:bash", "cli-native:Bash"),
        ("cli-native:webfetch", "cli-native:WebFetch"),
    ],
)
def test_rules_that_can_never_match_are_named(tool_id: str, hint: str) -> None:
    from octipusd.policy.rules import unmatchable_reason

    reason = unmatchable_reason(tool_id)
    assert reason is not None and reason.startswith("never matches") and hint in reason


@pytest.mark.parametrize(
    "tool_id", ["cli-native:Bash", "cli-native", "*", "shell", "shell__run", "slack.post_message"]
)
def test_rules_that_can_match_pass(tool_id: str) -> None:
    from octipusd.policy.rules import unmatchable_reason

    assert unmatchable_reason(tool_id) is None


# Command lines are matched per simple command (a user trial found prefix rules stretched past `;`).


@pytest.mark.parametrize(
    ("command", "level"),
    [
        ("git status", "allow"),
        ("gitk", "allow"),  # FACTS.md §3: a plain string prefix within one command
        ("git status; rm -rf ~", "ask"),
        ("git status && git log", "allow"),  # every command is allowed by the rule
        ("cat /dev/null; touch shellpwned.txt", "ask"),
        ("ls $(rm x)", "ask"),
        ("echo `touch x`", "ask"),
        ("git status 'unclosed", "ask"),
        ("git log | head", "ask"),
        # user trial: an allowed prefix must not stretch to a file write or to git's own commands
        ("echo owned > /tmp/outside.txt", "ask"),
        ("cat /etc/shadow > /tmp/x", "ask"),
        ("echo x >> notes.txt", "ask"),
        ("echo quiet > /dev/null 2>&1", "allow"),
        ('git -c alias.x="!touch /tmp/pwned" x', "ask"),
        ("git --config-env=core.pager=P log", "ask"),
        ("GIT_DIR=. git -c core.sshCommand=evil fetch", "ask"),
        ("git --no-pager log", "allow"),
        ("git commit -c HEAD", "allow"),  # -c after the subcommand is the subcommand's option
    ],
)
def test_allow_prefix_rules_cover_every_command_of_a_line(command: str, level: str) -> None:
    from octipusd.policy.engine import Policy

    policy = Policy.from_setting(None)
    assert str(policy.decide("shell__run", {"command": command}).level) == level


@pytest.mark.parametrize(
    "command",
    ["rm -rf build", "ls; rm x", "echo hi && rm x", 'bash -c "rm -rf build"', "sudo rm x", "echo $(rm x)"],
)
def test_deny_prefix_rules_catch_a_command_anywhere_in_a_line(command: str) -> None:
    from octipusd.policy.engine import Policy

    policy = Policy.from_setting(
        {"allow": ["cli-native:Bash(echo:*)", "cli-native:Bash(ls:*)"], "deny": ["cli-native:Bash(rm:*)"]}
    )
    decision = policy.decide("cli-native:Bash", {"command": command}, "Bash")
    assert str(decision.level) == "deny", (command, decision.explanation)


def test_exact_and_fork_bomb_rules_still_match_the_line_as_written() -> None:
    from octipusd.policy.engine import Policy

    policy = Policy.from_setting({"allow": ['cli-native:Bash(bash -c "echo probe")'], "deny": []})
    assert str(policy.decide("cli-native:Bash", {"command": 'bash -c "echo probe"'}, "Bash").level) == "allow"
    defaults = Policy.from_setting(None)
    assert str(defaults.decide("shell__run", {"command": ":(){ :|:& };:"}).level) == "deny"
