"""Script conversations: several agents on one scripted server (octipusd.testing.script, servers)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.responses_server import ScriptedResponsesServer, opening_texts
from octipusd.testing.script import (
    EXHAUSTED_STEP,
    Conversation,
    TextBlock,
    load_script,
    parse_script,
)
from octipusd.testing.scripted_http import content_texts


def text_step(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


def tool_step(name: str = "Bash") -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": name, "input": {}}]}


SCRIPT: dict[str, Any] = {
    "steps": [tool_step(), text_step("parent done")],
    "conversations": [
        {"match": "CHILD-ALPHA", "steps": [tool_step(), text_step("alpha done")]},
        {"match": "You are the reviewer", "steps": [text_step("review done")], "comment": "x"},
        {"match": "CHILD", "steps": [text_step("generic child")]},
    ],
}


# -- parsing ---------------------------------------------------------------------------------------


def test_parse_conversations_and_choose() -> None:
    script = parse_script(SCRIPT)
    assert len(script.steps) == 2
    assert [c.match for c in script.conversations] == ["CHILD-ALPHA", "You are the reviewer", "CHILD"]
    assert isinstance(script.conversations[0], Conversation)
    # The first match wins, in any of the texts; no match is None (the top-level steps).
    assert script.conversation_for(["sys", "do CHILD-ALPHA things"]) == 0
    assert script.conversation_for(["CHILD-BETA"]) == 2
    assert script.conversation_for(["You are the reviewer. CHILD-ALPHA"]) == 0
    assert script.conversation_for(["You are the reviewer.", "hi"]) == 1
    assert script.conversation_for(["parent prompt"]) is None
    assert script.conversation_for([]) is None
    assert script.conversation_for(["child-alpha"]) is None  # case-sensitive
    assert script.step_for(1, 0).content == (TextBlock("alpha done"),)
    assert script.step_for(1).content == (TextBlock("parent done"),)
    assert script.step_for(1, None).content == (TextBlock("parent done"),)
    assert script.step_for(1, 1) is EXHAUSTED_STEP
    with pytest.raises(IndexError, match=r"conversations\[3\]"):
        script.step_for(0, 3)


def test_conversations_without_top_level_steps() -> None:
    script = parse_script({"conversations": [{"match": "m", "steps": []}]})
    assert script.steps == ()
    assert script.conversations == (Conversation("m", ()),)
    assert script.step_for(0) is EXHAUSTED_STEP
    assert script.step_for(0, 0) is EXHAUSTED_STEP


def test_script_without_conversations_is_unchanged() -> None:
    script = parse_script({"steps": [text_step("a")]})
    assert script.conversations == ()
    assert script.conversation_for(["anything"]) is None
    assert script.step_for(0).content == (TextBlock("a"),)
    assert parse_script([text_step("a")]) == script


def test_load_script_with_conversations(tmp_path: Path) -> None:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(SCRIPT), encoding="utf-8")
    assert load_script(path) == parse_script(SCRIPT)
    bad = {"conversations": [{"match": "m", "steps": [{"content": [{"type": "text"}]}]}]}
    path.write_text(json.dumps(bad), encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"s\.json: script conversations\[0\]\.steps\[0\]: content\[0\]\.text"
    ):
        load_script(path)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "script: missing 'steps' (a list of model turns) or 'conversations'"),
        ({"conversation": []}, "script: unknown top-level key(s) ['conversation']"),
        ({"conversations": {}}, "script: conversations: expected a list, got object"),
        ({"conversations": ["x"]}, "script conversations[0]: expected a JSON object"),
        (
            {"conversations": [{"steps": []}]},
            "script conversations[0].match: expected a non-empty string, got null",
        ),
        (
            {"conversations": [{"match": "a", "steps": []}, {"match": "", "steps": []}]},
            "script conversations[1].match: expected a non-empty string, got ''",
        ),
        (
            {"conversations": [{"match": 3, "steps": []}]},
            "script conversations[0].match: expected a non-empty",
        ),
        ({"conversations": [{"match": "a"}]}, "script conversations[0].steps: missing"),
        ({"conversations": [{"match": "a", "steps": {}}]}, "script conversations[0].steps: expected a list"),
        (
            {"conversations": [{"match": "a", "steps": [], "stepz": []}]},
            "script conversations[0]: unknown key(s) ['stepz']; allowed: ['comment', 'match', 'steps']",
        ),
        (
            {"conversations": [{"match": "a", "steps": []}, {"match": "a", "steps": []}]},
            "script conversations[1].match: 'a' repeats conversations[0].match",
        ),
        (
            {"conversations": [{"match": "a", "steps": [text_step("x"), {"content": []}]}]},
            "script conversations[0].steps[1]: content: must hold",
        ),
        (
            {"conversations": [{"match": "a", "steps": [text_step("x", stall_times=0)]}]},
            "script conversations[0].steps[0]: stall_times: expected an integer >= 1",
        ),
        (
            {
                "steps": [text_step("x")],
                "conversations": [{"match": "a", "steps": [{"error": {"status": 9}}]}],
            },
            "script conversations[0].steps[0]: error.status",
        ),
    ],
)
def test_malformed_conversations(data: Any, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_script(data)
    assert message in str(info.value)


def test_content_texts() -> None:
    assert content_texts("s") == ["s"]
    assert content_texts([{"type": "text", "text": "a"}, {"type": "image"}, "junk", {"text": 3}]) == ["a"]
    assert content_texts(None) == []
    assert content_texts({"text": "x"}) == []


# -- Anthropic Messages ----------------------------------------------------------------------------


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": text}]}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": [{"type": "text", "text": text}]}


def post_messages(
    srv: ScriptedAnthropicServer, messages: list[Any], system: Any = None, **extra: Any
) -> httpx.Response:
    body: dict[str, Any] = {"model": "m", "max_tokens": 10, "stream": False, "messages": messages, **extra}
    if system is not None:
        body["system"] = system
    return httpx.post(f"{srv.base_url}/v1/messages?beta=true", json=body, timeout=10.0)


def texts_of(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [block.get("text", block.get("name")) for block in response.json()["content"]]


def test_anthropic_matches_system_string_and_blocks_and_first_user_message() -> None:
    with ScriptedAnthropicServer(SCRIPT) as srv:
        parent = post_messages(srv, [user("Please spawn a child.")], system="You are Claude Code.")
        by_prompt = post_messages(
            srv,
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "<system-reminder>r</system-reminder>"},
                        {"type": "text", "text": "Task CHILD-ALPHA: look"},
                    ],
                }
            ],
            system=[{"type": "text", "text": "You are Claude Code."}],
        )
        by_system_blocks = post_messages(
            srv,
            [user("review it")],
            system=[{"type": "text", "text": "x"}, {"type": "text", "text": "You are the reviewer."}],
        )
        by_system_string = post_messages(srv, [user("go")], system="You are the reviewer, and strict")
        by_string_content = post_messages(srv, [{"role": "user", "content": "CHILD-OMEGA"}])
    assert texts_of(parent) == ["Bash"]
    assert texts_of(by_prompt) == ["Bash"]
    assert texts_of(by_system_blocks) == ["review done"]
    assert texts_of(by_system_string) == ["review done"]
    assert texts_of(by_string_content) == ["generic child"]
    records = srv.message_requests
    assert [(r.conversation, r.step, r.attempt) for r in records] == [
        (None, 0, 0),
        (0, 0, 0),
        (1, 0, 0),
        (1, 0, 1),
        (2, 0, 0),
    ]
    assert [r.conversation for r in srv.requests_in(1)] == [1, 1]
    assert srv.requests_in(None) == [records[0]]
    assert "CHILD-ALPHA" in records[1].body_text()
    assert "CHILD-ALPHA" not in records[0].body_text()


def test_anthropic_later_messages_do_not_switch_conversation() -> None:
    """Only the opening texts count: the parent sees the child's marker in a tool result later."""
    with ScriptedAnthropicServer(SCRIPT) as srv:
        history = [
            user("Please spawn a child."),
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "spawn_child",
                        "input": {"prompt": "CHILD-ALPHA"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "CHILD-ALPHA answered"}],
            },
            user("and CHILD-ALPHA again"),
        ]
        response = post_messages(srv, history)
        # The child's resumed conversation keeps its conversation as its history grows.
        child = post_messages(srv, [user("CHILD-ALPHA"), assistant("ran Bash"), user("next")])
    assert texts_of(response) == ["parent done"]
    assert texts_of(child) == ["alpha done"]
    assert [(r.conversation, r.step) for r in srv.message_requests] == [(None, 1), (0, 1)]


