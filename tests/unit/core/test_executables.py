"""Executable resolution (seed 003): login PATH plus ~/.local/bin and ~/.npm-global/bin; names or absolute paths."""

from __future__ import annotations

import os
from pathlib import Path

from octipusd.runner.executables import login_path, resolve_executable


def _tool(folder: Path, name: str, version: str = "9.9.9 (Tool)") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\necho '{version}'\n")
    path.chmod(0o755)
    return path


def test_login_path_reads_the_login_shell_and_adds_user_folders(tmp_path: Path) -> None:
    shell = tmp_path / "fake-shell"
    shell.write_text('#!/bin/sh\nprintf "%s" "/login/bin:/usr/bin"\n')
    shell.chmod(0o755)
    path = login_path({"SHELL": str(shell), "PATH": "/ignored"}, home=tmp_path)
    assert path.split(":") == [
        "/login/bin",
        "/usr/bin",
        f"{tmp_path}/.local/bin",
        f"{tmp_path}/.npm-global/bin",
    ]


def test_login_path_falls_back_to_the_environment(tmp_path: Path) -> None:
    path = login_path({"SHELL": str(tmp_path / "missing"), "PATH": "/env/bin"}, home=tmp_path)
    assert path.split(":")[0] == "/env/bin"


def test_command_name_found_on_the_search_path_with_version(tmp_path: Path) -> None:
    tool = _tool(tmp_path / ".npm-global" / "bin", "claude")
    search = login_path({"SHELL": "/bin/false", "PATH": "/nonexistent"}, home=tmp_path)
    r = resolve_executable("claude-code", "claude", search, lambda b: (b, "--version"), os.environ)
    assert r.path == str(tool) and r.version == "9.9.9 (Tool)" and r.error is None
    assert r.require() == str(tool)


def test_absolute_path_and_missing_binary(tmp_path: Path) -> None:
    tool = _tool(tmp_path / "opt", "claude")
    assert resolve_executable("claude-code", str(tool), "/nowhere").path == str(tool)
    missing = resolve_executable("claude-code", "claude", str(tmp_path / "empty"))
    assert missing.path is None and missing.searched_path == str(tmp_path / "empty")
    assert str(tmp_path / "empty") in (missing.error or "")
    gone = resolve_executable("claude-code", str(tmp_path / "nope"), "/x")
    assert gone.path is None and "does not exist" in (gone.error or "")
