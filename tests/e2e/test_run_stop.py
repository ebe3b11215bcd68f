"""A stop really stops, and a finished vendor finishes its run (issue 12, faults 1 to 3).

Adversarial vendors the real binaries cannot be made to be: the stub CLI speaks Claude's
stream-json and ignores stdin EOF and SIGTERM, leaves a child holding its stdout, or starts a
grandchild that leaves its session and clears its environment.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

from octipusd.runner.process import run_processes
from octipusd.testing.stub_cli import CLAUDE_INIT, claude_result
from tests.e2e.conftest import Env
from tests.e2e.test_stream_framing import stub_binary

INIT = CLAUDE_INIT


def _assistant(*content: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": "msg_1", "role": "assistant", "content": list(content)},
        "session_id": "$SESSION_ID",
    }


_result = claude_result


def _start(octipus: Callable[..., Env], tmp_path: Path, actions: list[dict[str, Any]]) -> Env:
    script = tmp_path / "stub.json"
    script.write_text(json.dumps(actions))
    return octipus({"steps": []}, binary=stub_binary(tmp_path, script))


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _gone(pid):
            return True
        time.sleep(0.1)
    return _gone(pid)


def test_nothing_the_vendor_prints_after_a_stop_is_accepted(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """A vendor that ignores EOF and SIGTERM and prints tool uses, a text and a success result after
    the stop: none of it becomes an event, the result, usage or a transcript message."""
    late = "the late answer nobody may see"
    env = _start(
        octipus,
        tmp_path,
        [
            {"read_line": True},
            {"emit": INIT},
            {"emit": _assistant({"type": "text", "text": "working on it"})},
            {"ignore_sigterm": True},
            {"read_until_eof": True},
            {
                "emit": _assistant(
                    {"type": "tool_use", "id": "toolu_late", "name": "Bash", "input": {"command": "id"}}
                )
            },
            {"emit": _assistant({"type": "text", "text": late})},
            {"emit": _result(late, tokens=999)},
            {"sleep": 60},
        ],
    )
    session = env.new_session()
    run = env.post(session, "go")
    env.wait(
        lambda: any(
            e["kind"] == "text" and e["data"].get("text") == "working on it" for e in env.events(run)
        ),
        what="the vendor's first text",
    )
    env.client.request("POST", f"/runs/{run}/stop", json={"reason": "stopped by the test"})
    final = env.wait_final(run, timeout=60)
    assert final["status"] == "cancelled", final
    assert final["result_text"] is None
    assert not final["input_tokens"] and not final["output_tokens"], final
    events = env.events(run)
    assert not [e for e in events if late in json.dumps(e["data"])], (
        "a line printed after the stop was stored"
    )
    assert not [e for e in events if e["kind"] == "tool_use"], "a tool use printed after the stop was stored"
    notes = [e["data"]["message"] for e in events if e["kind"] == "notice" and "discarded" in e["data"]]
    assert len(notes) == 1 and "discarded" in notes[0], notes
    messages = env.client.request("GET", f"/sessions/{session}/messages")
    assert [m["role"] for m in messages] == ["user"], messages


def test_a_vendor_that_exited_ends_its_run_even_if_a_child_holds_its_stdout(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """The vendor prints its result and exits 0; a background child keeps its stdout open. The run
    ends at once (it does not wait for the child), and the child is stopped."""
    pid_file = tmp_path / "holder.pid"
    env = _start(
        octipus,
        tmp_path,
        [
            {"read_line": True},
            {"emit": INIT},
            {"spawn_background": {"pid_file": str(pid_file), "seconds": 300, "inherit_stdio": True}},
            {"emit": _result("done")},
            {"exit": 0},
        ],
    )
    run = env.post(env.new_session(), "go")
    final = env.wait_final(run, timeout=30)
    assert final["status"] == "succeeded", final
    assert final["result_text"] == "done"
    assert _wait_gone(int(pid_file.read_text())), "the child holding the vendor's stdout survived the run"


def test_a_grandchild_that_leaves_its_session_and_clears_its_environment_ends_with_the_run(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """``setsid env -i``: neither the process group nor the run marker finds it; it still ends."""
    pid_file = tmp_path / "escaper.pid"
    env = _start(
        octipus,
        tmp_path,
        [
            {"read_line": True},
            {"emit": INIT},
            {
                "spawn_background": {
                    "pid_file": str(pid_file),
                    "seconds": 300,
                    "setsid": True,
                    "clear_env": True,
                }
            },
            {"emit": _assistant({"type": "text", "text": "started"})},
            {"sleep": 120},
        ],
    )
    run = env.post(env.new_session(), "go")
    env.wait(lambda: pid_file.exists() and pid_file.read_text().strip(), what="the escaper's pid")
    escaper = int(pid_file.read_text())
    assert psutil.Process(escaper).environ().get("OCTIPUS_RUN_ID") is None
    env.client.request("POST", f"/runs/{run}/stop", json={"reason": "stopped by the test"})
    assert env.wait_final(run, timeout=60)["status"] == "cancelled"
    assert _wait_gone(escaper), (
        "a grandchild that called setsid and cleared its environment survived the stop"
    )


ANSWER = "the turn's own answer"


def _outlives_its_result(
    octipus: Callable[..., Env], tmp_path: Path, afterwards: list[dict[str, Any]]
) -> tuple[str, list[dict[str, Any]]]:
    """A vendor that answers, then does ``afterwards`` instead of exiting (issue 26 item 1). Its run
    ends ``succeeded`` with only that answer (bounded by the grace after the result, not by the
    hour of the active-work limit), no process of it is left, and the session's next turn runs at
    once. Returns the run's id and its events."""
    env = _start(
        octipus,
        tmp_path,
        [
            {"read_line": True},
            {"emit": INIT},
            {"emit": _assistant({"type": "text", "text": ANSWER})},
            {"emit": _result(ANSWER, tokens=7)},
            *afterwards,
        ],
    )
    session = env.new_session()
    run = env.post(session, "go")
    final = env.wait_final(run, timeout=45)
    assert final["status"] == "succeeded", final
    assert final["result_text"] == ANSWER
    assert final["input_tokens"] == 7 and final["output_tokens"] == 7, final
    env.wait(lambda: not run_processes(run), timeout=15, what="no process of the run left")
    events = env.events(run)
    notes = [e["data"] for e in events if e["kind"] == "notice" and "after_result" in e["data"]]
    assert len(notes) == 1 and notes[0]["lingered"], notes
    # the admission slot and the session are free: the next turn is accepted and runs
    (tmp_path / "stub.json").write_text(
        json.dumps([{"read_line": True}, {"emit": INIT}, {"emit": _result("again")}])
    )
    second = env.wait_final(env.post(session, "again"), timeout=45)
    assert second["status"] == "succeeded" and second["result_text"] == "again", second
    return run, events


