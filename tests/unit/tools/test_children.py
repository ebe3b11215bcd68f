"""``spawn_child`` and ``collect_children``: argument validation, the resume-key rule, the host
calls and child tool sets."""

from __future__ import annotations

import re
import string
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from octipusd.bridge.fakes import FakeToolHost
from octipusd.errors import ConflictError, InvalidRequestError
from octipusd.toolkit import (
    RESERVED_IDENTITY_ARGUMENTS,
    ChildRequest,
    RunIdentity,
    ToolHost,
    validate_tool_specs,
)
from octipusd.tools import (
    CHILD_ROLES,
    COLLECT_CHILDREN,
    DEFAULT_TOOLS,
    MONITOR_TOOLS,
    PIPELINE_TOOLS,
    ROOT_ROLE,
    SPAWN_CHILD,
    STEER_CHILD,
    UPDATE_WORK_PLAN,
    child_tools,
    validate_resume_key,
)
from octipusd.tools.children import (
    MAX_BRIEF_CHARS,
    MAX_COLLECT_SECONDS,
    RESUME_KEY,
    RESUME_KEY_RULE,
    parse_child_request,
    parse_collect_request,
    parse_steer_request,
)

jsonschema = pytest.importorskip("jsonschema")

pytestmark = pytest.mark.anyio

KEY_ALPHABET = string.ascii_letters + string.digits + "._:-"
ROLES = ("general", "coding", "research", "review", "test")
SUMMARY_KEYS = {"childRunId", "role", "status", "resumed", "vendorSessionId", "result", "reason"}


@dataclass
class RecordingHost(FakeToolHost):
    """Records what reaches ``spawn_child`` and ``collect_children`` and answers with fixed summaries."""

    calls: list[tuple[RunIdentity, ChildRequest]] = field(default_factory=list)
    collects: list[tuple[RunIdentity, list[str] | None, float]] = field(default_factory=list)

    async def spawn_child(self, identity: RunIdentity, request: ChildRequest) -> dict[str, Any]:
        self.calls.append((identity, request))
        return {
            "childRunId": "run-child-7",
            "role": request.role,
            "status": "succeeded",
            "resumed": True,
            "vendorSessionId": "vendor-7",
            "result": "all green",
            "reason": None,
        }

    async def collect_children(
        self, identity: RunIdentity, child_run_ids: Sequence[str] | None, timeout_seconds: float
    ) -> dict[str, Any]:
        self.collects.append(
            (identity, None if child_run_ids is None else list(child_run_ids), timeout_seconds)
        )
        return {
            "children": [{"childRunId": "run-child-7", "role": "coding", "status": "succeeded"}],
            "pending": [{"childRunId": "run-child-8", "role": "test", "status": "running"}],
        }


def _invalid(arguments: dict[str, Any]) -> str:
    with pytest.raises(InvalidRequestError) as caught:
        parse_child_request(arguments)
    return caught.value.message


# ------------------------------------------------------------------ resume key


@pytest.mark.parametrize(
    "key",
    ["a", "x" * 200, KEY_ALPHABET, "task-1", "T_2.3:4", "issue:42", "...", "-", "0"],
)
def test_resume_keys_within_the_rule_are_accepted(key: str) -> None:
    assert validate_resume_key(key) == key


def test_absent_resume_key_is_none() -> None:
    assert validate_resume_key(None) is None
    assert parse_child_request({"role": "general", "brief": "b"}).resume_key is None
    assert parse_child_request({"role": "general", "brief": "b", "resumeKey": None}).resume_key is None


@pytest.mark.parametrize(
    "key",
    [
        "",
        "k" * 201,
        "a/b",
        "a b",
        "a>b",
        "tâche",
        "ключ",
        "任务",
        "a\n",
        "\na",
        "a\tb",
        "a+b",
        "a@b",
        "a\\b",
        "a\x00",
    ],
)
def test_resume_keys_outside_the_rule_name_the_field_and_the_rule(key: str) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        validate_resume_key(key)
    message = caught.value.message
    assert message.startswith("resumeKey: must be ")
    assert RESUME_KEY_RULE in message
    assert RESUME_KEY_RULE == "1 to 200 letters, digits, '.', '_', ':' or '-'"


