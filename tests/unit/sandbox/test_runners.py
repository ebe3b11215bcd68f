"""Finding the shell sandbox's runner, the argv it builds, and the three modes (no command runs
here: ``test_confined_shell.py`` runs real commands in the real bubblewrap)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from octipusd.errors import SandboxUnavailableError
from octipusd.sandbox import (
    RUNNER_DIRS,
    RunnerSearch,
    bwrap_argv,
    confine,
    daemon_hidden_paths,
    docker_sockets,
    firejail_argv,
    masked_paths,
    passed_sockets,
)
from octipusd.sandbox.runners import OFF_REASON
from octipusd.settings_security import ShellSandboxMode
from octipusd.toolkit import RunnerKind, SandboxRunner, ShellSandbox, ShellTerms

BWRAP = SandboxRunner(RunnerKind.BWRAP, Path("/usr/bin/bwrap"))


@pytest.fixture
def var_tmp() -> Iterator[Path]:
    """A folder outside /tmp: a path under the host's /tmp is not masked (the private /tmp hides it)."""
    path = Path(tempfile.mkdtemp(prefix="octipus-argv-test-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def program(folder: Path, name: str, body: str = "exit 0", *, executable: bool = True) -> Path:
    """A real program ``folder/name`` (a shell script) standing in for a runner."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755 if executable else 0o644)
    return path


def test_runners_are_looked_for_only_in_the_three_folders() -> None:
    assert (Path("/usr/bin"), Path("/usr/local/bin"), Path("/bin")) == RUNNER_DIRS
    assert RunnerSearch().dirs == RUNNER_DIRS


def test_a_runner_on_the_path_but_outside_the_folders_is_not_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = tmp_path / "on-path"
    program(on_path, "bwrap")
    program(on_path, "firejail")
    monkeypatch.setenv("PATH", f"{on_path}:{os.environ['PATH']}")
    empty = tmp_path / "empty"
    empty.mkdir()
    found = RunnerSearch([empty]).find(ShellSandboxMode.AUTO)
    assert found.runner is None and not found.in_force
    assert found.unavailable == f"no bwrap in {empty}; no firejail in {empty}"


def test_bwrap_is_preferred_then_firejail_and_the_folders_keep_their_order(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    program(second, "bwrap")
    program(first, "firejail")
    found = RunnerSearch([first, second]).find(ShellSandboxMode.REQUIRED)
    assert found.runner == SandboxRunner(RunnerKind.BWRAP, second / "bwrap")
    assert found.in_force and found.unavailable == ""
    program(first, "bwrap")
    assert RunnerSearch([first, second]).find(ShellSandboxMode.AUTO).runner == SandboxRunner(
        RunnerKind.BWRAP, first / "bwrap"
    )


def test_a_runner_that_cannot_work_here_counts_as_absent_with_its_reason(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    program(folder, "bwrap", "echo 'bwrap: No permissions to create new namespace' >&2; exit 1")
    program(folder, "firejail", "exit 0", executable=False)  # not executable: not a runner
    found = RunnerSearch([folder]).find(ShellSandboxMode.REQUIRED)
    assert found.runner is None
    assert found.unavailable == (
        f"{folder}/bwrap cannot work here: its probe exited 1: bwrap: No permissions to create new "
        f"namespace; no firejail in {folder}"
    )
    program(folder, "firejail", "exit 0")
    assert RunnerSearch([folder]).find(ShellSandboxMode.AUTO).runner == SandboxRunner(
        RunnerKind.FIREJAIL, folder / "firejail"
    )


def test_with_the_sandbox_off_no_runner_is_probed_at_start_up(tmp_path: Path) -> None:
    folder, probed = tmp_path / "bin", tmp_path / "probed"
    program(folder, "bwrap", f"touch {probed}")
    found = RunnerSearch([folder]).find(ShellSandboxMode.OFF)
    assert found.runner is None and found.unavailable == OFF_REASON and not found.in_force
    assert not probed.exists()
    assert RunnerSearch([folder]).find(ShellSandboxMode.AUTO).runner is not None and probed.exists()


def test_a_probe_that_hangs_is_a_reason(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    program(folder, "bwrap", "exec sleep 30")
    found = RunnerSearch([folder], probe_timeout_s=0.2).find(ShellSandboxMode.AUTO)
    assert found.runner is None and "its probe did not end within 0.2 s" in found.unavailable


def test_the_real_bwrap_of_this_machine_passes_its_probe() -> None:
    found = RunnerSearch().find(ShellSandboxMode.AUTO)
    assert found.runner == SandboxRunner(RunnerKind.BWRAP, Path("/usr/bin/bwrap")), found.unavailable


def test_auto_without_a_runner_warns_once_and_required_says_commands_are_refused(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="octipusd.sandbox"):
        auto = RunnerSearch([tmp_path]).find(ShellSandboxMode.AUTO)
        for _ in range(3):  # commands run unconfined and say nothing more
            assert confine(ShellTerms(auto), workspace=tmp_path, cwd=tmp_path, network=False) == ()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "security.shellSandbox=auto found no runner" in warnings[0].getMessage()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="octipusd.sandbox"):
        RunnerSearch([tmp_path]).find(ShellSandboxMode.REQUIRED)
    assert "every shell command is refused" in caplog.records[0].getMessage()


def test_the_modes(tmp_path: Path) -> None:
    ws = tmp_path
    off = ShellSandbox(ShellSandboxMode.OFF, BWRAP)
    assert not off.in_force
    assert confine(ShellTerms(off, host_services=True), workspace=ws, cwd=ws, network=True) == ()
    missing = ShellSandbox(ShellSandboxMode.REQUIRED, None, "no bwrap in /usr/bin")
    with pytest.raises(SandboxUnavailableError) as refused:
        confine(ShellTerms(missing), workspace=ws, cwd=ws, network=False)
    assert "security.shellSandbox=required" in refused.value.message
    assert "(no bwrap in /usr/bin)" in refused.value.message
    assert confine(ShellTerms(ShellSandbox(ShellSandboxMode.AUTO)), workspace=ws, cwd=ws, network=False) == ()
    wrapped = confine(
        ShellTerms(ShellSandbox(ShellSandboxMode.AUTO, BWRAP)), workspace=ws, cwd=ws, network=False
    )
    assert wrapped[0] == "/usr/bin/bwrap" and wrapped[-1] == "--"


def _pairs(argv: tuple[str, ...], option: str) -> list[str]:
    return [argv[i + 1] for i, word in enumerate(argv) if word == option]


def test_bwrap_argv(var_tmp: Path) -> None:
    tmp_path = var_tmp
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    sock_dir, data = tmp_path / "run", tmp_path / "data"
    sock_dir.mkdir()
    data.mkdir()
    sock = sock_dir / "octipusd.sock"
    sock.touch()
    docker = tmp_path / "docker.sock"
    docker.touch()
    gone = tmp_path / "not-there"
    sandbox = ShellSandbox(
        ShellSandboxMode.REQUIRED, BWRAP, hidden=(sock_dir, sock, data, gone), docker_sockets=(docker,)
    )
    argv = bwrap_argv(BWRAP, sandbox, workspace=ws, cwd=ws / "sub", network=False, host=False)
    assert argv[:3] == ("/usr/bin/bwrap", "--die-with-parent", "--unshare-all")
    assert "--share-net" not in argv
    assert argv[3:6] == ("--ro-bind", "/", "/") and _pairs(argv, "--tmpfs")[0] == "/tmp"
    assert _pairs(argv, "--bind") == [str(ws)]  # the only writable place besides the private /tmp
    assert _pairs(argv, "--tmpfs")[1:] == [str(sock_dir), str(data)]
    assert _pairs(argv, "--remount-ro") == [str(sock_dir), str(data)]
    assert argv.index("--bind") < argv.index(str(sock_dir))  # masks come after the workspace
    masked_files = [
        argv[i + 2] for i, w in enumerate(argv) if w == "--ro-bind" and argv[i + 1] == "/dev/null"
    ]
    # the socket is inside its masked folder already; a path that does not exist is not masked
    assert masked_files == [str(docker)]
    assert argv[-3:] == ("--chdir", str(ws / "sub"), "--")

    shared = bwrap_argv(BWRAP, sandbox, workspace=ws, cwd=ws, network=True, host=True)
    assert "--share-net" in shared and str(docker) not in shared  # host services: the Docker socket
    # a hidden folder that holds the workspace stays (the command must reach it); the socket does not
    inside = ShellSandbox(ShellSandboxMode.AUTO, BWRAP, hidden=(tmp_path, sock))
    argv = bwrap_argv(BWRAP, inside, workspace=ws, cwd=ws, network=False, host=False)
    assert _pairs(argv, "--tmpfs") == ["/tmp"] and str(sock) in argv


def test_network_and_host_services_through_confine(tmp_path: Path) -> None:
    sandbox = ShellSandbox(ShellSandboxMode.AUTO, BWRAP)
    for network, host, shared in [(False, False, False), (True, False, True), (False, True, True)]:
        argv = confine(
            ShellTerms(sandbox, host_services=host), workspace=tmp_path, cwd=tmp_path, network=network
        )
        assert ("--share-net" in argv) is shared


def test_firejail_argv(var_tmp: Path) -> None:
    tmp_path = var_tmp
    runner = SandboxRunner(RunnerKind.FIREJAIL, Path("/usr/bin/firejail"))
    docker = tmp_path / "docker.sock"
    docker.touch()
    sandbox = ShellSandbox(
        ShellSandboxMode.AUTO, runner, hidden=(tmp_path / "data",), docker_sockets=(docker,)
    )
    (tmp_path / "data").mkdir()
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = confine(ShellTerms(sandbox), workspace=ws, cwd=ws, network=False)
    assert argv == firejail_argv(runner, sandbox, workspace=ws, network=False, host=False)
    assert argv[0] == "/usr/bin/firejail" and "--private-tmp" in argv and "--net=none" in argv
    assert f"--read-write={ws}" in argv and "--read-only=/" in argv
    assert f"--blacklist={tmp_path / 'data'}" in argv and f"--blacklist={docker}" in argv
    host = confine(ShellTerms(sandbox, host_services=True), workspace=ws, cwd=ws, network=False)
    assert "--net=none" not in host and f"--blacklist={docker}" not in host


def test_the_daemon_hidden_list() -> None:
    run, data = Path("/run/user/1000"), Path("/home/a/.local/share/octipus")
    private = (run / "octipus", run / "octipus" / "octipusd.sock", data, data / "vault.key")
    hidden = daemon_hidden_paths(
        private,
        {"XDG_RUNTIME_DIR": str(run), "SSH_AUTH_SOCK": "/home/a/.ssh/agent/s.sock", "HOME": "/home/a"},
    )
    assert hidden[:4] == private
    assert {run, run / "bus", run / "systemd", run / "docker.sock", run / "gnupg"} <= set(hidden)
    assert {Path("/run/user"), Path("/run/dbus"), Path("/var/run/dbus")} <= set(hidden)
    assert {Path("/home/a/.ssh/agent"), Path("/home/a/.ssh/agent/s.sock")} <= set(hidden)
    assert Path("/run") not in hidden  # resolv.conf may live in /run/systemd/resolve
    bare = daemon_hidden_paths(private, {})
    assert not [p for p in bare if p == run or "ssh" in str(p)]
    assert docker_sockets({}) == (Path("/var/run/docker.sock"), Path("/run/docker.sock"))
    assert docker_sockets({"XDG_RUNTIME_DIR": str(run)})[2:] == (
        run / "docker.sock",
        run / "podman/podman.sock",
    )


def test_masks_skip_the_host_tmp_and_bind_back_a_docker_socket_for_host_services(
    tmp_path: Path, var_tmp: Path
) -> None:
    run, ws = var_tmp / "run", var_tmp / "ws"
    (run / "podman").mkdir(parents=True)
    ws.mkdir()
    rootless = run / "podman" / "podman.sock"
    rootless.touch()
    in_tmp = tmp_path / "agent"  # under the host's /tmp: the private /tmp hides it already
    in_tmp.mkdir()
    sandbox = ShellSandbox(ShellSandboxMode.REQUIRED, BWRAP, hidden=(run, in_tmp), docker_sockets=(rootless,))
    assert masked_paths(sandbox, ws, host=False) == [(run, True)]  # the socket is inside the folder
    plain = bwrap_argv(BWRAP, sandbox, workspace=ws, cwd=ws, network=False, host=False)
    assert str(in_tmp) not in plain and str(rootless) not in plain
    host = bwrap_argv(BWRAP, sandbox, workspace=ws, cwd=ws, network=True, host=True)
    at = host.index(str(run))
    assert host[at - 1 : at + 6] == (
        "--tmpfs",
        str(run),
        "--bind",
        str(rootless),
        str(rootless),
        "--remount-ro",
        str(run),
    )
    assert passed_sockets(sandbox, run, host=False) == []
