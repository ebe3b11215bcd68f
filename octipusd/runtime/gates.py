"""A child's command scorer gates and the worktree setup command, run through the shell tool's path.

Seed 003 ("Permissions and limits", command scorers; ``swarm.contractRetries``,
``swarm.worktreeSetupCommand``). After a child finishes, the contract retry loop calls
:func:`run_gates` with the child's tree (its worktree, or the project it worked in) and the gates
of its ``spawn_child`` request; before a child starts in a new worktree it calls
:func:`run_setup_command`. Each command goes exactly the way an agent's ``shell__run`` call goes:

1. the checks that make it an *environment failure* without running it: the tree is missing; an
   explicit directory switch of git, make, pnpm, npm or yarn
   (:func:`~octipusd.policy.dirswitch.directory_switches`) resolves outside the real tree (symlinks
   followed) or to a directory that is not there; a program it starts is not on the shell's PATH
   (not checked on a line that sets PATH or defines a function); a gate command the shell cannot
   parse (``sh -n``) is a failure no retry can fix;
2. the permission gate (rules, grants, flow guard; an ASK waits for a person in an attended
   session, and is refused at once in an unattended one, so a gate never hangs on it), then the
   recovery review gate of a mutation (seed 000); a refused command is journaled
   ``not_executed`` and is a failed gate whose reason is the refusal;
3. the action journal's boundary around ``shell__run``'s own handler (``started``, then the
   outcome; a timeout is ``uncertain``, as for any shell call).

Who it runs as (:class:`GateCaller`): the child run's identity with its workspace replaced by the
tree, so rules, workspace-scoped grants and the journal treat a gate command as one of the child's
own ``shell__run`` calls (journal scope: the child's run and worker id; events such as
``policy_decision`` land on the child's run). The command's processes carry the child's run
marker, so a restarted daemon stops a gate's leftovers with the child's. Under the shell sandbox
(``security.shellSandbox``) a gate command runs confined like any ``shell__run`` call; it shares the
host's services when the *parent* run does: gates are the parent's verification of its child's work
(as a stage's ``verifyCommand`` is the stage's, seed 003 "Host services for gate commands"), while
the child itself never inherits the parent's ``host_services``.

The verdict (:class:`GateVerdict`): a failure the child can fix is a command that ran and failed
(a non-zero exit, a timeout, a kill); an environment failure or a refusal is not, and never asks
the child to rewrite working code.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from octipusd.errors import OctipusError
from octipusd.runtime.gate_checks import missing_program, switch_problem, tree_root
from octipusd.runtime.host import action_scope
from octipusd.runtime.manual_host import ManualCallHost
from octipusd.runtime.services import RunServices
from octipusd.toolkit import (
    ActionOutcome,
    CallContext,
    Executed,
    GateSpec,
    RunIdentity,
    ShellTerms,
    ToolOutcome,
)
from octipusd.tools import SHELL_RUN
from octipusd.tools.gate_args import DEFAULT_GATE_TIMEOUT_SECONDS
from octipusd.tools.shell import MAX_TIMEOUT_SECONDS as SHELL_MAX_TIMEOUT_SECONDS
from octipusd.tools.shell_command import check_syntax

if TYPE_CHECKING:
    from octipusd.runtime.supervisor import RunSupervisor

__all__ = [
    "GATE_OUTPUT_TAIL_CHARS",
    "MAX_REASON_CHARS",
    "SETUP_TIMEOUT_SECONDS",
    "CommandEnd",
    "GateCaller",
    "GateStatus",
    "GateVerdict",
    "caller_of",
    "run_gates",
    "run_setup_command",
]

#: Characters of a command's output kept for its result and the retry reason (its end).
GATE_OUTPUT_TAIL_CHARS = 1500
#: Characters of :attr:`GateVerdict.reason` at most (it is appended to the child's brief on retry).
MAX_REASON_CHARS = 8000
#: Deadline of the worktree setup command (seconds): ``shell__run``'s own cap.
SETUP_TIMEOUT_SECONDS = SHELL_MAX_TIMEOUT_SECONDS


class GateStatus(enum.StrEnum):
    """How one gate (or one of its commands) ended."""

    PASSED = "passed"
    #: It ran and failed (fixable), or it was refused or cannot be parsed (not fixable).
    FAILED = "failed"
    #: It cannot run in this environment (tree, directory or program unavailable); never retried.
    ENVIRONMENT_FAILURE = "environment_failure"
    #: An ``anyOf`` alternative not tried because an earlier one passed.
    SKIPPED = "skipped"


@dataclass(frozen=True)
class GateCaller:
    """Who a gate command runs as (see the module docstring).

    Attributes:
        identity: The child run's identity; its ``workspace`` is replaced by the tree.
        space: The child's session is in a shared space (the shell guard applies).
        plan: The child ran in plan mode (a plan turn runs no shell command: every gate is refused).
        on_waiting: Told +1/-1 when an approval wait of a gate command opens/ends (the parent's
            :meth:`~octipusd.runtime.supervisor.RunSupervisor.set_waiting`: it shows
            ``awaiting_approval`` meanwhile); None: nobody is told.
        host_services: The parent run shares the host's services with its own shell commands, its
            children's gate and setup commands included (see the module docstring).
    """

    identity: RunIdentity
    space: bool = False
    plan: bool = False
    on_waiting: Callable[[int], Awaitable[None]] | None = None
    host_services: bool = False


def caller_of(child: RunSupervisor) -> GateCaller:
    """The :class:`GateCaller` of a child run, before it started or after it ended.

    Its identity is the child's own once the child planned its turn; before that (the worktree
    setup command runs before the child starts) it is made from the child's run as the supervisor
    will make it (worker ``child:<run id>``, the run's author, the child's attendance).
    """
    identity = child.identity
    if identity is None:
        run = child.run
        identity = RunIdentity(
            run_id=run.id,
            session_id=child.session_id,
            user=child.services.user,
            worker_id=f"child:{run.id}",
            workspace=Path(),  # replaced by the tree
            attended=child.attended,
            author=run.author,
        )
    parent = child.parent
    return GateCaller(
        identity,
        space=child.space,
        plan=child.run.plan_mode,
        on_waiting=parent.set_waiting if parent is not None else None,
        host_services=parent.run.host_services if parent is not None else False,
    )


@dataclass(frozen=True)
class CommandEnd:
    """How one command (a gate's, an alternative's, or the setup command) ended.

    Attributes:
        command: The command line.
        status: Its :class:`GateStatus`.
        exit_code: The shell's exit status (negative: killed by that signal); None when it did not run.
        output: The end of its output (stdout, then stderr), at most :data:`GATE_OUTPUT_TAIL_CHARS`
            characters plus a cut note; for a refusal, the refusal.
        why: One line: ``exited 1``, ``timed out after 30 s``, the refusal or the environment failure.
        fixable: It ran and failed: changing the code may make it pass.
        timed_out: It ran past its deadline (journaled ``uncertain``; not fixable by a retry).
    """

    command: str
    status: GateStatus
    exit_code: int | None = None
    output: str = ""
    why: str = ""
    fixable: bool = False
    timed_out: bool = False

    def to_dict(self) -> dict[str, Any]:
        """``{"command", "status", "exitCode", "output", "reason"}`` (JSON-ready)."""
        return {
            "command": self.command,
            "status": str(self.status),
            "exitCode": self.exit_code,
            "output": self.output,
            "reason": self.why,
        }


@dataclass(frozen=True)
class _GateEnd:
    """One gate's end: its status, the command that decided it, and every command it tried."""

    gate: GateSpec
    status: GateStatus
    decided_by: CommandEnd
    tried: tuple[CommandEnd, ...]

    @property
    def blocks_retry(self) -> bool:
        """A required failure no retry of the child can fix (environment, refusal, not retryable)."""
        if not self.gate.required or self.status is GateStatus.PASSED:
            return False
        return self.status is GateStatus.ENVIRONMENT_FAILURE or not (
            self.decided_by.fixable and self.gate.retryable
        )

    def to_dict(self) -> dict[str, Any]:
        result = {
            "name": self.gate.name,
            **self.decided_by.to_dict(),
            "status": str(self.status),
            "required": self.gate.required,
            "retryable": self.gate.retryable,
        }
        if self.gate.any_of:
            result["alternatives"] = [end.to_dict() for end in self.tried]
        return result