def test_a_long_bad_key_is_shown_truncated() -> None:
    message = _invalid({"role": "general", "brief": "b", "resumeKey": "y" * 5000})
    assert message.startswith("resumeKey:") and "(5000 characters)" in message
    assert "y" * 41 not in message and len(message) < 200


@pytest.mark.parametrize("value", [1, 1.5, True, ["a"], {"k": "v"}])
def test_a_non_string_key_is_refused_with_its_type(value: Any) -> None:
    with pytest.raises(InvalidRequestError, match=r"^resumeKey: must be a string, got "):
        validate_resume_key(value)


@settings(max_examples=300)
@given(st.text(alphabet=KEY_ALPHABET, min_size=1, max_size=200))
def test_generated_keys_matching_the_rule_are_accepted(key: str) -> None:
    assert validate_resume_key(key) == key


@settings(max_examples=300)
@given(st.text(max_size=260))
def test_generated_keys_are_accepted_exactly_when_they_follow_the_rule(key: str) -> None:
    follows = 1 <= len(key) <= 200 and all(char in KEY_ALPHABET for char in key)
    if follows:
        assert validate_resume_key(key) == key
    else:
        with pytest.raises(InvalidRequestError, match=r"^resumeKey: "):
            validate_resume_key(key)


@settings(max_examples=200)
@given(
    st.text(alphabet=KEY_ALPHABET, max_size=100),
    st.characters().filter(lambda char: char not in KEY_ALPHABET),
    st.text(alphabet=KEY_ALPHABET, max_size=99),
)
def test_one_foreign_character_anywhere_spoils_a_key(prefix: str, bad: str, suffix: str) -> None:
    with pytest.raises(InvalidRequestError, match=r"^resumeKey: must be 1 to 200"):
        validate_resume_key(prefix + bad + suffix)


@settings(max_examples=100)
@given(st.text(alphabet=KEY_ALPHABET, min_size=201, max_size=400))
def test_generated_keys_longer_than_200_are_refused(key: str) -> None:
    with pytest.raises(InvalidRequestError, match=r"^resumeKey: must be 1 to 200"):
        validate_resume_key(key)


@settings(max_examples=200)
@given(st.text(max_size=210))
def test_the_published_pattern_agrees_with_the_validator(key: str) -> None:
    schema = SPAWN_CHILD.input_schema["properties"]["resumeKey"]
    schema_ok = jsonschema.Draft202012Validator(schema).is_valid(key)
    try:
        validate_resume_key(key)
    except InvalidRequestError:
        accepted = False
    else:
        accepted = True
    if accepted:
        assert schema_ok
    elif schema_ok:
        # Python's ``re`` lets ``$`` match before a final newline (ECMA-262, the dialect JSON
        # Schema specifies, does not); the handler uses ``fullmatch`` and refuses such keys.
        assert key.endswith("\n") and RESUME_KEY.fullmatch(key[:-1])


# ------------------------------------------------------------------ the other arguments


def test_a_full_request_is_parsed() -> None:
    request = parse_child_request(
        {
            "role": "coding",
            "brief": "fix the parser",
            "resumeKey": "issue:42",
            "maxTurns": 200,
            "tokenBudget": 50000,
            "timeoutSeconds": 7200,
        }
    )
    assert request == ChildRequest(
        role="coding",
        brief="fix the parser",
        resume_key="issue:42",
        max_turns=200,
        token_budget=50000,
        timeout_seconds=7200.0,
    )
    assert isinstance(request.timeout_seconds, float)


