"""Vendor-native tools, classified in one place: which only read, which change something.

A vendor's own tools reach Octipus as ``cli-native:<Tool>`` permission requests (Claude Code's
names; the other vendors' names are mapped to the Claude tool they behave like through the
adapters' ``tool_aliases``, :func:`~octipusd.policy.gate.native_flow_id`). The classification
here is used by:

* the default rules and plan mode (:data:`READ_ONLY_CLI_TOOLS` are allowed, and a plan turn may
  use them);
* the recovery review (seed 000 "Action recovery"): after an uncertain Octipus action, a native
  call that :func:`native_mutates` needs the same recovery review as an Octipus mutation, while
  read-only tools stay available for checking external state. A name not listed here counts as a
  mutation, as arbitrary shell commands do (seed 000: "conservatively treated as mutations");
* the check of rule texts (:data:`KNOWN_NATIVE_TOOLS`, a forgotten prefix or a wrong case).
"""

from __future__ import annotations

from typing import Final

from octipusd.toolkit import RecoveryContract, RiskClass

__all__ = [
    "CONTROL_CLI_TOOLS",
    "KNOWN_NATIVE_TOOLS",
    "MUTATING_CLI_TOOLS",
    "NATIVE_CONTRACT",
    "READ_ONLY_CLI_TOOLS",
    "native_mutates",
]

#: Native tools that only read (files, the web, the agent's own to-do list): allowed by the
#: default rules, available in plan mode and while a recovery review is owed.
READ_ONLY_CLI_TOOLS: Final = (
    "Read",
    "Glob",
    "Grep",
    "LS",
    "NotebookRead",
    "WebFetch",
    "WebSearch",
    "TodoWrite",
)

#: Native tools that change nothing themselves: a question to the person, the end of planning,
#: a sub-agent (each of its calls is asked for on its own), reading a background shell's output.
CONTROL_CLI_TOOLS: Final = ("AskUserQuestion", "ExitPlanMode", "Task", "Agent", "BashOutput")

#: Native tools known to change something (Claude Code's, and Codex's item kinds); any name in
#: neither list above counts as one too.
MUTATING_CLI_TOOLS: Final = (
    "Bash",
    "KillShell",
    "Write",
    "Edit",
    "MultiEdit",
    "NotebookEdit",
    "commandExecution",
    "fileChange",
)

#: Every native tool name people write in rules.
KNOWN_NATIVE_TOOLS: Final = (*READ_ONLY_CLI_TOOLS, *CONTROL_CLI_TOOLS, *MUTATING_CLI_TOOLS)

#: The recovery contract of a native mutation: the vendor runs it in the workspace, Octipus neither
#: executes nor journals it, so it declares nothing beyond containment.
NATIVE_CONTRACT: Final = RecoveryContract(
    RiskClass.CONTAINABLE, intended_effects="whatever the vendor's own tool does in the workspace"
)

_CHANGES_NOTHING: Final = frozenset((*READ_ONLY_CLI_TOOLS, *CONTROL_CLI_TOOLS))


def native_mutates(name: str) -> bool:
    """Whether a vendor-native tool may change something (so it waits for a recovery review).

    Args:
        name: The native tool's name as Claude names it (``Bash``, ``Write``...), i.e. after the
            vendor's alias was applied.

    Returns:
        False only for the read-only and control tools listed here.
    """
    return name not in _CHANGES_NOTHING