@dataclass(frozen=True)
class GateVerdict:
    """The verdict of a child's gates.

    Attributes:
        passed: Every required gate passed (an ``anyOf`` gate passes when one alternative does).
        retry: Not passed, some required retryable gate failed fixably (its command ran and
            failed), and no required gate failed in a way a retry cannot fix (an environment
            failure, a refusal, an unparsable command, or a failing gate that is not retryable).
            Whether a retry is left is the caller's (``swarm.contractRetries``).
        reason: Empty when every gate passed; else which gates did not pass, with their command,
            exit code and output tail, at most :data:`MAX_REASON_CHARS` characters. With ``retry``
            it is written to the child (append it to its brief); otherwise it says why the child
            is not retried.
        results: One object per gate, in order, for the receipt: ``{"name", "command", "status":
            "passed" | "failed" | "environment_failure", "exitCode", "output", "reason",
            "required", "retryable"}``, plus ``"alternatives"`` (the same per command, ``skipped``
            for the ones not tried) for an ``anyOf`` gate, whose ``command`` is the alternative
            that decided it.
    """

    passed: bool
    retry: bool
    reason: str
    results: list[dict[str, Any]]


async def run_gates(
    services: RunServices, caller: GateCaller, *, tree: Path, gates: Sequence[GateSpec]
) -> GateVerdict:
    """Run a child's gates, in order, each command in ``tree`` through the shell tool's path.

    Every gate runs (a failure does not skip the later gates, so the receipt is complete); an
    ``anyOf`` gate tries its alternatives in order until one passes. A command that times out or
    is killed is journaled ``uncertain``, as any ``shell__run`` call is (seed 000): until a person
    reviews it, the recovery review refuses the session's further mutations in an unattended
    session, the later gates and a retried child's changes included (those gates then fail as
    refused, which stops the retries).

    Args:
        services: The daemon's run services (permission gate, recovery review, journal).
        caller: Who the commands run as (:func:`caller_of` the child).
        tree: The child's tree: its worktree, or the project it worked in.
        gates: The gates of the child's request (:attr:`~octipusd.toolkit.ChildRequest.gates`).

    Returns:
        The :class:`GateVerdict`; ``passed`` and no reason for no gates. Failures of the commands,
        refusals and Octipus's own failures to run one (the store, the journal) are in the verdict,
        never raised.

    Raises:
        Cancellation: a running command's process group is stopped first (the journal records the
            call ``uncertain``).
    """
    root, problem = tree_root(tree)
    ends: list[_GateEnd] = []
    for gate in gates:
        if root is None:
            tried: tuple[CommandEnd, ...] = (
                CommandEnd(gate.commands[0], GateStatus.ENVIRONMENT_FAILURE, why=problem),
            )
        else:
            tried = await _run_gate(services, caller, root, gate)
        ends.append(_gate_end(gate, tried))
    return _verdict(ends)


