"""A faithful stand-in for the Antigravity CLI (``agy``) in print mode, with a scripted "model".

The real ``agy`` cannot be installed here. This stub behaves as ``sources.md`` §4 and seed 003 say
the print mode does, so the Antigravity adapter and the daemon can be driven end to end::

    OCTIPUS_AGY_SCRIPT=script.json python -m octipusd.testing.stub_agy --print='hello'

Command line (cobra/pflag style, like the Go binary): ``--flag value``, ``--flag=value``,
``-p value``, ``-p=value``, ``-pvalue``; ``--`` ends the flags. Accepted flags:

================================  ====================================================================
``-p``, ``--prompt``, ``--print``  the one-shot prompt (print mode); variadic: positional arguments
                                  that follow are appended, space-separated (third party: "--print is
                                  variadic")
``--mode plan|accept-edits``      ``plan`` refuses file writes (sources.md §4: verified read-only)
``--model NAME``                  recorded
``--effort low|medium|high``      recorded
``--disable-slash-commands``      recorded
``--print-timeout DURATION``      Go duration (``90s``, ``5m``, ``1h30m``); a bare integer fails with
                                  "missing unit in duration" and exit 2; default 5m. When exceeded the
                                  stub prints ``Error: print timeout ...`` on stderr and exits 1
                                  (UNCONFIRMED: the real message and status are not documented)
``--add-dir DIR`` (repeatable)    grants writes to DIR; without a grant covering the working directory
                                  writes are virtualized to
                                  ``$HOME/.gemini/antigravity-cli/brain/<conversation_id>/``
``--dangerously-skip-permissions``  tools proceed without review
``--sandbox``                     terminal commands are silently not run (observed by a third party)
``--conversation ID``, ``-c``,    resume-like flags: ignored, a brand-new conversation starts silently
``--continue``                    (seed 003: a stale id does not error)
``--log-file PATH``               accepted, nothing is written
``-h``/``--help``, ``-v``/``--version``
================================  ====================================================================

Any other flag: ``Error: unknown flag: --x`` (or ``unknown shorthand flag``) on stderr, exit 2; a
value flag without its value or a bad ``--mode``/``--effort``/``--print-timeout``: exit 2. Without a
print flag the stub exits 2 (it models print mode only). stdin is never read.

Output: buffered plain text. Nothing is printed until the turn is over; then the answer (the
``say`` texts joined by newlines) and a newline, or nothing when the answer is empty. No JSON, no
conversation id, exit 0.

Tool permission (``toolPermission`` in ``$HOME/.gemini/antigravity-cli/settings.json``, default
``request-review``; AGY ``docs/reference.md``): a ``run`` or ``write`` action proceeds when
``--dangerously-skip-permissions`` is given or the setting is ``always-proceed``; otherwise it waits
for a review nobody can give in print mode, and the turn ends at once with an empty answer and
exit 0 (sources.md §4, observed: 'the run "succeeds" with empty response'). The stub simplifies
``proceed-in-sandbox`` and ``strict`` to that same wait.

The "model" (``OCTIPUS_AGY_SCRIPT``, a JSON file): either a list of actions run by every
invocation, or ``{"turns": [[actions], [actions], ...]}`` where the n-th invocation (counted in the
state file ``OCTIPUS_AGY_STATE``, default ``<script>.state``) runs ``turns[n]``; an invocation past
the last turn prints ``stub agy: ...`` on stderr and exits 1. ``{"actions": [...]}`` equals a list.
Each action is an object with one key:

- ``{"say": "text"}``: add a paragraph to the answer.
- ``{"run": "command"}``: run ``/bin/sh -c command`` in the working directory with agy's environment
  (how agy's agent uses its terminal, e.g. ``octipus-bridge call update_work_plan '{...}'``);
  stdin is ``/dev/null``, stdout and stderr are captured.
- ``{"say_output": true}``: add the last command's stdout and stderr to the answer.
- ``{"write": {"path": "rel/path", "content": "text"}}``: the agent's file edit tool; refused in
  ``--mode plan`` (the turn goes on).
- ``{"sleep": 0.2}``: wait that many seconds.
- ``{"stderr": "text"}``: write a line to stderr.
- ``{"exit": 3}``: print the answer so far and exit with that status.

Example: ``octipusd/testing/scripts/agy/bridge_plan.json`` (a turn that lists the bridge's tools and
saves a work plan through ``octipus-bridge``, then a second turn).

Record (``OCTIPUS_AGY_RECORD``, optional): JSON lines appended to that file. At start, before the
command line is checked: ``{"event": "start", "pid", "argv" (arguments after the program),
"env_keys" (sorted names only, never values), "cwd", "stdin" ("devnull" | "pipe" | "tty" | "file"
| "closed" | "other")}``. After parsing: ``{"event": "turn", "pid", "prompt", "mode", "model",
"effort", "add_dirs", "resume_requested", "conversation_id", "turn", "tool_permission"}``. At the
end: ``{"event": "end", "pid", "exit_code", "actions": [{"action", "outcome", ...}], "answer"}``.
Action outcomes: ``said``, ``ran`` (with ``exit_code`` and ``output``), ``blocked_sandbox``,
``waiting_review``, ``refused_plan_mode``, ``written``, ``virtualized`` (with ``path``), ``slept``,
``timeout``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "RECORD_ENV",
    "SCRIPT_ENV",
    "STATE_ENV",
    "VERSION",
    "AgyArgs",
    "UsageError",
    "load_turn",
    "main",
    "parse_args",
    "parse_go_duration",
]

#: Environment variable naming the script file.
SCRIPT_ENV = "OCTIPUS_AGY_SCRIPT"
#: Environment variable naming the JSON-lines record file.
RECORD_ENV = "OCTIPUS_AGY_RECORD"
#: Environment variable naming the turn-counter file (default ``<script>.state``).
STATE_ENV = "OCTIPUS_AGY_STATE"
#: What ``--version`` prints.
VERSION = "agy 1.1.18 (Octipus stub)"

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2

#: agy's own print timeout default (sources.md §4: "CLI default 5 m"), seconds.
DEFAULT_PRINT_TIMEOUT = 300.0
#: Output of a command kept in the record, characters.
RECORD_OUTPUT_MAX = 65536

_BOOL_LONG = {
    "help": "help",
    "version": "version",
    "continue": "continue_",
    "sandbox": "sandbox",
    "disable-slash-commands": "disable_slash_commands",
    "dangerously-skip-permissions": "skip_permissions",
}
_VALUE_LONG = {
    "prompt": "prompt",
    "print": "prompt",
    "conversation": "conversation",
    "model": "model",
    "mode": "mode",
    "effort": "effort",
    "print-timeout": "print_timeout",
    "log-file": "log_file",
    "add-dir": "add_dir",
}
_BOOL_SHORT = {"h": "help", "v": "version", "c": "continue_"}
_VALUE_SHORT = {"p": "prompt"}

MODES = ("plan", "accept-edits")
EFFORTS = ("low", "medium", "high")
_ACTIONS = ("say", "run", "say_output", "write", "sleep", "stderr", "exit")

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")

HELP = """\
Antigravity CLI (Octipus stub of print mode)

