"""``shell__run_background``, ``shell__read_background``, ``shell__stop_background``: a command that
keeps running while the agent works (a dev server, a watcher, a database), its output so far, its stop.

``shell__run_background({command, cwd?, env?, network?, timeout?})`` starts ``/bin/sh -c COMMAND`` and
returns its ``id`` at once. It is prepared exactly as ``shell__run`` is
(:func:`~octipusd.tools.shell_command.prepare_command`): the same arguments, the same shell sandbox
(no network unless ``network: true`` or the run shares the host's services; the stage's
``hostServices`` also gives it the Docker socket), the same vault placeholders in ``env`` (their
values are masked in every later read of its output), the same ``sh -n`` refusal, the same
permission rules (the ``shell`` family, ASK by default) and the same journal: the start is the
mutation that is journaled (completed once the job started; a refusal ``not_executed``). The job
belongs to the run and ends with it; ``timeout`` bounds its life (default and most:
:data:`MAX_LIFETIME_SECONDS`); a run has at most a few running at once
(:class:`~octipusd.runtime.background.BackgroundLimits`).

``shell__read_background({id, since?, wait?})`` is read-only: the job's state (``running``,
``exit_code``, ``ended_by``) and its output (stdout and stderr as they came) from character ``since``
(``next`` of the previous read; default: the oldest kept), waiting up to ``wait`` seconds for new
output or the job's end. ``shell__stop_background({id})`` stops the job and everything it started
(SIGTERM, then SIGKILL): an internal tool, since it only ends a process Octipus started for this run.
"""

from __future__ import annotations

from typing import Any, Final

from octipusd.errors import ConflictError, InvalidRequestError
from octipusd.toolkit import (
    BackgroundJobs,
    BackgroundStart,
    NotExecutedError,
    RecoveryContract,
    RiskClass,
    RunIdentity,
    ToolHost,
    ToolResult,
    ToolSpec,
)
from octipusd.toolkit.secrets import call_masker
from octipusd.tools.base import reject_unknown, require_str
from octipusd.tools.shell_command import COMMAND_PROPERTIES, parse_seconds, prepare_command, refuse_bad_syntax

__all__ = [
    "BACKGROUND_TOOLS",
    "MAX_LIFETIME_SECONDS",
    "MAX_READ_WAIT_SECONDS",
    "SHELL_READ_BACKGROUND",
    "SHELL_RUN_BACKGROUND",
    "SHELL_STOP_BACKGROUND",
]

#: Longest life of a background command, and its life when the call names none (seconds).
MAX_LIFETIME_SECONDS: Final = 3600.0
#: Longest a read may wait for new output (seconds).
MAX_READ_WAIT_SECONDS: Final = 30.0
#: Deadline of a start call (spawning and the syntax check; seconds).
_START_CALL_SECONDS: Final = 60.0
#: Deadline of a stop call: the stop's own bounds, plus a margin (seconds).
_STOP_CALL_SECONDS: Final = 45.0


def _jobs(host: ToolHost, identity: RunIdentity, tool: str) -> BackgroundJobs:
    try:
        return host.background_jobs(identity)
    except ConflictError as exc:
        raise NotExecutedError(f"{tool} was not run: {exc.message}") from exc