async def run_setup_command(
    services: RunServices, caller: GateCaller, *, tree: Path, command: str
) -> dict[str, Any]:
    """Run ``swarm.worktreeSetupCommand`` in a new worktree before its child starts.

    It goes the shell tool's path like a gate command (the rules decide it; an unattended ASK is
    refused), without the directory-switch checks (the operator wrote it), under
    :data:`SETUP_TIMEOUT_SECONDS`.

    Args:
        services: The daemon's run services.
        caller: Who it runs as (:func:`caller_of` the child, which has not started yet).
        tree: The new worktree.
        command: The setting's command line.

    Returns:
        ``{"command", "status", "exitCode", "output", "reason"}`` (see :meth:`CommandEnd.to_dict`),
        ``status`` ``passed`` when it exited 0. A failure is reported, never raised: record the
        result on the child's receipt, still start the child, and tell it in its brief that the
        setup failed (with ``reason``), so it can see what is missing rather than guess.

    Raises:
        Cancellation: as for :func:`run_gates`.
    """
    root, problem = tree_root(tree)
    if root is None:
        return CommandEnd(command, GateStatus.ENVIRONMENT_FAILURE, why=problem).to_dict()
    end = await _run_command(services, caller, root, command, SETUP_TIMEOUT_SECONDS, switches=False)
    return end.to_dict()


# ------------------------------------------------------------------ one gate, one command


