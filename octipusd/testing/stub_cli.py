"""A scriptable stand-in for a vendor agent CLI, for framing and fault tests.

Some situations cannot be produced with the real binaries on demand: a 3 MiB stdout line, a
non-JSON line in the middle of the stream, a crash at an exact point, a grandchild process left
behind. This stub produces them. Run it as::

    OCTIPUS_STUB_SCRIPT=actions.json python -m octipusd.testing.stub_cli [any args]

The arguments are ignored, except that ``--session-id X`` / ``--session-id=X`` / ``--resume X`` /
``--resume=X`` set the value substituted for the placeholder ``$SESSION_ID`` in emitted lines.

``actions.json`` is a JSON list of actions (``{"actions": [...]}`` is accepted too), run in order;
each action is an object with one of these keys:

- ``{"emit": {...}}``: write the object as one JSON line.
- ``{"emit_raw": "text"}``: write the text as one line (it may be non-JSON).
- ``{"emit_big": {"bytes": 3145728}}``: write one valid JSON line of at least that many bytes, shaped
  like a Claude ``assistant`` text event (observed.md §1.3).
- ``{"stderr": "text"}``: write the text as one line on stderr.
- ``{"read_line": true}``: block until one line arrives on stdin and remember it. At end of input the
  stub exits 0, as Claude does when its stdin closes (observed.md §1.4).
- ``{"echo_last_input": true}``: emit ``{"type": "stub_input", "line": "<last line read, without its
  newline>"}`` (``line`` is null if nothing was read yet).
- ``{"sleep": 1.5}``: sleep that many seconds.
- ``{"wait_for_file": "/path/release-$SESSION_ID"}``: block until that file exists (polled every 20 ms;
  ``$SESSION_ID`` is replaced), so a test decides when a run goes on.
- ``{"emit_burst": {"count": 1000, "per_second": 20}}``: write ``count`` Claude ``assistant`` text
  events whose text is ``burst <i> t=<time.time() when written>`` (for latency measurements), paced at
  ``per_second`` (on a fixed schedule from the first; 0, the default, as fast as it can).
- ``{"spawn_background": {"pid_file": "p", "seconds": 300}}``: start ``sleep 300`` as a grandchild in
  the stub's own process group, never waited for, and write its pid to ``pid_file``. Its stdio is
  /dev/null unless ``"inherit_stdio": true``, which lets it hold the stub's stdout/stderr open.
  ``"setsid": true`` starts it in a session of its own instead, and ``"clear_env": true`` with an
  empty environment (no run marker): a descendant that tries to escape its run.
- ``{"wait_background": true}``: block until every process ``spawn_background`` started has ended: a
  vendor that does not exit while its background work runs (Claude Code with a ``run_in_background``
  shell does not).
- ``{"ignore_sigterm": true}``: ignore SIGTERM from now on (a vendor slow to stop).
- ``{"read_until_eof": true}``: read and drop stdin lines until it closes, then go on (at EOF the
  stub does not exit, unlike ``read_line``): a vendor that ignores stdin EOF.
- ``{"exit": 3}``: exit with that status now.

stdout is written in binary and flushed after every line. After the last action the stub exits 0.
``$SESSION_ID`` is replaced in every string (keys and values) of ``emit`` objects, in ``emit_raw``
text and in the ``emit_big`` event's ``session_id``.

If ``OCTIPUS_STUB_ARGV_FILE`` is set, the stub first writes
``{"argv": [args after the program], "env_keys": [sorted names], "cwd": "...", "pid": N}`` to it.

A malformed action file makes the stub print ``stub_cli: <reason>`` on stderr and exit 2.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any, BinaryIO

__all__ = [
    "ARGV_FILE_ENV",
    "CLAUDE_INIT",
    "SCRIPT_ENV",
    "StubScriptError",
    "big_assistant_event",
    "claude_result",
    "main",
    "session_id_from_argv",
]

#: Environment variable naming the action file.
SCRIPT_ENV = "OCTIPUS_STUB_SCRIPT"
#: Environment variable naming the file that receives the argv and environment keys.
ARGV_FILE_ENV = "OCTIPUS_STUB_ARGV_FILE"
#: The placeholder replaced by the session id from the command line.
SESSION_PLACEHOLDER = "$SESSION_ID"

_ACTIONS = (
    "emit",
    "emit_raw",
    "emit_big",
    "stderr",
    "read_line",
    "echo_last_input",
    "sleep",
    "wait_for_file",
    "emit_burst",
    "spawn_background",
    "wait_background",
    "ignore_sigterm",
    "read_until_eof",
    "exit",
)


#: Claude Code's ``system/init`` line with the Octipus bridge connected, for this stub's scripts
#: (speaking Claude's stream-json, observed.md §1.3).
CLAUDE_INIT: dict[str, Any] = {
    "type": "system",
    "subtype": "init",
    "session_id": SESSION_PLACEHOLDER,
    "tools": ["Bash"],
    "mcp_servers": [{"name": "octipus", "status": "connected"}],
}


def claude_result(text: str = "done", tokens: int = 5) -> dict[str, Any]:
    """Claude Code's successful ``result`` line answering ``text``, with that many tokens each way."""
    return {
        "type": "result",
        "subtype": "success",
        "is_error": False,
        "result": text,
        "session_id": SESSION_PLACEHOLDER,
        "usage": {"input_tokens": tokens, "output_tokens": tokens},
    }