Usage:
  agy [flags]

Flags:
  -p, --prompt string          Run a one-shot prompt (alias --print; variadic)
  -c, --continue               Continue previous session
      --conversation string    Load session by ID
      --mode string            Permission mode: plan | accept-edits
      --model string           Specify model name override
      --effort string          Reasoning effort: low | medium | high
      --disable-slash-commands Disable slash commands
      --print-timeout duration Print mode timeout (default 5m0s)
      --add-dir stringArray    Grant the agent access to a directory
      --dangerously-skip-permissions  Skip every tool permission review
      --sandbox                Run inside isolated Docker container
      --log-file string        Write logs to a file
  -h, --help                   Display help menu
  -v, --version                Display version info
"""


class UsageError(Exception):
    """A command-line error (exit 2); the message is what the CLI prints after ``Error: ``."""


class ScriptError(Exception):
    """The script file is missing or malformed, or has no turn for this invocation (exit 1)."""


class PrintTimeout(Exception):
    """The turn ran past ``--print-timeout``."""


@dataclass
class AgyArgs:
    """A parsed ``agy`` command line.

    Attributes:
        prompt: The print-mode prompt, or None when no print flag was given.
        mode: ``plan``, ``accept-edits`` or None.
        model: ``--model`` value.
        effort: ``--effort`` value.
        print_timeout: Seconds (``--print-timeout``, default 300).
        print_timeout_text: The duration as given (for messages).
        add_dirs: ``--add-dir`` values in order.
        conversation: ``--conversation`` value (ignored: a new conversation starts).
        continue_: ``-c/--continue`` (ignored likewise).
        sandbox: ``--sandbox``.
        skip_permissions: ``--dangerously-skip-permissions``.
        disable_slash_commands: ``--disable-slash-commands``.
        log_file: ``--log-file`` value.
        help: ``-h/--help``.
        version: ``-v/--version``.
    """

    prompt: str | None = None
    mode: str | None = None
    model: str | None = None
    effort: str | None = None
    print_timeout: float = DEFAULT_PRINT_TIMEOUT
    print_timeout_text: str = "5m0s"
    add_dirs: list[str] = field(default_factory=list)
    conversation: str | None = None
    continue_: bool = False
    sandbox: bool = False
    skip_permissions: bool = False
    disable_slash_commands: bool = False
    log_file: str | None = None
    help: bool = False
    version: bool = False

    @property
    def resume_requested(self) -> bool:
        """Whether a resume-like flag was given (``--conversation``, ``-c``)."""
        return self.conversation is not None or self.continue_


def parse_go_duration(text: str) -> float:
    """Parse a Go ``time.ParseDuration`` string.

    Args:
        text: e.g. ``"90s"``, ``"1h30m"``, ``"1.5m"``, ``"0"``.

    Returns:
        Seconds.

    Raises:
        ValueError: the Go error text, e.g. ``time: missing unit in duration "60"``.
    """
    original = text
    sign = 1.0
    if text[:1] in ("+", "-"):
        sign = -1.0 if text[0] == "-" else 1.0
        text = text[1:]
    if text == "0":
        return 0.0
    if not text:
        raise ValueError(f'time: invalid duration "{original}"')
    total = 0.0
    pos = 0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if match is None:
            digits = re.match(r"\d+\.?\d*|\.\d+", text[pos:])
            if digits and pos + digits.end() == len(text):
                raise ValueError(f'time: missing unit in duration "{original}"')
            if digits:
                raise ValueError(
                    f'time: unknown unit "{text[pos + digits.end() :]}" in duration "{original}"'
                )
            raise ValueError(f'time: invalid duration "{original}"')
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total


def _set_value(args: AgyArgs, dest: str, flag: str, value: str) -> None:
    if dest == "add_dir":
        args.add_dirs.append(value)
    elif dest == "mode":
        if value not in MODES:
            raise UsageError(
                f'invalid argument "{value}" for "{flag}" flag: must be one of {", ".join(MODES)}'
            )
        args.mode = value
    elif dest == "effort":
        if value not in EFFORTS:
            raise UsageError(
                f'invalid argument "{value}" for "{flag}" flag: must be one of {", ".join(EFFORTS)}'
            )
        args.effort = value
    elif dest == "print_timeout":
        try:
            seconds = parse_go_duration(value)
        except ValueError as exc:
            raise UsageError(f'invalid argument "{value}" for "{flag}" flag: {exc}') from None
        args.print_timeout = seconds
        args.print_timeout_text = value
    else:
        setattr(args, dest, value)


def _set_bool(args: AgyArgs, dest: str, flag: str, value: str | None) -> None:
    if value is None:
        setattr(args, dest, True)
        return
    lowered = value.lower()
    if lowered in ("1", "t", "true"):
        setattr(args, dest, True)
    elif lowered in ("0", "f", "false"):
        setattr(args, dest, False)
    else:
        raise UsageError(
            f'invalid argument "{value}" for "{flag}" flag: strconv.ParseBool: parsing "{value}": invalid syntax'
        )


def parse_args(argv: Sequence[str]) -> AgyArgs:
    """Parse an ``agy`` command line the way pflag would (see the module docstring).

    Args:
        argv: Arguments after the program name.

    Returns:
        The parsed arguments.

    Raises:
        UsageError: an unknown flag, a value flag without its value, or an invalid value.
    """
    args = AgyArgs()
    positional: list[str] = []
    prompt_given = False
    items = list(argv)
    i = 0
    while i < len(items):
        arg = items[i]
        i += 1
        if arg == "--":
            positional.extend(items[i:])
            break
        if arg.startswith("--"):
            name, eq, inline = arg[2:].partition("=")
            flag = "--" + name
            if name in _BOOL_LONG:
                _set_bool(args, _BOOL_LONG[name], flag, inline if eq else None)
            elif name in _VALUE_LONG:
                if eq:
                    value = inline
                elif i < len(items):
                    value = items[i]
                    i += 1
                else:
                    raise UsageError(f"flag needs an argument: {flag}")
                _set_value(args, _VALUE_LONG[name], flag, value)
                prompt_given = prompt_given or _VALUE_LONG[name] == "prompt"
            else:
                raise UsageError(f"unknown flag: {flag}")
            continue
        if arg.startswith("-") and len(arg) > 1:
            letters = arg[1:]
            j = 0
            while j < len(letters):
                letter = letters[j]
                j += 1
                if letter in _BOOL_SHORT:
                    _set_bool(args, _BOOL_SHORT[letter], "-" + letter, None)
                elif letter in _VALUE_SHORT:
                    rest = letters[j:]
                    if rest.startswith("="):
                        value = rest[1:]
                    elif rest:
                        value = rest
                    elif i < len(items):
                        value = items[i]
                        i += 1
                    else:
                        raise UsageError(f"flag needs an argument: '{letter}' in -{letter}")
                    _set_value(args, _VALUE_SHORT[letter], "-" + letter, value)
                    prompt_given = True
                    break
                else:
                    raise UsageError(f"unknown shorthand flag: '{letter}' in {arg}")
            continue
        positional.append(arg)
    if prompt_given:
        args.prompt = " ".join([args.prompt or "", *positional]) if positional else args.prompt
    elif positional:
        raise UsageError(f'unknown command "{positional[0]}" for "agy"')
    return args


# ------------------------------------------------------------------------------- script


def _validate(actions: object, where: str) -> list[dict[str, Any]]:
    if not isinstance(actions, list):
        raise ScriptError(f"{where}: expected a JSON list of actions")
    checked: list[dict[str, Any]] = []
    for n, action in enumerate(actions):
        if not isinstance(action, dict) or len(action) != 1:
            raise ScriptError(f"{where} action {n}: expected an object with exactly one key, got {action!r}")
        ((key, arg),) = action.items()
        if key not in _ACTIONS:
            raise ScriptError(f"{where} action {n}: unknown action {key!r}; known: {', '.join(_ACTIONS)}")
        bad = (
            (key in ("say", "run", "stderr") and not isinstance(arg, str))
            or (
                key == "sleep"
                and not (isinstance(arg, int | float) and not isinstance(arg, bool) and arg >= 0)
            )
            or (key == "exit" and not (isinstance(arg, int) and not isinstance(arg, bool)))
            or (
                key == "write"
                and not (
                    isinstance(arg, dict)
                    and isinstance(arg.get("path"), str)
                    and isinstance(arg.get("content"), str)
                )
            )
        )
        if bad:
            raise ScriptError(f"{where} action {n}: bad argument for {key!r}: {arg!r}")
        checked.append({key: arg})
    return checked


def load_turn(script_path: str, state_path: str) -> tuple[int, list[dict[str, Any]]]:
    """Load the actions of this invocation's turn and advance the turn counter.

    Args:
        script_path: The script file.
        state_path: The turn-counter file (created when missing).

    Returns:
        ``(turn index, actions)``.

    Raises:
        ScriptError: unreadable or malformed script, or no turn left.
    """
    try:
        with open(script_path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ScriptError(f"{script_path}: {exc}") from None
    if isinstance(data, dict) and "actions" in data:
        data = data["actions"]
    fd = os.open(state_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        raw = os.read(fd, 64).decode("ascii", errors="replace").strip()
        index = int(raw) if raw.isdigit() else 0
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, f"{index + 1}\n".encode())
    finally:
        os.close(fd)
    if isinstance(data, dict) and "turns" in data:
        turns = data["turns"]
        if not isinstance(turns, list):
            raise ScriptError(f"{script_path}: 'turns' must be a list of action lists")
        if index >= len(turns):
            raise ScriptError(
                f"{script_path}: the script has {len(turns)} turn(s) and this is invocation {index + 1}"
            )
        return index, _validate(turns[index], f"turn {index}")
    return index, _validate(data, "script")


# ------------------------------------------------------------------------------- running


def _stdin_kind() -> str:
    try:
        info = os.fstat(0)
    except OSError:
        return "closed"
    if stat.S_ISFIFO(info.st_mode):
        return "pipe"
    if stat.S_ISCHR(info.st_mode):
        try:
            null = os.stat(os.devnull)
        except OSError:
            null = None
        if null is not None and (info.st_dev, info.st_ino) == (null.st_dev, null.st_ino):
            return "devnull"
        return "tty" if os.isatty(0) else "other"
    if stat.S_ISREG(info.st_mode):
        return "file"
    if stat.S_ISSOCK(info.st_mode):
        return "pipe"
    return "other"


def _record(entry: dict[str, Any]) -> None:
    path = os.environ.get(RECORD_ENV)
    if not path:
        return
    line = (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, line)
    finally:
        os.close(fd)


def tool_permission(home: str | None) -> str:
    """Read ``toolPermission`` from ``$HOME/.gemini/antigravity-cli/settings.json``.

    Args:
        home: The HOME folder, or None.

    Returns:
        The setting, ``request-review`` when absent or unreadable (agy's default).
    """
    if not home:
        return "request-review"
    path = Path(home) / ".gemini" / "antigravity-cli" / "settings.json"
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("toolPermission")
    except (OSError, ValueError, AttributeError):
        return "request-review"
    return value if isinstance(value, str) else "request-review"


def _granted(cwd: str, add_dirs: Sequence[str]) -> bool:
    here = os.path.realpath(cwd)
    for folder in add_dirs:
        root = os.path.realpath(os.path.join(cwd, folder))
        with contextlib.suppress(ValueError):
            if os.path.commonpath([here, root]) == root:
                return True
    return False


class _Turn:
    """One print-mode turn: the scripted actions with agy's rules applied."""

    def __init__(self, args: AgyArgs, permission: str, conversation_id: str) -> None:
        self.args = args
        self.permission = permission
        self.conversation_id = conversation_id
        self.cwd = os.getcwd()
        self.deadline = time.monotonic() + args.print_timeout if args.print_timeout > 0 else None
        self.answer: list[str] = []
        self.outcomes: list[dict[str, Any]] = []
        self.last_output = ""

    def remaining(self) -> float | None:
        if self.deadline is None:
            return None
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise PrintTimeout
        return left

    def may_proceed(self) -> bool:
        return self.args.skip_permissions or self.permission == "always-proceed"

    def run(self, actions: list[dict[str, Any]], stderr: TextIO) -> int | None:
        """Run the actions; return an exit status to stop early with, or None at the end."""
        for action in actions:
            ((key, arg),) = action.items()
            self.remaining()
            if key == "say":
                self.answer.append(arg)
                self.outcomes.append({"action": "say", "outcome": "said"})
            elif key == "say_output":
                self.answer.append(self.last_output.rstrip("\n"))
                self.outcomes.append({"action": "say_output", "outcome": "said"})
            elif key == "stderr":
                stderr.write(arg + "\n")
                stderr.flush()
                self.outcomes.append({"action": "stderr", "outcome": "written"})
            elif key == "sleep":
                left = self.remaining()
                if left is not None and arg > left:
                    time.sleep(left)
                    raise PrintTimeout
                time.sleep(arg)
                self.outcomes.append({"action": "sleep", "outcome": "slept", "seconds": arg})
            elif key == "exit":
                self.outcomes.append({"action": "exit", "outcome": "exit", "exit_code": arg})
                return int(arg)
            elif key == "run":
                if not self._command(arg):
                    self.answer.clear()
                    return EXIT_OK
            elif key == "write" and not self._write(arg["path"], arg["content"]):
                self.answer.clear()
                return EXIT_OK
        return None

    def _command(self, command: str) -> bool:
        entry: dict[str, Any] = {"action": "run", "command": command}
        self.outcomes.append(entry)
        if self.args.sandbox:
            entry["outcome"] = "blocked_sandbox"
            self.last_output = ""
            return True
        if not self.may_proceed():
            entry["outcome"] = "waiting_review"
            return False
        try:
            done = subprocess.run(
                ["/bin/sh", "-c", command],
                cwd=self.cwd,
                env=dict(os.environ),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=self.remaining(),
                check=False,
            )
        except subprocess.TimeoutExpired:
            entry["outcome"] = "timeout"
            raise PrintTimeout from None
        output = done.stdout.decode("utf-8", "replace") + done.stderr.decode("utf-8", "replace")
        self.last_output = output
        entry.update(outcome="ran", exit_code=done.returncode, output=output[:RECORD_OUTPUT_MAX])
        return True

    def _write(self, rel: str, content: str) -> bool:
        entry: dict[str, Any] = {"action": "write", "path": rel}
        self.outcomes.append(entry)
        if self.args.mode == "plan":
            entry["outcome"] = "refused_plan_mode"
            return True
        if not self.may_proceed():
            entry["outcome"] = "waiting_review"
            return False
        if _granted(self.cwd, self.args.add_dirs):
            target = Path(self.cwd) / rel
            entry["outcome"] = "written"
        else:
            home = os.environ.get("HOME") or str(Path.home())
            brain = Path(home) / ".gemini" / "antigravity-cli" / "brain" / self.conversation_id
            target = brain / rel.lstrip("/")
            entry["outcome"] = "virtualized"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        entry["target"] = str(target)
        return True


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: behave as ``agy`` in print mode (see the module docstring).

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        The exit status: 0 after a turn, 2 for command-line errors, 1 for a print timeout or a
        script problem, or the status of an ``exit`` action.
    """
    args_list = list(sys.argv[1:] if argv is None else argv)
    pid = os.getpid()
    _record(
        {
            "event": "start",
            "pid": pid,
            "argv": args_list,
            "env_keys": sorted(os.environ),
            "cwd": os.getcwd(),
            "stdin": _stdin_kind(),
        }
    )
    try:
        args = parse_args(args_list)
    except UsageError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        print("Run 'agy --help' for usage.", file=sys.stderr)
        _record({"event": "end", "pid": pid, "exit_code": EXIT_USAGE, "actions": [], "answer": ""})
        return EXIT_USAGE
    if args.help:
        sys.stdout.write(HELP)
        return EXIT_OK
    if args.version:
        print(VERSION)
        return EXIT_OK
    if args.prompt is None:
        print("Error: this stub models print mode only; pass -p/--prompt/--print", file=sys.stderr)
        return EXIT_USAGE
    conversation_id = str(uuid.uuid4())  # always a new conversation: resume flags are ignored
    permission = tool_permission(os.environ.get("HOME"))
    script_path = os.environ.get(SCRIPT_ENV)
    turn_index: int | None = None
    code: int | None
    turn = _Turn(args, permission, conversation_id)
    try:
        if not script_path:
            raise ScriptError(f"{SCRIPT_ENV} is not set")
        turn_index, actions = load_turn(script_path, os.environ.get(STATE_ENV) or script_path + ".state")
        _record(
            {
                "event": "turn",
                "pid": pid,
                "prompt": args.prompt,
                "mode": args.mode,
                "model": args.model,
                "effort": args.effort,
                "add_dirs": args.add_dirs,
                "print_timeout": args.print_timeout,
                "resume_requested": args.resume_requested,
                "conversation_id": conversation_id,
                "turn": turn_index,
                "tool_permission": permission,
            }
        )
        code = turn.run(actions, sys.stderr)
    except ScriptError as exc:
        print(f"stub agy: {exc}", file=sys.stderr)
        _record({"event": "end", "pid": pid, "exit_code": EXIT_FAILURE, "actions": [], "answer": ""})
        return EXIT_FAILURE
    except PrintTimeout:
        print(f"Error: print timeout of {args.print_timeout_text} exceeded", file=sys.stderr)
        _record(
            {"event": "end", "pid": pid, "exit_code": EXIT_FAILURE, "actions": turn.outcomes, "answer": ""}
        )
        return EXIT_FAILURE
    answer = "\n".join(turn.answer).strip("\n")
    final = EXIT_OK if code is None else code
    try:
        if answer:
            sys.stdout.write(answer + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        final = EXIT_FAILURE
    _record({"event": "end", "pid": pid, "exit_code": final, "actions": turn.outcomes, "answer": answer})
    return final


if __name__ == "__main__":
    sys.exit(main())