async def _run_gate(
    services: RunServices, caller: GateCaller, root: Path, gate: GateSpec
) -> tuple[CommandEnd, ...]:
    """Run a gate's command, or its alternatives until one passes (the rest are ``skipped``)."""
    timeout = gate.timeout_seconds if gate.timeout_seconds is not None else DEFAULT_GATE_TIMEOUT_SECONDS
    tried: list[CommandEnd] = []
    for index, command in enumerate(gate.commands):
        end = await _run_command(services, caller, root, command, timeout, switches=True)
        tried.append(end)
        if end.status is GateStatus.PASSED:
            tried.extend(
                CommandEnd(rest, GateStatus.SKIPPED, why="an earlier alternative passed")
                for rest in gate.commands[index + 1 :]
            )
            break
    return tuple(tried)


def _gate_end(gate: GateSpec, tried: tuple[CommandEnd, ...]) -> _GateEnd:
    """A gate's status from its commands: passed by one that passed; else failed by the first that
    ran (a viable alternative); else failed by a refusal; else an environment failure."""
    for wanted in (
        lambda e: e.status is GateStatus.PASSED,
        lambda e: e.status is GateStatus.FAILED and e.fixable,
        lambda e: e.status is GateStatus.FAILED,
    ):
        decided = next((end for end in tried if wanted(end)), None)
        if decided is not None:
            return _GateEnd(gate, decided.status, decided, tried)
    return _GateEnd(gate, GateStatus.ENVIRONMENT_FAILURE, tried[0], tried)


async def _run_command(
    services: RunServices, caller: GateCaller, root: Path, command: str, seconds: float, *, switches: bool
) -> CommandEnd:
    """The checks of step 1 (module docstring), then the command through the shell tool's path."""
    problem = switch_problem(command, root) if switches else None
    if problem is None:
        problem = missing_program(command)
    if problem is not None:
        return CommandEnd(command, GateStatus.ENVIRONMENT_FAILURE, why=problem)
    try:
        complaint = await check_syntax(command, root)
    except (OSError, TimeoutError) as exc:
        return CommandEnd(command, GateStatus.ENVIRONMENT_FAILURE, why=f"the shell could not check it: {exc}")
    if complaint is not None:
        return CommandEnd(command, GateStatus.FAILED, why=f"the shell cannot parse it: {complaint}")
    try:
        return await _through_shell_tool(services, caller, root, command, seconds)
    except OctipusError as exc:  # the store or the journal failed: nothing the child can fix
        return CommandEnd(
            command, GateStatus.ENVIRONMENT_FAILURE, why=f"Octipus could not run it: {exc.message}"
        )


async def _through_shell_tool(
    services: RunServices, caller: GateCaller, root: Path, command: str, seconds: float
) -> CommandEnd:
    """Decide the command as ``shell__run`` (rules, flow guard, recovery review) and run it inside
    the journal's boundary with the tool's own handler (steps 2 and 3 of the module docstring)."""
    identity = dataclasses.replace(caller.identity, workspace=root)
    tool, contract, scope = SHELL_RUN.tool_id, SHELL_RUN.recovery_contract, action_scope(identity)
    args: dict[str, Any] = {"command": command, "timeout": seconds}
    ctx = CallContext(
        run_id=identity.run_id,
        session_id=identity.session_id,
        workspace=str(root),
        attended=identity.attended,
        on_waiting=caller.on_waiting,
        space=caller.space,
        plan=caller.plan,
        stage=identity.stage,  # a stage's verifyCommand: its attempt, its approved gate commands (a child's gate: None)
        host_services=caller.host_services,
    )
    verdict = await services.gate.decide(ctx, tool, args)
    if verdict.allowed:
        verdict = await services.recovery.check(ctx, scope, tool, args, contract)
    if not verdict.allowed:
        await services.journal.refused(scope, tool, args, contract, verdict.reason)
        return CommandEnd(command, GateStatus.FAILED, why=f"not run: {verdict.reason}")
    # the one call decided here; shell__run asks it only how to confine the command
    host = ManualCallHost(tool, verdict.reason, shell=ShellTerms(services.sandbox, caller.host_services))

    async def body() -> str | dict[str, Any] | ToolOutcome:
        with anyio.fail_after(SHELL_RUN.timeout_seconds):
            return await SHELL_RUN.handler(identity, host, dict(args))

    executed = await services.journal.execute(
        scope,
        tool,
        args,
        contract,
        body,
        timeout_seconds=SHELL_RUN.timeout_seconds,
        dispatch=SHELL_RUN.dispatch(),
    )
    return _ended(command, executed, seconds)


