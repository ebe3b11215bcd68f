"""The scripted Anthropic Messages server over real HTTP (octipusd.testing.anthropic_server)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from octipusd.testing.anthropic_server import ScriptedAnthropicServer, check_loopback, sse_events_for_step
from octipusd.testing.script import parse_script

REPO = Path(__file__).resolve().parents[3]

TOOL_THEN_TEXT: dict[str, Any] = {
    "steps": [
        {
            "content": [
                {"type": "text", "text": "Let me run something for you."},
                {
                    "type": "tool_use",
                    "name": "Bash",
                    "input": {"command": "echo hi", "description": "say hi"},
                },
            ],
            "usage": {"input_tokens": 120, "output_tokens": 33, "cache_read_input_tokens": 5},
        },
        {"content": [{"type": "text", "text": "All done."}]},
    ]
}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def parse_sse(raw: str) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for frame in raw.split("\n\n"):
        if not frame.strip():
            continue
        lines = dict(line.split(": ", 1) for line in frame.split("\n"))
        events.append((lines["event"], json.loads(lines["data"])))
    return events


def post_stream(srv: ScriptedAnthropicServer, messages: list[Any], **extra: Any) -> httpx.Response:
    body = {"model": "claude-opus-4-8", "max_tokens": 100, "stream": True, "messages": messages, **extra}
    return httpx.post(
        f"{srv.base_url}/v1/messages?beta=true",
        json=body,
        headers={"x-api-key": "sk-ant-secret", "anthropic-version": "2023-06-01"},
        timeout=10.0,
    )


def rebuild(events: list[tuple[str, dict[str, Any]]]) -> tuple[list[dict[str, Any]], str]:
    """Reassemble content blocks from SSE events, as an SDK would; return (blocks, stop_reason)."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    stop_reason = ""
    for name, data in events:
        assert data["type"] == name
        if name == "content_block_start":
            blocks[data["index"]] = dict(data["content_block"])
            partial[data["index"]] = ""
        elif name == "content_block_delta":
            delta = data["delta"]
            if delta["type"] == "text_delta":
                blocks[data["index"]]["text"] += delta["text"]
            else:
                partial[data["index"]] += delta["partial_json"]
        elif name == "content_block_stop":
            if blocks[data["index"]]["type"] == "tool_use":
                blocks[data["index"]]["input"] = json.loads(partial[data["index"]])
        elif name == "message_delta":
            stop_reason = data["delta"]["stop_reason"]
    return [blocks[i] for i in sorted(blocks)], stop_reason


@pytest.fixture
def srv() -> Iterator[ScriptedAnthropicServer]:
    with ScriptedAnthropicServer(TOOL_THEN_TEXT) as server:
        yield server


def test_warmup_head_and_get(srv: ScriptedAnthropicServer) -> None:
    assert srv.base_url.startswith("http://127.0.0.1:")
    assert not srv.base_url.endswith("/v1")
    assert httpx.head(srv.base_url + "/").status_code == 200
    assert httpx.get(srv.base_url + "/").status_code == 200
    assert [(r.method, r.path) for r in srv.requests] == [("HEAD", "/"), ("GET", "/")]


def test_stream_step0_event_sequence(srv: ScriptedAnthropicServer) -> None:
    response = post_stream(srv, [user("hi")])
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["transfer-encoding"] == "chunked"
    events = parse_sse(response.text)
    names = [name for name, _ in events]
    assert names[:2] == ["message_start", "ping"]
    assert names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == 2
    assert names.count("content_block_stop") == 2
    assert names.count("content_block_delta") >= 4  # several chunks per block
    message = events[0][1]["message"]
    assert message["id"].startswith("msg_")
    assert message["model"] == "claude-opus-4-8"
    assert message["role"] == "assistant"
    assert message["content"] == []
    assert message["stop_reason"] is None
    assert set(message["usage"]) == {
        "input_tokens",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "output_tokens",
    }
    assert message["usage"]["input_tokens"] == 120
    assert message["usage"]["cache_read_input_tokens"] == 5
    blocks, stop_reason = rebuild(events)
    assert stop_reason == "tool_use"
    assert blocks[0] == {"type": "text", "text": "Let me run something for you."}
    assert blocks[1]["type"] == "tool_use"
    assert blocks[1]["id"].startswith("toolu_")
    assert blocks[1]["name"] == "Bash"
    assert blocks[1]["input"] == {"command": "echo hi", "description": "say hi"}
    assert events[-2][1]["usage"] == {"output_tokens": 33}


def test_step_index_counts_assistant_turns_and_tolerates_system(srv: ScriptedAnthropicServer) -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
                {"type": "text", "text": "hi"},
            ],
        },
        {"role": "system", "content": "agents: ..."},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hi"}]},
    ]
    blocks, stop_reason = rebuild(parse_sse(post_stream(srv, messages).text))
    assert blocks == [{"type": "text", "text": "All done."}]
    assert stop_reason == "end_turn"
    # A resumed conversation resends the history: two assistant turns -> past the end.
    longer = [*messages, assistant("All done."), user("again")]
    blocks, stop_reason = rebuild(parse_sse(post_stream(srv, longer).text))
    assert blocks == [{"type": "text", "text": "(script exhausted)"}]
    assert stop_reason == "end_turn"
    assert [r.step for r in srv.message_requests] == [1, 2]