def test_limits_at_their_lower_bounds_and_nulls_are_accepted() -> None:
    low = parse_child_request(
        {"role": "test", "brief": "x" * 20000, "maxTurns": 1, "tokenBudget": 1, "timeoutSeconds": 1}
    )
    assert (low.max_turns, low.token_budget, low.timeout_seconds) == (1, 1, 1.0)
    nulls = parse_child_request(
        {"role": "test", "brief": "b", "maxTurns": None, "tokenBudget": None, "timeoutSeconds": None}
    )
    assert nulls == ChildRequest(role="test", brief="b")
    assert parse_child_request({"role": "review", "brief": "b", "timeoutSeconds": 2.5}).timeout_seconds == 2.5


@pytest.mark.parametrize("role", ROLES)
def test_every_child_role_is_accepted(role: str) -> None:
    assert parse_child_request({"role": role, "brief": "do it"}).role == role


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"brief": "b"}, "role: required"),
        ({"role": 1, "brief": "b"}, "role: must be a string, got int"),
        (
            {"role": "manager", "brief": "b"},
            "role: must be one of general, coding, research, review, test, got 'manager'",
        ),
        ({"role": ROOT_ROLE, "brief": "b"}, "role: must be one of general, coding, research, review, test"),
        ({"role": "General", "brief": "b"}, "role: must be one of"),
        ({"role": "general"}, "brief: required"),
        ({"role": "general", "brief": None}, "brief: must be a string, got NoneType"),
        ({"role": "general", "brief": ["do"]}, "brief: must be a string, got list"),
        ({"role": "general", "brief": ""}, "brief: must not be empty"),
        ({"role": "general", "brief": "  \n"}, "brief: must not be empty"),
        ({"role": "general", "brief": "x" * 20001}, "brief: longer than 20000 characters"),
        ({"role": "general", "brief": "b", "resumeKey": ""}, "resumeKey: must be 1 to 200"),
        ({"role": "general", "brief": "b", "resumeKey": 7}, "resumeKey: must be a string, got int"),
        ({"role": "general", "brief": "b", "maxTurns": 0}, "maxTurns: must be from 1 to 200, got 0"),
        ({"role": "general", "brief": "b", "maxTurns": 201}, "maxTurns: must be from 1 to 200, got 201"),
        ({"role": "general", "brief": "b", "maxTurns": 3.0}, "maxTurns: must be an integer, got float"),
        ({"role": "general", "brief": "b", "maxTurns": "3"}, "maxTurns: must be an integer, got str"),
        ({"role": "general", "brief": "b", "maxTurns": True}, "maxTurns: must be an integer, got bool"),
        ({"role": "general", "brief": "b", "tokenBudget": 0}, "tokenBudget: must be at least 1, got 0"),
        ({"role": "general", "brief": "b", "tokenBudget": -5}, "tokenBudget: must be at least 1"),
        ({"role": "general", "brief": "b", "tokenBudget": 1e6}, "tokenBudget: must be an integer, got float"),
        ({"role": "general", "brief": "b", "timeoutSeconds": 0.5}, "timeoutSeconds: must be from 1 to 7200"),
        ({"role": "general", "brief": "b", "timeoutSeconds": 7201}, "timeoutSeconds: must be from 1 to 7200"),
        (
            {"role": "general", "brief": "b", "timeoutSeconds": float("nan")},
            "timeoutSeconds: must be from 1 to 7200",
        ),
        (
            {"role": "general", "brief": "b", "timeoutSeconds": float("inf")},
            "timeoutSeconds: must be from 1 to 7200",
        ),
        (
            {"role": "general", "brief": "b", "timeoutSeconds": "60"},
            "timeoutSeconds: must be a number of seconds, got str",
        ),
        (
            {"role": "general", "brief": "b", "timeoutSeconds": False},
            "timeoutSeconds: must be a number of seconds, got bool",
        ),
        (
            {"role": "general", "brief": "b", "model": "opus"},
            "arguments: unknown field(s) model; accepted: brief, detach, gates, maxTurns, resumeKey, "
            "role, timeoutSeconds, tokenBudget",
        ),
        ({"role": "general", "brief": "b", "resume_key": "k"}, "arguments: unknown field(s) resume_key"),
    ],
)
def test_bad_arguments_name_the_field(arguments: dict[str, Any], message: str) -> None:
    assert _invalid(arguments).startswith(message)


