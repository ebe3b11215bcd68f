"""The argv the adapter builds is accepted by the real Claude Code binary (offline, < 15 s).

Each case runs the built launch with the built stdin line against a closed port
(``ANTHROPIC_BASE_URL=http://127.0.0.1:9``, ``CLAUDE_CODE_MAX_RETRIES=0``) and a bridge URL on the
same closed port, with HOME and CLAUDE_CONFIG_DIR in a temporary folder. A parse error would end
the process before any output (``error: option ...``, ``error: unknown option ...``); instead the
binary must print ``system/init`` with the session id, permission mode and model we asked for,
report the bridge as failed (it cannot connect), and end with an error result because the model
endpoint refuses connections.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from dataclasses import replace
from pathlib import Path

import pytest
from octipus_claude_code import ClaudeCodeAdapter, mcp_failure, parse_version

from octipusd.adapter import (
    BridgeEndpoint,
    LaunchRequest,
    LaunchSpec,
    PermissionMode,
    ResultEvent,
    SessionEvent,
    VendorEvent,
)

REPO = Path(__file__).resolve().parents[3]
BINARY = Path(os.environ.get("OCTIPUS_CLAUDE_BINARY", REPO / ".vendor/npm/node_modules/.bin/claude"))

pytestmark = [
    pytest.mark.e2e,
]


def run(spec: LaunchSpec, home: Path) -> tuple[int, str, list[VendorEvent]]:
    for path, content in spec.files.items():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(content)
    env = dict(spec.env)
    env.update(
        HOME=str(home),
        CLAUDE_CONFIG_DIR=str(home / ".claude"),
        ANTHROPIC_BASE_URL="http://127.0.0.1:9",
        ANTHROPIC_API_KEY="sk-ant-test-0000",
        CLAUDE_CODE_MAX_RETRIES="0",
    )
    proc = subprocess.run(
        list(spec.argv),
        input="".join(line + "\n" for line in spec.initial_input).encode(),
        capture_output=True,
        cwd=spec.cwd,
        env=env,
        timeout=12,
        check=False,
    )
    parser = ClaudeCodeAdapter().new_parser()
    events = [e for line in proc.stdout.splitlines() for e in parser.feed(line)]
    return proc.returncode, proc.stderr.decode("utf-8", "replace"), events


def test_version_output_parses() -> None:
    argv = ClaudeCodeAdapter().version_argv(str(BINARY))
    out = subprocess.run(list(argv), capture_output=True, timeout=10, check=True).stdout.decode()
    version = parse_version(out)
    assert version is not None and version.count(".") >= 2


@pytest.mark.parametrize(
    ("mode", "vendor_mode"),
    [(PermissionMode.WORKSPACE, "acceptEdits"), (PermissionMode.FULL, "bypassPermissions")],
)
def test_built_argv_is_accepted(tmp_path: Path, mode: PermissionMode, vendor_mode: str) -> None:
    adapter = ClaudeCodeAdapter()
    workspace, run_dir, home = tmp_path / "ws", tmp_path / "run", tmp_path / "home"
    for folder in (workspace, run_dir, home):
        folder.mkdir(mode=0o700)
    session_id = adapter.new_session_id()
    request = LaunchRequest(
        binary=str(BINARY),
        cwd=workspace,
        run_dir=run_dir,
        prompt="say hi",
        vendor_session_id=session_id,
        model="claude-test-model",
        permission_mode=mode,
        bridge=BridgeEndpoint(url="http://127.0.0.1:9/mcp", token="tok-" + uuid.uuid4().hex),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        additive_flags=(
            "--no-session-persistence",
            "--no-chrome",
            "--disable-slash-commands",
            "--effort=low",
        ),
        system_prompt="Answer briefly. --not-a-flag",
    )
    spec = adapter.build_launch(request)
    code, stderr, events = run(spec, home)
    assert "error: option" not in stderr and "unknown option" not in stderr, stderr
    assert "cannot be used with root" not in stderr, stderr
    sessions = [e for e in events if isinstance(e, SessionEvent)]
    assert sessions, f"no system/init (rc={code}); stderr: {stderr}"
    init = sessions[0]
    assert init.session_id == session_id
    assert init.model == "claude-test-model"
    assert init.raw is not None and init.raw["permissionMode"] == vendor_mode
    assert mcp_failure(init, "octipus") is not None  # nothing listens on port 9
    results = [e for e in events if isinstance(e, ResultEvent)]
    assert len(results) == 1 and results[0].is_error and results[0].session_id == session_id
    assert code == 1  # an error result ends the process with 1 (observed.md §1.4)

    # the resume form of the same launch is accepted too (nothing was persisted, so the id is unknown)
    resumed = adapter.build_launch(replace(request, resume=True, additive_flags=()))
    code, stderr, events = run(resumed, home)
    assert "error: option" not in stderr and "unknown option" not in stderr, stderr
    (result,) = [e for e in events if isinstance(e, ResultEvent)]
    assert adapter.session_missing(result)
    assert code == 1
    assert json.loads(spec.initial_input[0])["message"]["content"] == "say hi"
