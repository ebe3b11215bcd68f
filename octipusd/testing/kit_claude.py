"""Conformance kit for Claude Code: the real ``claude`` against the scripted Anthropic model."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.conformance import ModelServer, Step
from octipusd.testing.harness import claude_binary


class ClaudeKit:
    """Claude Code (observed.md §1): tools ``Bash`` and ``mcp__octipus__<tool>``, stdio relay, resume."""

    adapter = "claude-code"
    relay = True
    resumes = True
    reports_usage = True
    sandbox_without_network = False

    def start_model(self, steps: list[Step]) -> ModelServer:
        """Start the scripted Anthropic Messages server."""
        return ScriptedAnthropicServer({"steps": steps}).start()

    def daemon_env(self, home: Path, model: ModelServer) -> dict[str, str]:
        """Point the daemon's claude at the model (the harness sets ANTHROPIC_* already)."""
        return {"OCTIPUS_CLAUDE_BINARY": str(claude_binary())}

    def text(self, text: str) -> Step:
        """Answer ``text``."""
        return {"content": [{"type": "text", "text": text}]}

    def bridge_call(self, tool: str, arguments: Mapping[str, Any]) -> Step:
        """Call ``mcp__octipus__<tool>``."""
        return {"content": [{"type": "tool_use", "name": f"mcp__octipus__{tool}", "input": dict(arguments)}]}

    def shell(self, command: str) -> Step:
        """Run ``command`` with the Bash tool."""
        return {"content": [{"type": "tool_use", "name": "Bash", "input": {"command": command}}]}

    def session_options(self) -> dict[str, Any]:
        """Default session fields (workspace permission mode = acceptEdits)."""
        return {}
