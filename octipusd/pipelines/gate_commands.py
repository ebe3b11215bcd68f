"""A pipeline's gate commands (seed 003 "Approvals inside a pipeline"; issue 28 item 4).

A pipeline's gate commands are its stages' ``verifyCommand`` values resolved from the run's
parameters (:func:`gate_commands`); one that depends on a stage's output (``{{previousOutput}}``)
is not known in advance and is not listed. A plan or stage approval lists them
(:mod:`octipusd.pipelines.stage_approval`); approving it stores them on the pipeline
(``metadata.approvedGateCommands``, written with the decision: :mod:`octipusd.store.pipeline_decisions`).

:class:`GateCommandAllowance` is the :class:`~octipusd.toolkit.CallAllowance` the permission gate
consults where it would ask: an approved command runs without asking when

* the caller is a stage run of that pipeline (:attr:`CallContext.stage`: the stage's worker, or its
  ``verifyCommand`` run; never the root agent, a child the stage spawned or another pipeline) at the
  node the command was listed for;
* the call is that exact command as the only argument: ``shell__run`` with ``{"command": C}`` (its
  ``timeout`` and a ``description`` label ignored; ``cwd``, ``env``, ``network`` and ``useShell``
  only absent or at their defaults) or the CLI's own Bash (``cli-native:Bash``) with ``{"command":
  C}`` and at most ``description``/``timeout``. A changed command (``npm test 2>&1`` for ``npm
  test``) asks;
* the pipeline (of the caller's session) is ``running`` or ``awaiting_approval`` (the same check
  as the approved calls': :func:`~octipusd.pipelines.approved_calls.holding_pipeline`) and still
  walks the generation the person approved in (a resume starts a new walk: its stage approval asks
  again). The store drops them, with the approved calls, when the pipeline is completed, failed or
  stopped (:data:`~octipusd.store.pipeline_records.ALLOWANCE_KEYS`).

A pipeline without an approval prompt lists nothing: creating a pipeline is the model's action, not
the person's, so its gate commands ask the first time they run. The gate consults allowances only
after the rules: a DENY rule still wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from octipusd.pipelines.approved_calls import IGNORED_KEYS, holding_pipeline
from octipusd.pipelines.graph import Graph
from octipusd.pipelines.prompts import render_command
from octipusd.pipelines.templates import VARIABLE, ParameterValue, Step
from octipusd.store.pipeline_records import APPROVED_GATE_COMMANDS_KEY
from octipusd.store.repository import Store
from octipusd.toolkit import CallContext
from octipusd.tools import SHELL_RUN

__all__ = ["GateCommand", "GateCommandAllowance", "approved_command", "gate_commands"]

#: The CLI's own shell tool, as the gate names it.
NATIVE_BASH: Final = "cli-native:Bash"
#: ``shell__run`` arguments allowed only at their default (absent, null, or this value).
_SHELL_DEFAULTS: Final[Mapping[str, object]] = {"cwd": None, "env": {}, "network": False, "useShell": None}


@dataclass(frozen=True)
class GateCommand:
    """One gate command: the stage (its node) it belongs to and the resolved command."""

    node_key: str
    stage: str
    command: str

    def to_json(self) -> dict[str, str]:
        """``{"nodeKey", "stage", "command"}`` (what a stage approval's input lists)."""
        return {"nodeKey": self.node_key, "stage": self.stage, "command": self.command}


def _depends_on_output(step: Step) -> bool:
    return any(m.group(2) == "previousOutput" for m in VARIABLE.finditer(step.verify_command or ""))


def gate_commands(graph: Graph, values: Mapping[str, ParameterValue]) -> tuple[GateCommand, ...]:
    """The pipeline's gate commands, in node order (pure).

    Args:
        graph: The pipeline's compiled graph (its template's steps and node keys).
        values: The run's parameter values.

    Returns:
        Each stage's ``verifyCommand`` resolved from ``values``; a stage without one, or whose
        command uses ``{{previousOutput}}`` (not known in advance), is left out.
    """
    listed: list[GateCommand] = []
    for node in graph.nodes:
        if node.step_index is None:
            continue
        step = graph.template.steps[node.step_index]
        command = None if _depends_on_output(step) else render_command(step, values)
        if command and command.strip():
            listed.append(GateCommand(node.key, step.name, command))
    return tuple(listed)


def _at_default(key: str, value: object) -> bool:
    return value is None or value == _SHELL_DEFAULTS[key]


def approved_command(tool_id: str, arguments: Mapping[str, Any]) -> str | None:
    """The command of a call that runs it with nothing else (see the module), or None (pure)."""
    command = arguments.get("command")
    if not isinstance(command, str) or not command:
        return None
    rest = {k: v for k, v in arguments.items() if k != "command" and k not in IGNORED_KEYS}
    if tool_id == SHELL_RUN.tool_id:
        plain = all(k in _SHELL_DEFAULTS and _at_default(k, v) for k, v in rest.items())
        return command if plain else None
    if tool_id == NATIVE_BASH:
        return None if rest else command
    return None


class GateCommandAllowance:
    """The approved gate commands of pipelines, as an allowance of the permission gate (see the module).

    Args:
        store: The store (the pipeline's status, generation and ``metadata``).
    """

    def __init__(self, store: Store) -> None:
        self.store = store

    async def allows(
        self, ctx: CallContext, tool_id: str, arguments: dict[str, Any], action: str | None
    ) -> str | None:
        """Why this call runs without asking (an approved gate command of its stage), or None.

        Raises:
            StoreError: The pipeline could not be read (the call fails; nothing is allowed).
        """
        tag = ctx.stage
        command = approved_command(tool_id, arguments)
        if tag is None or command is None:
            return None
        pipeline = await holding_pipeline(self.store, ctx)
        if pipeline is None:
            return None
        for entry in pipeline.metadata.get(APPROVED_GATE_COMMANDS_KEY) or ():
            if (
                isinstance(entry, dict)
                and entry.get("nodeKey") == tag.node_key
                and entry.get("command") == command
                and entry.get("generation") == pipeline.generation
            ):
                return (
                    f"gate command of stage {tag.stage} approved by {entry.get('decidedBy')} with "
                    f"approval {entry.get('approvalId')} (pipeline {pipeline.name})"
                )
        return None
