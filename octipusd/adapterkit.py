"""Shared helpers of the adapter SDK: total (never-raising) accessors for vendor JSON.

Every adapter's parser must never raise on vendor input (``octipusd.adapter`` module docstring),
so field reads go through these helpers, which return a neutral value when a field is missing
or of an unexpected type instead of failing. Adapter packages import them from here rather
than keeping copies.

Also the location of the ``octipus-bridge`` helper as a vendor process must call it
(:func:`bridge_helper_path`, :func:`shell_guard_command`), shared by the adapters that hand it to
their vendor: Antigravity (the terminal bridge) and the Claude-binary adapters (the shell guard hook
of space mode).
"""

from __future__ import annotations

import json
import math
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Final

from octipusd.adapter import JSON, Usage

__all__ = [
    "BRIDGE_HELPER_NAME",
    "SHELL_GUARD_SUBCOMMAND",
    "as_cost",
    "as_dict",
    "as_list",
    "as_str",
    "as_tokens",
    "bridge_helper_path",
    "field_max",
    "is_zero",
    "shell_guard_command",
    "to_text",
]

#: Command name of the terminal helper (``[project.scripts]`` in pyproject.toml).
BRIDGE_HELPER_NAME: Final = "octipus-bridge"

#: The helper's subcommand that runs the shell guard hook (:mod:`octipusd.policy.shellguard`).
SHELL_GUARD_SUBCOMMAND: Final = "shell-guard"


def as_dict(value: object) -> JSON:
    """Return ``value`` if it is a JSON object (a dict with string keys), else an empty dict.

    Args:
        value: Any decoded JSON value.

    Returns:
        The same dict object (not a copy), or ``{}``.
    """
    if isinstance(value, dict):
        return value
    return {}


def as_list(value: object) -> list[Any]:
    """Return ``value`` if it is a JSON array, else an empty list."""
    if isinstance(value, list):
        return value
    return []


def as_str(value: object) -> str | None:
    """Return ``value`` if it is a string, else None."""
    return value if isinstance(value, str) else None


def as_tokens(value: object) -> int:
    """Read a token count: a non-negative int; anything else (bool, NaN, text, negative) counts as 0.

    Args:
        value: A decoded JSON value expected to be a token count.

    Returns:
        The count (tokens), clamped at 0; floats are truncated.
    """
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and math.isfinite(value):
        return max(int(value), 0)
    return 0


def as_cost(value: object) -> float | None:
    """Read a USD amount: a finite number, else None (bools are not numbers here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def is_zero(usage: Usage) -> bool:
    """Whether every token field of ``usage`` is 0."""
    return not (
        usage.input_tokens
        or usage.output_tokens
        or usage.cache_creation_input_tokens
        or usage.cache_read_input_tokens
    )


def field_max(a: Usage, b: Usage) -> Usage:
    """Field-wise maximum of two usages (tokens); ``estimated`` if either is."""
    return Usage(
        max(a.input_tokens, b.input_tokens),
        max(a.output_tokens, b.output_tokens),
        max(a.cache_creation_input_tokens, b.cache_creation_input_tokens),
        max(a.cache_read_input_tokens, b.cache_read_input_tokens),
        a.estimated or b.estimated,
    )


def to_text(value: object) -> str:
    """Render any decoded JSON value as compact JSON text (strings stay as they are).

    Never raises: values ``json`` cannot encode fall back to ``str``.
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, TypeError, RecursionError):
        pass
    try:
        return str(value)
    except RecursionError:
        return "<value nested too deeply to render>"


def bridge_helper_path() -> str:
    """Return the ``octipus-bridge`` path next to the running interpreter.

    ``octipus-bridge`` is a console script of the ``octipus`` distribution, installed in the same
    ``bin`` folder as the interpreter running the daemon (``sys.executable`` is not resolved: in a
    virtual environment it is the environment's ``bin/python``). An absolute path works inside a
    vendor process whatever its ``PATH``. No file-system access: a missing helper is noticed only
    when the vendor runs it.

    Returns:
        An absolute path string (``<dirname(sys.executable)>/octipus-bridge``).
    """
    return str(Path(os.path.abspath(sys.executable)).parent / BRIDGE_HELPER_NAME)


def shell_guard_command(helper: str | None = None) -> str:
    """Return the shell command line that runs the shell guard as a Claude Code hook.

    Claude Code runs a ``"type": "command"`` hook through a shell, writes the hook input JSON to its
    stdin and reads a decision JSON from its stdout; exit code 2 blocks the tool call (Claude Code
    hooks reference; observed with claude 2.1.197). The command is::

        '<helper>' shell-guard || exit 2

    The helper path is shell-quoted (it may contain spaces). ``|| exit 2`` makes the hook fail
    closed: if the helper is missing (exit 127) or crashes, the hook exits 2 and Claude blocks the
    call instead of treating the failure as a non-blocking hook error.

    Args:
        helper: Absolute path of ``octipus-bridge``; None for :func:`bridge_helper_path`.

    Returns:
        The command line (one string for the hook's ``command`` field).
    """
    path = helper if helper is not None else bridge_helper_path()
    return f"{shlex.quote(path)} {SHELL_GUARD_SUBCOMMAND} || exit 2"
