"""``get_cli_run_context``: the run's plan, feedback history and queued guidance.

Seed 003 ("Plans, feedback and delegation"): "get_cli_run_context returns the plan,
complete feedback history and queued user guidance." It bypasses the worker queue so a CLI
can read guidance while an awaited delegation holds the queue.
"""

from __future__ import annotations

from typing import Any

from octipusd.toolkit import RunIdentity, ToolHost, ToolResult, ToolSpec
from octipusd.tools.base import reject_unknown


async def _get_cli_run_context(
    identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]
) -> ToolResult:
    reject_unknown(arguments, ())
    return await host.run_context(identity)


GET_CLI_RUN_CONTEXT = ToolSpec(
    name="get_cli_run_context",
    description=(
        "Return this run's Octipus context: the work plan, the complete feedback history and user "
        "guidance queued for you (and children still pending). Check it before further affected "
        "work and before your final answer. Read-only; answers even while another Octipus tool "
        "call of yours is in progress."
    ),
    input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    handler=_get_cli_run_context,
    read_only=True,
    bypass_queue=True,
    timeout_seconds=15.0,
)
