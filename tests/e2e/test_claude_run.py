"""End to end through octipusd and the real claude binary against the scripted Anthropic model."""

from __future__ import annotations

import contextlib
import json
import shlex
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from octipusd.errors import ApiError
from octipusd.runner.process import run_processes
from octipusd.store.repository import Store
from tests.e2e.conftest import Env

WRITE_HELLO = {
    # a nested shell: acceptEdits lets a plain `echo > file` inside the workspace through unasked
    "command": 'bash -c "echo hello from octipus > hello.txt" && cat hello.txt',
    "description": "write hello.txt",
}


def _plan_then_bash() -> dict[str, Any]:
    return {
        "steps": [
            {
                "content": [
                    {
                        "type": "tool_use",
                        "name": "mcp__octipus__update_work_plan",
                        "input": {
                            "plan": {
                                "title": "E2E plan",
                                "steps": [{"id": "s1", "title": "write hello", "status": "in_progress"}],
                            },
                            "session_id": "forged-session",
                        },
                    }
                ]
            },
            {"content": [{"type": "tool_use", "name": "Bash", "input": WRITE_HELLO}]},
            {"content": [{"type": "text", "text": "Wrote hello.txt."}]},
            {"content": [{"type": "text", "text": "Earlier I wrote hello.txt."}]},
        ]
    }


def _kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == kind]


def test_bridge_tool_approved_bash_and_resumed_second_turn(octipus: Callable[..., Env]) -> None:
    env = octipus(_plan_then_bash())
    session = env.new_session()
    run1 = env.post(session, "Make a plan, then write hello.txt.")
    approval = env.wait_approval(run1)
    assert approval["tool_id"] == "cli-native:Bash"
    assert approval["subject"] == WRITE_HELLO["command"]
    assert env.run(run1)["status"] == "awaiting_approval"
    env.answer(approval["id"], "approve")
    final = env.wait_final(run1)
    assert final["status"] == "succeeded", final
    assert (env.daemon.workspace / "hello.txt").read_text() == "hello from octipus\n"
    events = env.events(run1)
    # the bridge call carried the run's identity, not the forged argument
    calls = _kinds(events, "bridge_call")
    assert any(c.get("tool") == "update_work_plan" for c in calls), calls
    # the plan landed in the run's own session, whatever the arguments claimed
    store = Store.open(f"sqlite:///{env.daemon.root / 'data' / 'octipus' / 'octipus.db'}")
    try:
        saved = store.get_work_plan(session)
        assert saved is not None and saved.plan["title"] == "E2E plan"
        assert store.get_work_plan("forged-session") is None
    finally:
        store.close()
    decisions = _kinds(events, "permission_decision")
    assert any(d["tool_id"] == "cli-native:Bash" and d["allowed"] for d in decisions)
    results = _kinds(events, "tool_result")
    assert any("hello from octipus" in r["content"] for r in results)
    assert final["input_tokens"] > 0 and final["output_tokens"] > 0
    status_running = next(d for d in _kinds(events, "run_status") if d["status"] == "running")
    vendor_id = status_running["vendor_session_id"]
    assert any(a == f"--session-id={vendor_id}" for a in status_running["argv"])
    assert not any("Bearer" in a for a in status_running["argv"])

    run2 = env.post(session, "What did you do earlier?")
    final2 = env.wait_final(run2)
    assert final2["status"] == "succeeded", final2
    assert final2["resumed"] is True and final2["vendor_session_id"] == vendor_id
    running2 = next(d for d in _kinds(env.events(run2), "run_status") if d["status"] == "running")
    assert f"--resume={vendor_id}" in running2["argv"]
    last = env.model.message_requests[-1].body
    text = json.dumps(last["messages"])
    assert "Make a plan, then write hello.txt." in text and "hello from octipus" in text
    assert final2["result_text"] == "Earlier I wrote hello.txt."


def test_denied_permission_does_not_run_the_tool(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "Bash", "input": WRITE_HELLO}]},
                {"content": [{"type": "text", "text": "The write was denied."}]},
            ]
        }
    )
    session = env.new_session()
    run = env.post(session, "write hello.txt")
    approval = env.wait_approval(run)
    env.answer(approval["id"], "deny", reason="not today")
    final = env.wait_final(run)
    assert final["status"] == "succeeded"
    assert not (env.daemon.workspace / "hello.txt").exists()
    events = env.events(run)
    denial = [d for d in _kinds(events, "permission_decision") if not d["allowed"]]
    assert denial and "not today" in denial[0]["reason"]
    assert any(r["is_error"] and "not today" in r["content"] for r in _kinds(events, "tool_result"))
    stored = env.client.request("GET", f"/approvals/{approval['id']}")
    assert stored["status"] == "denied" and stored["decision_reason"] == "not today"


