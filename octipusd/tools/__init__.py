"""Octipus's own tools, as exposed through the per-run bridge.

:data:`DEFAULT_TOOLS` is the tool set a bridge publishes unless told otherwise (a root
agent's set): ``get_cli_run_context``, ``get_work_plan``, ``update_work_plan``,
``spawn_child``, ``collect_children``, ``steer_child``, ``shell__run``, the background commands
(:data:`BACKGROUND_TOOLS`: ``shell__run_background``, ``shell__read_background``,
``shell__stop_background``), the pipeline tools (:data:`PIPELINE_TOOLS`) and the monitor tools
(:data:`MONITOR_TOOLS`). A child agent gets :func:`child_tools`: the same set without root-only
plan editing and pipelines, and without the delegation
tools when it may not delegate further (:func:`root_tools` likewise for a root whose level may
not delegate).
:data:`CHILD_ROLES` maps each spawnable role to its stable role prompt; :data:`ROOT_ROLE` is
the root agent's role name. :func:`run_instructions` gives a run's stable system instructions
(:data:`OCTIPUS_INSTRUCTIONS`, then a child's role prompt).
"""

from __future__ import annotations

from octipusd.toolkit import ToolSpec, validate_tool_specs
from octipusd.tools.children import (
    CHILD_ROLES,
    COLLECT_CHILDREN,
    DELEGATION_TOOLS,
    ROOT_ROLE,
    SPAWN_CHILD,
    STEER_CHILD,
    child_tools,
    parse_child_request,
    root_tools,
    validate_resume_key,
)
from octipusd.tools.context import GET_CLI_RUN_CONTEXT
from octipusd.tools.instructions import OCTIPUS_INSTRUCTIONS, run_instructions
from octipusd.tools.monitor import MONITOR_TOOLS
from octipusd.tools.pipeline import PIPELINE_TOOLS, STAGE_TOOLS
from octipusd.tools.plan import GET_WORK_PLAN, UPDATE_WORK_PLAN, validate_work_plan
from octipusd.tools.shell import SHELL_RUN, ShellResult, run_shell
from octipusd.tools.shell_background import (
    BACKGROUND_TOOLS,
    SHELL_READ_BACKGROUND,
    SHELL_RUN_BACKGROUND,
    SHELL_STOP_BACKGROUND,
)

#: The default (root) tool set of a bridge, in the order they are listed.
DEFAULT_TOOLS: tuple[ToolSpec, ...] = validate_tool_specs(
    (
        GET_CLI_RUN_CONTEXT,
        GET_WORK_PLAN,
        UPDATE_WORK_PLAN,
        SPAWN_CHILD,
        COLLECT_CHILDREN,
        STEER_CHILD,
        SHELL_RUN,
        *BACKGROUND_TOOLS,
        *PIPELINE_TOOLS,
        *MONITOR_TOOLS,
    )
)

__all__ = [
    "BACKGROUND_TOOLS",
    "CHILD_ROLES",
    "COLLECT_CHILDREN",
    "DEFAULT_TOOLS",
    "DELEGATION_TOOLS",
    "GET_CLI_RUN_CONTEXT",
    "GET_WORK_PLAN",
    "MONITOR_TOOLS",
    "OCTIPUS_INSTRUCTIONS",
    "PIPELINE_TOOLS",
    "ROOT_ROLE",
    "SHELL_READ_BACKGROUND",
    "SHELL_RUN",
    "SHELL_RUN_BACKGROUND",
    "SHELL_STOP_BACKGROUND",
    "SPAWN_CHILD",
    "STAGE_TOOLS",
    "STEER_CHILD",
    "UPDATE_WORK_PLAN",
    "ShellResult",
    "child_tools",
    "parse_child_request",
    "root_tools",
    "run_instructions",
    "run_shell",
    "validate_resume_key",
    "validate_work_plan",
]
