"""What every octipusctl command module shares: consoles, the API client, errors, parsing helpers.

The consoles and :func:`safe` come from :mod:`octipusd.ctl.output`: every value that did not
originate in Octipus goes into a markup string through :func:`safe`.

Exit codes (every command): 0 success; 1 the run (or request) failed; 2 bad input (or something
named was not found); 3 octipusd is not running.
"""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import typer
from rich.table import Table

from octipusd.ctl.client import Client
from octipusd.ctl.output import confirm, console, err, inert, safe, write_plain
from octipusd.errors import OctipusError
from octipusd.money import format_usd, usd
from octipusd.paths import default_socket_path

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_FAILED",
    "State",
    "bad_input",
    "confirm",
    "console",
    "err",
    "fail",
    "full_ids",
    "inert",
    "key_value",
    "new_client",
    "on_command_line",
    "parse_duration",
    "part",
    "print_json",
    "request",
    "safe",
    "set_path",
    "text_input",
    "unset_path",
    "usage_text",
    "write_plain",
]

#: Exit code of a failed run or request.
EXIT_FAILED = 1
#: Exit code of bad input (an option out of range, something named that does not exist).
EXIT_BAD_INPUT = 2


class State:
    """Options of the top-level callback that every command reads (the daemon's socket)."""

    socket: Path = default_socket_path()


def new_client() -> Client:
    """A new API client on the socket chosen by ``--socket`` / ``OCTIPUS_DAEMON__SOCKET``."""
    return Client(State.socket)


def fail(exc: OctipusError) -> typer.Exit:
    """Print ``exc``'s message on stderr and return the ``typer.Exit`` carrying its exit code."""
    err.print(f"octipusctl: {safe(exc.message)}")
    return typer.Exit(exc.exit_code)


def bad_input(message: str) -> NoReturn:
    """Print ``octipusctl: message`` on stderr and exit 2 (bad input)."""
    err.print(f"octipusctl: {safe(message)}")
    raise typer.Exit(EXIT_BAD_INPUT)


def text_input(text: str | None, file: Path | None, what: str) -> str:
    """The text of a turn or of guidance: the argument, ``-`` for standard input, or ``--file PATH``
    (``--file -`` is standard input too). Text on the command line is bounded by the system's
    argument size (about 128 KiB per argument on Linux); a file or stdin only by the daemon's
    request limits (:class:`~octipusd.api.request_limits.RequestLimits`).

    Exits 2 (bad input) when both or neither are given, the file cannot be read or is not UTF-8,
    or the text is empty.
    """
    if (text is None) == (file is None):
        bad_input(
            f"give the {what} as an argument, as - (read from stdin) or with --file PATH, and only one of them"
        )
    source = file if file is not None else (Path("-") if text == "-" else None)
    if source is None:
        assert text is not None
        value = text
    else:
        where = "standard input" if str(source) == "-" else str(source)
        try:
            value = (
                sys.stdin.buffer.read().decode() if str(source) == "-" else source.read_text(encoding="utf-8")
            )
        except (OSError, UnicodeDecodeError) as exc:
            bad_input(f"cannot read the {what} from {where}: {exc}")
    if not value.strip():
        bad_input(f"the {what} is empty")
    return value


def request(method: str, path: str, **kwargs: Any) -> Any:
    """Send one API request; a failure ends the command with the error's message and exit code."""
    try:
        return new_client().request(method, path, **kwargs)
    except OctipusError as exc:
        raise fail(exc) from None


def part(value: str) -> str:
    """``value`` quoted as one URL path segment (a name may hold ``/``, spaces, ``?``...)."""
    return quote(value, safe="")


def full_ids(table: Table, *columns: int) -> None:
    """Never shorten id columns: every command takes the whole id."""
    for index in columns:
        table.columns[index].no_wrap = True
        table.columns[index].min_width = 32


def usage_text(figures: dict[str, Any]) -> str:
    """A run's (or a session's) one usage figure: tokens in and out, cache tokens when any, and
    the vendor's cost when it reported one (``estimated`` when Octipus estimated the tokens)."""
    text = f"tokens in {figures['input_tokens']} out {figures['output_tokens']}"
    cache = (figures.get("cache_read_input_tokens") or 0, figures.get("cache_creation_input_tokens") or 0)
    if any(cache):
        text += f" (cache read {cache[0]}, written {cache[1]})"
    if figures.get("usage_estimated") or figures.get("estimated"):
        text += ", estimated"
    cost = usd(figures.get("cost_usd"))
    if cost is not None:
        text += f"; cost {format_usd(cost)}"
    return text


def print_json(value: Any) -> None:
    """Write ``value`` as one line of JSON on stdout (dates and other objects as strings)."""
    sys.stdout.write(json.dumps(value, default=str) + "\n")


def on_command_line(ctx: typer.Context, param: str) -> bool:
    """Whether the command's parameter ``param`` (Python name) was given on the command line."""
    source = ctx.get_parameter_source(param)
    return source is not None and source.name == "COMMANDLINE"


def key_value(item: str, what: str) -> tuple[list[str], Any]:
    """Parse ``KEY=JSON`` (KEY dotted, e.g. ``cliAgent.transport``); a value that is not JSON is a string.

    Args:
        item: The option's value.
        what: The option's name, for the error message (``--meta``).

    Returns:
        The key's path (split at dots) and the decoded value.
    """
    key, eq, raw = item.partition("=")
    path = key.strip().split(".")
    if not eq or not all(path):
        bad_input(f"{what} {item!r} is not KEY=JSON (e.g. cliAgent.transport=exec, cliAgent.sharedUse=true)")
    try:
        value: Any = json.loads(raw)
    except ValueError:
        value = raw
    return path, value


def set_path(target: dict[str, Any], path: list[str], value: Any) -> None:
    """Set ``target[path[0]][path[1]]... = value``, creating objects on the way (exit 2 on a clash)."""
    node = target
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            bad_input(f"cannot set {'.'.join(path)}: {part} is not an object")
        node = child
    node[path[-1]] = value


def unset_path(target: dict[str, Any], path: list[str]) -> None:
    """Remove ``target[path[0]][path[1]]...`` if it exists."""
    node: Any = target
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_UNIT_SECONDS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def parse_duration(text: str, what: str = "--ttl") -> float:
    """Parse a duration: ``90s``, ``30m``, ``1h``, ``2d``, ``1h30m`` or a number of seconds.

    Args:
        text: The option's value.
        what: The option's name, for the error message.

    Returns:
        The duration in seconds (> 0). Bad input ends the command with exit code 2.
    """
    raw = text.strip().lower()
    seconds: float | None = None
    try:
        seconds = float(raw)
    except ValueError:
        if raw and _DURATION_PART.sub("", raw) == "":
            seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(raw))
    if seconds is None or not math.isfinite(seconds):
        bad_input(f"{what} {text!r} is not a duration; use e.g. 90s, 30m, 1h, 2d or 1h30m")
    if not seconds > 0:
        bad_input(f"{what} {text!r} must be longer than zero")
    return seconds