class StubScriptError(ValueError):
    """The action file is malformed (message names the action index and the problem)."""


def session_id_from_argv(argv: Sequence[str]) -> str | None:
    """Find the session id in a vendor-style command line.

    Args:
        argv: Arguments (without the program name).

    Returns:
        The value of the last ``--session-id``/``--resume`` option (``--opt X`` or ``--opt=X``), or
        None if there is none.
    """
    found: str | None = None
    for i, arg in enumerate(argv):
        for option in ("--session-id", "--resume"):
            if arg.startswith(option + "="):
                found = arg[len(option) + 1 :]
            elif arg == option and i + 1 < len(argv):
                found = argv[i + 1]
    return found


def _substitute(value: Any, session_id: str | None) -> Any:
    if session_id is None:
        return value
    if isinstance(value, str):
        return value.replace(SESSION_PLACEHOLDER, session_id)
    if isinstance(value, list):
        return [_substitute(item, session_id) for item in value]
    if isinstance(value, dict):
        return {_substitute(k, session_id): _substitute(v, session_id) for k, v in value.items()}
    return value


def big_assistant_event(min_bytes: int, session_id: str) -> bytes:
    """Build one JSON line of at least ``min_bytes`` bytes shaped like a Claude assistant text event.

    Args:
        min_bytes: Minimum size of the encoded line, newline excluded, in bytes.
        session_id: Value of the event's ``session_id``.

    Returns:
        The encoded event (UTF-8, ASCII only) without a trailing newline.
    """

    def build(text_len: int) -> bytes:
        event = {
            "type": "assistant",
            "message": {
                "id": "msg_big",
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-4-8",
                "content": [{"type": "text", "text": "x" * text_len}],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 100,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "output_tokens": max(1, text_len // 4),
                },
            },
            "parent_tool_use_id": None,
            "session_id": session_id,
            "uuid": "00000000-0000-4000-8000-000000000b16",
        }
        return json.dumps(event, separators=(",", ":")).encode()

    overhead = len(build(0))
    text_len = max(0, min_bytes - overhead)
    line = build(text_len)
    while len(line) < min_bytes:  # output_tokens may have grown by a digit or two
        text_len += min_bytes - len(line)
        line = build(text_len)
    return line


def _validate(actions: object) -> list[dict[str, Any]]:
    if isinstance(actions, dict) and "actions" in actions:
        actions = actions["actions"]
    if not isinstance(actions, list):
        raise StubScriptError("expected a JSON list of actions")
    checked: list[dict[str, Any]] = []
    for i, action in enumerate(actions):
        if not isinstance(action, dict) or len(action) != 1:
            raise StubScriptError(f"action {i}: expected an object with exactly one key, got {action!r}")
        ((key, arg),) = action.items()
        if key not in _ACTIONS:
            raise StubScriptError(f"action {i}: unknown action {key!r}; known: {', '.join(_ACTIONS)}")
        bad = (
            (key == "emit" and not isinstance(arg, dict))
            or (key in ("emit_raw", "stderr", "wait_for_file") and not isinstance(arg, str))
            or (key == "emit_big" and not (isinstance(arg, dict) and _is_int(arg.get("bytes"))))
            or (key in ("sleep",) and not (_is_number(arg) and arg >= 0))
            or (
                key == "emit_burst"
                and not (
                    isinstance(arg, dict)
                    and _is_int(arg.get("count"))
                    and _is_number(arg.get("per_second", 0))
                    and arg.get("per_second", 0) >= 0
                )
            )
            or (key == "exit" and not _is_int(arg))
            or (
                key == "spawn_background"
                and not (
                    isinstance(arg, dict)
                    and isinstance(arg.get("pid_file"), str)
                    and _is_number(arg.get("seconds", 300))
                )
            )
        )
        if bad:
            raise StubScriptError(f"action {i}: bad argument for {key!r}: {arg!r}")
        checked.append({key: arg})
    return checked


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _write_line(out: BinaryIO, data: bytes) -> None:
    out.write(data + b"\n")
    out.flush()