def test_the_root_role_is_named_as_not_spawnable() -> None:
    assert ROOT_ROLE == "root" and ROOT_ROLE not in CHILD_ROLES
    assert "root agent's role cannot be spawned" in _invalid({"role": "root", "brief": "b"})


# ------------------------------------------------------------------ detach


@pytest.mark.parametrize(
    ("arguments", "detach"),
    [({"detach": True}, True), ({"detach": False}, False), ({}, False), ({"detach": None}, False)],
)
def test_detach_is_parsed_and_defaults_to_false(arguments: dict[str, Any], detach: bool) -> None:
    request = parse_child_request({"role": "general", "brief": "b", **arguments})
    assert request.detach is detach
    assert ChildRequest(role="general", brief="b").detach is False


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (1, "int"),
        (0, "int"),
        ("true", "str"),
        ("false", "str"),
        (1.0, "float"),
        ([True], "list"),
        ({}, "dict"),
    ],
)
def test_a_non_boolean_detach_is_refused_naming_the_field(value: Any, type_name: str) -> None:
    assert _invalid({"role": "general", "brief": "b", "detach": value}) == (
        f"detach: must be true or false, got {type_name}"
    )


async def test_the_handler_forwards_detach_to_the_host(identity: RunIdentity) -> None:
    host = RecordingHost()
    await SPAWN_CHILD.handler(identity, host, {"role": "coding", "brief": "b", "detach": True})
    await SPAWN_CHILD.handler(identity, host, {"role": "coding", "brief": "b"})
    assert [request.detach for _, request in host.calls] == [True, False]
    assert host.calls[0][1] == ChildRequest(role="coding", brief="b", detach=True)


# ------------------------------------------------------------------ the handler and the host


async def test_the_handler_passes_the_request_to_the_host_and_returns_its_summary(
    identity: RunIdentity,
) -> None:
    host = RecordingHost()
    assert isinstance(host, ToolHost)
    arguments = {
        "role": "research",
        "brief": "find the flaky test",
        "resumeKey": "flaky:1",
        "maxTurns": 12,
        "tokenBudget": 9000,
        "timeoutSeconds": 600,
    }
    result = await SPAWN_CHILD.handler(identity, host, dict(arguments))
    assert result == {
        "childRunId": "run-child-7",
        "role": "research",
        "status": "succeeded",
        "resumed": True,
        "vendorSessionId": "vendor-7",
        "result": "all green",
        "reason": None,
    }
    assert host.calls == [
        (
            identity,
            ChildRequest(
                role="research",
                brief="find the flaky test",
                resume_key="flaky:1",
                max_turns=12,
                token_budget=9000,
                timeout_seconds=600.0,
            ),
        )
    ]


async def test_a_refused_call_never_reaches_the_host(identity: RunIdentity) -> None:
    host = RecordingHost()
    with pytest.raises(InvalidRequestError, match="resumeKey"):
        await SPAWN_CHILD.handler(identity, host, {"role": "coding", "brief": "b", "resumeKey": "a/b"})
    with pytest.raises(InvalidRequestError, match="unknown field"):
        await SPAWN_CHILD.handler(identity, host, {"role": "coding", "brief": "b", "depth": 2})
    assert host.calls == []


async def test_the_fake_host_records_children_and_resumes_by_role_and_key(identity: RunIdentity) -> None:
    host = FakeToolHost()
    first = await SPAWN_CHILD.handler(identity, host, {"role": "coding", "brief": "one", "resumeKey": "t1"})
    again = await SPAWN_CHILD.handler(identity, host, {"role": "coding", "brief": "two", "resumeKey": "t1"})
    other_role = await SPAWN_CHILD.handler(
        identity, host, {"role": "review", "brief": "three", "resumeKey": "t1"}
    )
    fresh = await SPAWN_CHILD.handler(identity, host, {"role": "coding", "brief": "four"})
    summaries = [first, again, other_role, fresh]
    assert all(isinstance(summary, dict) and set(summary) == SUMMARY_KEYS for summary in summaries)
    assert [summary["resumed"] for summary in summaries if isinstance(summary, dict)] == [
        False,
        True,
        False,
        False,
    ]
    assert [spawn.request.brief for spawn in host.spawned] == ["one", "two", "three", "four"]


