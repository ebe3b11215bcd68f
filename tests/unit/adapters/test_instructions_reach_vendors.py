"""Octipus's instructions and the vendor-side tool timeout reach every adapter's launch (issue 14 items 1, 5).

Each adapter takes the run's system instructions on its own path (Claude ``--append-system-prompt``,
Codex ``developer_instructions`` / ``developerInstructions``, Vibe's tagged block in the prompt,
Antigravity's guide in the prompt) and never by writing ``AGENTS.md`` or ``GEMINI.md``; each that
has an MCP client gets the bridge's tool timeout. The real binaries are driven in
``tests/e2e/test_daemon.py`` (Claude's system prompt) and ``tests/unit/bridge/test_bridge_vendor_timeout.py``.
"""

from __future__ import annotations

import contextlib
import json
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from octipus_antigravity import AntigravityAdapter
from octipus_claude_code import ClaudeCodeAdapter
from octipus_codex import CodexAdapter, toml_string
from octipus_codex.launch import app_server_plan
from octipus_vibe import VibeAdapter
from octipus_vibe.acp import SessionPlan

from octipusd.adapter import Adapter, BridgeEndpoint, LaunchRequest, LaunchSpec
from octipusd.tools import CHILD_ROLES, DEFAULT_TOOLS, OCTIPUS_INSTRUCTIONS, child_tools, run_instructions

BRIDGE = BridgeEndpoint(
    url="http://127.0.0.1:40999/mcp", token="tok_" + "B" * 43, tool_timeout_seconds=1234.5
)

CASES: dict[str, tuple[Adapter, str, dict[str, Any]]] = {
    "claude": (ClaudeCodeAdapter(), "/opt/claude", {}),
    "codex-app-server": (CodexAdapter(), "/opt/codex", {}),
    "codex-exec": (CodexAdapter(), "/opt/codex", {"transport": "exec"}),
    "vibe-acp": (VibeAdapter(), "/opt/vibe/bin/vibe-acp", {}),
    "vibe-headless": (VibeAdapter(), "/opt/vibe/bin/vibe", {"transport": "headless"}),
    "antigravity": (AntigravityAdapter(bridge_helper="/opt/octipus/bin/octipus-bridge"), "/opt/agy", {}),
}


def _strings(value: Any) -> Iterator[str]:
    """Every string in a parsed JSON value, and the JSON values inside strings that hold one."""
    if isinstance(value, str):
        yield value
        if value[:1] in "[{":
            with contextlib.suppress(ValueError):
                yield from _strings(json.loads(value))
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _launch(tmp_path: Path, case: str, system_prompt: str) -> tuple[LaunchSpec, list[str]]:
    """The built launch of ``case`` and every text its vendor receives: argv, environment, written
    files, stdin lines (decoded) and, for Codex's app-server, the ``thread/start`` params the parser
    sends once Codex answered ``config/read``."""
    adapter, binary, options = CASES[case]
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)
    request = LaunchRequest(
        binary=binary,
        cwd=tmp_path / "ws",
        run_dir=tmp_path / "run",
        prompt="the task",
        vendor_session_id=adapter.new_session_id(),
        bridge=BRIDGE,
        env={"PATH": "/usr/bin", "HOME": "/home/u"},
        system_prompt=system_prompt,
        options=options,
    )
    spec = adapter.build_launch(request)
    sent: list[Any] = [json.loads(line) for line in spec.initial_input]
    if case.startswith("codex"):  # codex -c key=<TOML value>
        sent += [tomllib.loads(a) for flag, a in zip(spec.argv, spec.argv[1:], strict=False) if flag == "-c"]
    if case == "codex-app-server":
        sent.append(app_server_plan(request).thread_params)
    sent += [
        p.prompt for line in sent if isinstance(line, dict) if (p := SessionPlan.from_id(line.get("id")))
    ]
    return spec, [*spec.argv, *spec.env.values(), *spec.files.values(), *_strings(sent)]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("role", [None, "coding"])
