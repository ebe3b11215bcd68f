"""``spawn_child``'s ``gates`` argument: the child's command scorer gates, validated before dispatch.

Seed 003 ("Permissions and limits", command scorers). Input shape (camelCase, as the model sends
it), at most :data:`MAX_GATES` gates::

    [{"name"?: str,                 # 1..80 characters, unique; default "gates[<index>]"
      "command": str,               # a shell command line, 1..4000 characters
      # or, instead of "command":
      "anyOf": [str, ...],          # 1..4 alternatives: the gate passes when one passes
      "required"?: bool,            # default true: the gate must pass for verification to pass
      "retryable"?: bool,           # default true: a failure retries the child
      "timeoutSeconds"?: number}]   # 1..600 seconds per command; default 300

A command may not switch ``git``, ``make``, ``pnpm``, ``npm`` or ``yarn`` to a directory outside
the child's tree (:mod:`octipusd.policy.dirswitch`): the child's tree is chosen later, so any
absolute path, ``~`` path, ``..`` escape or shell expansion in such a switch is refused here.
Every refusal names the field (``gates[1].command: ...``, ``gates[0].anyOf[2]: ...``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from octipusd.errors import InvalidRequestError
from octipusd.policy.dirswitch import first_refusal
from octipusd.toolkit import GateSpec
from octipusd.tools.base import reject_unknown
from octipusd.tools.shell import MAX_TIMEOUT_SECONDS as SHELL_MAX_TIMEOUT_SECONDS

__all__ = [
    "DEFAULT_GATE_TIMEOUT_SECONDS",
    "GATES_SCHEMA",
    "MAX_GATES",
    "MAX_GATE_ALTERNATIVES",
    "MAX_GATE_COMMAND_CHARS",
    "MAX_GATE_NAME_CHARS",
    "MAX_GATE_TIMEOUT_SECONDS",
    "MIN_GATE_TIMEOUT_SECONDS",
    "parse_gates",
]

#: Gates one child may have.
MAX_GATES = 8
#: Alternatives one ``anyOf`` gate may have.
MAX_GATE_ALTERNATIVES = 4
#: Characters of one gate command (as ``swarm.worktreeSetupCommand``).
MAX_GATE_COMMAND_CHARS = 4000
#: Characters of a gate's name.
MAX_GATE_NAME_CHARS = 80
#: Shortest deadline of one gate command (seconds).
MIN_GATE_TIMEOUT_SECONDS = 1.0
#: Longest deadline of one gate command (seconds): a gate runs through ``shell__run``, whose cap it is.
MAX_GATE_TIMEOUT_SECONDS = SHELL_MAX_TIMEOUT_SECONDS
#: Deadline of a gate command that names none (seconds): test suites outlast ``shell__run``'s default.
DEFAULT_GATE_TIMEOUT_SECONDS = 300.0

_FIELDS = ("name", "command", "anyOf", "required", "retryable", "timeoutSeconds")


def parse_gates(value: object) -> tuple[GateSpec, ...]:
    """Validate the ``gates`` argument of ``spawn_child``.

    Args:
        value: The argument as received (None when absent).

    Returns:
        The gates in order; empty for None or ``[]``.

    Raises:
        InvalidRequestError: not a list of at most :data:`MAX_GATES` objects, an unknown or
            missing field, a wrong type, a value out of range, a duplicate name, or a directory
            switch outside the child's tree; the text names the field (``gates[1].command: ...``).
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidRequestError(f"gates: must be a list of gate objects, got {type(value).__name__}")
    if len(value) > MAX_GATES:
        raise InvalidRequestError(f"gates: at most {MAX_GATES} gates, got {len(value)}")
    gates: list[GateSpec] = []
    names: dict[str, int] = {}
    for index, item in enumerate(value):
        gate = _gate(item, f"gates[{index}]")
        if gate.name in names:
            raise InvalidRequestError(
                f"gates[{index}].name: {gate.name!r} is already the name of gates[{names[gate.name]}]"
            )
        names[gate.name] = index
        gates.append(gate)
    return tuple(gates)


def _gate(item: object, where: str) -> GateSpec:
    if not isinstance(item, dict):
        raise InvalidRequestError(f"{where}: must be an object, got {type(item).__name__}")
    reject_unknown(item, _FIELDS, where)
    command, alternatives = item.get("command"), item.get("anyOf")
    if command is not None and alternatives is not None:
        raise InvalidRequestError(f"{where}: give either command or anyOf, not both")
    commands: tuple[str, ...]
    if command is not None:
        commands = (_command(command, f"{where}.command"),)
    elif alternatives is not None:
        commands = _alternatives(alternatives, f"{where}.anyOf")
    else:
        raise InvalidRequestError(f"{where}: needs a command (or anyOf, a list of alternative commands)")
    return GateSpec(
        name=_name(item.get("name"), where),
        commands=commands,
        any_of=alternatives is not None,
        required=_flag(item, "required", where),
        retryable=_flag(item, "retryable", where),
        timeout_seconds=_timeout(item.get("timeoutSeconds"), f"{where}.timeoutSeconds"),
    )