async def test_the_fake_host_can_refuse_children(identity: RunIdentity) -> None:
    host = FakeToolHost(refuse_children="child depth limit reached")
    with pytest.raises(ConflictError, match="child depth limit reached"):
        await SPAWN_CHILD.handler(identity, host, {"role": "general", "brief": "b"})
    assert host.spawned == []


# ------------------------------------------------------------------ spec, schema and tool sets


def test_the_spec_flags() -> None:
    assert SPAWN_CHILD.name == "spawn_child" == SPAWN_CHILD.tool_id
    assert SPAWN_CHILD.internal and not SPAWN_CHILD.read_only and not SPAWN_CHILD.mutating
    assert not SPAWN_CHILD.bypass_queue
    assert SPAWN_CHILD.timeout_seconds == 7200
    assert SPAWN_CHILD.contract is None


def test_the_schema_is_valid_and_published() -> None:
    schema = SPAWN_CHILD.input_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert validate_tool_specs((SPAWN_CHILD,)) == (SPAWN_CHILD,)
    assert validate_tool_specs(DEFAULT_TOOLS) == DEFAULT_TOOLS
    assert not RESERVED_IDENTITY_ARGUMENTS.intersection(schema["properties"])
    assert schema["required"] == ["role", "brief"]
    assert schema["additionalProperties"] is False
    assert set(schema["properties"]) == {
        "role",
        "brief",
        "resumeKey",
        "maxTurns",
        "tokenBudget",
        "timeoutSeconds",
        "detach",
        "gates",
    }
    assert schema["properties"]["detach"]["type"] == "boolean"
    assert "collect_children" in schema["properties"]["detach"]["description"]
    assert schema["properties"]["role"]["enum"] == list(ROLES)
    assert schema["properties"]["resumeKey"]["pattern"] == RESUME_KEY.pattern
    assert "same key with the same role" in schema["properties"]["resumeKey"]["description"]
    assert "fresh child" in schema["properties"]["resumeKey"]["description"]


@pytest.mark.parametrize(
    "arguments",
    [
        {"role": "general", "brief": "b"},
        {
            "role": "test",
            "brief": "b",
            "resumeKey": "k",
            "maxTurns": 5,
            "tokenBudget": 10,
            "timeoutSeconds": 1.5,
            "detach": True,
        },
        {"role": "general", "brief": "b", "detach": False},
        {"role": "general", "brief": "b", "detach": "yes"},
        {"role": "general", "brief": "b", "detach": 1},
        {"role": "root", "brief": "b"},
        {"role": "general", "brief": ""},
        {"role": "general", "brief": "b", "maxTurns": 0},
        {"role": "general", "brief": "b", "tokenBudget": 0},
        {"role": "general", "brief": "b", "timeoutSeconds": 9000},
        {"role": "general", "brief": "b", "resumeKey": "a b"},
        {"role": "general", "brief": "b", "extra": 1},
        {"brief": "b"},
    ],
)
def test_the_schema_and_the_handler_agree(arguments: dict[str, Any]) -> None:
    schema_ok = jsonschema.Draft202012Validator(SPAWN_CHILD.input_schema).is_valid(arguments)
    try:
        parse_child_request(arguments)
    except InvalidRequestError:
        accepted = False
    else:
        accepted = True
    assert schema_ok == accepted


def test_spawn_child_follows_update_work_plan_in_the_default_tools() -> None:
    names = [spec.name for spec in DEFAULT_TOOLS]
    assert names.index("spawn_child") == names.index("update_work_plan") + 1


