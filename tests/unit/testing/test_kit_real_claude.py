"""The scripted Anthropic server driving the REAL Claude Code binary (observed.md §1).

Each test spawns ``claude -p --input-format stream-json --output-format stream-json --verbose`` with
a fresh HOME/CLAUDE_CONFIG_DIR under tmp_path, points ANTHROPIC_BASE_URL at the scripted server and
feeds user lines on stdin. Only the model is mocked; Bash really runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.harness import QUIET_ENV

REPO = Path(__file__).resolve().parents[3]
CLAUDE = REPO / ".vendor" / "npm" / "node_modules" / ".bin" / "claude"
DEMO = REPO / "octipusd" / "testing" / "scripts" / "demo.json"

pytestmark = [
    pytest.mark.e2e,
]


def user_line(text: str) -> str:
    """A stream-json user message (observed.md §1.4)."""
    message = {"role": "user", "content": text}
    return json.dumps({"type": "user", "message": message, "parent_tool_use_id": None, "session_id": ""})


class Claude:
    """One real claude process in stream-json mode, with a line reader that honours timeouts."""

    def __init__(
        self,
        srv: ScriptedAnthropicServer,
        tmp_path: Path,
        *extra_args: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.home = tmp_path / "home"
        self.cwd = tmp_path / "work"
        self.home.mkdir(exist_ok=True)
        self.cwd.mkdir(exist_ok=True)
        full_env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(self.home),
            "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
            "ANTHROPIC_BASE_URL": srv.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-mock-0000",
            "IS_SANDBOX": "1",  # root + bypassPermissions (observed.md §1.9)
            **QUIET_ENV,
            **(env or {}),
        }
        self.proc = subprocess.Popen(
            [
                str(CLAUDE),
                "-p",
                "--input-format",
                "stream-json",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "bypassPermissions",
                *extra_args,
            ],
            cwd=self.cwd,
            env=full_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        assert self.proc.stdout is not None
        threading.Thread(target=self._pump, args=(self.proc.stdout,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.lines.put(line)
        self.lines.put(None)

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(user_line(text) + "\n")
        self.proc.stdin.flush()

    def send_raw(self, obj: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(obj) + "\n")
        self.proc.stdin.flush()

    def next_event(self, timeout: float) -> dict[str, Any]:
        line = self.lines.get(timeout=timeout)
        if line is None:
            raise EOFError(f"claude exited; stderr: {self._stderr()}")
        event: dict[str, Any] = json.loads(line)
        return event

    def until_result(self, timeout: float = 15.0) -> list[dict[str, Any]]:
        """Read events up to and including the next ``result`` line."""
        deadline = time.monotonic() + timeout
        events: list[dict[str, Any]] = []
        while True:
            events.append(self.next_event(max(0.01, deadline - time.monotonic())))
            if events[-1]["type"] == "result":
                return events

    def finish(self, timeout: float = 10.0) -> int:
        """Close stdin (the CLI exits at EOF, observed.md §1.4) and return the exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self.close()

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None and not stream.closed:
                with contextlib.suppress(BrokenPipeError):
                    stream.close()

    def _stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return "<running>"
        return self.proc.stderr.read()


