"""Model rows end to end: the API and octipusctl against a real octipusd, and a session created
from a row running a turn with the real claude binary against the scripted model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from octipusd.adapter import AdapterDefaults, load_adapters
from octipusd.api.app import NOT_DESCRIBED, capabilities_for, check_additive_flags
from octipusd.errors import ApiError, InvalidRequestError
from tests.e2e.conftest import Env

BIN = Path(sys.executable).parent
#: One step: a changed permission mode changes the session fingerprint, so the turn after the row
#: changed starts a new vendor conversation, which plays step 0 again.
PONG = {"steps": [{"content": [{"type": "text", "text": "pong from a model row"}]}]}
#: The scripted model takes an API key from the daemon's environment; a model row (and, until the
#: runtime reads rows, the session's options) must let the vendor inherit it (seed 003
#: "Authentication and fallback").
INHERIT = {"inheritApiKeys": True}


def _ctl(env: Env, *args: str, daemon_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "octipusctl"), *args],
        env=daemon_env or env.daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _error(env: Env, method: str, path: str, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as caught:
        env.client.request(method, path, **kwargs)
    return caught.value


def _running_argv(env: Env, run_id: str) -> list[str]:
    running = next(
        e["data"]
        for e in env.events(run_id)
        if e["kind"] == "run_status" and e["data"]["status"] == "running"
    )
    return list(running["argv"])


def test_model_rows_through_the_api_and_a_turn_from_a_row(octipus: Callable[..., Env]) -> None:
    env = octipus(PONG)
    created = env.client.request(
        "POST",
        "/models",
        json={
            "name": "scripted-sonnet",
            "adapter": "claude-code",
            "model": "claude-scripted-1",
            "permission_mode": "default",
            "additive_flags": ["--no-chrome", "--effort", "high"],
            "metadata": {"cliAgent": {**INHERIT, "sharedUse": False}, "owner": "e2e"},
        },
    )
    assert created["additive_flags"] == ["--no-chrome", "--effort=high"]
    assert created["capabilities"] == {
        "adapter": "Claude Code / GLM / Kimi",
        "octipus_tools": "Scoped MCP",
        "vendor_planning_mode": "plan",
        "activity": "Structured stream",
        "vendor_approval_relay": "Claude permission control requests enter Octipus approvals",
        "transport": None,
        "source": "adapter",
    }
    row_id = created["id"]
    assert env.client.request("GET", f"/models/{row_id}") == created
    assert env.client.request("GET", "/models/scripted-sonnet") == created
    assert [r["name"] for r in env.client.request("GET", "/models")] == ["scripted-sonnet"]

    # rejected when saved: a flag the adapter does not allow (named, with the allowed list), an
    # adapter that is not installed, a bad mode, a bad cliAgent type, a duplicate name
    bad = _error(
        env, "POST", "/models", json={"name": "bad", "adapter": "claude-code", "additive_flags": ["--yolo"]}
    )
    assert (bad.http_status, bad.code) == (400, "invalid_request")
    assert "--yolo" in bad.message and "--no-chrome" in bad.message
    missing = _error(env, "POST", "/models", json={"name": "bad", "adapter": "no-such-cli"})
    assert (
        missing.http_status == 400 and "no-such-cli" in missing.message and "claude-code" in missing.message
    )
    mode = _error(
        env, "POST", "/models", json={"name": "bad", "adapter": "claude-code", "permission_mode": "yolo"}
    )
    assert mode.http_status == 400 and "workspace, full, plan, default" in mode.message
    typed = _error(
        env, "POST", "/models", json={"name": "bad", "adapter": "claude-code", "metadata": {"cliAgent": []}}
    )
    assert typed.http_status == 400 and "metadata.cliAgent must be an object" in typed.message
    duplicate = _error(env, "POST", "/models", json={"name": "scripted-sonnet", "adapter": "claude-code"})
    assert duplicate.http_status == 409 and "scripted-sonnet" in duplicate.message
    patch_bad = _error(env, "PATCH", "/models/scripted-sonnet", json={"additive_flags": ["--effort=extreme"]})
    assert patch_bad.http_status == 400 and "--effort=extreme" in patch_bad.message

    # a session from the row takes its adapter, model and mode; conflicting explicit values are refused
    conflict = _error(
        env,
        "POST",
        "/sessions",
        json={
            "workspace": str(env.daemon.workspace),
            "model_row": "scripted-sonnet",
            "permission_mode": "full",
        },
    )
    assert conflict.http_status == 400 and "permission_mode='full'" in conflict.message
    session_id = env.new_session(model_row="scripted-sonnet", options={**INHERIT, "transport": "stream"})
    session = env.client.request("GET", f"/sessions/{session_id}")
    assert session["model_row_id"] == row_id
    assert session["options"] == {**INHERIT, "transport": "stream"}
    assert (session["adapter"], session["model"], session["permission_mode"]) == (
        "claude-code",
        "claude-scripted-1",
        "default",
    )
    run = env.post(session_id, "ping")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", final
    assert final["result_text"] == "pong from a model row"
    argv = _running_argv(env, run)
    assert "--permission-mode=default" in argv and "--model=claude-scripted-1" in argv
    assert any(
        r.is_messages_call and r.body.get("model") == "claude-scripted-1" for r in env.model.message_requests
    )

    # an update reaches the linked session; a delete detaches it and it keeps working
    updated = env.client.request(
        "PATCH",
        "/models/scripted-sonnet",
        json={"permission_mode": "workspace", "binary": None, "name": "renamed"},
    )
    assert (updated["name"], updated["permission_mode"], updated["id"]) == ("renamed", "workspace", row_id)
    assert env.client.request("GET", f"/sessions/{session_id}")["permission_mode"] == "workspace"
    assert env.client.request("DELETE", "/models/renamed") is None
    gone = _error(env, "GET", f"/models/{row_id}")
    assert gone.http_status == 404 and row_id in gone.message
    detached = env.client.request("GET", f"/sessions/{session_id}")
    assert detached["model_row_id"] is None
    assert (detached["adapter"], detached["model"], detached["permission_mode"]) == (
        "claude-code",
        "claude-scripted-1",
        "workspace",
    )
    assert detached["options"] == {**INHERIT, "sharedUse": False, "transport": "stream"}
    run2 = env.post(session_id, "ping again")
    final2 = env.wait_final(run2)
    assert final2["status"] == "succeeded" and final2["result_text"] == "pong from a model row", final2
    assert "--permission-mode=acceptEdits" in _running_argv(env, run2)


def test_model_rows_through_octipusctl(octipus: Callable[..., Env], tmp_path: Path) -> None:
    env = octipus({"steps": [{"content": [{"type": "text", "text": "pong via octipusctl"}]}]})
    made = _ctl(
        env,
        "models",
        "create",
        "ctl-row",
        "--adapter",
        "claude-code",
        "--model",
        "claude-scripted-2",
        "--flag",
        "--no-chrome",
        "--flag=--effort=low",
        "--meta",
        "cliAgent.inheritApiKeys=true",
        "--meta",
        "cliAgent.maxTurns=7",
        "--meta",
        'owner={"team": "e2e"}',
    )
    assert made.returncode == 0, made.stderr
    assert "ctl-row" in made.stdout
    listed = _ctl(env, "models", "--json")
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    assert row["name"] == "ctl-row" and row["additive_flags"] == ["--no-chrome", "--effort=low"]
    assert row["metadata"] == {
        "cliAgent": {"inheritApiKeys": True, "maxTurns": 7},
        "owner": {"team": "e2e"},
    }
    table = _ctl(env, "models", "list")
    assert table.returncode == 0 and "ctl-row" in table.stdout and "plan" not in table.stdout

    shown = _ctl(env, "models", "show", "ctl-row", daemon_env={**env.daemon.env, "COLUMNS": "250"})
    assert shown.returncode == 0, shown.stderr
    caps = row["capabilities"]
    for text in (
        row["id"],
        "claude-scripted-2",
        "Octipus tools",
        "Vendor planning mode",
        "Vendor approval relay",
        caps["octipus_tools"],
        caps["activity"],
    ):
        assert text in shown.stdout, shown.stdout
    shown_json = json.loads(_ctl(env, "models", "show", row["id"], "--json").stdout)
    assert shown_json == row
    bogus = _ctl(
        env, "models", "create", "bogus-row", "--adapter", "claude-code", "--meta", "cliAgent.transport=exec"
    )
    assert bogus.returncode == 2 and "not a transport of claude-code" in bogus.stderr, bogus.stderr

    changed = _ctl(
        env,
        "models",
        "update",
        "ctl-row",
        "--permission-mode",
        "plan",
        "--meta",
        "cliAgent.sharedUse=false",
        "--unset-meta",
        "cliAgent.maxTurns",
        "--clear-flags",
    )
    assert changed.returncode == 0, changed.stderr
    after = env.client.request("GET", "/models/ctl-row")
    assert after["permission_mode"] == "plan" and after["additive_flags"] == []
    assert after["metadata"]["cliAgent"] == {"inheritApiKeys": True, "sharedUse": False}

    # bad input exits 2 and names what was wrong; a conflict exits 1
    bad_flag = _ctl(
        env, "models", "create", "bad", "--adapter", "claude-code", "--flag", "--dangerously-skip-permissions"
    )
    assert bad_flag.returncode == 2, bad_flag.stderr
    assert "--dangerously-skip-permissions" in bad_flag.stderr and "--no-chrome" in bad_flag.stderr
    bad_adapter = _ctl(env, "models", "create", "bad", "--adapter", "no-such-cli")
    assert bad_adapter.returncode == 2 and "installed adapters" in bad_adapter.stderr
    bad_meta = _ctl(env, "models", "create", "bad", "--adapter", "claude-code", "--meta", "no-equals-sign")
    assert bad_meta.returncode == 2 and "KEY=JSON" in bad_meta.stderr
    bad_type = _ctl(env, "models", "update", "ctl-row", "--meta", "cliAgent.sharedUse=1")
    assert bad_type.returncode == 2 and "sharedUse must be a boolean" in bad_type.stderr
    duplicate = _ctl(env, "models", "create", "ctl-row", "--adapter", "claude-code")
    assert duplicate.returncode == 1 and "ctl-row" in duplicate.stderr
    unknown = _ctl(env, "models", "show", "nope")
    assert unknown.returncode == 2 and "nope" in unknown.stderr
    assert [r["name"] for r in env.client.request("GET", "/models")] == ["ctl-row"]

    # a new session from the row runs a turn; explicit values that differ from the row's are refused
    refused = _ctl(env, "run", "x", "--model-row", "ctl-row", "--permission-mode", "full")
    assert refused.returncode == 2 and "permission_mode='full'" in refused.stderr
    ran = _ctl(
        env,
        "run",
        "ping",
        "--model-row",
        "ctl-row",
        "--option",
        "inheritApiKeys=true",
        "--workspace",
        str(env.daemon.workspace),
        "--approve",
        "no",
        "--json",
    )
    assert ran.returncode == 0, ran.stderr + ran.stdout
    lines = [json.loads(line) for line in ran.stdout.splitlines()]
    session_id = lines[0]["session_id"]
    assert any(e.get("kind") == "text" and e["data"]["text"] == "pong via octipusctl" for e in lines)
    session = env.client.request("GET", f"/sessions/{session_id}")
    assert session["model_row_id"] == row["id"] and session["permission_mode"] == "plan"
    assert session["options"] == INHERIT
    argv = _running_argv(env, lines[0]["run_id"])
    assert "--permission-mode=plan" in argv and "--model=claude-scripted-2" in argv

    deleted = _ctl(env, "models", "delete", "ctl-row")
    assert deleted.returncode == 0, deleted.stderr
    assert _ctl(env, "models", "--json").stdout.strip() == "[]"
    assert env.client.request("GET", f"/sessions/{session_id}")["model_row_id"] is None
    again = _ctl(env, "models", "delete", "ctl-row")
    assert again.returncode == 2 and "ctl-row" in again.stderr

    down = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "nothing-runs-here")}
    down.pop("OCTIPUS_DAEMON__SOCKET", None)
    assert _ctl(env, "models", daemon_env=down).returncode == 3


# The daemon's row checks as pure functions, against the installed adapters: each adapter checks
# its own flags and declares its capability row (per transport); an adapter that declares neither
# (built on AdapterDefaults only) accepts no flag and shows its capabilities as not described.

ADAPTERS = load_adapters()


class _Plugin(AdapterDefaults):
    """A third-party adapter declaring only what it must: no flags, no capability row."""

    name = "plugin-cli"
    display_name = "Plugin CLI"
    supports_resume = False


@pytest.mark.parametrize(
    ("adapter", "flags", "expected"),
    [
        (
            "codex",
            ["--strict-config", "--color", "always", "--strict-config"],
            ("--strict-config", "--color=always"),
        ),
        ("codex", ["--color=never"], ("--color=never",)),
        (
            "antigravity",
            ["--effort", "high", "--disable-slash-commands"],
            ("--effort=high", "--disable-slash-commands"),
        ),
        ("vibe", [], ()),
        ("claude-glm", ["--no-chrome", "--effort", "max"], ("--no-chrome", "--effort=max")),
    ],
)
def test_additive_flags_are_normalized_by_the_adapter(
    adapter: str, flags: list[str], expected: tuple[str, ...]
) -> None:
    assert check_additive_flags(ADAPTERS[adapter], flags) == expected


@pytest.mark.parametrize(
    ("adapter", "flags", "named", "allowed"),
    [
        ("codex", ["--sandbox", "danger-full-access"], "--sandbox", "--strict-config, --color"),
        ("codex", ["--color"], "--color", "--strict-config, --color"),
        ("codex", ["--strict-config=yes"], "--strict-config", "--strict-config, --color"),
        ("antigravity", ["--mode=auto"], "--mode=auto", "--disable-slash-commands, --effort"),
        ("vibe", ["--agent", "auto"], "--agent", "no additive flags"),
        ("claude-kimi", ["--permission-mode", "bypassPermissions"], "--permission-mode", "--no-chrome"),
    ],
)
def test_a_disallowed_flag_is_named_with_the_allowed_list(
    adapter: str, flags: list[str], named: str, allowed: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        check_additive_flags(ADAPTERS[adapter], flags)
    assert named in caught.value.message and allowed in caught.value.message
    assert caught.value.http_status == 400 and caught.value.code == "invalid_request"


def test_an_adapter_that_declares_no_flags_refuses_every_flag_and_describes_nothing() -> None:
    plugin = _Plugin()
    assert check_additive_flags(plugin, []) == ()  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match=r"'--anything' is not allowed: Plugin CLI declares no"):
        check_additive_flags(plugin, ["--anything"])  # type: ignore[arg-type]
    caps = capabilities_for("plugin-cli", plugin, {"transport": "x"})  # type: ignore[arg-type]
    assert (caps.adapter, caps.source, caps.transport) == ("Plugin CLI", "undeclared", "x")
    assert caps.octipus_tools == caps.vendor_approval_relay == NOT_DESCRIBED
    gone = capabilities_for("uninstalled-cli", None, {})
    assert (gone.adapter, gone.source, gone.activity) == ("uninstalled-cli", "undeclared", NOT_DESCRIBED)


@pytest.mark.parametrize(
    ("adapter", "transport", "planning", "activity", "relay"),
    [
        ("claude-code", None, "plan", "Structured stream", "Claude permission control requests"),
        ("claude-kimi", None, "plan", "Structured stream", "Claude permission control requests"),
        ("codex", None, "read-only sandbox", "Structured stream", "app-server: command and MCP approvals"),
        ("codex", "app-server", "read-only sandbox", "Structured stream", "app-server: command and MCP"),
        ("codex", "exec", "read-only sandbox", "Structured stream", "noninteractive sandbox policy"),
        ("vibe", None, "plan agent", "Structured stream over ACP", "ACP permission requests"),
        ("vibe", "headless", "plan agent", "Buffered", "Vendor agent mode; no interactive relay"),
        ("antigravity", None, "plan mode", "Buffered text", "Vendor mode; no interactive relay"),
    ],
)
def test_capabilities_follow_the_seed_table_and_the_transport(
    adapter: str, transport: str | None, planning: str, activity: str, relay: str
) -> None:
    options = {"transport": transport} if transport else {}
    caps = capabilities_for(adapter, ADAPTERS[adapter], options)
    assert (caps.source, caps.transport) == ("adapter", transport)
    assert (caps.vendor_planning_mode, caps.activity) == (planning, activity)
    assert relay in caps.vendor_approval_relay
    assert caps.octipus_tools == ("Terminal bridge" if adapter == "antigravity" else "Scoped MCP")
    labels = {"codex": "Codex CLI", "vibe": "Mistral Vibe", "antigravity": "Antigravity"}
    assert caps.adapter == labels.get(adapter, "Claude Code / GLM / Kimi")
