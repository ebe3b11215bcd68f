"""``shell__run``: run one shell command in the run's workspace.

The command runs as ``/bin/sh -c COMMAND`` in its own session (so its process group is the
whole job, background children included), with stdin from ``/dev/null``, in the workspace or
a sub-directory of it. The whole job -- the shell exiting *and* its output pipes closing -- is
bounded by the timeout; on expiry, or when the call is cancelled, the process group gets
SIGTERM, then SIGKILL after a grace period (2 s). A non-zero exit is a normal result, not a
tool error.

Result (a JSON object)::

    {"exit_code": int | null,     # negative: killed by that signal (e.g. -15)
     "stdout": str, "stderr": str, # each at most 64 KiB of output, then a truncation note
     "timed_out": bool, "duration_seconds": float,
     "stdout_truncated": bool, "stderr_truncated": bool}

Journal outcomes (seed 000): before the job starts, ``/bin/sh -n`` parses the whole command
line without running it; a syntax error is a parser refusal, raised as
:class:`~octipusd.toolkit.NotExecutedError` together with invalid arguments and a shell
that could not be started (nothing ran, so the next command needs no recovery review). A job
that exits on its own is a completed attempt whatever its exit code; a timeout or a job killed
by a signal returns its output as a :class:`~octipusd.toolkit.ToolOutcome` marked
uncertain, since it may have done part of its work. The tool's recovery contract is
``containable``: its blast radius is the workspace, its process group and its timeout.

Environment: the login variables of the daemon's environment (:mod:`octipusd.environment`: HOME,
PATH, locale, proxies, CA bundles...), then the call's ``env``, then ``PWD`` and the run marker.
The vendor's configuration variables and API keys are not passed: a command that needs a
credential gets it through ``env``.

Sandbox (``security.shellSandbox``, :mod:`octipusd.sandbox`): the handler asks its host for the
call's :class:`~octipusd.toolkit.ShellTerms` and, while the sandbox is in force, starts the shell
inside the runner: no network unless the call sets ``network: true`` (or the run shares the host's
services), no Docker socket, the workspace read-write as its cwd and the rest read-only, a private
``/tmp`` (``TMPDIR=/tmp``), the daemon's socket, data folder and settings file out of sight. With
``required`` and no runner, every call is refused as not executed, naming the setting. The timeout,
cancellation, the syntax check and the output limits are the same inside the sandbox.

Vault credentials (seed 003 "Authenticate with a vault credential"): the tool declares
``secret_env``, so its ``env`` values may carry ``{{secret:NAME}}`` placeholders; the handler
receives them already resolved (:func:`octipusd.toolkit.secrets.run_with_secrets`), and its result
is masked before anyone sees it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import psutil

from octipusd.errors import InvalidRequestError
from octipusd.toolkit import (
    NotExecutedError,
    RecoveryContract,
    RiskClass,
    RunIdentity,
    ToolHost,
    ToolOutcome,
    ToolResult,
    ToolSpec,
)
from octipusd.tools.shell_command import COMMAND_PROPERTIES, parse_seconds, prepare_command, refuse_bad_syntax

#: Deadline of a command that names none (seconds).
DEFAULT_TIMEOUT_SECONDS = 120.0
#: Longest deadline a command may ask for (seconds).
MAX_TIMEOUT_SECONDS = 600.0
#: Bytes of stdout and of stderr kept from one command (then a truncation note).
OUTPUT_LIMIT_BYTES = 64 * 1024
#: Seconds between SIGTERM and SIGKILL to a command's process group.
KILL_GRACE_SECONDS = 2.0
#: After a kill, how long to keep reading output the job wrote before it died (seconds).
_FINAL_DRAIN_SECONDS = 0.25
#: Seconds between two looks at whether a signalled process group is gone.
_POLL_SECONDS = 0.02
#: After the group is gone or killed, how long at least to wait for the shell to be reaped (seconds).
_REAP_SECONDS = 1.0
#: Bound of closing the command's pipes and reaping it at the end (seconds, shielded).
_CLOSE_SECONDS = 1.0


@dataclass(frozen=True)
class ShellResult:
    """Outcome of one :func:`run_shell` call.

    Attributes:
        exit_code: The shell's exit status; negative when a signal killed it; None if it
            could not be collected.
        stdout: Decoded standard output (UTF-8, undecodable bytes replaced), truncated.
        stderr: Decoded standard error, truncated likewise.
        timed_out: The job did not finish (exit and close its output) within the timeout.
        duration_seconds: Wall time from spawn to the end of collection (seconds).
        stdout_truncated: More than the output limit was written to stdout.
        stderr_truncated: Likewise for stderr.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_seconds: float
    stdout_truncated: bool = False
    stderr_truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        """Return the tool's JSON result."""
        return {
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "timed_out": self.timed_out,
            "duration_seconds": round(self.duration_seconds, 3),
            "stdout_truncated": self.stdout_truncated,
            "stderr_truncated": self.stderr_truncated,
        }