def test_collect_children_follows_spawn_child_in_the_default_tools() -> None:
    names = [spec.name for spec in DEFAULT_TOOLS]
    assert names.index("collect_children") == names.index("spawn_child") + 1


def test_child_tool_sets() -> None:
    with_spawn = child_tools(allow_spawn=True)
    without_spawn = child_tools(allow_spawn=False)
    assert [spec.name for spec in with_spawn] == [
        spec.name
        for spec in DEFAULT_TOOLS
        if spec is not UPDATE_WORK_PLAN and spec not in (*PIPELINE_TOOLS, *MONITOR_TOOLS)
    ]
    assert [spec.name for spec in without_spawn] == [
        spec.name
        for spec in DEFAULT_TOOLS
        if spec
        not in (UPDATE_WORK_PLAN, SPAWN_CHILD, COLLECT_CHILDREN, STEER_CHILD, *PIPELINE_TOOLS, *MONITOR_TOOLS)
    ]
    # seed 003: the pipeline and monitor tools are on the bridge of root runs only
    roots_only = (*PIPELINE_TOOLS, *MONITOR_TOOLS)
    assert not any(spec in tools for spec in roots_only for tools in (with_spawn, without_spawn))
    # The delegation tools go together: a child that may not spawn has nothing to collect or steer.
    assert all(spec in with_spawn for spec in (SPAWN_CHILD, COLLECT_CHILDREN, STEER_CHILD))
    assert not any(spec in without_spawn for spec in (SPAWN_CHILD, COLLECT_CHILDREN, STEER_CHILD))
    assert "update_work_plan" not in [spec.name for spec in with_spawn]
    assert all(UPDATE_WORK_PLAN not in tools for tools in (with_spawn, without_spawn))
    assert "get_work_plan" in [spec.name for spec in without_spawn]
    validate_tool_specs(with_spawn)
    validate_tool_specs(without_spawn)


def test_child_role_prompts() -> None:
    assert tuple(CHILD_ROLES) == ROLES
    with pytest.raises(TypeError):
        CHILD_ROLES["boss"] = "x"  # type: ignore[index]
    for role, prompt in CHILD_ROLES.items():
        assert prompt == prompt.strip() and 100 < len(prompt) < 1500, role
        assert "child agent of Octipus" in prompt, role
        assert re.search(r"\bonly what the brief asks\b", prompt), role
        assert "final answer for your parent" in prompt, role
    assert len(set(CHILD_ROLES.values())) == len(CHILD_ROLES)


# ------------------------------------------------------------------ collect_children


def _invalid_collect(arguments: dict[str, Any]) -> str:
    with pytest.raises(InvalidRequestError) as caught:
        parse_collect_request(arguments)
    return caught.value.message


def test_collect_without_arguments_waits_for_all_with_the_default_timeout() -> None:
    assert MAX_COLLECT_SECONDS == 900.0
    assert parse_collect_request({}) == (None, MAX_COLLECT_SECONDS)
    assert parse_collect_request({"childRunIds": None, "timeoutSeconds": None}) == (None, MAX_COLLECT_SECONDS)
    ids, timeout = parse_collect_request({"childRunIds": ["run-a"]})
    assert (ids, timeout) == (["run-a"], MAX_COLLECT_SECONDS) and isinstance(timeout, float)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"childRunIds": []}, ([], MAX_COLLECT_SECONDS)),
        ({"childRunIds": ["a", "b"], "timeoutSeconds": 30}, (["a", "b"], 30.0)),
        (
            {"childRunIds": [f"run-{n}" for n in range(100)]},
            ([f"run-{n}" for n in range(100)], MAX_COLLECT_SECONDS),
        ),
        ({"timeoutSeconds": 1}, (None, 1.0)),
        ({"timeoutSeconds": 2.5}, (None, 2.5)),
        ({"timeoutSeconds": 7200}, (None, 7140.0)),  # capped below the tool deadline
    ],
)
def test_collect_arguments_within_the_rules_are_accepted(
    arguments: dict[str, Any], expected: tuple[list[str] | None, float]
) -> None:
    assert parse_collect_request(arguments) == expected


