"""Delegation limits per level (``swarm.levelDefaults``) on the real claude binary.

Issue 15 item 1: depth, fan-out and token budget per level from one table; a refusal names the
limit and its setting key. The root agent (real ``claude``, scripted model) calls
``mcp__octipus__spawn_child``; each child is another real ``claude`` process whose scripted
conversation is picked by a marker in its brief (``LIM-...``). The daemon's table is set through
its nested environment variables (``OCTIPUS_SWARM__LEVELDEFAULTS__<LEVEL>__<KEY>``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from tests.e2e.conftest import Env

CONTEXT_SUFFIX = "\n[octipus run context]"
SPAWN = "mcp__octipus__spawn_child"
DELEGATION = {SPAWN, "mcp__octipus__collect_children", "mcp__octipus__steer_child"}


def _spawn(**arguments: Any) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": SPAWN, "input": arguments}]}


def _tool(name: str, usage: Mapping[str, int] | None = None, **arguments: Any) -> dict[str, Any]:
    step: dict[str, Any] = {
        "content": [{"type": "tool_use", "name": f"mcp__octipus__{name}", "input": arguments}]
    }
    if usage is not None:
        step["usage"] = dict(usage)
    return step


def _text(text: str, **extra: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], **extra}


def _conversation(match: str, *steps: dict[str, Any]) -> dict[str, Any]:
    return {"match": match, "steps": list(steps)}


def _start(octipus: Callable[..., Env], script: dict[str, Any], **table: str) -> Env:
    """A daemon with ``swarm.levelDefaults`` keys from ``table`` (``root__fanOut="1"``) whose policy
    lets agents delegate without asking (spawn_child defaults to ASK)."""
    extra = {f"OCTIPUS_SWARM__LEVELDEFAULTS__{key.upper()}": value for key, value in table.items()}
    env = octipus(script, extra_env=extra)
    for rule in ("spawn_child", "collect_children"):
        env.client.request("POST", "/rules", json={"level": "allow", "rule": rule})
    return env


def _kinds(events: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in events if e["kind"] == kind]


def _children(env: Env, session: str) -> list[dict[str, Any]]:
    found = env.client.request("GET", "/runs", params={"session_id": session, "limit": 1000})
    return sorted((r for r in found if r["parent_run_id"] is not None), key=lambda r: r["turn_index"])


def _child(env: Env, session: str, brief: str) -> dict[str, Any]:
    found = [r for r in _children(env, session) if r["prompt"] == brief]
    assert len(found) == 1, f"expected one child run with brief {brief!r}: {_children(env, session)}"
    return found[0]


def _tool_results(env: Env, run_id: str) -> list[dict[str, Any]]:
    return _kinds(env.events(run_id), "tool_result")


def _summary(result: dict[str, Any]) -> dict[str, Any]:
    assert not result["is_error"], result
    return dict(json.loads(str(result["content"]).split(CONTEXT_SUFFIX)[0]))


def _offered(env: Env, conversation: int) -> set[str]:
    """The tool names the first model request of a script conversation offered."""
    requests = env.model.requests_in(conversation)
    assert requests, f"conversation {conversation} made no model request"
    return {str(t.get("name")) for t in requests[0].body.get("tools", [])}


def test_a_root_at_its_fan_out_is_refused_a_second_child_naming_the_setting(
    octipus: Callable[..., Env],
) -> None:
    first_brief = "LIM-F1 a detached child that takes its time."
    second_brief = "LIM-F2 a second child the fan-out refuses."
    env = _start(
        octipus,
        {
            "steps": [
                _spawn(role="general", brief=first_brief, detach=True),
                _spawn(role="general", brief=second_brief, detach=True),
                _tool("collect_children"),
                _text("root done with one child"),
            ],
            "conversations": [
                # still thinking when the second spawn_child comes: the first child is alive
                _conversation("LIM-F1", _text("f one result", delay_seconds=4)),
                _conversation("LIM-F2", _text("a refused child ran")),
            ],
        },
        root__fanOut="1",
    )
    session = env.new_session()
    root = env.post(session, "Fan out two children.")
    final = env.wait_final(root)
    assert final["status"] == "succeeded", final
    assert final["result_text"] == "root done with one child", final

    first = _child(env, session, first_brief)
    assert first["status"] == "succeeded" and first["result_text"] == "f one result", first
    assert [c["prompt"] for c in _children(env, session)] == [first_brief], "a second child run exists"
    assert not env.model.requests_in(1), "the refused child's model was asked"
    assert [d["child_run_id"] for d in _kinds(env.events(root), "child_spawned")] == [first["id"]]

    started, refused, collected = _tool_results(env, root)
    assert _summary(started)["childRunId"] == first["id"] and _summary(started)["detached"] is True
    assert refused["is_error"] is True, refused
    content = str(refused["content"])
    assert "fan-out limit reached: a root run may have at most 1 child alive at once" in content, content
    assert "(swarm.levelDefaults.root.fanOut)" in content, content
    # the refusal came while the first child was alive (not after it ended)
    refused_at = next(
        e["created_at"] for e in env.events(root) if e["kind"] == "tool_result" and e["data"].get("is_error")
    )
    assert datetime.fromisoformat(refused_at) < datetime.fromisoformat(first["ended_at"])
    assert [c["childRunId"] for c in _summary(collected)["children"]] == [first["id"]]


def test_the_child_levels_token_budget_is_its_default_and_its_highest(octipus: Callable[..., Env]) -> None:
    """An agent child's default budget is ``swarm.levelDefaults.agent.tokens`` (80 000), counted
    without cache reads: a child re-reading 120 000 cached tokens succeeds, one sending 90 000 new
    ones is stopped; asking for more than the level's tokens or time is refused, naming the key."""
    cached_brief = "LIM-T1 a child that re-reads its cached prompt."
    heavy_brief = "LIM-T2 a child that sends many new tokens."
    reread = {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 40_000}
    env = _start(
        octipus,
        {
            "steps": [
                _spawn(role="general", brief=cached_brief),
                _spawn(role="general", brief=heavy_brief),
                _spawn(role="general", brief="LIM-T3 asks for too many tokens.", tokenBudget=80_001),
                _spawn(role="general", brief="LIM-T4 asks for too much time.", timeoutSeconds=601),
                _text("root done"),
            ],
            "conversations": [
                _conversation(
                    "LIM-T1",
                    _tool("get_work_plan", usage=reread),
                    _tool("get_work_plan", usage=reread),
                    _text("t one within budget", usage=reread),
                ),
                _conversation(
                    "LIM-T2", _text("t two spent", usage={"input_tokens": 90_000, "output_tokens": 20})
                ),
                _conversation("LIM-T3", _text("a refused child ran")),
                _conversation("LIM-T4", _text("a refused child ran")),
            ],
        },
    )
    session = env.new_session()
    root = env.post(session, "Delegate within the budgets.")
    assert env.wait_final(root)["status"] == "succeeded"

    cached = _child(env, session, cached_brief)
    assert cached["status"] == "succeeded" and cached["result_text"] == "t one within budget", cached
    assert cached["cache_read_input_tokens"] >= 120_000, "precondition: claude reported the cache reads"

    heavy = _child(env, session, heavy_brief)
    assert heavy["status"] == "failed", heavy
    assert "token budget" in heavy["reason"] and "budget 80000" in heavy["reason"], heavy

    results = _tool_results(env, root)
    assert [r["is_error"] for r in results] == [False, False, True, True], results
    assert _summary(results[1])["status"] == "failed"
    tokens, time = str(results[2]["content"]), str(results[3]["content"])
    assert "tokenBudget: 80001 tokens is above the limit of an agent child, 80000 tokens" in tokens, tokens
    assert "(swarm.levelDefaults.agent.tokens)" in tokens, tokens
    assert "timeoutSeconds: 601 s is above the limit of an agent child, 600 s" in time, time
    assert "swarm.levelDefaults.agent.wallMs" in time, time
    assert len(_children(env, session)) == 2, "a refused request made a child run"
    assert not env.model.requests_in(2) and not env.model.requests_in(3)


