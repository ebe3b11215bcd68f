"""The scripted OpenAI Responses server over real HTTP (octipusd.testing.responses_server)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from octipusd.testing.responses_server import (
    ScriptedResponsesServer,
    count_assistant_turns,
    sse_events_for_step,
)
from octipusd.testing.script import parse_script

REPO = Path(__file__).resolve().parents[3]

SCRIPT: dict[str, Any] = {
    "steps": [
        {
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "name": "exec_command", "input": {"cmd": "echo hi"}, "id": "call_fixed"},
                {
                    "type": "tool_use",
                    "name": "mcp__octipus__update_work_plan",
                    "input": {"plan": {"steps": []}},
                },
            ],
            "usage": {"input_tokens": 120, "output_tokens": 33, "cache_read_input_tokens": 5},
        },
        {"content": [{"type": "text", "text": "All done."}]},
    ]
}


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def call(call_id: str = "c1") -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "exec_command", "arguments": "{}"}


def output(call_id: str = "c1") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


def parse_sse(raw: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in raw.split("\n\n"):
        if frame.strip():
            fields = dict(line.split(": ", 1) for line in frame.split("\n"))
            events.append((fields["event"], json.loads(fields["data"])))
    return events


@pytest.fixture
def srv() -> Iterator[ScriptedResponsesServer]:
    with ScriptedResponsesServer(SCRIPT) as server:
        yield server


def post(srv: ScriptedResponsesServer, items: list[Any], **extra: Any) -> httpx.Response:
    body = {"model": "mock-model", "stream": True, "input": items, **extra}
    return httpx.post(f"{srv.base_url}/responses", json=body, headers={"authorization": "Bearer sk-secret"})


def test_base_url_has_the_v1_suffix(srv: ScriptedResponsesServer) -> None:
    assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
    assert httpx.get(srv.root_url + "/").status_code == 200
    assert httpx.head(srv.root_url + "/").status_code == 200
    assert httpx.get(f"{srv.base_url}/models").json()["data"] == []


def test_stream_step0_sequence_and_mapping(srv: ScriptedResponsesServer) -> None:
    response = post(srv, [user("hi")])
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = parse_sse(response.text)
    names = [name for name, _ in events]
    assert names[:2] == ["response.created", "response.in_progress"]
    assert names[-1] == "response.completed"
    assert all(data["type"] == name for name, data in events)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    done = [data["item"] for name, data in events if name == "response.output_item.done"]
    message, shell, mcp = done
    assert message["type"] == "message" and message["content"][0]["text"] == "Let me look."
    deltas = "".join(d["delta"] for n, d in events if n == "response.output_text.delta")
    assert deltas == "Let me look."
    assert shell == {
        "id": shell["id"],
        "type": "function_call",
        "status": "completed",
        "call_id": "call_fixed",
        "name": "exec_command",
        "arguments": '{"cmd": "echo hi"}',
    }
    assert mcp["namespace"] == "mcp__octipus" and mcp["name"] == "update_work_plan"
    assert json.loads(mcp["arguments"]) == {"plan": {"steps": []}}
    assert mcp["call_id"].startswith("call_")
    completed = events[-1][1]["response"]
    assert completed["status"] == "completed" and len(completed["output"]) == 3
    assert completed["usage"] == {
        "input_tokens": 125,
        "input_tokens_details": {"cached_tokens": 5},
        "output_tokens": 33,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 158,
    }


def test_step_is_the_number_of_assistant_turns(srv: ScriptedResponsesServer) -> None:
    history = [user("hi"), assistant("Let me look."), call("a"), call("b"), output("a"), output("b")]
    events = parse_sse(post(srv, history).text)
    assert events[-1][1]["response"]["output"][0]["content"][0]["text"] == "All done."
    assert [r.step for r in srv.message_requests] == [1]
    # a resumed thread resends everything: two turns done, the script is past its end
    resumed = [*history, assistant("All done."), user("again")]
    text = parse_sse(post(srv, resumed).text)[-1][1]["response"]["output"][0]["content"][0]["text"]
    assert text == "(script exhausted)"


@pytest.mark.parametrize(
    ("items", "turns"),
    [
        (None, 0),
        ([], 0),
        ([user("a")], 0),
        ([{"type": "message", "role": "developer", "content": []}, user("a"), assistant("b")], 1),
        ([user("a"), {"type": "reasoning", "summary": []}, call(), output(), assistant("x")], 2),
        ([user("a"), call(), output(), call(), output()], 2),
        ([user("a"), {"type": "custom_tool_call"}, {"type": "custom_tool_call_output"}], 1),
        (["junk", 3, {"no": "type"}, assistant("x")], 1),
    ],
)
def test_count_assistant_turns(items: Any, turns: int) -> None:
    assert count_assistant_turns(items) == turns


def test_non_streaming_response(srv: ScriptedResponsesServer) -> None:
    body = post(srv, [user("hi")], stream=False).json()
    assert body["object"] == "response" and body["status"] == "completed"
    assert [item["type"] for item in body["output"]] == ["message", "function_call", "function_call"]
    assert body["usage"]["input_tokens"] == 125


def test_records_redact_the_key_and_go_to_a_file(tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    with ScriptedResponsesServer(SCRIPT, record_path=record) as server:
        post(server, [user("hi")])
        httpx.get(f"{server.root_url}/nowhere")
        first, second = server.requests
        assert first.headers["authorization"] == "***" and first.is_responses_call
        assert first.step == 0 and first.attempt == 0
        assert not second.is_responses_call and second.step is None
        assert server.conversation_texts() == [json.dumps(first.body)]
        assert "sk-secret" not in record.read_text()
    lines = [json.loads(line) for line in record.read_text().splitlines()]
    assert [line["path"] for line in lines] == ["/v1/responses", "/nowhere"]


def test_unknown_route_and_bad_body() -> None:
    with ScriptedResponsesServer(SCRIPT) as server:
        missing = httpx.post(f"{server.base_url}/chat/completions", json={})
        assert missing.status_code == 404 and "error" in missing.json()
        bad = httpx.post(f"{server.base_url}/responses", content=b"[1]")
        assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"


def test_error_step_then_content() -> None:
    script = {"steps": [{"content": [{"type": "text", "text": "ok"}], "error": {"status": 500, "times": 1}}]}
    with ScriptedResponsesServer(script) as server:
        first = post(server, [user("hi")])
        assert first.status_code == 500
        assert first.json() == {
            "error": {"message": "mock: api_error", "type": "api_error", "param": None, "code": "api_error"}
        }
        second = post(server, [user("hi")])
        assert second.status_code == 200 and "response.completed" in second.text
        assert [r.attempt for r in server.message_requests] == [0, 1]


def test_stall_can_be_cut_by_close() -> None:
    script = {"steps": [{"content": [{"type": "text", "text": "late"}], "stall_seconds": 30}]}
    server = ScriptedResponsesServer(script).start()
    started = time.monotonic()
    with httpx.stream("POST", f"{server.base_url}/responses", json={"stream": True, "input": []}) as response:
        lines = response.iter_lines()
        assert next(lines) == "event: response.created"
        server.close()
        rest: list[str] = []
        with pytest.raises(httpx.HTTPError):
            rest.extend(lines)
        assert "event: response.completed" not in rest
    assert time.monotonic() - started < 10


def test_wait_for_requests(srv: ScriptedResponsesServer) -> None:
    with pytest.raises(TimeoutError):
        srv.wait_for_requests(1, timeout=0.05, responses_only=True)
    post(srv, [user("hi")])
    assert len(srv.wait_for_requests(1, timeout=1.0, responses_only=True)) == 1


def test_sse_events_for_a_text_step() -> None:
    step = parse_script({"steps": [{"content": [{"type": "text", "text": ""}]}]}).steps[0]
    names = [name for name, _ in sse_events_for_step(step, "m")]
    assert names == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]


def test_loopback_only() -> None:
    with pytest.raises(ValueError, match="loopback"):
        ScriptedResponsesServer(SCRIPT, host="0.0.0.0")
    with ScriptedResponsesServer(SCRIPT, host="localhost") as server:
        assert server.host == "127.0.0.1"


def _wait_file(path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise AssertionError(f"{path} not written within {timeout} s")


def _cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "octipusd.testing.responses_server", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_cli_serves_records_and_exits_on_sigterm(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    port_file, record = tmp_path / "port", tmp_path / "rec.jsonl"
    proc = _cli("--script", str(script), "--port-file", str(port_file), "--record", str(record))
    try:
        port = int(_wait_file(port_file, 10.0).strip())
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"listening on http://127.0.0.1:{port}/v1"
        response = httpx.post(f"http://127.0.0.1:{port}/v1/responses", json={"stream": True, "input": []})
        assert "response.completed" in response.text
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5.0) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert json.loads(record.read_text(encoding="utf-8").splitlines()[0])["step"] == 0


def test_cli_refuses_non_loopback_host_and_bad_scripts(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT), encoding="utf-8")
    proc = _cli("--script", str(script), "--host", "0.0.0.0")
    _, err = proc.communicate(timeout=10.0)
    assert proc.returncode == 2 and "loopback" in err
    script.write_text(json.dumps({"steps": [{"content": [{"type": "tool_use"}]}]}), encoding="utf-8")
    proc = _cli("--script", str(script))
    _, err = proc.communicate(timeout=10.0)
    assert proc.returncode == 2 and "script step 0: content[0].name" in err
