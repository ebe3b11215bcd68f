"""Vendor output the real binary cannot be made to produce: a stub CLI speaks Claude's stream-json."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psutil

from octipusd.testing.harness import write_python_stub
from octipusd.testing.stub_cli import ARGV_FILE_ENV, SCRIPT_ENV
from tests.e2e.conftest import Env


def stub_binary(folder: Path, script: Path, **env: str) -> Path:
    """An executable that runs octipusd.testing.stub_cli with this interpreter on ``script``."""
    return write_python_stub(
        folder / "claude-stub", "octipusd.testing.stub_cli", {SCRIPT_ENV: str(script), **env}
    )


def test_malformed_and_3_mib_lines_neither_crash_nor_get_lost(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    actions = [
        {"read_line": True},
        {
            "emit": {
                "type": "system",
                "subtype": "init",
                "session_id": "$SESSION_ID",
                "tools": ["Bash"],
                "mcp_servers": [{"name": "octipus", "status": "connected"}],
            }
        },
        {"emit_raw": "this is {not json"},
        {"emit_big": {"bytes": 3 * 1024 * 1024}},
        {"emit": {"type": "brand_new_event", "payload": {"x": 1}}},
        {
            "emit": {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": "done",
                "session_id": "$SESSION_ID",
                "usage": {"input_tokens": 7, "output_tokens": 3},
            }
        },
        {"exit": 0},
    ]
    script = tmp_path / "stub.json"
    script.write_text(json.dumps(actions))
    env = octipus({"steps": []}, binary=stub_binary(tmp_path, script))
    run = env.post(env.new_session(), "go")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", final
    events = env.events(run)
    unparsed = [e["data"] for e in events if e["kind"] == "unparsed"]
    assert [u["text"] for u in unparsed] == ["this is {not json"]
    texts = [e["data"]["text"] for e in events if e["kind"] == "text"]
    assert texts and max(len(t) for t in texts) >= 3 * 1024 * 1024 - 1024
    unknown = [e["data"] for e in events if e["kind"] == "unknown"]
    assert any(u["raw"]["type"] == "brand_new_event" and u["raw"]["payload"] == {"x": 1} for u in unknown)
    assert final["result_text"] == "done"


def test_bridge_reported_failed_in_init_fails_the_run(octipus: Callable[..., Env], tmp_path: Path) -> None:
    pid_file = tmp_path / "stub.pid"
    actions = [
        {"read_line": True},
        {
            "emit": {
                "type": "system",
                "subtype": "init",
                "session_id": "$SESSION_ID",
                "mcp_servers": [{"name": "octipus", "status": "failed"}],
            }
        },
        {"spawn_background": {"pid_file": str(pid_file), "seconds": 300}},
        {"read_line": True},
        {"sleep": 300},
    ]
    script = tmp_path / "stub.json"
    script.write_text(json.dumps(actions))
    env = octipus({"steps": []}, binary=stub_binary(tmp_path, script))
    run = env.post(env.new_session(), "go")
    final = env.wait_final(run)
    assert final["status"] == "failed"
    assert "MCP bridge 'octipus' as 'failed'" in final["reason"]
    background = int(pid_file.read_text())
    assert not psutil.pid_exists(background) or psutil.Process(background).status() == psutil.STATUS_ZOMBIE


def test_api_keys_reach_the_vendor_only_when_the_row_inherits_them(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    actions = [
        {"read_line": True},
        {
            "emit": {
                "type": "system",
                "subtype": "init",
                "session_id": "$SESSION_ID",
                "mcp_servers": [{"name": "octipus", "status": "connected"}],
            }
        },
        {
            "emit": {
                "type": "result",
                "subtype": "success",
                "is_error": False,
                "result": "ok",
                "session_id": "$SESSION_ID",
            }
        },
        {"exit": 0},
    ]
    script = tmp_path / "stub.json"
    script.write_text(json.dumps(actions))
    record = tmp_path / "argv.json"
    env = octipus(
        {"steps": []},
        extra_env={
            "ANTHROPIC_API_KEY": "sk-ant-daemon-environment",
            "OPENAI_API_KEY": "sk-openai-daemon-environment",
            "CLAUDE_CODE_OAUTH_TOKEN": "oauth-token",
        },
        binary=stub_binary(tmp_path, script, **{ARGV_FILE_ENV: str(record)}),
    )
    assert env.wait_final(env.post(env.new_session(), "go"))["status"] == "succeeded"
    keys = set(json.loads(record.read_text())["env_keys"])
    assert "ANTHROPIC_API_KEY" not in keys and "OPENAI_API_KEY" not in keys
    assert "CLAUDE_CODE_OAUTH_TOKEN" in keys, "Claude's OAuth token variable stays supported"

    inherit = env.new_session(options={"inheritApiKeys": True})
    assert env.wait_final(env.post(inherit, "go"))["status"] == "succeeded"
    keys = set(json.loads(record.read_text())["env_keys"])
    # the backend's own keys (the adapter's api_key_env), not every vendor's
    assert "ANTHROPIC_API_KEY" in keys and "OPENAI_API_KEY" not in keys