def test_collect_drops_repeated_ids_keeping_the_first_order() -> None:
    # The host hands each summary out once; a repeated id must not be looked up twice.
    assert parse_collect_request({"childRunIds": ["b", "a", "b", "a"]}) == (["b", "a"], MAX_COLLECT_SECONDS)


def test_collect_copies_the_id_list() -> None:
    ids = ["a"]
    parsed, _ = parse_collect_request({"childRunIds": ids})
    assert parsed == ids and parsed is not ids


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"childRunIds": "run-a"}, "childRunIds: must be a list"),
        ({"childRunIds": {"run-a": True}}, "childRunIds: must be a list"),
        ({"childRunIds": ("run-a",)}, "childRunIds: must be a list"),
        ({"childRunIds": [""]}, "childRunIds: must be a list"),
        ({"childRunIds": ["a", ""]}, "childRunIds: must be a list"),
        ({"childRunIds": [1]}, "childRunIds: must be a list"),
        ({"childRunIds": [None]}, "childRunIds: must be a list"),
        ({"childRunIds": [["a"]]}, "childRunIds: must be a list"),
        ({"childRunIds": [f"run-{n}" for n in range(101)]}, "childRunIds: must be a list of up to 100"),
        ({"timeoutSeconds": 0}, "timeoutSeconds: must be from 1 to 7200"),
        ({"timeoutSeconds": 0.5}, "timeoutSeconds: must be from 1 to 7200"),
        ({"timeoutSeconds": -1}, "timeoutSeconds: must be from 1 to 7200"),
        ({"timeoutSeconds": 7200.5}, "timeoutSeconds: must be from 1 to 7200"),
        ({"timeoutSeconds": float("nan")}, "timeoutSeconds: must be from 1 to 7200"),
        ({"timeoutSeconds": float("inf")}, "timeoutSeconds: must be from 1 to 7200"),
        ({"timeoutSeconds": "60"}, "timeoutSeconds: must be a number of seconds, got str"),
        ({"timeoutSeconds": True}, "timeoutSeconds: must be a number of seconds, got bool"),
        ({"ids": ["a"]}, "arguments: unknown field(s) ids; accepted: childRunIds, timeoutSeconds"),
        ({"childRunIds": ["a"], "wait": True}, "arguments: unknown field(s) wait"),
        ({"child_run_ids": ["a"]}, "arguments: unknown field(s) child_run_ids"),
    ],
)
def test_bad_collect_arguments_name_the_field(arguments: dict[str, Any], message: str) -> None:
    assert _invalid_collect(arguments).startswith(message)


async def test_the_collect_handler_passes_ids_and_timeout_to_the_host(identity: RunIdentity) -> None:
    host = RecordingHost()
    result = await COLLECT_CHILDREN.handler(
        identity, host, {"childRunIds": ["run-child-7", "run-child-8"], "timeoutSeconds": 90}
    )
    assert result == {
        "children": [{"childRunId": "run-child-7", "role": "coding", "status": "succeeded"}],
        "pending": [{"childRunId": "run-child-8", "role": "test", "status": "running"}],
    }
    await COLLECT_CHILDREN.handler(identity, host, {})
    assert host.collects == [
        (identity, ["run-child-7", "run-child-8"], 90.0),
        (identity, None, MAX_COLLECT_SECONDS),
    ]
    assert host.calls == []


async def test_a_refused_collect_never_reaches_the_host(identity: RunIdentity) -> None:
    host = RecordingHost()
    with pytest.raises(InvalidRequestError, match="childRunIds"):
        await COLLECT_CHILDREN.handler(identity, host, {"childRunIds": [""]})
    with pytest.raises(InvalidRequestError, match="timeoutSeconds"):
        await COLLECT_CHILDREN.handler(identity, host, {"timeoutSeconds": 0})
    with pytest.raises(InvalidRequestError, match="unknown field"):
        await COLLECT_CHILDREN.handler(identity, host, {"all": True})
    assert host.collects == []


