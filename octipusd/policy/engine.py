"""The permission decision for one tool call: the operator's rules, else the tool's default level.

Every tool id goes through here: Octipus tools (``shell__run``), MCP connector tools
(``server.tool``) and vendor-native tools (``cli-native:<Tool>``, seed 003 "Permissions and
limits").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from octipusd.policy.rules import Level, RuleSet, default_level


@dataclass(frozen=True)
class PolicyDecision:
    """A decision and why.

    Attributes:
        level: allow, ask or deny.
        explanation: Which rule matched, or which default applied (shown in approvals and events).
    """

    level: Level
    explanation: str


class Policy:
    """Decides tool calls from a :class:`RuleSet`.

    Args:
        rules: The effective rules (the built-in defaults unless ``permissions.rules`` is set).
    """

    def __init__(self, rules: RuleSet) -> None:
        self.rules = rules

    @classmethod
    def from_setting(cls, value: dict[str, list[str]] | None) -> Policy:
        """Build from the ``permissions.rules`` setting (None = built-in defaults).

        Raises:
            ValueError: a rule does not parse; the message names it.
        """
        return cls(RuleSet.from_setting(value))

    def decide(self, tool_id: str, arguments: dict[str, Any], action: str | None = None) -> PolicyDecision:
        """Decide one call.

        Args:
            tool_id: ``cli-native:Bash``, ``shell__run``, ``server.tool``...
            arguments: The call's arguments (the subject is taken from them).
            action: The action name (for ``cli-native:<Tool>``, the tool name).
        """
        match = self.rules.decide(tool_id, arguments, action)
        if match is not None:
            return PolicyDecision(match.level, match.explain())
        level = default_level(tool_id)
        return PolicyDecision(level, f"{level} by the default level of {tool_id} (no rule matched)")
