"""The scripted Chat Completions server that stands in for Vibe's model (octipusd.testing.chat_server)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from octipusd.testing.chat_server import SIDE_REPLY, ScriptedChatServer, is_side_request, main

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
SCRIPT = {
    "steps": [
        {
            "content": [
                {"type": "tool_use", "name": "bash", "input": {"command": "echo hi"}, "id": "call_fixed"}
            ]
        },
        {
            "content": [{"type": "text", "text": "All done here"}],
            "usage": {"input_tokens": 70, "output_tokens": 9, "cache_read_input_tokens": 30},
        },
        {"content": [], "error": {"status": 503, "type": "overloaded", "message": "busy"}},
    ]
}


@pytest.fixture
def server() -> Iterator[ScriptedChatServer]:
    with ScriptedChatServer(SCRIPT) as srv:
        yield srv


def chunks_of(response: httpx.Response) -> tuple[list[dict[str, Any]], list[str]]:
    """Decode an SSE body into chunk objects, plus every raw ``data:`` payload in order."""
    datas = [line[len("data: ") :] for line in response.text.split("\n") if line.startswith("data: ")]
    return [json.loads(d) for d in datas if d != "[DONE]"], datas


def post(srv: ScriptedChatServer, messages: list[dict[str, Any]], **body: Any) -> httpx.Response:
    payload = {"model": "mock-model", "messages": messages, "stream": True, "tools": TOOLS, **body}
    return httpx.post(
        f"{srv.base_url}/chat/completions",
        json=payload,
        headers={"Authorization": "Bearer sk-secret"},
        timeout=5,
    )


def test_base_url_is_what_vibe_wants(server: ScriptedChatServer) -> None:
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"


def test_tool_step_streams_tool_call_deltas(server: ScriptedChatServer) -> None:
    response = post(server, [{"role": "user", "content": "go"}])
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks, datas = chunks_of(response)
    assert datas[-1] == "[DONE]"
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == "mock-model" for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    head = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert (head["index"], head["id"], head["type"], head["function"]["name"]) == (
        0,
        "call_fixed",
        "function",
        "bash",
    )
    arguments = "".join(
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for c in chunks[1:-1]
    )
    assert json.loads(arguments) == {"command": "echo hi"}
    last = chunks[-1]
    assert last["choices"][0]["finish_reason"] == "tool_calls" and last["choices"][0]["delta"] == {}
    assert last["usage"]["prompt_tokens"] == 100 and last["usage"]["completion_tokens"] == 20
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_step_is_the_number_of_assistant_turns(server: ScriptedChatServer) -> None:
    history = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [{"id": "call_fixed", "type": "function"}]},
        {"role": "tool", "tool_call_id": "call_fixed", "content": "hi"},
    ]
    chunks, _ = chunks_of(post(server, history))
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text == "All done here"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["usage"] == {
        "prompt_tokens": 100,
        "completion_tokens": 9,
        "total_tokens": 109,
        "prompt_tokens_details": {"cached_tokens": 30},
    }
    assert [r.step for r in server.message_requests] == [1]


def test_side_requests_do_not_consume_steps(server: ScriptedChatServer) -> None:
    side = post(server, [{"role": "user", "content": "title this"}], tools=None)
    chunks, _ = chunks_of(side)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == SIDE_REPLY
    first = post(server, [{"role": "user", "content": "go"}])
    assert "tool_calls" in first.text  # still step 0
    assert [r.side for r in server.requests] == [True, False]
    assert server.side_requests[0].step is None
    assert len(server.message_requests) == 1
    assert json.loads(server.conversation_texts()[0])["messages"] == [{"role": "user", "content": "go"}]
    assert is_side_request({"tools": []}) and is_side_request({}) and not is_side_request({"tools": TOOLS})


def test_errors_non_streaming_and_records(server: ScriptedChatServer, tmp_path: Path) -> None:
    two = [{"role": "user"}, {"role": "assistant"}, {"role": "user"}, {"role": "assistant"}, {"role": "user"}]
    failed = post(server, two)
    assert failed.status_code == 503
    assert failed.json() == {"error": {"message": "busy", "type": "overloaded", "code": 503}}
    whole = post(server, [{"role": "user", "content": "go"}], stream=False)
    body = whole.json()
    assert body["object"] == "chat.completion"
    message = body["choices"][0]["message"]
    assert message["tool_calls"][0]["function"] == {"name": "bash", "arguments": '{"command": "echo hi"}'}
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert [r.attempt for r in server.message_requests] == [0, 0]
    assert all(r.headers["authorization"] == "***" for r in server.requests)
    assert server.wait_for_requests(2, timeout=1, messages_only=True)
    models = httpx.get(f"{server.base_url}/models", timeout=5).json()
    assert {m["id"] for m in models["data"]} == {"mock-model"}
    assert httpx.get(f"{server.base_url}/nope", timeout=5).status_code == 404


def test_exhausted_script_and_record_file(tmp_path: Path) -> None:
    record = tmp_path / "requests.jsonl"
    with ScriptedChatServer([{"content": [{"type": "text", "text": "only"}]}], record_path=record) as srv:
        post(srv, [{"role": "user"}])
        chunks, _ = chunks_of(post(srv, [{"role": "user"}, {"role": "assistant"}, {"role": "user"}]))
        assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) == "(script exhausted)"
    lines = [json.loads(item) for item in record.read_text().splitlines()]
    assert [item["step"] for item in lines] == [0, 1]
    assert lines[0]["headers"]["authorization"] == "***"


def test_loopback_only(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a loopback"):
        ScriptedChatServer(SCRIPT, host="0.0.0.0")
    script = tmp_path / "s.json"
    script.write_text(json.dumps(SCRIPT))
    assert main(["--script", str(script), "--host", "10.0.0.1"]) == 2
    assert "loopback" in capsys.readouterr().err
