"""A shell tool's command: its arguments validated, confined, with its environment.

``shell__run`` (:mod:`octipusd.tools.shell`) and ``shell__run_background``
(:mod:`octipusd.tools.shell_background`) take the same ``command``, ``cwd``, ``env`` and ``network``
and prepare them here alike (:func:`prepare_command`): the directory stays inside the workspace, the
host's :class:`~octipusd.toolkit.ShellTerms` decide the sandbox runner (the run's host services
included), the environment is the daemon's login variables, then the call's ``env``, then ``PWD`` and
the run's marker. :func:`refuse_bad_syntax` lets ``/bin/sh -n`` refuse a line before anything runs.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from octipusd.environment import login_environment
from octipusd.errors import InvalidRequestError, SandboxUnavailableError
from octipusd.sandbox import SANDBOX_TMPDIR, confine
from octipusd.toolkit import RUN_MARKER, NotExecutedError, RunIdentity, ToolHost
from octipusd.toolkit.secrets import SECRET_ENV_DESCRIPTION
from octipusd.tools.base import optional_str, reject_unknown, require_str

__all__ = [
    "COMMAND_ARGUMENTS",
    "COMMAND_PROPERTIES",
    "PreparedCommand",
    "base_environment",
    "check_syntax",
    "parse_seconds",
    "prepare_command",
    "refuse_bad_syntax",
    "resolve_cwd",
]

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def base_environment() -> dict[str, str]:
    """Return the environment a command starts from: the login variables of the daemon's
    environment (:func:`octipusd.environment.login_environment`, its PATH as the daemon was
    started with), never its settings, API keys or other credentials; a command gets those only
    through the call's ``env``."""
    return login_environment(os.environ)


def resolve_cwd(workspace: Path, cwd: str | None) -> Path:
    """Resolve a ``cwd`` argument against the workspace, refusing escapes.

    Args:
        workspace: The run's workspace.
        cwd: Relative (or absolute) path; None means the workspace itself.

    Returns:
        The resolved directory (symlinks resolved).

    Raises:
        InvalidRequestError: the path leaves the workspace (``..``, absolute path, symlink),
            does not exist, or is not a directory; or the workspace itself is missing.
    """
    root = workspace.resolve()
    if not root.is_dir():
        raise InvalidRequestError(f"workspace {str(workspace)!r} does not exist or is not a directory")
    if cwd is None or cwd == "":
        return root
    if "\x00" in cwd:
        raise InvalidRequestError("cwd: must not contain NUL characters")
    target = (root / cwd).resolve()
    if target != root and not target.is_relative_to(root):
        raise InvalidRequestError(
            f"cwd: {cwd!r} is outside the workspace; use a path relative to {str(root)!r}"
        )
    if not target.is_dir():
        raise InvalidRequestError(f"cwd: {cwd!r} does not exist or is not a directory")
    return target


def parse_seconds(arguments: Mapping[str, Any], key: str, default: float, maximum: float) -> float:
    """The call's ``key`` as a number of seconds in ``(0, maximum]``, or ``default`` when absent.

    Raises:
        InvalidRequestError: not a number, or out of range (the message names ``key``).
    """
    value = arguments.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidRequestError(f"{key}: must be a number of seconds, got {type(value).__name__}")
    if not 0 < value <= maximum:
        raise InvalidRequestError(f"{key}: must be > 0 and <= {maximum:g} seconds, got {value!r}")
    return float(value)


def _parse_network(arguments: Mapping[str, Any]) -> bool:
    value = arguments.get("network", False)
    if not isinstance(value, bool):
        raise InvalidRequestError(f"network: must be true or false, got {type(value).__name__}")
    return value


def _parse_env(arguments: Mapping[str, Any]) -> dict[str, str]:
    value = arguments.get("env")
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidRequestError(f"env: must be an object of string values, got {type(value).__name__}")
    env: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not _ENV_NAME.match(key):
            raise InvalidRequestError(f"env: invalid variable name {key!r}")
        if not isinstance(item, str):
            raise InvalidRequestError(f"env.{key}: must be a string, got {type(item).__name__}")
        if "\x00" in item:
            raise InvalidRequestError(f"env.{key}: must not contain NUL characters")
        env[key] = item
    return env


#: Deadline of the ``sh -n`` syntax check (seconds).
_SYNTAX_CHECK_SECONDS = 10.0


