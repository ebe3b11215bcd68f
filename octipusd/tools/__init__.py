"""Octipus's own tools, as exposed through the per-run bridge.

:data:`DEFAULT_TOOLS` is the tool set a bridge publishes unless told otherwise:
``get_cli_run_context``, ``get_work_plan``, ``update_work_plan`` and ``shell__run``.
"""

from __future__ import annotations

from octipusd.tools.base import ToolHandler, ToolResult, ToolSpec, validate_tool_specs
from octipusd.tools.context import GET_CLI_RUN_CONTEXT
from octipusd.tools.plan import GET_WORK_PLAN, UPDATE_WORK_PLAN, validate_work_plan
from octipusd.tools.shell import SHELL_RUN, ShellResult, run_shell

#: The default tool set of a bridge, in the order they are listed.
DEFAULT_TOOLS: tuple[ToolSpec, ...] = validate_tool_specs(
    (GET_CLI_RUN_CONTEXT, GET_WORK_PLAN, UPDATE_WORK_PLAN, SHELL_RUN)
)

__all__ = [
    "DEFAULT_TOOLS",
    "GET_CLI_RUN_CONTEXT",
    "GET_WORK_PLAN",
    "SHELL_RUN",
    "UPDATE_WORK_PLAN",
    "ShellResult",
    "ToolHandler",
    "ToolResult",
    "ToolSpec",
    "run_shell",
    "validate_tool_specs",
    "validate_work_plan",
]
