"""The space-mode shell guard (octipusd.policy.shellguard): decisions, the hook entry point, the helper."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from octipusd.adapterkit import bridge_helper_path, shell_guard_command
from octipusd.bridge import helper
from octipusd.policy import shellguard
from octipusd.policy.shellguard import GUARDED_NAMES, command_decision, guard_decision, guarded_name


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A workspace holding .claude/settings.json, a plain src/ folder and a link to .claude."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    workspace = tmp_path / "ws"
    (workspace / ".claude").mkdir(parents=True)
    (workspace / ".claude" / "settings.json").write_text("{}")
    (workspace / "src").mkdir()
    (workspace / "src" / "main.py").write_text("print(1)\n")
    (workspace / "link").symlink_to(workspace / ".claude")
    return workspace


def hook(tool: str, tool_input: Any, cwd: Path | str) -> dict[str, Any]:
    return {
        "session_id": "s",
        "transcript_path": "/t.jsonl",
        "cwd": str(cwd),
        "permission_mode": "default",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": "toolu_1",
    }


def is_deny(decision: dict[str, Any] | None) -> bool:
    if decision is None:
        return False
    output = decision["hookSpecificOutput"]
    assert output["hookEventName"] == "PreToolUse"
    assert output["permissionDecision"] == "deny"
    assert output["permissionDecisionReason"].startswith("Octipus shell guard:")
    return True


# ---------------------------------------------------------------------------- file tools


@pytest.mark.parametrize("name", sorted(GUARDED_NAMES))
@pytest.mark.parametrize("tool", ["Write", "Edit", "MultiEdit"])
def test_file_tools_deny_every_guarded_name(ws: Path, tool: str, name: str) -> None:
    path = ws / name / "config.toml" if not name.endswith(".json") else ws / name
    decision = guard_decision(hook(tool, {"file_path": str(path), "content": "x"}, ws))
    assert is_deny(decision)
    assert decision is not None and name in decision["hookSpecificOutput"]["permissionDecisionReason"]


def test_notebook_edit_uses_notebook_path(ws: Path) -> None:
    assert is_deny(guard_decision(hook("NotebookEdit", {"notebook_path": str(ws / ".agents/n.ipynb")}, ws)))
    assert guard_decision(hook("NotebookEdit", {"notebook_path": str(ws / "n.ipynb")}, ws)) is None


@pytest.mark.parametrize(
    "path",
    [
        "deep/er/.codex/config.toml",  # any depth
        ".claude/settings.json",  # relative to cwd
        "link/settings.json",  # a symlink to .claude
        "src/../.gemini/settings.json",
        ".CLAUDE/settings.json",  # case-insensitive
        "~/.vibe/config.toml",
        "sub/.mcp.json",
    ],
)
def test_file_paths_denied(ws: Path, path: str) -> None:
    assert is_deny(guard_decision(hook("Write", {"file_path": path, "content": "x"}, ws)))


@pytest.mark.parametrize(
    "path", ["src/main.py", "notes.claude", ".claude-backup/x", "mcp.json", ".mcp.json.bak"]
)
def test_file_paths_allowed(ws: Path, path: str) -> None:
    assert guard_decision(hook("Edit", {"file_path": str(ws / path)}, ws)) is None


def test_file_tool_without_a_path_is_denied(ws: Path) -> None:
    assert is_deny(guard_decision(hook("Write", {"content": "x"}, ws)))
    assert is_deny(guard_decision(hook("Edit", {"file_path": 3}, ws)))
    assert is_deny(guard_decision(hook("Write", "not an object", ws)))


def test_guarded_name_reports_the_component(ws: Path) -> None:
    assert guarded_name(str(ws / "link/x"), str(ws)) == ".claude"
    assert guarded_name("a/.Codex/b", "/") == ".Codex"
    assert guarded_name("src/main.py", str(ws)) is None


# ---------------------------------------------------------------------------- Bash


DENIED = [
    "echo x > .claude/settings.json",
    "echo x >> ~/.claude/settings.json",
    "echo x &> .mcp.json",
    "echo x >| .codex/config.toml",
    "cat a | tee .mcp.json",
    "cp a .claude/",
    "cp -t .gemini a b",
    "mv a .codex/config.toml",
    "ln -s /tmp/evil .gemini",
    "install -D f .agents/skills/x.md",
    "rsync -a x/ .vibe/",
    "mkdir -p .claude/commands",
    "touch .mcp.json",
    "sed -i s/a/b/ .claude/settings.json",
    "rm -rf .claude",
    "rm .claude.json",
    "dd if=/dev/zero of=.claude/x",
    "echo x > link/settings.json",  # through the symlink, no name on the line
    "touch link/new",
    "touch .{claude,x}/y",  # brace expansion
    "rm -rf .c*",  # a glob that matches .claude and .codex
    "D=.claude; touch $D/x",
    "echo a\ntouch .claude/x",  # newline separates commands
    "echo x#; touch .claude/y",  # '#' inside a word is not a comment
    "cat <<EOF > .claude/x\nhi\nEOF",
    "python3 -c \"open('.claude/settings.json','w').write('{}')\"",
    "bash -c 'cd .claude && touch settings.json'",
    "(echo x)>.claude/y",
    "echo;>.claude/ls",
    "for f in .claude/*; do rm $f; done",
    "echo .claude/x | xargs rm",
    "cd .claude && touch settings.json",
    "git checkout -- .claude/settings.json",
    "ls .claude; npm test",  # conservative: a mention and a writing command on one line
    "rm -rf .",  # sweeps the workspace's .claude
    "find . -name '*.json' -delete",
    "git clean -fdx",
    "echo 'unbalanced > .claude/x",  # cannot be parsed, mentions a guarded name
]

ALLOWED = [
    "echo hi > out.txt",
    "npm test",
    "cat .claude/settings.json",
    "ls -la .claude",
    "grep -r key .claude | head -5",
    "ls .claude 2>&1 | wc -l",
    "cat .claude/settings.json > /dev/null",
    "cd .claude && ls",
    "for f in .claude/*; do cat $f; done",
    "D=.claude; ls $D",
    "find .claude -name '*.json'",
    "rm -rf src",
    "rm -rf *",  # '*' does not match dot names
    "echo x > foo.claude",
    "echo 'unbalanced",
    "",
]


@pytest.mark.parametrize("command", DENIED)
def test_bash_denied(ws: Path, command: str) -> None:
    assert is_deny(guard_decision(hook("Bash", {"command": command}, ws))), command


@pytest.mark.parametrize("command", ALLOWED)
def test_bash_allowed(ws: Path, command: str) -> None:
    assert guard_decision(hook("Bash", {"command": command}, ws)) is None, command


def test_cwd_inside_configuration_denies_any_write(ws: Path) -> None:
    """Claude's hook cwd follows the Bash tool's directory (observed with claude 2.1.197)."""
    inside = ws / ".claude"
    assert is_deny(command_decision("touch settings.json", str(inside)))
    assert is_deny(command_decision("npm install", str(inside)))
    assert command_decision("ls", str(inside)) is None


def test_recursive_delete_of_home_is_denied(ws: Path) -> None:
    home = Path(os.environ["HOME"])
    (home / ".codex").mkdir()
    assert is_deny(command_decision("rm -rf ~", str(ws / "src")))
    assert is_deny(command_decision(f"rm -r {home.parent}", str(ws / "src")))


def test_bash_without_a_command_is_denied(ws: Path) -> None:
    assert is_deny(guard_decision(hook("Bash", {"description": "x"}, ws)))


def test_no_opinion_on_other_tools_and_events(ws: Path) -> None:
    assert guard_decision(hook("Read", {"file_path": str(ws / ".claude/settings.json")}, ws)) is None
    assert guard_decision(hook("mcp__octipus__write_file", {"path": ".claude/x"}, ws)) is None
    event = {**hook("Write", {"file_path": str(ws / ".claude/x")}, ws), "hook_event_name": "PostToolUse"}
    assert guard_decision(event) is None


def test_missing_cwd_uses_the_process_directory(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ws)
    decision = guard_decision({"tool_name": "Write", "tool_input": {"file_path": "link/x"}})
    assert is_deny(decision)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([*"ab .-/>|&;()'\"\\$*{},\n#=~<", ".claude", "rm", "touch"])).map("".join))
def test_command_decision_never_raises(command: str) -> None:
    decision = command_decision(command, "/nonexistent-octipus-ws")
    assert decision is None or is_deny(decision)


# ---------------------------------------------------------------------------- entry points


def run_main(text: str, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = shellguard.main(args, stdin=io.StringIO(text), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def test_main_prints_the_denial(ws: Path) -> None:
    code, out, err = run_main(json.dumps(hook("Write", {"file_path": str(ws / ".mcp.json")}, ws)))
    assert code == 0 and err == ""
    assert is_deny(json.loads(out))


def test_main_prints_nothing_without_an_opinion(ws: Path) -> None:
    assert run_main(json.dumps(hook("Bash", {"command": "ls"}, ws))) == (0, "", "")


@pytest.mark.parametrize("text", ["", "not json", "[]", '{"tool_input": {}}', '{"tool_name": 1}'])
def test_main_malformed_input_exits_2(text: str) -> None:
    code, out, err = run_main(text)
    assert code == 2 and out == ""
    assert err.startswith("octipus shell guard:") and "refused" in err


def test_main_refuses_arguments() -> None:
    assert run_main("{}", "--allow")[0] == 2


def test_main_fails_closed_on_an_internal_error(monkeypatch: pytest.MonkeyPatch, ws: Path) -> None:
    def boom(_: object) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(shellguard, "guard_decision", boom)
    code, out, err = run_main(json.dumps(hook("Bash", {"command": "ls"}, ws)))
    assert code == 2 and out == "" and "internal error RuntimeError" in err
    assert "Traceback (most recent call last)" in err  # the failure is kept with its traceback


def test_helper_subcommand_needs_no_bridge(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(helper.ENV_URL, raising=False)
    monkeypatch.delenv(helper.ENV_TOKEN, raising=False)
    monkeypatch.setattr(
        sys, "stdin", io.StringIO(json.dumps(hook("Bash", {"command": "touch .mcp.json"}, ws)))
    )
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    assert helper.main(["shell-guard"]) == 0
    assert is_deny(json.loads(out.getvalue()))


def test_installed_console_script_runs_the_guard(ws: Path) -> None:
    """The absolute command the Claude adapter puts in the locked settings works as a hook."""
    command = shell_guard_command()
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"]}
    denied = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(hook("Edit", {"file_path": str(ws / "link/settings.json")}, ws)),
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert denied.returncode == 0, denied.stderr
    assert is_deny(json.loads(denied.stdout))
    allowed = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(hook("Edit", {"file_path": str(ws / "src/main.py")}, ws)),
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert (allowed.returncode, allowed.stdout) == (0, "")
    malformed = subprocess.run(
        ["/bin/sh", "-c", command],
        input="[]",
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )
    assert malformed.returncode == 2 and "refused" in malformed.stderr


def test_guard_command_quotes_the_path_and_fails_closed(tmp_path: Path) -> None:
    missing = tmp_path / "no such dir" / "octipus-bridge"
    command = shell_guard_command(str(missing))
    assert command == f"'{missing}' shell-guard || exit 2"
    result = subprocess.run(
        ["/bin/sh", "-c", command], input=b"{}", capture_output=True, timeout=10, check=False
    )
    assert result.returncode == 2  # a missing helper blocks instead of a non-blocking hook error
    assert shell_guard_command().startswith(bridge_helper_path())
    assert bridge_helper_path() == os.path.join(
        os.path.dirname(os.path.abspath(sys.executable)), "octipus-bridge"
    )