async def test_the_fake_host_collects_its_children(identity: RunIdentity) -> None:
    host = FakeToolHost()
    await SPAWN_CHILD.handler(identity, host, {"role": "coding", "brief": "one", "detach": True})
    await SPAWN_CHILD.handler(identity, host, {"role": "review", "brief": "two", "detach": True})
    every = await COLLECT_CHILDREN.handler(identity, host, {})
    assert every == {
        "children": [
            {"childRunId": "child-1", "role": "coding", "status": "succeeded"},
            {"childRunId": "child-2", "role": "review", "status": "succeeded"},
        ],
        "pending": [],
    }
    some = await COLLECT_CHILDREN.handler(identity, host, {"childRunIds": ["child-2"], "timeoutSeconds": 5})
    assert isinstance(some, dict) and [child["childRunId"] for child in some["children"]] == ["child-2"]


def test_the_collect_spec_flags() -> None:
    assert COLLECT_CHILDREN.name == "collect_children" == COLLECT_CHILDREN.tool_id
    assert COLLECT_CHILDREN.internal and not COLLECT_CHILDREN.read_only and not COLLECT_CHILDREN.mutating
    assert not COLLECT_CHILDREN.bypass_queue
    assert COLLECT_CHILDREN.timeout_seconds == 7200
    assert COLLECT_CHILDREN.contract is None
    assert "detach=true" in COLLECT_CHILDREN.description


def test_the_collect_schema_is_valid_and_published() -> None:
    schema = COLLECT_CHILDREN.input_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert validate_tool_specs((COLLECT_CHILDREN,)) == (COLLECT_CHILDREN,)
    assert validate_tool_specs((SPAWN_CHILD, COLLECT_CHILDREN)) == (SPAWN_CHILD, COLLECT_CHILDREN)
    assert not RESERVED_IDENTITY_ARGUMENTS.intersection(schema["properties"])
    assert set(schema["properties"]) == {"childRunIds", "timeoutSeconds"}
    assert "required" not in schema
    assert schema["additionalProperties"] is False
    assert schema["properties"]["childRunIds"]["maxItems"] == 100
    assert schema["properties"]["timeoutSeconds"]["minimum"] == 1
    assert schema["properties"]["timeoutSeconds"]["maximum"] == 7200


@pytest.mark.parametrize(
    "arguments",
    [
        {},
        {"childRunIds": ["a", "b"], "timeoutSeconds": 60},
        {"childRunIds": []},
        {"childRunIds": ["x"] * 100},
        {"childRunIds": ["x"] * 101},
        {"childRunIds": [""]},
        {"childRunIds": [3]},
        {"childRunIds": "a"},
        {"timeoutSeconds": 0.5},
        {"timeoutSeconds": 7201},
        {"timeoutSeconds": "5"},
        {"extra": 1},
    ],
)
def test_the_collect_schema_and_the_handler_agree(arguments: dict[str, Any]) -> None:
    schema_ok = jsonschema.Draft202012Validator(COLLECT_CHILDREN.input_schema).is_valid(arguments)
    try:
        parse_collect_request(arguments)
    except InvalidRequestError:
        accepted = False
    else:
        accepted = True
    assert schema_ok == accepted


def test_steer_child_arguments_are_validated_naming_the_field() -> None:
    assert parse_steer_request({"childRunId": "c1", "text": "also this"}) == ("c1", "also this")
    for arguments, named in (
        ({"childRunId": "c1"}, "text"),
        ({"text": "x"}, "childRunId"),
        ({"childRunId": "c1", "text": "   "}, "text"),
        ({"childRunId": "c1", "text": "x" * (MAX_BRIEF_CHARS + 1)}, "text"),
        ({"childRunId": "c1", "text": "x", "child": "c2"}, "child"),
    ):
        with pytest.raises(InvalidRequestError, match=named):
            parse_steer_request(arguments)