def test_the_delegation_tools_follow_the_level_table(octipus: Callable[..., Env]) -> None:
    """An agent child gets the delegation tools and a subagent does not (its fanOut is 0); with
    ``swarm.levelDefaults.agent.fanOut = 0`` an agent child gets none either."""
    script = {
        "steps": [_spawn(role="general", brief="LIM-D1 an agent child."), _text("root done")],
        "conversations": [
            _conversation(
                "LIM-D1", _spawn(role="general", brief="LIM-D2 a subagent child."), _text("agent done")
            ),
            _conversation("LIM-D2", _text("subagent done")),
        ],
    }
    env = _start(octipus, script)
    session = env.new_session()
    assert env.wait_final(env.post(session, "Delegate two levels deep."))["status"] == "succeeded"
    assert [c["status"] for c in _children(env, session)] == ["succeeded", "succeeded"]
    assert _offered(env, 0) >= DELEGATION, _offered(env, 0)
    assert not DELEGATION & _offered(env, 1), _offered(env, 1)
    assert "mcp__octipus__get_work_plan" in _offered(env, 1), "precondition: the subagent has Octipus tools"

    flat = _start(octipus, script, agent__fanOut="0")
    session = flat.new_session()
    root = flat.post(session, "Delegate two levels deep.")
    assert flat.wait_final(root)["status"] == "succeeded"
    [agent] = _children(flat, session)
    assert agent["status"] == "succeeded", agent
    assert not DELEGATION & _offered(flat, 0), _offered(flat, 0)
    assert "mcp__octipus__get_work_plan" in _offered(flat, 0)
    # the agent's model still called spawn_child: Claude has no such tool and answers with an error
    assert not flat.model.requests_in(1), "a subagent ran under an agent whose fanOut is 0"
