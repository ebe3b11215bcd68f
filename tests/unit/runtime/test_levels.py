"""Delegation limits per level (issue 15 item 1): every refusal names its limit and setting key."""

from __future__ import annotations

import re

import pytest

from octipusd.adapter import Usage
from octipusd.errors import InvalidRequestError
from octipusd.runtime.levels import DEEPEST_DEPTH, admit_child, budget_tokens, may_spawn
from octipusd.settings_swarm import LevelDefaults, LevelLimits
from octipusd.toolkit import ChildRequest
from octipusd.tools import DELEGATION_TOOLS, child_tools, root_tools

DEFAULTS = LevelDefaults()


def _admit(
    request: ChildRequest,
    *,
    depth: int = 0,
    alive: int = 0,
    uncollected_detached: int = 0,
    levels: LevelDefaults = DEFAULTS,
) -> ChildRequest:
    return admit_child(
        levels, depth=depth, alive=alive, uncollected_detached=uncollected_detached, request=request
    )


def _refused(request: ChildRequest, **counts: int) -> str:
    with pytest.raises(InvalidRequestError) as info:
        _admit(request, **counts)
    return info.value.message


PLAIN = ChildRequest(role="general", brief="b")
DETACHED = ChildRequest(role="general", brief="b", detach=True)


def test_defaults_of_the_child_level_are_applied() -> None:
    # a root's child is an agent: 80 000 tokens and 600 s
    admitted = _admit(PLAIN)
    assert (admitted.token_budget, admitted.timeout_seconds) == (80_000, 600.0)
    assert (admitted.role, admitted.brief, admitted.detach) == ("general", "b", False)
    # an agent's child is a subagent: 30 000 tokens
    assert _admit(PLAIN, depth=1).token_budget == 30_000
    # what the request gives within the limits is kept
    own = _admit(ChildRequest(role="test", brief="b", token_budget=500, timeout_seconds=12.5, max_turns=3))
    assert (own.token_budget, own.timeout_seconds, own.max_turns) == (500, 12.5, 3)
    at_limit = _admit(ChildRequest(role="test", brief="b", token_budget=80_000, timeout_seconds=600))
    assert (at_limit.token_budget, at_limit.timeout_seconds) == (80_000, 600)


def test_the_configured_table_decides_the_defaults() -> None:
    levels = LevelDefaults(agent=LevelLimits(tokens=1234, wallMs=5500, fanOut=1, maxPendingDetached=1))
    admitted = _admit(PLAIN, levels=levels)
    assert (admitted.token_budget, admitted.timeout_seconds) == (1234, 5.5)


def test_a_subagent_may_not_spawn_naming_the_depth_limit() -> None:
    message = _refused(PLAIN, depth=2)
    assert message == (
        "a subagent run (depth 2) may not spawn children: swarm.levelDefaults.subagent.fanOut is 0 "
        "(the depth limit)"
    )
    assert not may_spawn(DEFAULTS, 2)
    assert may_spawn(DEFAULTS, 0) and may_spawn(DEFAULTS, 1)


def test_a_level_with_fan_out_zero_may_not_spawn() -> None:
    levels = LevelDefaults(agent=LevelLimits(tokens=80_000, wallMs=600_000, fanOut=0, maxPendingDetached=0))
    with pytest.raises(InvalidRequestError) as info:
        _admit(PLAIN, depth=1, levels=levels)
    assert info.value.message.startswith("an agent run (depth 1) may not spawn children:")
    assert "swarm.levelDefaults.agent.fanOut is 0" in info.value.message
    assert not may_spawn(levels, 1) and may_spawn(levels, 0)


def test_the_deepest_level_may_not_spawn_whatever_its_fan_out() -> None:
    levels = LevelDefaults(
        subagent=LevelLimits(tokens=30_000, wallMs=600_000, fanOut=3, maxPendingDetached=3)
    )
    assert DEEPEST_DEPTH == 2
    assert not may_spawn(levels, DEEPEST_DEPTH) and not may_spawn(levels, DEEPEST_DEPTH + 1)
    with pytest.raises(InvalidRequestError) as info:
        _admit(PLAIN, depth=2, levels=levels)
    message = info.value.message
    assert "a subagent run (depth 2) may not spawn children" in message
    assert "3 levels (root, agent, subagent)" in message and "the depth limit" in message, message


