"""Vendor-native tools classified in one place (octipusd.policy.native)."""

from __future__ import annotations

import pytest

from octipusd.policy.gate import native_flow_id
from octipusd.policy.native import (
    CONTROL_CLI_TOOLS,
    KNOWN_NATIVE_TOOLS,
    MUTATING_CLI_TOOLS,
    READ_ONLY_CLI_TOOLS,
    native_mutates,
)
from octipusd.policy.rules import CLI_NATIVE_PREFIX, DEFAULT_RULES

CODEX_ALIASES = {"commandExecution": "Bash", "fileChange": "Write", "webSearch": "WebSearch"}


@pytest.mark.parametrize("name", ["Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "KillShell"])
def test_claude_s_mutating_tools_mutate(name: str) -> None:
    assert native_mutates(name)


@pytest.mark.parametrize("name", [*READ_ONLY_CLI_TOOLS, *CONTROL_CLI_TOOLS])
def test_readers_and_control_tools_do_not(name: str) -> None:
    assert not native_mutates(name)


@pytest.mark.parametrize(
    ("vendor", "mutates"), [("commandExecution", True), ("fileChange", True), ("webSearch", False)]
)
def test_other_vendors_tools_are_classified_as_the_claude_tool_they_behave_like(
    vendor: str, mutates: bool
) -> None:
    name = native_flow_id(CLI_NATIVE_PREFIX + vendor, CODEX_ALIASES).removeprefix(CLI_NATIVE_PREFIX)
    assert native_mutates(name) is mutates


def test_an_unknown_native_tool_counts_as_a_mutation() -> None:
    assert native_mutates("permissions") and native_mutates("mcp__other__write")


def test_the_lists_are_disjoint_and_the_default_rules_allow_exactly_the_readers() -> None:
    assert len(set(KNOWN_NATIVE_TOOLS)) == len(KNOWN_NATIVE_TOOLS)
    assert set(MUTATING_CLI_TOOLS).isdisjoint({*READ_ONLY_CLI_TOOLS, *CONTROL_CLI_TOOLS})
    natives = {r for r in DEFAULT_RULES["allow"] if r.startswith(CLI_NATIVE_PREFIX)}
    assert natives == {f"{CLI_NATIVE_PREFIX}{t}(*)" for t in READ_ONLY_CLI_TOOLS}