async def _start(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    tool = SHELL_RUN_BACKGROUND.name
    call = prepare_command(tool, identity, host, arguments, extra=("timeout",))
    try:
        lifetime = parse_seconds(arguments, "timeout", MAX_LIFETIME_SECONDS, MAX_LIFETIME_SECONDS)
    except InvalidRequestError as exc:
        raise NotExecutedError(f"invalid arguments for {tool}: {exc.message}") from exc
    await refuse_bad_syntax(call)
    jobs = _jobs(host, identity, tool)
    job = BackgroundStart(
        command=call.command,
        argv=(*call.runner, "/bin/sh", "-c", call.command),
        cwd=call.cwd,
        env=call.env,
        lifetime_seconds=lifetime,
        masker=call_masker(),
    )
    try:
        return await jobs.start(job)
    except ConflictError as exc:
        raise NotExecutedError(f"{tool} was not run: {exc.message}") from exc
    except OSError as exc:  # spawn failed: the job never started
        raise NotExecutedError(f"the shell could not be started, so nothing ran: {exc}") from exc


def _job_id(arguments: dict[str, Any], allowed: tuple[str, ...]) -> str:
    reject_unknown(arguments, allowed)
    return require_str(arguments, "id")


async def _read(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    job_id = _job_id(arguments, ("id", "since", "wait"))
    since = arguments.get("since")
    if since is not None and (isinstance(since, bool) or not isinstance(since, int) or since < 0):
        raise InvalidRequestError("since: must be a whole number >= 0 (the `next` of an earlier read)")
    wait = 0.0
    if arguments.get("wait") not in (None, 0):
        wait = parse_seconds(arguments, "wait", 0.0, MAX_READ_WAIT_SECONDS)
    return await host.background_jobs(identity).read(job_id, since, wait)


async def _stop(identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
    job_id = _job_id(arguments, ("id",))
    return await host.background_jobs(identity).stop(job_id)


_ID = {"type": "string", "description": "The id shell__run_background returned (bg-1, bg-2...)."}

SHELL_RUN_BACKGROUND = ToolSpec(
    name="shell__run_background",
    description=(
        "Start a shell command (/bin/sh -c) in the background in the run's workspace and return its id "
        "at once (e.g. a dev server or a watcher); read its output with shell__read_background and "
        "stop it with shell__stop_background. It runs under the same sandbox, permissions and "
        "vault rules as shell__run, until it exits, is stopped, its timeout passes, or this run "
        "ends: everything it started is then stopped. Keep it in the foreground of its shell (no "
        "trailing &): when the shell exits, what it left running is stopped too. A run keeps a "
        "few running at once."
    ),
    input_schema={
        "type": "object",
        "properties": {
            **COMMAND_PROPERTIES,
            "timeout": {
                "type": "number",
                "description": f"Seconds before the command is stopped (default and most "
                f"{MAX_LIFETIME_SECONDS:g}; it also ends with the run).",
                "exclusiveMinimum": 0,
                "maximum": MAX_LIFETIME_SECONDS,
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    handler=_start,
    secret_env=True,
    contract=RecoveryContract(
        RiskClass.CONTAINABLE,
        intended_effects="whatever the command does, inside the workspace's sandbox, until it is "
        "stopped, its timeout passes or the run ends",
    ),
    timeout_seconds=_START_CALL_SECONDS,
)

SHELL_READ_BACKGROUND = ToolSpec(
    name="shell__read_background",
    description=(
        "Read a background command's output so far and its state: {id, running, exit_code, ended_by, "
        "output, offset, next, dropped_chars, more}. Pass since: <next of your previous read> to get "
        "only new output, and wait: N (seconds, at most 30) to wait for new output or its end."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "id": _ID,
            "since": {"type": "integer", "minimum": 0, "description": "Output offset to read from."},
            "wait": {
                "type": "number",
                "minimum": 0,
                "maximum": MAX_READ_WAIT_SECONDS,
                "description": "Seconds to wait for new output or the end (default 0).",
            },
        },
        "required": ["id"],
        "additionalProperties": False,
    },
    handler=_read,
    read_only=True,
    timeout_seconds=MAX_READ_WAIT_SECONDS + 15.0,
)

SHELL_STOP_BACKGROUND = ToolSpec(
    name="shell__stop_background",
    description=(
        "Stop a background command and everything it started (SIGTERM, then SIGKILL); returns its "
        "final state. Its output stays readable."
    ),
    input_schema={
        "type": "object",
        "properties": {"id": _ID},
        "required": ["id"],
        "additionalProperties": False,
    },
    handler=_stop,
    internal=True,
    timeout_seconds=_STOP_CALL_SECONDS,
)

#: The background tools, in their published order.
BACKGROUND_TOOLS: Final = (SHELL_RUN_BACKGROUND, SHELL_READ_BACKGROUND, SHELL_STOP_BACKGROUND)
