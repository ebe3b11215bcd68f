"""The daemon's private paths are out of the agents' reach (issue 17's review finding): the matching
of :class:`ProtectedPaths` on real folders (symlinks, ``~``, ``..``, commands), the gate's refusal
before the rules, and the composition of the paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from octipus_codex import CodexAdapter

from octipusd.policy.approvals import ApprovalBroker
from octipusd.policy.engine import Policy
from octipusd.policy.gate import PermissionGate
from octipusd.policy.protected import ProtectedPaths
from octipusd.runtime.private import daemon_private_paths
from octipusd.settings import Settings
from octipusd.store import Store
from octipusd.toolkit import CallContext

PRIVATE = "the Octipus daemon's private data"


class Layout:
    """A home with the daemon's data folder, a workspace beside it, and a symlink into the data."""

    def __init__(self, root: Path) -> None:
        self.home = root / "home"
        self.data = self.home / ".local" / "share" / "octipus"
        self.data.mkdir(parents=True)
        self.key = self.data / "vault.key"
        self.key.write_text("k")
        self.db = self.data / "octipus.db"
        self.db.write_text("")
        self.workspace = self.home / "project"
        self.workspace.mkdir()
        (self.workspace / "notes.txt").write_text("notes")
        self.link = self.workspace / "innocent"
        self.link.symlink_to(self.data)
        self.protected = ProtectedPaths((self.data, self.key, self.db), home=str(self.home))

    def refusal(self, tool: str, arguments: dict[str, Any], workspace: Path | None = None) -> str | None:
        return self.protected.refusal(tool, arguments, str(workspace or self.workspace))


@pytest.fixture
def layout(tmp_path: Path) -> Layout:
    return Layout(tmp_path)


@pytest.mark.parametrize(
    "arguments",
    [
        {"file_path": "{data}/vault.key"},
        {"file_path": "{data}"},
        {"file_path": "~/.local/share/octipus/vault.key"},
        {"file_path": "$HOME/.local/share/octipus/octipus.db"},
        {"file_path": "../.local/share/octipus/vault.key"},  # relative to the workspace
        {"file_path": "{workspace}/sub/../../.local/share/octipus/vault.key"},
        {"file_path": "innocent/vault.key"},  # a symlink into the data folder
        {"notebook_path": "{data}/x.ipynb"},
        {"filePath": "{data}/vault.key"},
        {"paths": ["notes.txt", "{data}/octipus.db"]},
        {"changes": [{"path": "notes.txt"}, {"path": "{data}/vault.key"}]},  # Codex's fileChange
        {"command": "ls", "cwd": "{data}"},
    ],
)
def test_a_path_argument_inside_a_protected_path_is_refused(
    layout: Layout, arguments: dict[str, Any]
) -> None:
    def fill(value: Any) -> Any:
        if isinstance(value, str):
            return value.format(data=layout.data, workspace=layout.workspace)
        if isinstance(value, list):
            return [fill(v) for v in value]
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        return value

    refusal = layout.refusal("cli-native:Read", fill(arguments))
    assert refusal is not None and PRIVATE in refusal and "no rule, grant or approval" in refusal, refusal
    assert str(layout.data) in refusal


@pytest.mark.parametrize(
    "arguments",
    [
        {"file_path": "notes.txt"},
        {"file_path": "{home}/.local/share/octipus-other/vault.key"},  # a sibling that shares the prefix
        {"file_path": "{home}/.local/share"},  # a parent, read by a tool that does not search
        {"file_path": "~/.bashrc"},
        {"command": "cat notes.txt", "cwd": "."},
        {"path": "{home}/.local"},
    ],
)
def test_other_paths_and_parents_of_non_searching_tools_pass(
    layout: Layout, arguments: dict[str, Any]
) -> None:
    filled = {k: v.format(home=layout.home) if isinstance(v, str) else v for k, v in arguments.items()}
    assert layout.refusal("cli-native:Read", filled) is None
    assert layout.refusal("cli-native:LS", filled) is None


def test_a_recursive_search_over_a_folder_holding_the_data_is_refused(layout: Layout) -> None:
    home = str(layout.home)
    for tool, arguments in [
        ("cli-native:Grep", {"pattern": "token", "path": home}),
        ("cli-native:Grep", {"pattern": "token", "path": "~"}),
        ("cli-native:Glob", {"pattern": "**/*", "path": f"{home}/.local"}),
        ("cli-native:Glob", {"pattern": f"{home}/.local/**/*.key"}),  # an absolute pattern
        ("cli-native:Glob", {"pattern": "../.local/**"}),  # a relative one leaving the workspace
        ("cli-native:Grep", {"pattern": "token"}),  # no path: the workspace, here the home
    ]:
        workspace = layout.home if "path" not in arguments and tool.endswith("Grep") else None
        refusal = layout.refusal(tool, arguments, workspace)
        assert refusal is not None and "recursively" in refusal and PRIVATE in refusal, (tool, arguments)
        assert "search a folder that does not hold it" in refusal
    # searches that cannot reach it
    assert layout.refusal("cli-native:Grep", {"pattern": "token"}) is None
    assert layout.refusal("cli-native:Glob", {"pattern": "**/*.py", "path": str(layout.workspace)}) is None
    assert layout.refusal("cli-native:Glob", {"pattern": f"{home}/project/**"}) is None


