"""The permission policy end to end: octipusd, the real claude binary, the scripted model.

Seed 003 "Permissions and limits" and the flow guard paragraph; FACTS.md §3 and §9.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from octipusd.errors import OctipusError
from tests.e2e.conftest import Env

# A nested shell: Claude's acceptEdits mode lets simple commands through unasked, a nested shell
# always raises a permission request (observed with claude 2.1.197).
NESTED = {"command": 'bash -c "echo policy-probe"', "description": "probe"}


def _kinds(env: Env, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [e["data"] for e in env.events(run_id) if e["kind"] == kind]


def _bash_turns(count: int) -> dict[str, Any]:
    steps: list[dict[str, Any]] = []
    for i in range(count):
        steps.append({"content": [{"type": "tool_use", "name": "Bash", "input": NESTED}]})
        steps.append({"content": [{"type": "text", "text": f"turn {i} done"}]})
    return {"steps": steps}


def test_configured_allow_then_a_stored_legacy_deny_wins(octipus: Callable[..., Env]) -> None:
    rules = {"allow": ['cli-native:Bash(bash -c "echo policy-probe")'], "ask": [], "deny": []}
    env = octipus(_bash_turns(2), extra_env={"OCTIPUS_PERMISSIONS__RULES": json.dumps(rules)})
    session = env.new_session()
    first = env.post(session, "probe once")
    assert env.wait_final(first)["status"] == "succeeded"
    decision = _kinds(env, first, "policy_decision")[0]
    assert decision["level"] == "allow" and decision["rule"] == rules["allow"][0], decision
    assert any(
        "policy-probe" in r["content"] and not r["is_error"] for r in _kinds(env, first, "tool_result")
    )
    assert env.client.request("GET", "/approvals", params={"status": "all", "run_id": first}) == []

    # an operator's deny on the legacy identity (every native tool) beats the per-tool allow; it
    # reaches Claude's own deny list, so Claude no longer offers the tool at all
    env.client.request("POST", "/rules", json={"level": "deny", "rule": "cli-native"})
    second = env.post(session, "probe again")
    assert env.wait_final(second)["status"] == "succeeded"
    argv = next(d for d in _kinds(env, second, "run_status") if d["status"] == "running")["argv"]
    assert "--disallowedTools=Bash" in argv, argv
    results = _kinds(env, second, "tool_result")
    assert any(r["is_error"] and "Bash exists but is not enabled" in r["content"] for r in results), results
    assert not any("policy-probe" in r["content"] and not r["is_error"] for r in results)
    explained = env.client.request(
        "POST", "/rules/explain", json={"tool_id": "cli-native:Bash", "arguments": NESTED, "action": "Bash"}
    )
    assert explained["decision"]["level"] == "deny"
    assert "either identity" in explained["decision"]["explanation"]


def test_a_deny_added_while_the_prompt_is_open_cannot_be_approved(octipus: Callable[..., Env]) -> None:
    env = octipus(_bash_turns(1))
    session = env.new_session()
    run = env.post(session, "probe")
    approval = env.wait_approval(run)
    assert approval["explanation"] and "default" in approval["explanation"], approval
    rule = env.client.request("POST", "/rules", json={"level": "deny", "rule": "cli-native:Bash(bash -c:*)"})
    env.answer(approval["id"], "approve")
    assert env.wait_final(run)["status"] == "succeeded"
    results = _kinds(env, run, "tool_result")
    assert any(r["is_error"] and "changed while the approval was open" in r["content"] for r in results), (
        results
    )
    env.client.request("DELETE", f"/rules/{rule['id']}")
    assert env.client.request("GET", "/rules")["stored"] == []


def test_a_remembered_approval_is_a_grant_with_a_usage_limit(octipus: Callable[..., Env]) -> None:
    env = octipus(_bash_turns(3))
    session = env.new_session()
    first = env.post(session, "probe")
    approval = env.wait_approval(first)
    answered = env.client.request(
        "POST",
        f"/approvals/{approval['id']}",
        json={"decision": "approve", "remember": {"scope": "session", "max_uses": 1}},
    )
    assert answered["grant_id"]
    assert env.wait_final(first)["status"] == "succeeded"
    # the grant allows the next identical call once, then it is used up and the call asks again
    second = env.post(session, "probe")
    assert env.wait_final(second)["status"] == "succeeded"
    used = _kinds(env, second, "policy_decision")[0]
    assert used["level"] == "allow" and used["grant_id"] == answered["grant_id"], used
    third = env.post(session, "probe")
    again = env.wait_approval(third)
    env.answer(again["id"], "deny", "enough")
    assert env.wait_final(third)["status"] == "succeeded"
    grants = env.client.request("GET", "/rules")["grants"]
    assert grants == []  # used up: no longer active


def _read_env_then_fetch() -> dict[str, Any]:
    return {
        "steps": [
            {"content": [{"type": "tool_use", "name": "Read", "input": {"file_path": "__ENV__"}}]},
            {
                "content": [
                    {
                        "type": "tool_use",
                        "name": "WebFetch",
                        "input": {"url": "https://example.com/upload", "prompt": "summarize"},
                    }
                ]
            },
            {"content": [{"type": "text", "text": "done"}]},
        ]
    }


def _script_with_path(script: dict[str, Any], path: str) -> dict[str, Any]:
    return json.loads(json.dumps(script).replace("__ENV__", path))


@pytest.mark.parametrize("attended", [True, False])
def test_flow_guard_escalates_a_webfetch_after_a_credential_read(
    octipus: Callable[..., Env], tmp_path: Any, attended: bool
) -> None:
    env_file = tmp_path / f"ws-{attended}" / ".env"
    env_file.parent.mkdir()
    env_file.write_text("API_TOKEN=s3cr3t\n")
    env = octipus(_script_with_path(_read_env_then_fetch(), str(env_file)))
    session = str(
        env.client.request(
            "POST", "/sessions", json={"workspace": str(env_file.parent), "attended": attended}
        )["id"]
    )
    run = env.post(session, "read the env file, then fetch")
    if attended:
        approval = env.wait_approval(run)
        assert approval["tool_id"] == "cli-native:WebFetch"
        assert approval["reason"].startswith("flow guard: "), approval
        assert "allow" in approval["explanation"]  # the rules alone would have allowed it
        env.answer(approval["id"], "deny", "no egress after reading secrets")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", final
    label = env.client.request("GET", f"/sessions/{session}")["flow_label"]
    assert "secret" in label.split(","), label
    # the Read was auto-allowed by Claude (never relayed) and still counted: seen in the stream
    flagged = _kinds(env, run, "flow_label")
    assert flagged and flagged[0]["tool_id"] == "cli-native:Read", flagged
    results = _kinds(env, run, "tool_result")
    if not attended:
        assert any(r["is_error"] and "Approval required: flow guard:" in r["content"] for r in results), (
            results
        )
        assert "Approval required: flow guard:" in (final["reason"] or "")


def test_full_mode_bypass_does_not_authorize_a_denied_octipus_tool(octipus: Callable[..., Env]) -> None:
    script = {
        "steps": [
            {
                "content": [
                    {"type": "tool_use", "name": "mcp__octipus__shell__run", "input": {"command": "echo hi"}}
                ]
            },
            {"content": [{"type": "text", "text": "done"}]},
        ]
    }
    env = octipus(script)
    env.client.request("POST", "/rules", json={"level": "deny", "rule": "shell__run"})
    session = env.new_session(permission_mode="full")
    run = env.post(session, "run a shell command")
    assert env.wait_final(run)["status"] == "succeeded"
    results = _kinds(env, run, "tool_result")
    assert any(r["is_error"] and "denied by Octipus policy" in r["content"] for r in results), results
    status = next(d for d in _kinds(env, run, "run_status") if d["status"] == "running")
    assert "bypassPermissions" in " ".join(status["argv"])


def test_plan_mode_overrides_the_row_for_one_turn(octipus: Callable[..., Env]) -> None:
    write = {"command": 'bash -c "echo x > planned.txt"', "description": "write"}
    plan = {"plan": {"title": "the plan", "steps": [{"id": "s1", "title": "write", "status": "pending"}]}}
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "tool_use", "name": "mcp__octipus__update_work_plan", "input": plan}]},
                {"content": [{"type": "tool_use", "name": "Bash", "input": write}]},
                {"content": [{"type": "text", "text": "a plan"}]},
                {"content": [{"type": "text", "text": "done"}]},
            ]
        }
    )
    session = env.new_session(permission_mode="full")
    planned = str(
        env.client.request("POST", f"/sessions/{session}/turns", json={"prompt": "plan it", "plan": True})[
            "id"
        ]
    )
    final = env.wait_final(planned)
    assert final["plan_mode"] is True and final["status"] == "succeeded", final
    argv = " ".join(next(d for d in _kinds(env, planned, "run_status") if d["status"] == "running")["argv"])
    assert "--permission-mode plan" in argv or "--permission-mode=plan" in argv, argv
    # planning tools run; anything that changes the workspace is refused without asking anyone
    results = _kinds(env, planned, "tool_result")
    assert any(r["is_error"] and "plan mode" in r["content"] for r in results), results
    assert not (env.daemon.workspace / "planned.txt").exists()
    assert env.client.request("GET", "/approvals", params={"status": "all", "run_id": planned}) == []
    assert not any(r["is_error"] and "update_work_plan" in r["content"] for r in results)
    normal = env.post(session, "now do it")
    env.wait_final(normal)
    argv = " ".join(next(d for d in _kinds(env, normal, "run_status") if d["status"] == "running")["argv"])
    assert "bypassPermissions" in argv, argv


def test_questionnaire_needs_answers_and_a_bare_approve_is_refused(octipus: Callable[..., Env]) -> None:
    question = {
        "question": "Which database should we use?",
        "header": "Database",
        "multiSelect": False,
        "options": [
            {"label": "SQLite", "description": "embedded, zero set-up"},
            {"label": "PostgreSQL", "description": "a server, for teams"},
        ],
    }
    script = {
        "steps": [
            {
                "content": [
                    {"type": "tool_use", "name": "AskUserQuestion", "input": {"questions": [question]}}
                ]
            },
            {"content": [{"type": "text", "text": "thanks"}]},
        ]
    }
    env = octipus(script)
    # even a stored ALLOW does not answer a questionnaire for the person
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "cli-native:AskUserQuestion"})
    session = env.new_session()
    run = env.post(session, "ask me")
    approval = env.wait_approval(run)
    assert approval["kind"] == "questionnaire"
    shown = approval["questions"]["questions"][0]
    assert [o["description"] for o in shown["options"]] == ["embedded, zero set-up", "a server, for teams"]
    with pytest.raises(OctipusError, match="questionnaire"):
        env.answer(approval["id"], "approve")
    with pytest.raises(OctipusError, match="Which database"):
        env.client.request(
            "POST", f"/approvals/{approval['id']}", json={"decision": "approve", "answers": {"Other?": "x"}}
        )
    env.client.request(
        "POST",
        f"/approvals/{approval['id']}",
        json={"decision": "approve", "answers": {"Which database should we use?": "PostgreSQL"}},
    )
    assert env.wait_final(run)["status"] == "succeeded"
    results = _kinds(env, run, "tool_result")
    assert any(
        r["content"].startswith("Your questions have been answered:") and "PostgreSQL" in r["content"]
        for r in results
    ), results
    stored = env.client.request("GET", f"/approvals/{approval['id']}")
    assert stored["answers"] == {"Which database should we use?": "PostgreSQL"}
    with pytest.raises(OctipusError, match="already approved"):
        env.answer(approval["id"], "approve")
    # a rule that forgot the cli-native: prefix would never match: refused with the fix
    with pytest.raises(OctipusError, match=r"cli-native:Bash\(\.\.\.\)"):
        env.client.request("POST", "/rules", json={"level": "deny", "rule": "Bash(rm:*)"})