class _Capture:
    """Keeps the first ``limit`` bytes of a stream and counts the rest."""

    def __init__(self, name: str, limit: int) -> None:
        self.name = name
        self.limit = limit
        self.buffer = bytearray()
        self.total = 0

    async def drain(self, stream: anyio.abc.ByteReceiveStream | None) -> None:
        if stream is None:
            return
        try:
            async for chunk in stream:
                self.total += len(chunk)
                room = self.limit - len(self.buffer)
                if room > 0:
                    self.buffer += chunk[:room]
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self) -> str:
        text = self.buffer.decode("utf-8", errors="replace")
        if self.truncated:
            text += f"\n[{self.name} truncated: {self.total} bytes written, first {self.limit} shown]"
        return text


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """True while a non-zombie process is in the group (zombies may wait for a reaper)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for proc in psutil.process_iter():
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.Error):
            continue
    return False


async def terminate_group(
    process: anyio.abc.Process, pgid: int, grace_seconds: float = KILL_GRACE_SECONDS
) -> None:
    """Stop a whole process group: SIGTERM, then SIGKILL after ``grace_seconds``; shielded.

    Args:
        process: The group leader (our child), reaped here when it exits.
        pgid: The process group id (the leader's pid, since it started a new session).
        grace_seconds: How long members get to exit after SIGTERM (seconds).
    """
    with anyio.CancelScope(shield=True):
        _signal_group(pgid, signal.SIGTERM)
        with anyio.move_on_after(grace_seconds):
            # Group membership has no wait primitive; poll it.
            while _group_alive(pgid):  # noqa: ASYNC110
                await anyio.sleep(_POLL_SECONDS)
        if _group_alive(pgid):
            _signal_group(pgid, signal.SIGKILL)
        with anyio.move_on_after(max(grace_seconds, _REAP_SECONDS)):
            await process.wait()


async def run_shell(
    command: str,
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_seconds: float,
    output_limit: int = OUTPUT_LIMIT_BYTES,
    kill_grace: float = KILL_GRACE_SECONDS,
    runner: Sequence[str] = (),
) -> ShellResult:
    """Run ``/bin/sh -c command`` in its own session and collect its output.

    Args:
        command: The shell command line.
        cwd: Working directory (must exist).
        env: The complete environment of the command.
        timeout_seconds: Deadline for the whole job (seconds, > 0).
        output_limit: Bytes kept of each of stdout and stderr.
        kill_grace: Seconds between SIGTERM and SIGKILL on timeout or cancellation.
        runner: The sandbox runner's argv to start the shell with (:func:`octipusd.sandbox.confine`);
            empty: the shell starts directly. The runner is the process group's leader either way.

    Returns:
        The :class:`ShellResult`; a non-zero exit or a timeout is a result, not an exception.

    Raises:
        OSError: the shell could not be started (e.g. ``cwd`` vanished).
    """
    started = time.monotonic()
    # Shielded: cancelled while asyncio connects the pipes, asyncio would kill only the shell and
    # leave its background jobs running; the cancellation lands at the next checkpoint instead,
    # where the ``finally`` below stops the whole group.
    with anyio.CancelScope(shield=True):
        process = await anyio.open_process(
            [*runner, "/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=dict(env),
            start_new_session=True,
        )
    pgid = process.pid
    out = _Capture("stdout", output_limit)
    err = _Capture("stderr", output_limit)
    finished = False
    timed_out = False
    try:
        with anyio.move_on_after(timeout_seconds) as deadline:
            async with anyio.create_task_group() as tg:
                tg.start_soon(out.drain, process.stdout)
                tg.start_soon(err.drain, process.stderr)
                await process.wait()
            finished = True
        if deadline.cancelled_caught:
            timed_out = True
            await terminate_group(process, pgid, kill_grace)
            finished = True
            with anyio.move_on_after(_FINAL_DRAIN_SECONDS):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(out.drain, process.stdout)
                    tg.start_soon(err.drain, process.stderr)
    finally:
        if not finished:  # cancelled from outside: the job must not outlive the call
            await terminate_group(process, pgid, kill_grace)
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_SECONDS):
            await process.aclose()
    return ShellResult(
        exit_code=process.returncode,
        stdout=out.text(),
        stderr=err.text(),
        timed_out=timed_out,
        duration_seconds=time.monotonic() - started,
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
    )


async def _shell_run(
    identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]
) -> ToolResult | ToolOutcome:
    call = prepare_command("shell__run", identity, host, arguments, extra=("timeout",))
    try:
        timeout = parse_seconds(arguments, "timeout", DEFAULT_TIMEOUT_SECONDS, MAX_TIMEOUT_SECONDS)
    except InvalidRequestError as exc:
        raise NotExecutedError(f"invalid arguments for shell__run: {exc.message}") from exc
    await refuse_bad_syntax(call)
    try:
        result = await run_shell(
            call.command, cwd=call.cwd, env=call.env, timeout_seconds=timeout, runner=call.runner
        )
    except OSError as exc:  # spawn failed: the job never started
        raise NotExecutedError(f"the shell could not be started, so nothing ran: {exc}") from exc
    if result.timed_out:
        return ToolOutcome(
            result.to_dict(),
            uncertain=f"timed out after {timeout:g} s; the job was stopped and may have done part of its work",
            detail="timed_out",
        )
    if result.exit_code is None or result.exit_code < 0:
        how = "could not be collected" if result.exit_code is None else f"signal {-result.exit_code}"
        return ToolOutcome(
            result.to_dict(),
            uncertain=f"the job was killed ({how}) and may have done part of its work",
            detail=f"exit {result.exit_code}",
        )
    return result.to_dict()


SHELL_RUN = ToolSpec(
    name="shell__run",
    description=(
        "Run a shell command (/bin/sh -c) in the run's workspace and return "
        "{exit_code, stdout, stderr, timed_out, duration_seconds}. stdout and stderr keep the first "
        "64 KiB each. A non-zero exit is a normal result. On timeout the whole process group "
        "(background jobs included) is terminated. Pass a credential a command needs in env, never "
        "in the command line. When the daemon's shell sandbox is in force (health shows it), the command "
        "sees the workspace read-write, the rest of the file system read-only, a private /tmp (keep "
        "virtual environments and tools in the workspace) and no network: set network: true only when "
        "it must reach the network (installing packages, calling an API). A network: true call counts as "
        "sending data out for the flow guard, so in a session that has read credentials it waits for a "
        "person's approval."
    ),
    input_schema={
        "type": "object",
        "properties": {
            **COMMAND_PROPERTIES,
            "timeout": {
                "type": "number",
                "description": f"Seconds before the job is killed (default {DEFAULT_TIMEOUT_SECONDS:g}, "
                f"max {MAX_TIMEOUT_SECONDS:g}).",
                "exclusiveMinimum": 0,
                "maximum": MAX_TIMEOUT_SECONDS,
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    handler=_shell_run,
    secret_env=True,
    contract=RecoveryContract(
        RiskClass.CONTAINABLE,
        intended_effects="whatever the command does, inside the workspace's process group and timeout",
    ),
    # The job's own timeout is the limit; this backstop also covers the kill grace and drains.
    timeout_seconds=MAX_TIMEOUT_SECONDS + 30.0,
)