@pytest.mark.parametrize(
    "command",
    [
        "cat {data}/vault.key",
        "cat '{data}/vault.key'",
        'base64 "{data}"/vault.key',
        "cat ~/.local/share/octipus/vault.key",
        "cat $HOME/.local/share/octipus/vault.key | base64",
        "cat ${{HOME}}/.local/share/octipus/octipus.db",
        "sqlite3 {data}/octipus.db .dump",
        "cp -r {data} /tmp/x",
        "cat ../.local/share/octipus/vault.key",  # a relative word from the workspace
        "cd /tmp && cat <innocent/vault.key",  # through the symlink
        "tar --file=out.tar -c {data}",
        "echo unbalanced 'quote && cat {data}/vault.key",
    ],
)
def test_a_command_naming_a_protected_path_is_refused(layout: Layout, command: str) -> None:
    text = command.format(data=layout.data)
    for tool in ("shell__run", "cli-native:Bash"):
        refusal = layout.refusal(tool, {"command": text})
        assert refusal is not None and PRIVATE in refusal and "command" in refusal, (tool, text)


@pytest.mark.parametrize(
    "command",
    [
        "cat notes.txt",
        "ls {home}/.local/share",
        "cat {home}/.local/share/octipus-old/vault.key",
        "grep -r octipus .",
        "echo vault.key",
    ],
)
def test_commands_that_do_not_name_it_pass(layout: Layout, command: str) -> None:
    assert layout.refusal("shell__run", {"command": command.format(home=layout.home)}) is None


def test_a_folder_holding_the_workspace_stays_open_but_its_listed_files_do_not(layout: Layout) -> None:
    inner = layout.data / "worktree"
    inner.mkdir()
    (inner / "a.txt").write_text("a")
    assert layout.refusal("cli-native:Read", {"file_path": "a.txt"}, inner) is None
    assert layout.refusal("shell__run", {"command": f"cat {inner}/a.txt"}, inner) is None
    refusal = layout.refusal("cli-native:Read", {"file_path": "../vault.key"}, inner)
    assert refusal is not None and str(layout.key) in refusal
    assert layout.refusal("shell__run", {"command": f"cat {layout.db}"}, inner) is not None


def test_a_symlinked_protected_path_is_matched_by_both_names(tmp_path: Path) -> None:
    real = tmp_path / "real-data"
    real.mkdir()
    alias = tmp_path / "data"
    alias.symlink_to(real)
    protected = ProtectedPaths((alias,), home=str(tmp_path / "home"))
    workspace = str(tmp_path)
    for command in (f"cat {alias}/vault.key", f"cat {real}/vault.key"):
        assert protected.refusal("shell__run", {"command": command}, workspace) is not None
    assert protected.refusal("cli-native:Read", {"file_path": f"{real}/k"}, workspace) is not None
    assert ProtectedPaths().refusal("shell__run", {"command": f"cat {real}/k"}, workspace) is None


def test_the_composed_paths_cover_data_keys_database_settings_socket_and_credentials(tmp_path: Path) -> None:
    settings = Settings.model_validate(
        {
            "database": {"url": f"sqlite:///{tmp_path}/elsewhere/o.db"},
            "daemon": {"socket": str(tmp_path / "run/s.sock")},
        }
    )
    env = {"CREDENTIALS_DIRECTORY": str(tmp_path / "creds"), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    paths = daemon_private_paths(settings, tmp_path / "data", None, env)
    for expected in (
        tmp_path / "run",
        tmp_path / "run/s.sock",
        tmp_path / "data",
        tmp_path / "data/vault.key",
        tmp_path / "data/vault.key.next",
        tmp_path / "creds",
        tmp_path / "elsewhere/o.db",
        tmp_path / "elsewhere/o.db-wal",
        tmp_path / "cfg/octipus/config.toml",
    ):
        assert expected in paths, expected
    assert len(paths) == len(set(paths))
    without = daemon_private_paths(settings, tmp_path / "data", tmp_path / "my.toml", {})
    assert tmp_path / "creds" not in without and tmp_path / "my.toml" in without


# ------------------------------------------------------------------------------ the gate


@pytest.mark.anyio
async def test_the_gate_refuses_before_every_rule_grant_and_approval(store: Store, layout: Layout) -> None:
    session = store.create_session(workspace=str(layout.workspace), adapter="codex")
    run = store.create_run(session_id=session.id, prompt="work", owner="test")
    events: list[tuple[str, dict[str, Any]]] = []

    async def emit(run_id: str, kind: str, data: dict[str, Any]) -> None:
        events.append((kind, data))

    for rule in ("cli-native:Read(*)", "cli-native:Bash(cat:*)", "shell__run", "cli-native:commandExecution"):
        store.add_rule(level="allow", rule=rule, created_by="operator")
    gate = PermissionGate(
        store,
        ApprovalBroker(store, timeout_seconds=30),
        emit,
        Policy.from_setting(None),
        tool_aliases=CodexAdapter.tool_aliases,
        protected=layout.protected,
    )
    ctx = CallContext(run_id=run.id, session_id=session.id, workspace=str(layout.workspace), attended=True)
    key = str(layout.key)
    for tool, arguments in [
        ("cli-native:Read", {"file_path": key}),
        ("shell__run", {"command": f"cat {key}"}),
        ("cli-native:commandExecution", {"command": f"cat {key}", "cwd": str(layout.workspace)}),
    ]:
        result = await gate.decide(ctx, tool, arguments, action=tool.removeprefix("cli-native:"))
        assert not result.allowed and PRIVATE in result.reason, (tool, result)
    decisions = [d for k, d in events if k == "policy_decision"]
    assert [d["level"] for d in decisions] == ["deny"] * 3
    assert all(PRIVATE in d["explanation"] for d in decisions)
    assert "approval_requested" not in [k for k, _ in events]
    # the same gate allows what does not reach the data
    allowed = await gate.decide(ctx, "cli-native:Read", {"file_path": "notes.txt"}, action="Read")
    assert allowed.allowed, allowed