def tool_results(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block
        for event in events
        if event["type"] == "user"
        for block in event["message"]["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def assistant_blocks(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        block for event in events if event["type"] == "assistant" for block in event["message"]["content"]
    ]


def test_bash_tool_use_runs_and_final_text_arrives(tmp_path: Path) -> None:
    script = {
        "steps": [
            {
                "content": [
                    {"type": "text", "text": "I will write a file."},
                    {
                        "type": "tool_use",
                        "name": "Bash",
                        "input": {
                            "command": "echo scripted-ok > out.txt && cat out.txt",
                            "description": "write",
                        },
                    },
                ],
                "usage": {"input_tokens": 150, "output_tokens": 30},
            },
            {"content": [{"type": "text", "text": "All done: wrote out.txt"}]},
        ]
    }
    with ScriptedAnthropicServer(script) as srv:
        claude = Claude(srv, tmp_path)
        try:
            claude.send("hi")
            events = claude.until_result()
            rc = claude.finish()
        finally:
            claude.close()
        requests = srv.requests
    assert rc == 0
    assert (claude.cwd / "out.txt").read_text() == "scripted-ok\n"
    init = events[0]
    assert init["type"] == "system" and init["subtype"] == "init"
    assert init["apiKeySource"] == "ANTHROPIC_API_KEY"
    blocks = assistant_blocks(events)
    tool_use = next(b for b in blocks if b["type"] == "tool_use")
    assert tool_use["name"] == "Bash"
    assert tool_use["id"].startswith("toolu_")
    assert tool_use["input"] == {
        "command": "echo scripted-ok > out.txt && cat out.txt",
        "description": "write",
    }
    (result_block,) = tool_results(events)
    assert result_block["tool_use_id"] == tool_use["id"]
    assert result_block["is_error"] is False
    assert result_block["content"] == "scripted-ok"
    result = events[-1]
    assert result["subtype"] == "success"
    assert result["is_error"] is False
    assert result["result"] == "All done: wrote out.txt"
    assert result["stop_reason"] == "end_turn"
    assert result["num_turns"] == 2
    assert result["usage"]["input_tokens"] == 250  # 150 + the default 100
    # What the binary sent us (observed.md §1.2).
    messages_calls = [r for r in requests if r.is_messages_call]
    assert [r.step for r in messages_calls] == [0, 1]
    assert all(r.path == "/v1/messages?beta=true" for r in messages_calls)
    first = messages_calls[0]
    assert first.headers["x-api-key"] == "***"
    assert first.headers["anthropic-version"] == "2023-06-01"
    assert first.body["stream"] is True
    assert any(t["name"] == "Bash" for t in first.body["tools"])
    second_messages = messages_calls[1].body["messages"]
    assert second_messages[-1]["role"] == "user"
    assert second_messages[-1]["content"][0]["tool_use_id"] == tool_use["id"]


def test_error_step_gives_is_error_result(tmp_path: Path) -> None:
    script = {"steps": [{"error": {"status": 400, "message": "mock: bad request"}}]}
    with ScriptedAnthropicServer(script) as srv:
        claude = Claude(srv, tmp_path)
        try:
            claude.send("hi")
            events = claude.until_result()
            rc = claude.finish()
        finally:
            claude.close()
        assert len(srv.message_requests) == 1  # 400 is not retried (observed.md §1.8)
    result = events[-1]
    assert rc == 1
    assert result["is_error"] is True
    assert result["api_error_status"] == 400
    assert result["result"] == "API Error: 400 mock: bad request"


def test_overloaded_once_is_retried_then_succeeds(tmp_path: Path) -> None:
    script = {
        "steps": [
            {
                "error": {"status": 529, "message": "mock: overloaded", "times": 1},
                "content": [{"type": "text", "text": "after retry"}],
            }
        ]
    }
    with ScriptedAnthropicServer(script) as srv:
        claude = Claude(srv, tmp_path, env={"CLAUDE_CODE_MAX_RETRIES": "1"})
        try:
            claude.send("hi")
            events = claude.until_result()
            rc = claude.finish()
        finally:
            claude.close()
        assert [r.step for r in srv.message_requests] == [0, 0]
    retries = [e for e in events if e["type"] == "system" and e.get("subtype") == "api_retry"]
    assert len(retries) == 1
    assert retries[0]["error_status"] == 529
    assert events[-1]["is_error"] is False
    assert events[-1]["result"] == "after retry"
    assert rc == 0


def test_demo_script_two_turns_then_resume(tmp_path: Path) -> None:
    """demo.json turn 1 (plan tool + Bash + text), then a follow-up in a resumed process."""
    with ScriptedAnthropicServer(DEMO) as srv:
        first = Claude(srv, tmp_path)
        try:
            first.send("Write hello.txt")
            events = first.until_result()
            assert first.finish() == 0
        finally:
            first.close()
        session_id = events[-1]["session_id"]
        assert events[-1]["result"] == "Wrote hello.txt."
        assert (first.cwd / "hello.txt").read_text() == "hello from octipus\n"
        names = [b["name"] for b in assistant_blocks(events) if b["type"] == "tool_use"]
        assert names == ["mcp__octipus__update_work_plan", "Bash"]
        # No octipus MCP server here, so the plan call fails as an unknown tool (observed.md §1.5).
        plan_result, bash_result = tool_results(events)
        assert plan_result["is_error"] is True
        assert bash_result["content"] == "hello from octipus"

        second = Claude(srv, tmp_path, "--resume", session_id)
        try:
            second.send("What did you do earlier?")
            events = second.until_result()
            assert second.finish() == 0
        finally:
            second.close()
        assert events[-1]["session_id"] == session_id
        assert events[-1]["result"] == "Earlier I wrote hello.txt."
        calls = srv.message_requests
    assert [r.step for r in calls] == [0, 1, 2, 3]
    roles = [m["role"] for m in calls[-1].body["messages"] if m["role"] != "system"]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]


def test_stalled_model_can_be_interrupted(tmp_path: Path) -> None:
    """An interrupt mid-stream aborts the request; the next prompt replays the same step."""
    script = {
        "steps": [
            {"content": [{"type": "text", "text": "answer"}], "stall_seconds": 30, "stall_times": 1},
        ]
    }
    with ScriptedAnthropicServer(script) as srv:
        claude = Claude(srv, tmp_path)
        try:
            claude.send("hi")
            srv.wait_for_requests(1, timeout=10.0, messages_only=True)
            claude.send_raw(
                {"type": "control_request", "request_id": "int-1", "request": {"subtype": "interrupt"}}
            )
            events = claude.until_result(timeout=10.0)
            result = events[-1]
            assert result["subtype"] == "error_during_execution"
            assert result["is_error"] is True
            assert any(
                e["type"] == "control_response" and e["response"]["request_id"] == "int-1" for e in events
            )
            # The session stays usable (observed.md §1.4); the interrupted turn did not count.
            claude.send("again")
            events = claude.until_result(timeout=10.0)
            assert claude.finish() == 0
        finally:
            claude.close()
        calls = srv.message_requests
    assert events[-1]["is_error"] is False
    assert events[-1]["result"] == "answer"
    assert [(r.step, r.attempt) for r in calls] == [(0, 0), (0, 1)]
    texts = [b["text"] for b in calls[1].body["messages"][0]["content"] if b["type"] == "text"]
    assert "[Request interrupted by user]\n" in texts
