"""Shared helpers of the adapter SDK: total (never-raising) accessors for vendor JSON.

Every adapter's parser must never raise on vendor input (``octipusd.adapter`` module docstring),
so field reads go through these helpers, which return a neutral value when a field is missing
or of an unexpected type instead of failing. Adapter packages import them from here rather
than keeping copies.

Also the check of the Octipus bridge in a vendor's session announcement
(:func:`bridge_not_connected`: an adapter whose vendor reports MCP statuses fails the run with a
:class:`~octipusd.adapter.RunFailureEvent` unless the bridge is ``connected``), the check of a model
row's additive flags (:func:`normalize_additive_flags`: a few boolean
switches and one flag with a closed set of values, per vendor), and the location of the
``octipus-bridge`` helper as a vendor process must call it
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
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any, Final

from octipusd.adapter import JSON, RunFailureEvent, SessionEvent, Usage
from octipusd.errors import AdapterError
from octipusd.money import usd

__all__ = [
    "BRIDGE_CONNECTED",
    "BRIDGE_HELPER_NAME",
    "BRIDGE_PENDING",
    "SHELL_GUARD_SUBCOMMAND",
    "ValuedFlag",
    "allowed_additive_flags",
    "as_cost",
    "as_dict",
    "as_list",
    "as_str",
    "as_tokens",
    "bridge_helper_path",
    "bridge_not_connected",
    "field_max",
    "is_zero",
    "normalize_additive_flags",
    "shell_guard_command",
    "to_text",
]

#: Command name of the terminal helper (``[project.scripts]`` in pyproject.toml).
BRIDGE_HELPER_NAME: Final = "octipus-bridge"

#: The helper's subcommand that runs the shell guard hook (:mod:`octipusd.policy.shellguard`).
SHELL_GUARD_SUBCOMMAND: Final = "shell-guard"

#: The one :attr:`~octipusd.adapter.SessionEvent.mcp_servers` status in which the bridge serves the
#: run; any other (``failed``, ``needs-auth``, ``pending``, ``unknown``, absent) leaves its tools out.
BRIDGE_CONNECTED: Final = "connected"
#: The status of an MCP server the vendor is still connecting to (Claude's ``system/init``).
BRIDGE_PENDING: Final = "pending"


def bridge_not_connected(
    event: SessionEvent, server_name: str, vendor: str, where: str
) -> RunFailureEvent | None:
    """The run's failure when a vendor's session announcement shows the bridge not ``connected``.

    A vendor that cannot reach its MCP server goes on without its tools and may still report
    success: Claude lists a refused bridge ``failed`` and one that accepted the connection but never
    answered ``pending`` (its tool calls then fail with "still connecting"), and exits 0
    (observed.md §1.5). Only a parser that reads a status the vendor holds as settled calls this.

    Args:
        event: The parsed announcement (its ``raw`` becomes the failure's).
        server_name: The bridge's MCP server name (``BridgeEndpoint.server_name``).
        vendor: The vendor as a person knows it (``Claude Code``).
        where: What the vendor reported in (``system/init``).

    Returns:
        None when the bridge is ``connected``; else a :class:`RunFailureEvent` whose reason names the
        status (or lists the servers reported when the bridge is absent); for ``pending`` it holds only
        unless the bridge answers the vendor's handshake in time (``unless_bridge_answers``).
    """
    status = event.mcp_servers.get(server_name)
    if status == BRIDGE_CONNECTED:
        return None
    if status is None:
        listed = ", ".join(f"{k}: {v}" for k, v in event.mcp_servers.items()) or "none"
        reason = (
            f"{vendor} did not report the Octipus MCP bridge {server_name!r} ({where} lists MCP servers: "
            f"{listed}); the run cannot use Octipus tools"
        )
    else:
        reason = (
            f"{vendor} reported the Octipus MCP bridge {server_name!r} as {status!r} in {where}, not "
            f"{BRIDGE_CONNECTED!r} (it could not connect, was refused or never answered); the run cannot "
            "use Octipus tools"
        )
    return RunFailureEvent(raw=event.raw, reason=reason, unless_bridge_answers=status == BRIDGE_PENDING)


def decode_line(line: bytes | bytearray | memoryview | str) -> str:
    """Decode one output line as UTF-8 with replacement characters (never raises).

    Returns:
        The text; ``repr(line)`` for an object that is no buffer (``bytes()`` refuses it).
    """
    if isinstance(line, str):
        return line
    try:
        return bytes(line).decode("utf-8", errors="replace")
    except (TypeError, ValueError):  # not a buffer, or a released memoryview: keep something readable
        return repr(line)


def load_object(text: str) -> JSON | None:
    """Parse ``text`` as a JSON object; None when it is not JSON (or nested too deep) or not an object."""
    try:
        obj: Any = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


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


def as_cost(value: object) -> Decimal | None:
    """Read a vendor's USD figure exactly (:func:`octipusd.money.usd`): a JSON number within
    :data:`~octipusd.money.MAX_FIGURE_USD`, taken by its decimal text and kept to the nano-dollar;
    else None (bools and strings are not figures here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return usd(value)


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


@dataclass(frozen=True)
class ValuedFlag:
    """An additive flag that takes one value from a closed set, e.g. ``--effort=<level>``.

    Attributes:
        name: The flag, e.g. ``--effort``.
        values: The accepted values, in the order error messages list them.
        noun: What one value is called in messages (``level`` -> "needs a level", "allowed levels").
        kind: What two conflicting values are called ("set two effort levels").
    """

    name: str
    values: tuple[str, ...]
    noun: str
    kind: str

    @property
    def allowed(self) -> str:
        """The flag as the allowed list shows it: ``--name=<a|b|c>``."""
        return f"{self.name}=<{'|'.join(self.values)}>"


def allowed_additive_flags(switches: Sequence[str], valued: ValuedFlag) -> tuple[str, ...]:
    """The human-readable list of allowed additive flags: the switches, then ``--name=<a|b>``."""
    return (*switches, valued.allowed)


def normalize_additive_flags(
    flags: Sequence[str],
    *,
    vendor: str,
    switches: Sequence[str],
    valued: ValuedFlag,
    type_vendor: str | None = None,
    values_vendor: str | None = None,
) -> tuple[str, ...]:
    """Validate a model row's additive flags and return them in ``--flag[=value]`` form.

    Accepted: each of ``switches``, and ``valued`` as ``--name=<value>`` or as the two items
    ``--name``, ``<value>``. Items are stripped of surrounding white space; duplicates are kept once
    and a second, different value of ``valued`` is refused. Seed 003 ("Permissions and limits"):
    managed runs reject any other extra argument, since it could override permission, MCP, input,
    output, directory or budget settings.

    Args:
        flags: The row's additive flags, in order.
        vendor: Names the vendor where a flag is not allowed ("is not allowed for Codex CLI").
        switches: The boolean flags allowed.
        valued: The one flag with a value.
        type_vendor: Names the vendor where an item is not a string ("allowed for Codex: ...");
            None names none.
        values_vendor: Names the vendor where a value is unknown ("allowed levels for Antigravity:
            ..."); None names none.

    Returns:
        The normalized flags, in first-seen order, without duplicates.

    Raises:
        AdapterError: a flag is not allowed, the valued flag has a missing or unknown value, or two
            different values are given. The message names the flag and the allowed list.
    """
    allowed = ", ".join(allowed_additive_flags(switches, valued))
    prefix = f"{valued.name}="
    out: list[str] = []
    chosen: str | None = None
    items = list(flags)
    i = 0
    while i < len(items):
        flag = items[i]
        i += 1
        if not isinstance(flag, str):
            for_type = f" for {type_vendor}" if type_vendor else ""
            raise AdapterError(f"additive flag {flag!r} is not a string; allowed{for_type}: {allowed}")
        text = flag.strip()
        if text in switches:
            if text not in out:
                out.append(text)
            continue
        if text == valued.name or text.startswith(prefix):
            if text == valued.name:
                if i >= len(items) or not isinstance(items[i], str):
                    raise AdapterError(
                        f"additive flag {valued.name} needs a {valued.noun}; allowed: {allowed}"
                    )
                value = items[i].strip()
                i += 1
            else:
                value = text.removeprefix(prefix)
            if value not in valued.values:
                for_values = f" for {values_vendor}" if values_vendor else ""
                raise AdapterError(
                    f"additive flag {prefix}{value} has an unknown {valued.noun}; allowed {valued.noun}s"
                    f"{for_values}: {', '.join(valued.values)}"
                )
            if chosen is not None and chosen != value:
                raise AdapterError(f"additive flags set two {valued.kind} ({chosen} and {value}); keep one")
            if chosen is None:
                chosen = value
                out.append(f"{prefix}{value}")
            continue
        raise AdapterError(f"additive flag {flag!r} is not allowed for {vendor}; allowed: {allowed}")
    return tuple(out)