def test_unanswered_permission_expires_denies_and_fails_the_run(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {
                    "content": [
                        {"type": "tool_use", "name": "Bash", "input": WRITE_HELLO},
                        {
                            "type": "tool_use",
                            "name": "Write",
                            "input": {"file_path": "other.txt", "content": "x"},
                        },
                    ]
                },
                {"content": [{"type": "text", "text": "done"}]},
            ]
        },
        extra_env={"OCTIPUS_DAEMON__APPROVALTIMEOUTSECONDS": "2"},
    )
    session = env.new_session(permission_mode="default")
    run = env.post(session, "write hello.txt")
    env.wait_approval(run)
    final = env.wait_final(run)
    assert final["status"] == "failed"
    assert "not answered within 2 s" in final["reason"]
    assert not (env.daemon.workspace / "hello.txt").exists()
    approvals = env.client.request("GET", "/approvals", params={"status": "all", "run_id": run})
    assert approvals and all(a["status"] in ("expired", "cancelled") for a in approvals), approvals
    assert any(a["status"] == "expired" for a in approvals)


def test_unattended_run_cannot_ask(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "Bash", "input": WRITE_HELLO}]},
                {"content": [{"type": "text", "text": "could not write"}]},
            ]
        }
    )
    session = env.new_session(attended=False)
    run = env.post(session, "write hello.txt")
    final = env.wait_final(run)
    assert not (env.daemon.workspace / "hello.txt").exists()
    assert "review required" in (final["reason"] or "")
    assert env.client.request("GET", "/approvals", params={"status": "all", "run_id": run}) == []
    assert _kinds(env.events(run), "review_required")


def test_bridge_refuses_missing_wrong_and_foreign_capabilities(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    script = {
        "steps": [
            {"content": [{"type": "tool_use", "name": "Bash", "input": WRITE_HELLO}]},
            {"content": [{"type": "text", "text": "ok"}]},
            {"content": [{"type": "tool_use", "name": "Bash", "input": WRITE_HELLO}]},
            {"content": [{"type": "text", "text": "ok"}]},
        ]
    }
    env = octipus(script)
    run_a = env.post(env.new_session(), "write hello.txt")
    approval_a = env.wait_approval(run_a)
    run_b = env.post(env.new_session(), "write hello.txt")
    approval_b = env.wait_approval(run_b)

    def bridge_of(run_id: str) -> tuple[str, str]:
        configs = list((env.daemon.root / "data" / "octipus" / "runs" / run_id).glob("*.json"))
        assert configs, f"no MCP config written for run {run_id}"
        server = json.loads(configs[0].read_text())["mcpServers"]["octipus"]
        return server["url"], server["headers"]["Authorization"]

    url_a, auth_a = bridge_of(run_a)
    _url_b, auth_b = bridge_of(run_b)
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    with httpx.Client(timeout=10) as http:
        assert http.post(url_a, json=init, headers=headers).status_code == 401
        bad = {**headers, "Authorization": "Bearer " + "x" * 43}
        assert http.post(url_a, json=init, headers=bad).status_code == 401
        foreign = {**headers, "Authorization": auth_b}
        assert http.post(url_a, json=init, headers=foreign).status_code == 401
        assert http.post(url_a, json=init, headers={**headers, "Authorization": auth_a}).status_code == 200
    # the refusals ended no run
    assert env.run(run_a)["status"] == "awaiting_approval"
    env.answer(approval_a["id"], "approve")
    env.answer(approval_b["id"], "approve")
    assert env.wait_final(run_a)["status"] == "succeeded"
    assert env.wait_final(run_b)["status"] == "succeeded"


def test_second_turn_while_live_is_refused(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "Bash", "input": WRITE_HELLO}]},
                {"content": [{"type": "text", "text": "ok"}]},
            ]
        }
    )
    session = env.new_session()
    run = env.post(session, "write hello.txt")
    approval = env.wait_approval(run)
    with pytest.raises(ApiError, match="already has a live run") as refused:
        env.post(session, "again")
    assert refused.value.http_status == 409
    env.answer(approval["id"], "approve")
    assert env.wait_final(run)["status"] == "succeeded"


@contextlib.contextmanager
def _silent_mcp_server() -> Iterator[str]:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers; yields its /mcp URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        with contextlib.suppress(OSError):
            while True:
                held.append(listener.accept()[0])

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    finally:
        listener.close()
        for conn in held:
            conn.close()


