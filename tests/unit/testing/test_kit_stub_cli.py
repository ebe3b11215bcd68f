"""The stand-in vendor CLI (octipusd.testing.stub_cli)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from octipusd.testing.stub_cli import big_assistant_event, session_id_from_argv

REPO = Path(__file__).resolve().parents[3]


def start(tmp_path: Path, actions: Any, *args: str, **env: str) -> subprocess.Popen[bytes]:
    script = tmp_path / "actions.json"
    script.write_text(json.dumps(actions), encoding="utf-8")
    full_env = {**os.environ, "OCTIPUS_STUB_SCRIPT": str(script), **env}
    return subprocess.Popen(
        [sys.executable, "-m", "octipusd.testing.stub_cli", *args],
        cwd=REPO,
        env=full_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def run(tmp_path: Path, actions: Any, *args: str, stdin: bytes = b"", **env: str) -> tuple[int, bytes, bytes]:
    proc = start(tmp_path, actions, *args, **env)
    out, err = proc.communicate(stdin, timeout=15.0)
    return proc.returncode, out, err


def test_emit_raw_and_exit_code(tmp_path: Path) -> None:
    rc, out, err = run(
        tmp_path,
        [
            {"emit": {"type": "system", "subtype": "init", "session_id": "$SESSION_ID"}},
            {"emit_raw": "this is not json {"},
            {"stderr": "warning: something"},
            {"exit": 3},
            {"emit": {"type": "never"}},
        ],
        "-p",
        "--session-id",
        "abc-123",
    )
    assert rc == 3
    lines = out.split(b"\n")
    assert json.loads(lines[0]) == {"type": "system", "subtype": "init", "session_id": "abc-123"}
    assert lines[1] == b"this is not json {"
    assert lines[2:] == [b""]
    assert err == b"warning: something\n"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--resume=r-1"], "r-1"),
        (["--resume", "r-2", "-p"], "r-2"),
        (["--session-id=s-1"], "s-1"),
        (["-p", "--output-format", "stream-json"], None),
        (["--resume"], None),
    ],
)
def test_session_id_from_argv(argv: list[str], expected: str | None) -> None:
    assert session_id_from_argv(argv) == expected


def test_session_placeholder_in_nested_values_and_raw(tmp_path: Path) -> None:
    rc, out, _ = run(
        tmp_path,
        [
            {"emit": {"a": ["x-$SESSION_ID", {"$SESSION_ID": 1}], "n": 5}},
            {"emit_raw": "raw $SESSION_ID"},
        ],
        "--resume=zz",
    )
    assert rc == 0
    first, second = out.splitlines()
    assert json.loads(first) == {"a": ["x-zz", {"zz": 1}], "n": 5}
    assert second == b"raw zz"


def test_placeholder_kept_without_session_arg(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, [{"emit": {"session_id": "$SESSION_ID"}}])
    assert json.loads(out) == {"session_id": "$SESSION_ID"}


def test_emit_big_is_one_valid_json_line(tmp_path: Path) -> None:
    size = 3 * 1024 * 1024
    rc, out, _ = run(tmp_path, [{"emit_big": {"bytes": size}}, {"emit": {"type": "after"}}], "--session-id=S")
    assert rc == 0
    big, after, tail = out.split(b"\n")
    assert len(big) >= size
    assert len(big) < size + 1024
    event = json.loads(big)
    assert event["type"] == "assistant"
    assert event["session_id"] == "S"
    assert event["message"]["id"] == "msg_big"
    assert event["message"]["role"] == "assistant"
    assert event["message"]["content"][0]["type"] == "text"
    assert set(event["message"]["content"][0]["text"]) == {"x"}
    assert "usage" in event["message"]
    assert json.loads(after) == {"type": "after"}
    assert tail == b""


@pytest.mark.parametrize("size", [0, 10, 400, 1000, 100_000])
def test_big_assistant_event_sizes(size: int) -> None:
    line = big_assistant_event(size, "sid")
    assert len(line) >= size
    assert len(line) < max(size, 400) + 64
    json.loads(line)


def test_read_line_and_echo(tmp_path: Path) -> None:
    proc = start(
        tmp_path,
        [
            {"emit": {"type": "ready"}},
            {"read_line": True},
            {"echo_last_input": True},
            {"read_line": True},
            {"echo_last_input": True},
        ],
    )
    assert proc.stdin is not None and proc.stdout is not None
    assert json.loads(proc.stdout.readline()) == {"type": "ready"}
    first = '{"type":"user","message":{"role":"user","content":"hi"}}'
    proc.stdin.write(first.encode() + b"\n")
    proc.stdin.flush()
    assert json.loads(proc.stdout.readline()) == {"type": "stub_input", "line": first}
    proc.stdin.write("second ünïcode\n".encode())
    proc.stdin.close()
    assert json.loads(proc.stdout.readline()) == {"type": "stub_input", "line": "second ünïcode"}
    assert proc.wait(timeout=10.0) == 0
    proc.stdout.close()
    assert proc.stderr is not None
    proc.stderr.close()


def test_read_line_at_eof_exits_zero(tmp_path: Path) -> None:
    rc, out, _ = run(tmp_path, [{"read_line": True}, {"emit": {"type": "never"}}], stdin=b"")
    assert rc == 0
    assert out == b""


def test_echo_before_any_input_is_null(tmp_path: Path) -> None:
    _, out, _ = run(tmp_path, [{"echo_last_input": True}])
    assert json.loads(out) == {"type": "stub_input", "line": None}


def test_sleep_then_emit(tmp_path: Path) -> None:
    started = time.monotonic()
    rc, out, _ = run(tmp_path, [{"sleep": 0.2}, {"emit": {"type": "late"}}])
    assert rc == 0
    assert time.monotonic() - started >= 0.2
    assert json.loads(out) == {"type": "late"}


def test_argv_file(tmp_path: Path) -> None:
    argv_file = tmp_path / "argv.json"
    rc, _, _ = run(
        tmp_path,
        [],
        "-p",
        "--output-format",
        "stream-json",
        OCTIPUS_STUB_ARGV_FILE=str(argv_file),
        STUB_MARKER="1",
    )
    assert rc == 0
    data = json.loads(argv_file.read_text(encoding="utf-8"))
    assert data["argv"] == ["-p", "--output-format", "stream-json"]
    assert "STUB_MARKER" in data["env_keys"]
    assert "OCTIPUS_STUB_SCRIPT" in data["env_keys"]
    assert data["env_keys"] == sorted(data["env_keys"])
    assert data["cwd"] == str(REPO)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still "exists"; treat it as dead.
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_spawn_background_stays_in_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    proc = start(
        tmp_path,
        [{"spawn_background": {"pid_file": str(pid_file), "seconds": 30}}, {"emit": {"type": "spawned"}}],
    )
    try:
        out, _ = proc.communicate(timeout=10.0)
        assert proc.returncode == 0
        assert json.loads(out) == {"type": "spawned"}
        grandchild = int(pid_file.read_text(encoding="utf-8"))
        assert _alive(grandchild)  # outlives the stub: it was not waited for
        assert os.getpgid(grandchild) == os.getpgid(0)  # the stub's (inherited) process group
    finally:
        if pid_file.exists():
            pid = int(pid_file.read_text(encoding="utf-8"))
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_spawn_background_in_own_group_is_killed_with_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    script = tmp_path / "actions.json"
    script.write_text(
        json.dumps(
            [
                {"spawn_background": {"pid_file": str(pid_file), "seconds": 30}},
                {"emit": {"type": "spawned"}},
                {"sleep": 30},
            ]
        ),
        encoding="utf-8",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "octipusd.testing.stub_cli"],
        cwd=REPO,
        env={**os.environ, "OCTIPUS_STUB_SCRIPT": str(script)},
        stdout=subprocess.PIPE,
        start_new_session=True,  # as a supervisor would start the vendor CLI
    )
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline()) == {"type": "spawned"}
        grandchild = int(pid_file.read_text(encoding="utf-8"))
        assert os.getpgid(grandchild) == proc.pid
        os.killpg(proc.pid, signal.SIGKILL)
        assert proc.wait(timeout=5.0) == -signal.SIGKILL
        deadline = time.monotonic() + 5.0
        while _alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _alive(grandchild)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_inherit_stdio_holds_stdout_open(tmp_path: Path) -> None:
    pid_file = tmp_path / "bg.pid"
    proc = start(
        tmp_path,
        [
            {"spawn_background": {"pid_file": str(pid_file), "seconds": 30, "inherit_stdio": True}},
            {"exit": 0},
        ],
    )
    try:
        assert proc.wait(timeout=10.0) == 0
        grandchild = int(pid_file.read_text(encoding="utf-8"))
        assert _alive(grandchild)
        assert proc.stdout is not None
        os.set_blocking(proc.stdout.fileno(), False)
        # No EOF yet: the grandchild still holds the write end of the pipe.
        assert proc.stdout.read() is None
        os.kill(grandchild, signal.SIGKILL)
    finally:
        if pid_file.exists():
            pid = int(pid_file.read_text(encoding="utf-8"))
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.parametrize(
    ("actions", "fragment"),
    [
        ({"nope": 1}, "expected a JSON list"),
        ([{"fly": True}], "action 0: unknown action 'fly'"),
        ([{"emit": {}}, {"emit": "text"}], "action 1: bad argument for 'emit'"),
        ([{"emit_big": {"size": 3}}], "bad argument for 'emit_big'"),
        ([{"sleep": -1}], "bad argument for 'sleep'"),
        ([{"exit": "x"}], "bad argument for 'exit'"),
        ([{"emit": {}, "exit": 1}], "exactly one key"),
        ([{"spawn_background": {"seconds": 3}}], "bad argument for 'spawn_background'"),
    ],
)
def test_malformed_actions_exit_2(tmp_path: Path, actions: Any, fragment: str) -> None:
    rc, out, err = run(tmp_path, actions)
    assert rc == 2
    assert out == b""
    assert fragment in err.decode()


def test_actions_object_form_and_missing_env(tmp_path: Path) -> None:
    rc, out, _ = run(tmp_path, {"actions": [{"emit": {"ok": True}}]})
    assert rc == 0
    assert json.loads(out) == {"ok": True}
    env = {k: v for k, v in os.environ.items() if k != "OCTIPUS_STUB_SCRIPT"}
    proc = subprocess.run(
        [sys.executable, "-m", "octipusd.testing.stub_cli"],
        cwd=REPO,
        env=env,
        capture_output=True,
        timeout=10.0,
        check=False,
    )
    assert proc.returncode == 2
    assert b"OCTIPUS_STUB_SCRIPT" in proc.stderr


def test_reader_going_away_is_quiet(tmp_path: Path) -> None:
    proc = start(tmp_path, [{"emit_big": {"bytes": 4 * 1024 * 1024}}, {"emit": {"type": "x"}}])
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    rc = proc.wait(timeout=10.0)
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.stdin is not None
    proc.stdin.close()
    assert rc == 1
    assert b"Traceback" not in err