async def check_syntax(command: str, cwd: Path) -> str | None:
    """Parse ``command`` with ``/bin/sh -n`` (read, do not execute).

    Args:
        command: The command line.
        cwd: Directory to run the check in.

    Returns:
        None when the shell accepts the line, else the shell's complaint (one line).

    Raises:
        OSError: the shell could not be started.
        TimeoutError: the check took longer than 10 s.
    """
    with anyio.fail_after(_SYNTAX_CHECK_SECONDS):
        done = await anyio.run_process(
            ["/bin/sh", "-n", "-c", command],
            stdin=subprocess.DEVNULL,
            cwd=cwd,
            env=base_environment(),
            check=False,
        )
    if done.returncode == 0:
        return None
    text = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
    return text[-1] if text else f"sh -n exited {done.returncode}"


#: The arguments every shell tool takes (``shell__run`` adds its ``timeout``).
COMMAND_ARGUMENTS: tuple[str, ...] = ("command", "cwd", "env", "network")
#: Their JSON Schema properties, as each shell tool publishes them.
COMMAND_PROPERTIES: Mapping[str, Any] = {
    "command": {"type": "string", "description": "Shell command line, run with /bin/sh -c."},
    "cwd": {
        "type": "string",
        "description": "Working directory relative to the workspace (must stay inside it).",
    },
    "env": {
        "type": "object",
        "description": SECRET_ENV_DESCRIPTION,
        "additionalProperties": {"type": "string"},
    },
    "network": {
        "type": "boolean",
        "description": "Give the command the network inside the shell sandbox (default false; "
        "no effect while the sandbox is off). Counts as egress for the flow guard.",
    },
}


@dataclass(frozen=True)
class PreparedCommand:
    """One validated shell command of a call, confined and with its environment, ready to start.

    Attributes:
        command: The command line.
        cwd: Its directory (inside the workspace).
        env: Its complete environment.
        runner: The sandbox runner's argv before ``/bin/sh -c`` (empty: unconfined).
    """

    command: str
    cwd: Path
    env: dict[str, str]
    runner: tuple[str, ...]


def prepare_command(
    tool: str, identity: RunIdentity, host: ToolHost, arguments: Mapping[str, Any], extra: Sequence[str] = ()
) -> PreparedCommand:
    """Validate a shell tool's arguments (:data:`COMMAND_ARGUMENTS` and the tool's ``extra`` keys),
    confine the command (the host's :class:`~octipusd.toolkit.ShellTerms`: the sandbox and the run's
    host services) and build its environment.

    Raises:
        NotExecutedError: an invalid argument (naming ``tool``), or ``security.shellSandbox=required``
            with no runner.
    """
    try:
        reject_unknown(arguments, (*COMMAND_ARGUMENTS, *extra))
        command = require_str(arguments, "command")
        if "\x00" in command:
            raise InvalidRequestError("command: must not contain NUL characters")
        cwd = resolve_cwd(identity.workspace, optional_str(arguments, "cwd"))
        network = _parse_network(arguments)
        call_env = _parse_env(arguments)
    except InvalidRequestError as exc:
        raise NotExecutedError(f"invalid arguments for {tool}: {exc.message}") from exc
    try:
        runner = confine(host.shell_terms(identity), workspace=identity.workspace, cwd=cwd, network=network)
    except SandboxUnavailableError as exc:
        raise NotExecutedError(
            f"the shell sandbox refused the command, so nothing ran: {exc.message}"
        ) from exc
    env = base_environment()
    if runner:
        env["TMPDIR"] = SANDBOX_TMPDIR  # the host's TMPDIR is out of reach: the private /tmp is there
    env.update(call_env)
    env["PWD"] = str(cwd)
    # the run's marker: a daemon that restarts after a crash finds and stops the job with the
    # run's other leftovers, so an orphaned job cannot keep acting while a person reviews it
    env[RUN_MARKER] = identity.run_id
    return PreparedCommand(command, cwd, env, runner)


async def refuse_bad_syntax(call: PreparedCommand) -> None:
    """Parse the command with ``/bin/sh -n`` before it runs (:func:`check_syntax`).

    Raises:
        NotExecutedError: the parser refused the line, or the check could not run (nothing ran).
    """
    try:
        complaint = await check_syntax(call.command, call.cwd)
    except (OSError, TimeoutError) as exc:
        raise NotExecutedError(f"the shell could not check the command, so it was not run: {exc}") from exc
    if complaint is not None:
        raise NotExecutedError(f"the shell parser refused the command, so nothing ran: {complaint}")