def _ended(command: str, executed: Executed, seconds: float) -> CommandEnd:
    """A :class:`CommandEnd` from ``shell__run``'s result."""
    value = executed.value
    if not isinstance(value, dict):  # not started (not_executed), or Octipus failed around it
        prefix = "not run: " if executed.outcome is ActionOutcome.NOT_EXECUTED else ""
        return CommandEnd(command, GateStatus.ENVIRONMENT_FAILURE, why=f"{prefix}{value}")
    code = value.get("exit_code")
    output = _tail(value)
    if value.get("timed_out"):
        # journaled ``uncertain`` like any timed-out shell__run: the recovery review would refuse a
        # retried child's changes until a person looks, so a timeout is not retried
        why = f"timed out after {seconds:g} s (its process group was stopped; the journal holds it uncertain)"
        return CommandEnd(command, GateStatus.FAILED, code, output, why, timed_out=True)
    if code == 0:
        return CommandEnd(command, GateStatus.PASSED, code, output, "exited 0")
    elif isinstance(code, int) and code > 0:
        why = f"exited {code}"
    else:
        why = f"was killed ({'signal ' + str(-code) if isinstance(code, int) else 'no exit status'})"
    return CommandEnd(command, GateStatus.FAILED, code, output, why, fixable=True)


def _tail(result: dict[str, Any]) -> str:
    """The end of a command's output: stdout, then stderr under a ``[stderr]`` line."""
    out, err = str(result.get("stdout") or "").rstrip(), str(result.get("stderr") or "").rstrip()
    text = f"{out}\n[stderr]\n{err}" if out and err else (out or err)
    if len(text) <= GATE_OUTPUT_TAIL_CHARS:
        return text
    cut = len(text) - GATE_OUTPUT_TAIL_CHARS
    return f"[... {cut} earlier characters cut]\n{text[cut:]}"


# ------------------------------------------------------------------ the verdict


def _verdict(ends: Sequence[_GateEnd]) -> GateVerdict:
    required = [end for end in ends if end.gate.required]
    passed = all(end.status is GateStatus.PASSED for end in required)
    blocking = [end for end in required if end.blocks_retry]
    retry = not passed and not blocking
    return GateVerdict(
        passed=passed,
        retry=retry,
        reason=_reason(ends, retry=retry, blocking=blocking),
        results=[end.to_dict() for end in ends],
    )


def _reason(ends: Sequence[_GateEnd], *, retry: bool, blocking: Sequence[_GateEnd]) -> str:
    failed = [end for end in ends if end.status is not GateStatus.PASSED]
    if not failed:
        return ""
    if retry:
        head = (
            "Your work did not pass its verification gates, which ran in your working tree after you "
            "finished. Fix the cause in the code (do not weaken or skip the checks) and finish again; "
            "the gates run again then."
        )
    elif blocking:
        head = "The verification gates failed and the child is not retried: " + "; ".join(
            _final(end) for end in blocking
        )
    else:
        head = "Verification passed; gates that are not required did not pass."
    text = "\n\n".join([head, *(_describe(end) for end in failed)])
    if len(text) > MAX_REASON_CHARS:
        note = "\n[... cut; every gate's output is on the receipt]"
        text = text[: MAX_REASON_CHARS - len(note)] + note
    return text


def _final(end: _GateEnd) -> str:
    """Why a blocking gate stops the retries, as a clause."""
    name = end.gate.name
    if end.status is GateStatus.ENVIRONMENT_FAILURE:
        return f"gate {name!r} cannot run in this environment (not a problem of the code)"
    if not end.decided_by.fixable:
        if end.decided_by.timed_out:
            return (
                f"gate {name!r} timed out; its outcome awaits a recovery review, so the child is not retried"
            )
        return f"gate {name!r} did not run, and a retry of the child cannot change that"
    return f"gate {name!r} failed and is not retryable"


def _describe(end: _GateEnd) -> str:
    """One gate that did not pass: name, command, what happened, its output's end."""
    kind = "required" if end.gate.required else "not required"
    shown = end.decided_by
    line = f"- gate {end.gate.name!r} ({kind}, {end.status}): `{shown.command}`: {shown.why}"
    others = [e for e in end.tried if e is not shown and e.status is not GateStatus.SKIPPED]
    if others:
        line += "; other alternatives: " + "; ".join(f"`{e.command}`: {e.why}" for e in others)
    if shown.output and shown.fixable:
        line += f"\n  end of its output:\n```\n{shown.output}\n```"
    return line
