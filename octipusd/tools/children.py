"""``spawn_child``: delegate one task to a child agent and wait for its answer.

Seed 003 ("Plans, feedback and delegation"): delegation goes through one ``spawn_child``
handler with role, depth and budget constraints; CLI children receive their own assigned
tools and never root-only plan editing (:func:`child_tools`). Seed 003 ("Resuming child
sessions per role and task"): the parent may pass ``resumeKey``, a task id of 1 to 200
letters, digits, ``.``, ``_``, ``:`` or ``-``; the same key with the same role continues that
child's vendor session, omitting it gives a fresh child. The host
(:meth:`octipusd.toolkit.ToolHost.spawn_child`) scopes the key by the parent, runs the
child and returns its summary; this module only validates and forwards.

Input shape (camelCase, as the model sends it)::

    {"role": "general" | "coding" | "research" | "review" | "test",
     "brief": str,                 # 1..20000 characters
     "resumeKey"?: str,            # 1..200 of [A-Za-z0-9._:-]
     "maxTurns"?: int,             # 1..200
     "tokenBudget"?: int,          # >= 1, tokens
     "timeoutSeconds"?: number,    # 1..7200, seconds
     "detach"?: bool,
     "gates"?: [gate, ...]}        # the child's command scorer gates (octipusd.tools.gate_args)

Result shape (the host's summary, unchanged)::

    {"childRunId": str, "role": str, "status": str, "resumed": bool,
     "vendorSessionId": str | None, "result": str | None, "reason": str | None}
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from octipusd.errors import InvalidRequestError
from octipusd.toolkit import ChildRequest, RunIdentity, ToolHost, ToolResult, ToolSpec
from octipusd.tools.base import reject_unknown, require_str
from octipusd.tools.gate_args import GATES_SCHEMA, parse_gates
from octipusd.tools.monitor import MONITOR_TOOLS
from octipusd.tools.pipeline import PIPELINE_TOOLS

#: A child resume key (the parent's task id): 1 to 200 ASCII letters, digits, ``.``, ``_``,
#: ``:`` or ``-``. Match it with ``fullmatch`` (``$`` alone also matches before a final newline).
RESUME_KEY = re.compile(r"^[A-Za-z0-9._:-]{1,200}$")

#: The rule of :data:`RESUME_KEY`, in words (error texts and the schema description).
RESUME_KEY_RULE = "1 to 200 letters, digits, '.', '_', ':' or '-'"

#: The root agent's role name. It is not a child role: ``spawn_child`` refuses it.
ROOT_ROLE = "root"

#: Bounds of the other arguments.
MAX_BRIEF_CHARS = 20000
MAX_TURNS = 200
MAX_TIMEOUT_SECONDS = 7200.0
MIN_TIMEOUT_SECONDS = 1.0

#: How much of a bad value an error text shows.
_SHOWN_CHARS = 40

_CHILD_PREAMBLE = (
    "You are a child agent of Octipus, started by a parent agent to do one delegated task. "
    "Do only what the brief asks: do not widen the scope, start unrelated work or ask the user "
    "questions the brief already answers. "
)
_CHILD_ENDING = (
    " When you are done, or cannot go on, end with a concise final answer for your parent: "
    "what you did, the result, and anything left open or blocked. Your parent reads only that "
    "answer."
)

#: Child role name -> the role's stable prompt (the child's system instructions for its role).
#: Part of a keyed child's session fingerprint (seed 003): change a prompt only on purpose.
CHILD_ROLES: Mapping[str, str] = MappingProxyType(
    {
        "general": _CHILD_PREAMBLE
        + "Carry out the brief with the tools you have, checking your work as you go."
        + _CHILD_ENDING,
        "coding": _CHILD_PREAMBLE
        + "Make the code changes the brief asks for in the working directory, following the "
        "project's existing style, and run the relevant tests or checks before you finish. Do not "
        "commit, push or rewrite history unless the brief says so. List the files you changed."
        + _CHILD_ENDING,
        "research": _CHILD_PREAMBLE
        + "Find and read the sources the brief needs (code, documentation, the web when "
        "available) without changing any file. Report findings with their sources (paths, line "
        "numbers, URLs) and say how certain each one is." + _CHILD_ENDING,
        "review": _CHILD_PREAMBLE
        + "Review the changes or material named in the brief without changing them. Report "
        "concrete problems ordered by severity, each with its location and a suggested fix; say "
        "plainly when you found none." + _CHILD_ENDING,
        "test": _CHILD_PREAMBLE
        + "Write or run the tests the brief asks for. Change test files only, unless the brief "
        "says otherwise. Report the commands you ran, what passed, what failed and the relevant "
        "failure output." + _CHILD_ENDING,
    }
)

_ARGUMENTS = ("role", "brief", "resumeKey", "maxTurns", "tokenBudget", "timeoutSeconds", "detach", "gates")


def _shown(value: str) -> str:
    """``repr`` of ``value``, truncated to :data:`_SHOWN_CHARS` characters."""
    if len(value) > _SHOWN_CHARS:
        return f"{value[:_SHOWN_CHARS]!r}... ({len(value)} characters)"
    return repr(value)


def validate_resume_key(value: object) -> str | None:
    """Validate a ``resumeKey`` argument.

    Args:
        value: The argument as received (None when absent).

    Returns:
        The key unchanged, or None when ``value`` is None.

    Raises:
        InvalidRequestError: ``value`` is not a string, or not 1 to 200 letters, digits,
            ``.``, ``_``, ``:`` or ``-``; the text names ``resumeKey``, states the rule and
            shows the bad value (truncated).
    """
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequestError(f"resumeKey: must be a string, got {type(value).__name__}")
    if not RESUME_KEY.fullmatch(value):
        raise InvalidRequestError(f"resumeKey: must be {RESUME_KEY_RULE}, got {_shown(value)}")
    return value


def _role(arguments: Mapping[str, Any]) -> str:
    role = require_str(arguments, "role")
    if role not in CHILD_ROLES:
        note = " (the root agent's role cannot be spawned)" if role == ROOT_ROLE else ""
        raise InvalidRequestError(f"role: must be one of {', '.join(CHILD_ROLES)}, got {_shown(role)}{note}")
    return role


def _brief(arguments: Mapping[str, Any]) -> str:
    brief = require_str(arguments, "brief")
    if len(brief) > MAX_BRIEF_CHARS:
        raise InvalidRequestError(f"brief: longer than {MAX_BRIEF_CHARS} characters ({len(brief)})")
    return brief


def _optional_int(arguments: Mapping[str, Any], key: str, low: int, high: int | None) -> int | None:
    value = arguments.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidRequestError(f"{key}: must be an integer, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bounds = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise InvalidRequestError(f"{key}: must be {bounds}, got {value}")
    return value


def _optional_seconds(arguments: Mapping[str, Any], key: str) -> float | None:
    value = arguments.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequestError(f"{key}: must be a number of seconds, got {type(value).__name__}")
    if not (math.isfinite(value) and MIN_TIMEOUT_SECONDS <= value <= MAX_TIMEOUT_SECONDS):
        raise InvalidRequestError(
            f"{key}: must be from {MIN_TIMEOUT_SECONDS:g} to {MAX_TIMEOUT_SECONDS:g} seconds, got {value}"
        )
    return float(value)


def parse_child_request(arguments: Mapping[str, Any]) -> ChildRequest:
    """Validate ``spawn_child`` arguments and build the :class:`ChildRequest`.

    Args:
        arguments: The call's arguments (identity keys already stripped by the bridge).

    Returns:
        The request; absent or null optional arguments are None.

    Raises:
        InvalidRequestError: an unknown key, a missing required field, a wrong type, a value
            out of range, or a gate command switching a tool to a directory outside the child's
            tree (:func:`~octipusd.tools.gate_args.parse_gates`); the text names the field (e.g.
            ``maxTurns: must be from 1 to 200, got 0``, ``gates[1].command: ...``).
    """
    reject_unknown(arguments, _ARGUMENTS)
    return ChildRequest(
        role=_role(arguments),
        brief=_brief(arguments),
        resume_key=validate_resume_key(arguments.get("resumeKey")),
        max_turns=_optional_int(arguments, "maxTurns", 1, MAX_TURNS),
        token_budget=_optional_int(arguments, "tokenBudget", 1, None),
        timeout_seconds=_optional_seconds(arguments, "timeoutSeconds"),
        detach=_optional_bool(arguments, "detach"),
        gates=parse_gates(arguments.get("gates")),
    )


def _optional_bool(arguments: Mapping[str, Any], name: str) -> bool:
    value = arguments.get(name)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidRequestError(f"{name}: must be true or false, got {type(value).__name__}")
    return value


async def _spawn_child(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    request = parse_child_request(arguments)
    return await host.spawn_child(identity, request)


SPAWN_CHILD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {
            "type": "string",
            "enum": list(CHILD_ROLES),
            "description": (
                "The child's role: general (any task), coding (change code and run checks), "
                "research (read and report, no changes), review (review without changes), "
                "test (write or run tests)."
            ),
        },
        "brief": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_BRIEF_CHARS,
            "description": (
                "The whole task for the child: goal, relevant paths and facts, constraints, and "
                "what its final answer must contain. The child sees nothing else of your conversation."
            ),
        },
        "resumeKey": {
            "type": "string",
            "pattern": RESUME_KEY.pattern,
            "minLength": 1,
            "maxLength": 200,
            "description": (
                f"Optional task id ({RESUME_KEY_RULE}). Passing the same key with the same role "
                "continues that child's vendor session (Claude Code and Codex children), so it "
                "keeps what it learned on the task; omitting it gives a fresh child. Ignored where "
                "the child cannot resume."
            ),
        },
        "maxTurns": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_TURNS,
            "description": "Optional turn limit of the child run.",
        },
        "tokenBudget": {
            "type": "integer",
            "minimum": 1,
            "description": "Optional token budget of the child run (tokens).",
        },
        "timeoutSeconds": {
            "type": "number",
            "minimum": MIN_TIMEOUT_SECONDS,
            "maximum": MAX_TIMEOUT_SECONDS,
            "description": "Optional wall-clock limit of the child run (seconds).",
        },
        "detach": {
            "type": "boolean",
            "description": (
                "Return as soon as the child started instead of waiting; keep working and pick "
                "its result up with collect_children. Children still running when you finish are "
                "cancelled."
            ),
        },
        "gates": GATES_SCHEMA,
    },
    "required": ["role", "brief"],
    "additionalProperties": False,
}

SPAWN_CHILD = ToolSpec(
    name="spawn_child",
    description=(
        "Delegate one task to a child agent and wait for it to finish (or, with detach=true, "
        "return at once and collect the result later with collect_children). The child runs with its "
        "role's instructions and its own tools, sees only your brief, and returns "
        '{"childRunId", "role", "status", "resumed", "vendorSessionId", "result", "reason"}; '
        "result is its final answer. Pass resumeKey to continue an earlier child of the same role "
        "on the same task. Pass gates (commands such as 'pnpm test') to verify the child's work in "
        "its own tree; a fixable failure retries the child with the failure output."
    ),
    input_schema=SPAWN_CHILD_SCHEMA,
    handler=_spawn_child,
    timeout_seconds=MAX_TIMEOUT_SECONDS,
    internal=True,
)


#: Default ``collect_children`` wait (seconds).
MAX_COLLECT_SECONDS = 900.0
#: Longest ``collect_children`` wait (seconds): below the tool's own deadline, so a wait that ends
#: always answers with the children still pending instead of a tool timeout.
COLLECT_WAIT_CAP = MAX_TIMEOUT_SECONDS - 60.0


def parse_collect_request(arguments: Mapping[str, Any]) -> tuple[list[str] | None, float]:
    """Validate ``collect_children`` arguments.

    Returns:
        ``(child run ids or None for all, timeout in seconds)``.

    Raises:
        InvalidRequestError: naming the bad field.
    """
    reject_unknown(arguments, ("childRunIds", "timeoutSeconds"))
    ids = arguments.get("childRunIds")
    if ids is not None and (
        not isinstance(ids, list) or not all(isinstance(i, str) and i for i in ids) or len(ids) > 100
    ):
        raise InvalidRequestError("childRunIds: must be a list of up to 100 child run ids (strings)")
    timeout = _optional_seconds(arguments, "timeoutSeconds")
    # Duplicates dropped (first occurrence kept): the host hands each summary out once, so a
    # repeated id would be looked up again after its summary was taken.
    unique = list(dict.fromkeys(ids)) if ids is not None else None
    return unique, (min(timeout, COLLECT_WAIT_CAP) if timeout is not None else MAX_COLLECT_SECONDS)


async def _collect_children(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    ids, timeout = parse_collect_request(arguments)
    return await host.collect_children(identity, ids, timeout)


COLLECT_CHILDREN = ToolSpec(
    name="collect_children",
    description=(
        "Wait for children you spawned with detach=true and return their results "
        '({"children": [{"childRunId", "role", "status", "result", ...}], "pending": [...]}). '
        "Each result is returned once. Without childRunIds, waits for every uncollected child."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "childRunIds": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 100},
            "timeoutSeconds": {
                "type": "number",
                "minimum": MIN_TIMEOUT_SECONDS,
                "maximum": MAX_TIMEOUT_SECONDS,
                "description": "Longest wait (seconds); children still running are then listed as pending.",
            },
        },
        "additionalProperties": False,
    },
    handler=_collect_children,
    timeout_seconds=MAX_TIMEOUT_SECONDS,
    internal=True,
)


def parse_steer_request(arguments: Mapping[str, Any]) -> tuple[str, str]:
    """Validate ``steer_child`` arguments.

    Returns:
        ``(child run id, guidance text)``.

    Raises:
        InvalidRequestError: naming the bad field.
    """
    reject_unknown(arguments, ("childRunId", "text"))
    child = require_str(arguments, "childRunId")
    text = require_str(arguments, "text")
    if not text.strip():
        raise InvalidRequestError("text: the guidance is empty")
    if len(text) > MAX_BRIEF_CHARS:
        raise InvalidRequestError(f"text: at most {MAX_BRIEF_CHARS} characters, got {len(text)}")
    return child, text


async def _steer_child(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    child, text = parse_steer_request(arguments)
    return await host.steer_child(identity, child, text)


STEER_CHILD = ToolSpec(
    name="steer_child",
    description=(
        "Send guidance to one of your own children that is still running (spawned with detach=true): "
        "it reaches the child's running turn, or its run context when its CLI takes no live input. "
        'Returns {"childRunId", "delivery": "stdin" | "queued"}. Collect its result with collect_children.'
    ),
    input_schema={
        "type": "object",
        "properties": {
            "childRunId": {"type": "string", "minLength": 1},
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_BRIEF_CHARS},
        },
        "required": ["childRunId", "text"],
        "additionalProperties": False,
    },
    handler=_steer_child,
    timeout_seconds=60.0,
    internal=True,
)


#: The delegation tools: published together, and only to a run that may have children.
DELEGATION_TOOLS = frozenset({SPAWN_CHILD.name, COLLECT_CHILDREN.name, STEER_CHILD.name})


#: The pipeline and monitor tools only a root run has (seed 003: "on the bridge of root runs"; a
#: monitor wakes the root's session).
ROOT_PIPELINE_TOOLS: frozenset[str] = frozenset(t.name for t in (*PIPELINE_TOOLS, *MONITOR_TOOLS))


def child_tools(allow_spawn: bool) -> tuple[ToolSpec, ...]:
    """Return the tool set of a child agent.

    That is :data:`octipusd.tools.DEFAULT_TOOLS` without ``update_work_plan``, the pipeline and the
    monitor tools (plan editing, pipelines and monitors are root-only, seed 003) and, unless ``allow_spawn``, without the
    :data:`DELEGATION_TOOLS`; order is kept.

    Args:
        allow_spawn: True when the child may spawn children of its own (its level allows it).
    """
    root_only = {"update_work_plan", *ROOT_PIPELINE_TOOLS}
    return _without(root_only if allow_spawn else {*root_only, *DELEGATION_TOOLS})


def root_tools(allow_spawn: bool) -> tuple[ToolSpec, ...]:
    """Return the tool set of a root agent: :data:`octipusd.tools.DEFAULT_TOOLS`, without the
    :data:`DELEGATION_TOOLS` unless ``allow_spawn`` (its level allows children); order is kept."""
    return _without(set() if allow_spawn else set(DELEGATION_TOOLS))


def _without(dropped: set[str]) -> tuple[ToolSpec, ...]:
    # Imported here: the package imports this module to build DEFAULT_TOOLS.
    from octipusd.tools import DEFAULT_TOOLS

    return tuple(spec for spec in DEFAULT_TOOLS if spec.name not in dropped)