def test_a_bridge_that_never_answers_fails_the_run(
    octipus: Callable[..., Env], claude: Path, tmp_path: Path
) -> None:
    # the real claude, its MCP config pointed at a server that accepts the connection and never answers:
    # init lists the bridge "pending", the tool call fails "still connecting" and claude exits 0 with a
    # success result; the adapter reports it and, as the bridge never saw the handshake, the run fails
    with _silent_mcp_server() as silent:
        wrapper = tmp_path / "claude-silent-bridge"
        wrapper.write_text(
            "#!/bin/sh\n"
            'for arg in "$@"; do case "$arg" in --mcp-config=*) '
            f"sed -i -E 's#http://127[.]0[.]0[.]1:[0-9]+/mcp#{silent}#' \"${{arg#--mcp-config=}}\";; esac; done\n"
            f'exec {shlex.quote(str(claude.resolve()))} "$@"\n'
        )
        wrapper.chmod(0o700)
        env = octipus(
            {
                "steps": [
                    {"content": [{"type": "tool_use", "name": "mcp__octipus__get_work_plan", "input": {}}]},
                    {"content": [{"type": "text", "text": "The plan tool is unavailable."}]},
                ]
            },
            binary=wrapper,
        )
        run = env.post(env.new_session(), "Show the work plan.")
        final = env.wait_final(run)
    assert final["status"] == "failed", final
    assert "Octipus MCP bridge 'octipus' as 'pending' in system/init" in final["reason"], final
    events = env.events(run)
    (session,) = _kinds(events, "session")
    assert session["mcp_servers"] == {"octipus": "pending"}
    (failure,) = _kinds(events, "run_failure")
    # pending may still connect: the run fails because the vendor ended without the bridge's handshake
    assert final["reason"].startswith(failure["reason"]) and "handshake with the bridge" in final["reason"]
    assert not _kinds(events, "bridge_call")  # nothing reached the real bridge


def test_a_claude_kept_alive_by_a_background_agent_ends_its_run_after_its_result(
    octipus: Callable[..., Env],
) -> None:
    """Claude Code 2.1.197 does not exit after its result while a background agent it started still
    waits for the model (issue 26 item 1; on main the run stayed ``running`` for the hour of its
    active-work limit). The run ends ``succeeded`` with that result within the grace after it, no
    process of it is left, and the session's next turn runs at once."""
    agent = {
        "description": "background agent",
        "prompt": "BACKGROUND-AGENT: wait",
        "subagent_type": "general-purpose",
        "run_in_background": True,
    }
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "Task", "input": agent}]},
                {"content": [{"type": "text", "text": "Started it."}]},
                {"content": [{"type": "text", "text": "Second answer."}]},
            ],
            "conversations": [  # the agent's model call answers after ten minutes
                {
                    "match": "BACKGROUND-AGENT",
                    "steps": [{"delay_seconds": 600, "content": [{"type": "text", "text": "late"}]}],
                }
            ],
        }
    )
    session = env.new_session()
    run = env.post(session, "Start a background agent.")
    final = env.wait_final(run, timeout=60)
    assert final["status"] == "succeeded", final
    assert final["result_text"] == "Started it."
    notes = [d for d in _kinds(env.events(run), "notice") if "after_result" in d]
    assert len(notes) == 1 and notes[0]["lingered"], notes  # claude did not exit by itself
    env.wait(lambda: not run_processes(run), timeout=15, what="no process of the run left")
    second = env.wait_final(env.post(session, "And now?"), timeout=60)
    assert second["status"] == "succeeded" and second["result_text"] == "Second answer.", second


def test_what_claude_answers_after_its_result_is_not_part_of_the_run(octipus: Callable[..., Env]) -> None:
    """A background shell that ends after claude's result makes claude answer its notification with
    one more model turn before it exits (2.1.197): on main that text was appended to the run's
    answer. It is not part of the run: the answer is the turn's own, one notice counts the rest."""
    background = {"command": "sleep 4; echo finished", "description": "background", "run_in_background": True}
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "Bash", "input": background}]},
                {"content": [{"type": "text", "text": "Started it."}]},
                {"content": [{"type": "text", "text": "The background shell finished."}]},
            ]
        }
    )
    run = env.post(env.new_session(), "Start a background shell.")
    final = env.wait_final(run, timeout=60)
    assert final["status"] == "succeeded", final
    assert final["result_text"] == "Started it."
    events = env.events(run)
    assert [d["text"] for d in _kinds(events, "text")] == ["Started it."]
    assert len(_kinds(events, "result")) == 1