def test_anthropic_attempt_counters_are_per_conversation() -> None:
    script = {
        "steps": [{"error": {"status": 529, "times": 1}, **text_step("parent recovered")}],
        "conversations": [
            {
                "match": "CHILD",
                "steps": [{"error": {"status": 529, "times": 1}, **text_step("child recovered")}],
            },
        ],
    }
    with ScriptedAnthropicServer(script) as srv:
        parent_first = post_messages(srv, [user("parent")])
        child_first = post_messages(srv, [user("CHILD")])  # not used up by the parent's attempt
        child_second = post_messages(srv, [user("CHILD")])
        parent_second = post_messages(srv, [user("parent")])
    assert parent_first.status_code == 529
    assert child_first.status_code == 529
    assert texts_of(child_second) == ["child recovered"]
    assert texts_of(parent_second) == ["parent recovered"]
    assert [(r.conversation, r.attempt) for r in srv.message_requests] == [
        (None, 0),
        (0, 0),
        (0, 1),
        (None, 1),
    ]


def test_anthropic_stall_times_per_conversation() -> None:
    script = {
        "steps": [text_step("p", stall_seconds=0.3, stall_times=1)],
        "conversations": [{"match": "CHILD", "steps": [text_step("c", stall_seconds=2.0, stall_times=1)]}],
    }
    with ScriptedAnthropicServer(script) as srv:
        post_messages(srv, [user("parent")], stream=True)
        started = time.monotonic()
        post_messages(srv, [user("CHILD")], stream=True)  # its own first attempt: stalls
        child_first = time.monotonic() - started
        started = time.monotonic()
        post_messages(srv, [user("CHILD")], stream=True)
        child_second = time.monotonic() - started
    # a stall of 2 s against none: apart by far more than a loaded machine's scheduling delays
    assert child_first >= 1.9
    assert child_second < 1.0