def _burst(out: BinaryIO, count: int, per_second: float, session_id: str) -> None:
    start = time.monotonic()
    for i in range(count):
        if per_second:
            delay = start + i / per_second - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        event = {
            "type": "assistant",
            "message": {
                "id": f"msg_burst_{i}",
                "role": "assistant",
                "content": [{"type": "text", "text": f"burst {i} t={time.time():.6f}"}],
            },
            "session_id": session_id,
        }
        _write_line(out, json.dumps(event, separators=(",", ":")).encode())


def run(actions: list[dict[str, Any]], argv: Sequence[str], stdin: BinaryIO, stdout: BinaryIO) -> int:
    """Perform validated actions.

    Args:
        actions: Output of the action-file validation (one-key dicts).
        argv: Arguments, for ``$SESSION_ID``.
        stdin: Binary input stream (``read_line``).
        stdout: Binary output stream, flushed after every line.

    Returns:
        The exit status (from an ``exit`` action, 0 at the end of the list or at end of stdin).
    """
    session_id = session_id_from_argv(argv)
    last_input: str | None = None
    background: list[subprocess.Popen[bytes]] = []
    for action in actions:
        ((key, arg),) = action.items()
        if key == "emit":
            _write_line(stdout, json.dumps(_substitute(arg, session_id), ensure_ascii=False).encode())
        elif key == "emit_raw":
            _write_line(stdout, str(_substitute(arg, session_id)).encode())
        elif key == "emit_big":
            _write_line(stdout, big_assistant_event(int(arg["bytes"]), session_id or SESSION_PLACEHOLDER))
        elif key == "stderr":
            sys.stderr.write(str(arg) + "\n")
            sys.stderr.flush()
        elif key == "read_line":
            raw = stdin.readline()
            if not raw:
                return 0
            last_input = raw.rstrip(b"\r\n").decode("utf-8", errors="replace")
        elif key == "echo_last_input":
            _write_line(stdout, json.dumps({"type": "stub_input", "line": last_input}).encode())
        elif key == "sleep":
            time.sleep(float(arg))
        elif key == "wait_for_file":
            target = str(_substitute(arg, session_id))
            while not os.path.exists(target):
                time.sleep(0.02)
        elif key == "emit_burst":
            _burst(
                stdout, int(arg["count"]), float(arg.get("per_second", 0)), session_id or SESSION_PLACEHOLDER
            )
        elif key == "spawn_background":
            inherit = bool(arg.get("inherit_stdio", False))
            child = subprocess.Popen(
                ["sleep", str(arg.get("seconds", 300))],
                stdin=subprocess.DEVNULL,
                stdout=None if inherit else subprocess.DEVNULL,
                stderr=None if inherit else subprocess.DEVNULL,
                start_new_session=bool(arg.get("setsid", False)),
                env={} if arg.get("clear_env") else None,
            )
            background.append(child)
            # written whole (a rename), so a reader polling the file never sees a part of the pid
            partial = f"{arg['pid_file']}.partial"
            with open(partial, "w", encoding="utf-8") as handle:
                handle.write(f"{child.pid}\n")
            os.replace(partial, arg["pid_file"])
        elif key == "wait_background":
            for child in background:
                child.wait()
        elif key == "ignore_sigterm":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        elif key == "read_until_eof":
            while stdin.readline():
                pass
        elif key == "exit":
            return int(arg)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: read the action file named by ``OCTIPUS_STUB_SCRIPT`` and run it.

    Args:
        argv: Arguments without the program name; ``sys.argv[1:]`` when None.

    Returns:
        Exit status: from the script (0 by default), 2 if the action file is missing or malformed.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    argv_file = os.environ.get(ARGV_FILE_ENV)
    if argv_file:
        with open(argv_file, "w", encoding="utf-8") as handle:
            json.dump(
                {"argv": args, "env_keys": sorted(os.environ), "cwd": os.getcwd(), "pid": os.getpid()}, handle
            )
    script_path = os.environ.get(SCRIPT_ENV)
    if not script_path:
        print(f"stub_cli: {SCRIPT_ENV} is not set", file=sys.stderr)
        return 2
    try:
        with open(script_path, encoding="utf-8") as handle:
            actions = _validate(json.load(handle))
    except (OSError, ValueError) as exc:
        print(f"stub_cli: {script_path}: {exc}", file=sys.stderr)
        return 2
    try:
        return run(actions, args, sys.stdin.buffer, sys.stdout.buffer)
    except BrokenPipeError:
        # The reader went away; exit quietly without the interpreter's flush error on stdout.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