def test_the_instructions_reach_the_vendor_with_the_invocation(
    tmp_path: Path, case: str, role: str | None
) -> None:
    instructions = run_instructions(role)
    spec, texts = _launch(tmp_path, case, instructions)
    assert any(instructions in text for text in texts), case
    # never by rewriting the project's agent files (seed 003 "How tools and context work")
    assert not [p for p in spec.files if p.name in {"AGENTS.md", "GEMINI.md", "CLAUDE.md"}]
    assert all(p.is_relative_to(tmp_path / "run") for p in spec.files), spec.files


def test_where_each_vendor_takes_them(tmp_path: Path) -> None:
    claude, _ = _launch(tmp_path, "claude", OCTIPUS_INSTRUCTIONS)
    assert f"--append-system-prompt={OCTIPUS_INSTRUCTIONS}" in claude.argv
    assert OCTIPUS_INSTRUCTIONS not in json.dumps(claude.initial_input)  # not in the user's message
    exec_argv, _ = _launch(tmp_path, "codex-exec", OCTIPUS_INSTRUCTIONS)
    assert f"developer_instructions={toml_string(OCTIPUS_INSTRUCTIONS)}" in exec_argv.argv
    _, texts = _launch(tmp_path, "codex-app-server", OCTIPUS_INSTRUCTIONS)
    assert OCTIPUS_INSTRUCTIONS in texts  # thread/start's developerInstructions, exactly
    _, texts = _launch(tmp_path, "vibe-acp", OCTIPUS_INSTRUCTIONS)
    assert any(
        t.startswith(f"<system-instructions>\n{OCTIPUS_INSTRUCTIONS}\n</system-instructions>") for t in texts
    )


def test_the_instructions_are_one_stable_text_per_role() -> None:
    assert run_instructions(None) == OCTIPUS_INSTRUCTIONS == run_instructions(None)
    for role, prompt in CHILD_ROLES.items():
        assert run_instructions(role) == f"{OCTIPUS_INSTRUCTIONS}\n\n{prompt}"
    for name in (
        "get_cli_run_context",
        "get_work_plan",
        "update_work_plan",
        "spawn_child",
        "collect_children",
    ):
        assert name in OCTIPUS_INSTRUCTIONS
    assert "final answer" in OCTIPUS_INSTRUCTIONS and "do not retry" in OCTIPUS_INSTRUCTIONS
    assert len(OCTIPUS_INSTRUCTIONS) < 2200  # short: it is sent on every invocation


def test_the_vault_workflow_is_in_the_instructions_and_only_where_placeholders_resolve() -> None:
    # seed 003: managed agents get the guidance; the shell tool's env parameter describes it
    for phrase in ("{{secret:github_token}}", "in env", "ask for the name, not the token", "octipus-bridge"):
        assert phrase in OCTIPUS_INSTRUCTIONS, phrase
    for spec in (*DEFAULT_TOOLS, *child_tools(True), *child_tools(False)):
        env = spec.input_schema.get("properties", {}).get("env", {})
        promised = "{{secret:" in json.dumps(env)
        assert promised == spec.secret_env, spec.name
        assert "{{secret:" not in spec.description, spec.name
    assert any(spec.secret_env for spec in DEFAULT_TOOLS)


@pytest.mark.parametrize("case", ["claude", "codex-app-server", "codex-exec", "vibe-headless"])
def test_the_bridge_tool_timeout_reaches_the_vendor_config(tmp_path: Path, case: str) -> None:
    spec, texts = _launch(tmp_path, case, OCTIPUS_INSTRUCTIONS)
    if case == "claude":
        (config,) = spec.files.values()
        assert json.loads(config)["mcpServers"]["octipus"]["timeout"] == 1234500
        assert spec.env["CLAUDE_CODE_MCP_TOOL_IDLE_TIMEOUT"] == "1234500"
    elif case == "codex-exec":
        assert "mcp_servers.octipus.tool_timeout_sec=1234.5" in spec.argv
    elif case == "codex-app-server":
        assert any("1234.5" in text for text in texts) is False  # a number, not a string
        plan = app_server_plan(
            LaunchRequest(binary="/opt/codex", cwd=tmp_path, run_dir=tmp_path, prompt="p", bridge=BRIDGE)
        )
        assert plan.thread_params["config"]["mcp_servers"]["octipus"]["tool_timeout_sec"] == 1234.5
    else:
        servers = json.loads(spec.env["VIBE_MCP_SERVERS"])
        assert servers[0]["tool_timeout_sec"] == 1234.5