def test_fan_out_counts_every_live_child() -> None:
    assert _admit(PLAIN, alive=5).token_budget == 80_000
    message = _refused(PLAIN, alive=6)
    assert message == (
        "fan-out limit reached: a root run may have at most 6 children alive at once "
        "(swarm.levelDefaults.root.fanOut); collect or wait for one first"
    )
    # detached or not, a live child counts
    assert "swarm.levelDefaults.root.fanOut" in _refused(DETACHED, alive=6)
    one = LevelDefaults(root=LevelLimits(tokens=200_000, wallMs=600_000, fanOut=1, maxPendingDetached=6))
    with pytest.raises(InvalidRequestError, match=re.escape("at most 1 child alive at once")):
        _admit(DETACHED, alive=1, levels=one)
    agent = _refused(PLAIN, depth=1, alive=4)
    assert "an agent run may have at most 4 children" in agent and "swarm.levelDefaults.agent.fanOut" in agent


def test_uncollected_detached_children_are_limited() -> None:
    # an agent may leave 3 detached children uncollected (ended ones too), but spawn a fourth attached
    message = _refused(DETACHED, depth=1, alive=0, uncollected_detached=3)
    assert message.startswith("detached limit reached: an agent run may leave at most 3 children")
    assert "(swarm.levelDefaults.agent.maxPendingDetached)" in message
    assert "collect_children" in message
    assert _admit(PLAIN, depth=1, uncollected_detached=3).detach is False
    assert _admit(DETACHED, depth=1, uncollected_detached=2).detach is True


def test_a_token_budget_above_the_child_level_is_refused() -> None:
    message = _refused(ChildRequest(role="coding", brief="b", token_budget=80_001))
    assert message == (
        "tokenBudget: 80001 tokens is above the limit of an agent child, 80000 tokens "
        "(swarm.levelDefaults.agent.tokens); ask for at most that, or omit it"
    )
    grandchild = _refused(ChildRequest(role="coding", brief="b", token_budget=30_001), depth=1)
    assert "a subagent child, 30000 tokens (swarm.levelDefaults.subagent.tokens)" in grandchild


def test_a_time_limit_above_the_child_level_is_refused() -> None:
    message = _refused(ChildRequest(role="coding", brief="b", timeout_seconds=600.5))
    assert message == (
        "timeoutSeconds: 600.5 s is above the limit of an agent child, 600 s "
        "(swarm.levelDefaults.agent.wallMs = 600000 ms); ask for at most that, or omit it"
    )


def test_the_depth_refusal_comes_before_the_counts() -> None:
    assert "(the depth limit)" in _refused(PLAIN, depth=2, alive=99, uncollected_detached=99)
    assert "fan-out" in _refused(ChildRequest(role="general", brief="b", token_budget=10**9), alive=6)


def test_the_tool_lists_follow_the_same_rule() -> None:
    names = {spec.name for spec in child_tools(may_spawn(DEFAULTS, 2))}
    assert not names & DELEGATION_TOOLS
    assert {spec.name for spec in child_tools(may_spawn(DEFAULTS, 1))} >= DELEGATION_TOOLS
    no_root = LevelDefaults(root=LevelLimits(tokens=200_000, wallMs=600_000, fanOut=0, maxPendingDetached=0))
    root_names = {spec.name for spec in root_tools(may_spawn(no_root, 0))}
    assert not root_names & DELEGATION_TOOLS and "update_work_plan" in root_names
    assert {spec.name for spec in root_tools(may_spawn(DEFAULTS, 0))} >= DELEGATION_TOOLS


def test_the_budget_counts_input_output_and_cache_writes_not_cache_reads() -> None:
    usage = Usage(
        input_tokens=100, output_tokens=20, cache_creation_input_tokens=3000, cache_read_input_tokens=45_000
    )
    assert budget_tokens(usage) == 3120