def test_non_streaming_message(srv: ScriptedAnthropicServer) -> None:
    response = httpx.post(
        srv.base_url + "/v1/messages", json={"model": "m-x", "max_tokens": 5, "messages": [user("hi")]}
    )
    assert response.status_code == 200
    body = response.json()
    assert body["type"] == "message"
    assert body["model"] == "m-x"
    assert body["stop_reason"] == "tool_use"
    assert body["content"][0] == {"type": "text", "text": "Let me run something for you."}
    assert body["content"][1]["id"].startswith("toolu_")
    assert body["usage"]["output_tokens"] == 33


def test_count_tokens(srv: ScriptedAnthropicServer) -> None:
    response = httpx.post(
        srv.base_url + "/v1/messages/count_tokens?beta=true", json={"model": "m", "messages": [user("hi")]}
    )
    assert response.status_code == 200
    assert isinstance(response.json()["input_tokens"], int)
    assert response.json()["input_tokens"] > 0


def test_unknown_route_is_404_json(srv: ScriptedAnthropicServer) -> None:
    response = httpx.get(srv.base_url + "/v1/models")
    assert response.status_code == 404
    assert response.json()["type"] == "error"


def test_records_redact_secrets_and_go_to_file(tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    with ScriptedAnthropicServer(TOOL_THEN_TEXT, record_path=record) as server:
        httpx.head(server.base_url + "/")
        post_stream(server, [user("hi")])
        httpx.post(
            server.base_url + "/v1/messages",
            json={"messages": [user("x")], "stream": False},
            headers={"Authorization": "Bearer tok"},
        )
        records = server.wait_for_requests(3, timeout=5.0)
    assert records[1].headers["x-api-key"] == "***"
    assert records[1].headers["anthropic-version"] == "2023-06-01"
    assert records[2].headers["authorization"] == "***"
    assert all(name == name.lower() for r in records for name in r.headers)
    assert records[1].body["messages"] == [user("hi")]
    assert records[1].step == 0
    assert records[1].is_messages_call
    assert not records[0].is_messages_call
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert [line["method"] for line in lines] == ["HEAD", "POST", "POST"]
    assert lines[1]["path"] == "/v1/messages?beta=true"
    assert lines[1]["headers"]["x-api-key"] == "***"
    assert "sk-ant-secret" not in record.read_text(encoding="utf-8")
    assert lines[1]["body"]["stream"] is True


def test_error_step_answers_error_json() -> None:
    script = {"steps": [{"error": {"status": 400, "message": "mock: bad request"}}]}
    with ScriptedAnthropicServer(script) as server:
        response = post_stream(server, [user("hi")])
        again = post_stream(server, [user("hi"), user("more")])
    assert response.status_code == 400
    assert response.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "mock: bad request"},
    }
    assert again.status_code == 400  # the error does not advance the conversation


def test_error_times_then_content() -> None:
    script = {
        "steps": [
            {"error": {"status": 529, "times": 1}, "content": [{"type": "text", "text": "recovered"}]},
        ]
    }
    with ScriptedAnthropicServer(script) as server:
        first = post_stream(server, [user("hi")])
        second = post_stream(server, [user("hi")])
    assert first.status_code == 529
    assert first.json()["error"]["type"] == "overloaded_error"
    assert second.status_code == 200
    assert rebuild(parse_sse(second.text))[0] == [{"type": "text", "text": "recovered"}]


def test_stall_sends_message_start_first() -> None:
    script = {"steps": [{"content": [{"type": "text", "text": "slow"}], "stall_seconds": 0.3}]}
    with ScriptedAnthropicServer(script) as server, httpx.Client(timeout=5.0) as client:
        body = {"model": "m", "stream": True, "messages": [user("hi")]}
        with client.stream("POST", server.base_url + "/v1/messages", json=body) as response:
            lines = response.iter_lines()
            started = time.monotonic()
            assert next(lines) == "event: message_start"
            first_at = time.monotonic() - started
            rest = "\n".join(lines)
            total = time.monotonic() - started
    assert first_at < 0.25
    assert total >= 0.25
    assert "event: message_stop" in rest