def _name(value: object, where: str) -> str:
    if value is None:
        return where
    if not isinstance(value, str):
        raise InvalidRequestError(f"{where}.name: must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidRequestError(f"{where}.name: must not be empty")
    if len(value) > MAX_GATE_NAME_CHARS:
        raise InvalidRequestError(f"{where}.name: at most {MAX_GATE_NAME_CHARS} characters, got {len(value)}")
    return value


def _command(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise InvalidRequestError(f"{where}: must be a string, got {type(value).__name__}")
    if not value.strip():
        raise InvalidRequestError(f"{where}: must not be empty")
    if len(value) > MAX_GATE_COMMAND_CHARS:
        raise InvalidRequestError(f"{where}: at most {MAX_GATE_COMMAND_CHARS} characters, got {len(value)}")
    if "\x00" in value:
        raise InvalidRequestError(f"{where}: must not contain NUL characters")
    refusal = first_refusal(value)
    if refusal is not None:
        raise InvalidRequestError(
            f"{where}: {refusal}; a gate runs in the child's own tree (its worktree or captured project), "
            "so drop the switch or use a path relative to that tree ('pnpm test', not "
            "'pnpm -C /host/repo test')"
        )
    return value


def _alternatives(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise InvalidRequestError(f"{where}: must be a list of commands, got {type(value).__name__}")
    if not 1 <= len(value) <= MAX_GATE_ALTERNATIVES:
        raise InvalidRequestError(
            f"{where}: must hold 1 to {MAX_GATE_ALTERNATIVES} commands, got {len(value)}"
        )
    return tuple(_command(command, f"{where}[{index}]") for index, command in enumerate(value))


def _flag(item: Mapping[str, Any], key: str, where: str) -> bool:
    value = item.get(key)
    if value is None:
        return True
    if not isinstance(value, bool):
        raise InvalidRequestError(f"{where}.{key}: must be true or false, got {type(value).__name__}")
    return value


def _timeout(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequestError(f"{where}: must be a number of seconds, got {type(value).__name__}")
    if not (math.isfinite(value) and MIN_GATE_TIMEOUT_SECONDS <= value <= MAX_GATE_TIMEOUT_SECONDS):
        raise InvalidRequestError(
            f"{where}: must be from {MIN_GATE_TIMEOUT_SECONDS:g} to {MAX_GATE_TIMEOUT_SECONDS:g} seconds, "
            f"got {value}"
        )
    return float(value)


_COMMAND_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": MAX_GATE_COMMAND_CHARS}

#: The JSON schema of the ``gates`` property of ``spawn_child``.
GATES_SCHEMA: dict[str, Any] = {
    "type": "array",
    "maxItems": MAX_GATES,
    "description": (
        "Optional verification gates, run after the child finishes, in its own tree (its worktree or "
        "the project) through the shell tool and its permission rules. Each gate has either command "
        "or anyOf (alternatives: the gate passes when one passes). A failing required gate retries the "
        "child with the failure (output tail included) unless it is not retryable. Do not switch git, "
        "make, pnpm, npm or yarn to a directory outside the tree: use 'pnpm test', not "
        "'pnpm -C /host/repo test'."
    ),
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string", "minLength": 1, "maxLength": MAX_GATE_NAME_CHARS},
            "command": {**_COMMAND_SCHEMA, "description": "Shell command line; exit 0 passes."},
            "anyOf": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_GATE_ALTERNATIVES,
                "items": _COMMAND_SCHEMA,
                "description": "Alternative commands (instead of command), tried in order.",
            },
            "required": {"type": "boolean", "description": "Must pass for verification (default true)."},
            "retryable": {
                "type": "boolean",
                "description": "A failure retries the child (default true); false stops the retries.",
            },
            "timeoutSeconds": {
                "type": "number",
                "minimum": MIN_GATE_TIMEOUT_SECONDS,
                "maximum": MAX_GATE_TIMEOUT_SECONDS,
                "description": f"Deadline of each command (default {DEFAULT_GATE_TIMEOUT_SECONDS:g} s).",
            },
        },
        "additionalProperties": False,
    },
}