def test_anthropic_child_answered_while_parent_request_pending() -> None:
    """The real shape: the parent's request waits (its tool runs a child) while the child talks."""
    script = {
        "steps": [text_step("parent answer", delay_seconds=1.0)],
        "conversations": [{"match": "CHILD-ALPHA", "steps": [tool_step(), text_step("alpha done")]}],
    }
    with ScriptedAnthropicServer(script) as srv:
        results: dict[str, httpx.Response] = {}
        parent = threading.Thread(target=lambda: results.update(p=post_messages(srv, [user("parent")])))
        parent.start()
        srv.wait_for_requests(1, timeout=5.0, messages_only=True)
        started = time.monotonic()
        first = post_messages(srv, [user("CHILD-ALPHA")])
        second = post_messages(srv, [user("CHILD-ALPHA"), assistant("x"), user("ok")])
        child_seconds = time.monotonic() - started
        parent.join(timeout=5.0)
    assert child_seconds < 0.9
    assert texts_of(first) == ["Bash"]
    assert texts_of(second) == ["alpha done"]
    assert texts_of(results["p"]) == ["parent answer"]
    assert [r.conversation for r in srv.message_requests] == [None, 0, 0]


def test_anthropic_record_file_and_as_dict_name_the_conversation(tmp_path: Path) -> None:
    record = tmp_path / "rec.jsonl"
    with ScriptedAnthropicServer(SCRIPT, record_path=record) as srv:
        httpx.head(srv.base_url + "/")
        post_messages(srv, [user("CHILD-ALPHA")])
        post_messages(srv, [user("parent")])
    lines = [json.loads(line) for line in record.read_text(encoding="utf-8").splitlines()]
    assert [line["conversation"] for line in lines] == [None, 0, None]
    assert srv.requests[1].as_dict()["conversation"] == 0
    assert srv.requests[0].body_text() == ""


def test_anthropic_script_without_conversations_records_none() -> None:
    with ScriptedAnthropicServer({"steps": [text_step("a")]}) as srv:
        response = post_messages(srv, [user("CHILD-ALPHA")], system="You are the reviewer")
    assert texts_of(response) == ["a"]
    assert [(r.conversation, r.step, r.attempt) for r in srv.message_requests] == [(None, 0, 0)]


# -- OpenAI Responses (Codex) ----------------------------------------------------------------------


