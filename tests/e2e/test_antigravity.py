"""Antigravity (stub ``agy``) and GLM (real ``claude`` as ``claude-glm``) through a real octipusd.

The conformance scenarios run over :class:`AntigravityKit` and :class:`GlmKit`; then the
Antigravity specifics: an Octipus tool reached through ``octipus-bridge`` with the capability only
in the environment, no resume on a follow-up turn, stdin ``/dev/null``, plan mode, and GLM's
endpoint and key mapping as the scripted server saw it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.conformance import SCENARIOS, Octipus, VendorKit, octipus
from octipusd.testing.kit_antigravity import AgyScript, AntigravityKit, GlmKit

KITS: dict[str, type[VendorKit]] = {"antigravity": AntigravityKit, "claude-glm": GlmKit}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("kit", list(KITS))
def test_conformance(kit: str, scenario: str, tmp_path: Path) -> None:
    SCENARIOS[scenario](KITS[kit](), tmp_path)


def _records(env: Octipus) -> list[dict[str, Any]]:
    assert isinstance(env.model, AgyScript)
    return env.model.records()


def _turn_records(env: Octipus, event: str) -> list[dict[str, Any]]:
    """Records of the invocations that ran a turn (not the daemon's ``agy --version`` probe)."""
    records = _records(env)
    turn_pids = {r["pid"] for r in records if r["event"] == "turn"}
    return [r for r in records if r["event"] == event and r["pid"] in turn_pids]


def test_bridge_reached_through_the_helper_with_the_capability_in_the_environment(tmp_path: Path) -> None:
    kit = AntigravityKit()
    plan = {"plan": {"title": "agy plan", "steps": [{"id": "s1", "title": "check", "status": "pending"}]}}
    steps = [
        kit.shell("octipus-bridge list"),
        kit.bridge_call("update_work_plan", plan),
        kit.shell('printf %s "$OCTIPUS_BRIDGE_TOKEN"'),  # what the agent's terminal inherits
        kit.text("plan saved"),
    ]
    with octipus(kit, tmp_path, steps) as env:
        run = env.post(env.new_session(), "save a plan")
        final = env.wait_final(run)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        assert final["result_text"] == "plan saved"
        calls = env.kinds(run, "bridge_call")
        assert any(
            c.get("tool") == "update_work_plan" and c.get("event") == "tool_call_finished" for c in calls
        ), calls
        (start,) = _turn_records(env, "start")
        (end,) = _turn_records(env, "end")
        listed, called, printed = (a for a in end["actions"] if a["action"] == "run")
        assert listed["outcome"] == "ran" and listed["exit_code"] == 0
        assert "update_work_plan" in listed["output"]
        assert called["outcome"] == "ran" and called["exit_code"] == 0, called
        token = printed["output"]
        assert len(token) >= 32
        # the capability is in the environment only: never on the command line or in stored events
        assert {"OCTIPUS_BRIDGE_URL", "OCTIPUS_BRIDGE_TOKEN"} <= set(start["env_keys"])
        assert not any(token in arg for arg in start["argv"])
        assert token not in str(env.events(run))
        # usage is estimated from the prompt and the answer
        assert final["usage_estimated"] is True and final["input_tokens"] > 0 and final["output_tokens"] > 0


def test_follow_up_turn_is_never_resumed(tmp_path: Path) -> None:
    kit = AntigravityKit()
    with octipus(kit, tmp_path, [kit.text("first answer"), kit.text("second answer")]) as env:
        session = env.new_session()
        first = env.wait_final(env.post(session, "remember octopus"))
        second = env.wait_final(env.post(session, "what was the word?"))
        assert (first["status"], second["status"]) == ("succeeded", "succeeded"), env.daemon.log()[-3000:]
        assert (second["resumed"], second["vendor_session_id"]) == (False, None)
        assert second["result_text"] == "second answer"
        starts = _turn_records(env, "start")
        turns = _turn_records(env, "turn")
        assert len(starts) == 2 and [t["turn"] for t in turns] == [0, 1]
        for start, turn in zip(starts, turns, strict=True):
            assert turn["resume_requested"] is False
            assert not any(a.startswith(("--conversation", "-c", "--continue")) for a in start["argv"])
        # never resumed, so each turn is a new conversation carrying the earlier messages (seed 003
        # "What resume actually saves")
        assert turns[1]["prompt"].endswith("what was the word?")
        assert "remember octopus" in turns[1]["prompt"] and "first answer" in turns[1]["prompt"]
        assert "first answer" not in turns[0]["prompt"]


def test_stdin_is_dev_null_and_an_inherited_pipe_is_irrelevant(tmp_path: Path) -> None:
    kit = AntigravityKit()
    with octipus(kit, tmp_path, [kit.shell("sleep 0.2"), kit.text("slept")]) as env:
        final = env.wait_final(env.post(env.new_session(), "sleep a little"), timeout=60)
        assert final["status"] == "succeeded", final
        (start,) = _turn_records(env, "start")
        assert start["stdin"] == "devnull"


def test_plan_mode_is_passed_and_refuses_writes(tmp_path: Path) -> None:
    kit = AntigravityKit()
    write = {"actions": [{"write": {"path": "planned.txt", "content": "x"}}], "ends_turn": False}
    with octipus(kit, tmp_path, [write, kit.text("here is the plan")]) as env:
        final = env.wait_final(env.post(env.new_session(permission_mode="plan"), "plan only"))
        assert final["status"] == "succeeded", final
        (start,) = _turn_records(env, "start")
        assert start["argv"][:2] == ["--mode", "plan"]
        assert not (env.daemon.workspace / "planned.txt").exists()
        (end,) = _turn_records(env, "end")
        assert end["actions"][0]["outcome"] == "refused_plan_mode"


def test_default_tool_permission_ends_with_a_clear_failure(tmp_path: Path) -> None:
    kit = AntigravityKit(tool_permission="request-review")
    with octipus(kit, tmp_path, [kit.shell("touch ran.txt"), kit.text("never")]) as env:
        final = env.wait_final(env.post(env.new_session(), "touch a file"))
        assert final["status"] == "failed", final
        assert "toolPermission" in final["reason"]
        assert not (env.daemon.workspace / "ran.txt").exists()


def test_glm_endpoint_and_key_reach_the_model_server(tmp_path: Path) -> None:
    kit = GlmKit()
    with octipus(kit, tmp_path, [kit.text("glm pong")]) as env:
        final = env.wait_final(env.post(env.new_session(), "ping"))
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        assert isinstance(env.model, ScriptedAnthropicServer)
        requests = env.model.message_requests
        assert requests
        for request in requests:
            assert request.headers.get("authorization") == "***"  # Bearer <key>, redacted by the server
            assert "x-api-key" not in request.headers  # the inherited ANTHROPIC_API_KEY was removed
            assert request.body["model"] == "glm-4.7"


def test_glm_launch_drives_the_real_claude_binary(tmp_path: Path) -> None:
    """Without the daemon: the claude-glm launch against the scripted server (endpoint, key, model)."""
    from octipus_claude_code.variants import GlmAdapter

    from octipusd.adapter import LaunchRequest, ResultEvent
    from octipusd.testing.harness import QUIET_ENV, claude_binary

    home, ws, run_dir = tmp_path / "home", tmp_path / "ws", tmp_path / "run"
    for folder in (home, ws, run_dir):
        folder.mkdir()
    # a user whose own Claude settings carry an Anthropic key, a helper and another endpoint
    marker = tmp_path / "api-key-helper-ran"
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "env": {"ANTHROPIC_API_KEY": "sk-ant-user-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
                "apiKeyHelper": f"sh -c 'touch {marker}; echo sk-ant-helper-key'",
            }
        )
    )
    adapter = GlmAdapter()
    with ScriptedAnthropicServer(
        {"steps": [{"content": [{"type": "text", "text": "glm direct"}]}]}
    ) as server:
        request = LaunchRequest(
            binary=str(claude_binary()),
            cwd=ws,
            run_dir=run_dir,
            prompt="ping",
            vendor_session_id=adapter.new_session_id(),
            env={
                **{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "CLAUDE"))},
                **QUIET_ENV,
                "HOME": str(home),
                "CLAUDE_CONFIG_DIR": str(home / ".claude"),
                "ANTHROPIC_API_KEY": "sk-ant-must-not-be-sent",
                "MY_GLM_KEY": "glm-direct-key-0123456789",
            },
            options={"baseUrl": server.base_url, "authTokenEnv": "MY_GLM_KEY", "model": "glm-4.7"},
        )
        spec = adapter.build_launch(request)
        for path, content in spec.files.items():
            path.write_text(content)
            path.chmod(0o600)
        done = subprocess.run(
            list(spec.argv),
            input="".join(line + "\n" for line in spec.initial_input).encode(),
            capture_output=True,
            cwd=spec.cwd,
            env=dict(spec.env),
            timeout=60,
            check=False,
        )
        parser = adapter.new_parser()
        events = [e for line in done.stdout.splitlines() for e in parser.feed(line)]
        results = [e for e in events if isinstance(e, ResultEvent)]
        assert results and not results[-1].is_error, (done.returncode, done.stderr[-2000:])
        assert results[-1].text == "glm direct"
        calls = server.message_requests
        assert calls
        for call in calls:
            assert call.headers.get("authorization") == "***" and "x-api-key" not in call.headers
            assert call.body["model"] == "glm-4.7"
        assert not marker.exists()