def test_stall_times_only_first_attempt_and_hangup_ends_stall() -> None:
    script = {"steps": [{"content": [{"type": "text", "text": "x"}], "stall_seconds": 30, "stall_times": 1}]}
    with ScriptedAnthropicServer(script) as server:
        body = json.dumps({"stream": True, "messages": [user("hi")]}).encode()
        request = (
            b"POST /v1/messages?beta=true HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        with socket.create_connection(("127.0.0.1", server.port), timeout=5.0) as sock:
            sock.sendall(request)
            received = b""
            while b"message_start" not in received:
                received += sock.recv(65536)
        # The client hung up mid-stall: the handler notices and drops the connection.
        deadline = time.monotonic() + 3.0
        while server.open_connections and time.monotonic() < deadline:
            time.sleep(0.02)
        assert server.open_connections == 0
        started = time.monotonic()
        response = post_stream(server, [user("hi")])  # same step again: attempt 1, no stall
        assert time.monotonic() - started < 3.0
    assert rebuild(parse_sse(response.text))[0] == [{"type": "text", "text": "x"}]
    assert [(r.step, r.attempt) for r in server.message_requests] == [(0, 0), (0, 1)]


def test_delay_before_answer() -> None:
    script = {"steps": [{"content": [{"type": "text", "text": "late"}], "delay_seconds": 0.3}]}
    with ScriptedAnthropicServer(script) as server:
        started = time.monotonic()
        response = post_stream(server, [user("hi")])
        elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert elapsed >= 0.25


def test_close_cuts_a_stalled_stream_quickly() -> None:
    script = {"steps": [{"content": [{"type": "text", "text": "never"}], "stall_seconds": 60}]}
    server = ScriptedAnthropicServer(script).start()
    outcome: list[str] = []

    def client() -> None:
        try:
            text = post_stream(server, [user("hi")]).text
            outcome.append(text)
        except httpx.HTTPError as exc:
            outcome.append(type(exc).__name__)

    thread = threading.Thread(target=client)
    thread.start()
    server.wait_for_requests(1, timeout=5.0, messages_only=True)
    started = time.monotonic()
    server.close()
    thread.join(timeout=5.0)
    assert not thread.is_alive()
    assert time.monotonic() - started < 3.0
    assert outcome and "message_stop" not in outcome[0]
    server.close()  # idempotent


def test_wait_for_requests_times_out(srv: ScriptedAnthropicServer) -> None:
    httpx.head(srv.base_url + "/")
    assert len(srv.wait_for_requests(1, timeout=1.0)) == 1
    with pytest.raises(TimeoutError):
        srv.wait_for_requests(1, timeout=0.05, messages_only=True)


def test_requests_from_many_threads(srv: ScriptedAnthropicServer) -> None:
    results: list[int] = []

    def hit() -> None:
        results.append(post_stream(srv, [user("hi")]).status_code)

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10.0)
    assert results == [200] * 8
    assert len(srv.wait_for_requests(8, timeout=1.0, messages_only=True)) == 8


def test_sse_events_every_data_has_type() -> None:
    step = parse_script(TOOL_THEN_TEXT).steps[0]
    for name, data in sse_events_for_step(step, "m"):
        assert data["type"] == name


def test_loopback_only() -> None:
    assert check_loopback("127.0.0.1") == "127.0.0.1"
    assert check_loopback("localhost") == "127.0.0.1"
    assert check_loopback("::1") == "::1"
    for host in ("0.0.0.0", "10.1.2.3", "example.com", "::"):
        with pytest.raises(ValueError, match="loopback"):
            check_loopback(host)
    with pytest.raises(ValueError, match="loopback"):
        ScriptedAnthropicServer(TOOL_THEN_TEXT, host="0.0.0.0")


def _cli(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "octipusd.testing.anthropic_server", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_file(path: Path, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return path.read_text(encoding="utf-8")
        time.sleep(0.02)
    raise TimeoutError(str(path))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_cli_serves_records_and_exits_on_signal(tmp_path: Path, sig: signal.Signals) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(TOOL_THEN_TEXT), encoding="utf-8")
    port_file = tmp_path / "port"
    record = tmp_path / "rec.jsonl"
    proc = _cli("--script", str(script), "--port-file", str(port_file), "--record", str(record))
    try:
        port = int(_wait_file(port_file, 10.0).strip())
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == f"listening on http://127.0.0.1:{port}"
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/messages?beta=true",
            json={"stream": True, "messages": [user("hi")]},
        )
        assert rebuild(parse_sse(response.text))[1] == "tool_use"
        proc.send_signal(sig)
        assert proc.wait(timeout=5.0) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert json.loads(record.read_text(encoding="utf-8").splitlines()[0])["step"] == 0


def test_cli_refuses_non_loopback_host(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(TOOL_THEN_TEXT), encoding="utf-8")
    proc = _cli("--script", str(script), "--host", "0.0.0.0")
    _, err = proc.communicate(timeout=10.0)
    assert proc.returncode == 2
    assert "loopback" in err


def test_cli_reports_malformed_script(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"steps": [{"content": [{"type": "text"}]}]}), encoding="utf-8")
    proc = _cli("--script", str(script))
    _, err = proc.communicate(timeout=10.0)
    assert proc.returncode == 2
    assert "script step 0: content[0].text" in err


def test_script_from_path(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps(TOOL_THEN_TEXT), encoding="utf-8")
    with ScriptedAnthropicServer(str(script)) as server:
        assert len(server.script.steps) == 2
        assert server.port > 0