def test_a_vendor_silent_after_its_result_with_its_pipes_open_ends_its_run(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """It ignores stdin EOF and sleeps without closing stdout or stderr."""
    _run, events = _outlives_its_result(octipus, tmp_path, [{"read_until_eof": True}, {"sleep": 600}])
    assert [e["data"]["text"] for e in events if e["kind"] == "text"] == [ANSWER]


def test_what_a_vendor_prints_after_its_result_is_not_part_of_the_run(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """It goes on with tool uses, texts and another result, then keeps printing."""
    late_tool = {"type": "tool_use", "id": "toolu_late", "name": "Bash", "input": {"command": "id"}}
    _run, events = _outlives_its_result(
        octipus,
        tmp_path,
        [
            {"emit": _assistant(late_tool)},
            {"emit": _assistant({"type": "text", "text": "late text"})},
            {"emit": _result("late answer", tokens=999)},
            {"emit_burst": {"count": 6000, "per_second": 20}},
        ],
    )
    assert [e["data"]["text"] for e in events if e["kind"] == "text"] == [ANSWER]
    assert not [e for e in events if e["kind"] == "tool_use"], (
        "a tool use printed after the result was stored"
    )
    assert [e["kind"] for e in events].count("result") == 1
    notes = [e["data"] for e in events if e["kind"] == "notice" and "after_result" in e["data"]]
    assert notes[0]["after_result"] >= 3, notes


def test_a_vendor_waiting_for_a_grandchild_that_holds_its_stdout_ends_its_run(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """It does not exit while its background child runs, and that child holds its stdout and stderr
    (Claude Code with a ``run_in_background`` shell)."""
    pid_file = tmp_path / "holder.pid"
    _outlives_its_result(
        octipus,
        tmp_path,
        [
            {"spawn_background": {"pid_file": str(pid_file), "seconds": 600, "inherit_stdio": True}},
            {"wait_background": True},
        ],
    )
    assert _wait_gone(int(pid_file.read_text())), (
        "the grandchild holding the vendor's stdout survived the run"
    )