def item(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def codex_input(prompt: str, developer: str = "<permissions instructions>") -> list[dict[str, Any]]:
    """The opening items Codex sends (observed.md §2.2): developer x2, environment, prompt."""
    return [
        item("developer", developer),
        item("developer", "<collaboration mode>"),
        item("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        item("user", prompt),
    ]


def post_responses(srv: ScriptedResponsesServer, items: Any, **extra: Any) -> httpx.Response:
    body = {"model": "mock-model", "stream": False, "input": items, **extra}
    return httpx.post(f"{srv.base_url}/responses", json=body, timeout=10.0)


def outputs_of(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    out = []
    for entry in response.json()["output"]:
        out.append(entry["content"][0]["text"] if entry["type"] == "message" else entry["name"])
    return out


def test_opening_texts_stop_at_first_model_output() -> None:
    items = [
        *codex_input("the prompt"),
        {"type": "function_call", "call_id": "c", "name": "exec_command", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c", "output": "CHILD-ALPHA"},
        item("user", "later prompt"),
    ]
    assert opening_texts({"instructions": "base", "input": items}) == [
        "base",
        "<permissions instructions>",
        "<collaboration mode>",
        "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>",
        "the prompt",
    ]
    assert opening_texts({"input": "just text"}) == ["just text"]
    assert opening_texts({"input": None}) == []
    assert opening_texts({"input": [{"role": "user", "content": "no type"}, "junk"]}) == ["no type"]


def test_responses_matches_instructions_developer_and_prompt_items() -> None:
    with ScriptedResponsesServer(SCRIPT) as srv:
        parent = post_responses(srv, codex_input("Please spawn a child."))
        by_prompt = post_responses(srv, codex_input("Task CHILD-ALPHA: look"))
        by_developer = post_responses(srv, codex_input("go", developer="You are the reviewer."))
        by_instructions = post_responses(srv, codex_input("go"), instructions="You are the reviewer!")
        by_string = post_responses(srv, "CHILD-OMEGA")
    assert outputs_of(parent) == ["Bash"]
    assert outputs_of(by_prompt) == ["Bash"]
    assert outputs_of(by_developer) == ["review done"]
    assert outputs_of(by_instructions) == ["review done"]
    assert outputs_of(by_string) == ["generic child"]
    assert [(r.conversation, r.step, r.attempt) for r in srv.message_requests] == [
        (None, 0, 0),
        (0, 0, 0),
        (1, 0, 0),
        (1, 0, 1),
        (2, 0, 0),
    ]
    assert len(srv.requests_in(0)) == 1
    assert "CHILD-ALPHA" in srv.requests_in(0)[0].body_text()


def test_responses_fallback_and_later_items_do_not_switch() -> None:
    with ScriptedResponsesServer(SCRIPT) as srv:
        parent_history = [
            *codex_input("Please spawn a child."),
            {
                "type": "function_call",
                "call_id": "c",
                "name": "spawn_child",
                "arguments": '{"p": "CHILD-ALPHA"}',
            },
            {"type": "function_call_output", "call_id": "c", "output": "CHILD-ALPHA finished"},
            item("user", "what did CHILD-ALPHA say?"),
        ]
        parent = post_responses(srv, parent_history)
        child_history = [
            *codex_input("CHILD-ALPHA"),
            {"type": "function_call", "call_id": "d", "name": "exec_command", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "d", "output": "ok"},
        ]
        child = post_responses(srv, child_history)
    assert outputs_of(parent) == ["parent done"]
    assert outputs_of(child) == ["alpha done"]
    assert [(r.conversation, r.step) for r in srv.message_requests] == [(None, 1), (0, 1)]


def test_responses_attempt_counters_are_per_conversation() -> None:
    script = {
        "steps": [{"error": {"status": 500, "times": 1}, **text_step("parent recovered")}],
        "conversations": [
            {
                "match": "CHILD",
                "steps": [{"error": {"status": 500, "times": 2}, **text_step("child recovered")}],
            },
        ],
    }
    with ScriptedResponsesServer(script) as srv:
        statuses = [
            post_responses(srv, codex_input("parent")).status_code,
            post_responses(srv, codex_input("CHILD")).status_code,
            post_responses(srv, codex_input("CHILD")).status_code,
        ]
        parent = post_responses(srv, codex_input("parent"))
        child = post_responses(srv, codex_input("CHILD"))
    assert statuses == [500, 500, 500]
    assert outputs_of(parent) == ["parent recovered"]
    assert outputs_of(child) == ["child recovered"]
    assert [(r.conversation, r.attempt) for r in srv.message_requests] == [
        (None, 0),
        (0, 0),
        (0, 1),
        (None, 1),
        (0, 2),
    ]
    assert [r.as_dict()["conversation"] for r in srv.message_requests] == [None, 0, 0, None, 0]
