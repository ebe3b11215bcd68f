"""``shell__run`` inside the real bubblewrap of this machine (issue 17 item 5).

Each test runs the tool's own handler with a :class:`FakeToolHost` answering ``shell_terms`` with a
sandbox the real :class:`RunnerSearch` found. Paths that must be out of reach live under
``/var/tmp`` (a path under ``/tmp`` would be hidden by the private ``/tmp`` alone and prove
nothing about the masks).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.sandbox import RunnerSearch
from octipusd.settings_security import ShellSandboxMode
from octipusd.toolkit import NotExecutedError, RunIdentity, ShellSandbox, ShellTerms, ToolOutcome
from octipusd.tools import SHELL_RUN
from tests.unit.sandbox.conftest import CONNECT, FETCH, sandbox_of

pytestmark = pytest.mark.anyio


async def shell(identity: RunIdentity, terms: ShellTerms, **arguments: Any) -> dict[str, Any]:
    result = await SHELL_RUN.handler(identity, FakeToolHost(shell=terms), arguments)
    if isinstance(result, ToolOutcome):
        result = result.value
    assert isinstance(result, dict)
    json.dumps(result)
    return result


async def test_no_network_unless_asked_or_the_run_shares_host_services(
    me: RunIdentity, listening: dict[str, Path], outside: Path, web: str
) -> None:
    sandbox = sandbox_of(listening, outside)
    unconfined = await shell(me, ShellTerms(), command=FETCH + web)
    assert unconfined["stdout"].strip() == "hello from the host"  # the server answers outside
    cut = await shell(me, ShellTerms(sandbox), command=FETCH + web)
    assert cut["exit_code"] == 7 and "URLError" in cut["stdout"], cut
    asked = await shell(me, ShellTerms(sandbox), command=FETCH + web, network=True)
    assert asked["exit_code"] == 0 and asked["stdout"].strip() == "hello from the host", asked
    host = await shell(me, ShellTerms(sandbox, host_services=True), command=FETCH + web)
    assert host["exit_code"] == 0 and host["stdout"].strip() == "hello from the host", host


async def test_the_file_system_the_daemon_socket_and_the_docker_socket(
    me: RunIdentity, listening: dict[str, Path], outside: Path
) -> None:
    sandbox = sandbox_of(listening, outside)
    terms = ShellTerms(sandbox)
    host_tmp = Path(tempfile.mkstemp(prefix="octipus-host-tmp-", dir="/tmp")[1])
    try:
        seen = await shell(me, terms, command=f"cat {host_tmp}; echo tmpdir=$TMPDIR; ls -A /tmp | wc -l")
        assert "No such file" in seen["stderr"] and seen["stdout"].split()[-2:] == ["tmpdir=/tmp", "0"], seen
        assert (await shell(me, ShellTerms(), command=f"cat {host_tmp}"))["exit_code"] == 0
    finally:
        os.unlink(host_tmp)
    (outside / "data").mkdir()
    (outside / "data" / "octipus.db").write_text("the store")
    wrote = await shell(
        me,
        terms,
        command=f"echo in > inside.txt && mkdir -p sub && echo sub > sub/f; echo out > {outside}/outside.txt; "
        f"cat {outside}/data/octipus.db; ls -A {listening['octipusd'].parent} | wc -l; "
        f"touch /tmp/private && echo private-tmp-ok",
    )
    assert (me.workspace / "inside.txt").read_text() == "in\n" and (me.workspace / "sub" / "f").exists()
    assert not (outside / "outside.txt").exists() and "private" not in os.listdir("/tmp")
    assert "Read-only file system" in wrote["stderr"], wrote
    assert "the store" not in wrote["stdout"] and wrote["stdout"].split() == ["0", "private-tmp-ok"], wrote
    # the daemon's socket folder is an empty tmpfs; the Docker socket is /dev/null
    hidden = await shell(me, terms, command=CONNECT + str(listening["octipusd"]))
    assert hidden["exit_code"] != 0 and "FileNotFoundError" in hidden["stderr"], hidden
    masked = await shell(me, terms, command=CONNECT + str(listening["docker"]))
    assert masked["exit_code"] != 0 and "ConnectionRefusedError" in masked["stderr"], masked
    docker = await shell(
        me, ShellTerms(sandbox, host_services=True), command=CONNECT + str(listening["docker"])
    )
    assert docker["exit_code"] == 0, docker  # host services: the Docker socket is there
    daemon = await shell(
        me, ShellTerms(sandbox, host_services=True), command=CONNECT + str(listening["octipusd"])
    )
    assert daemon["exit_code"] != 0  # the daemon's socket never is


async def test_exit_codes_env_and_syntax_refusal_are_kept(
    me: RunIdentity, listening: dict[str, Path], outside: Path
) -> None:
    terms = ShellTerms(sandbox_of(listening, outside))
    result = await shell(me, terms, command='echo "$GREETING from $PWD"; exit 3', env={"GREETING": "hi"})
    assert result["exit_code"] == 3 and result["stdout"] == f"hi from {me.workspace.resolve()}\n"
    listed = await shell(me, terms, command="env")
    names = {line.split("=", 1)[0] for line in listed["stdout"].splitlines()}
    assert not {n for n in names if n.startswith("OCTIPUS_") and n != "OCTIPUS_RUN_ID"}, names
    with pytest.raises(NotExecutedError, match="the shell parser refused"):
        await shell(me, terms, command="echo (")


def _setsid_jobs(marker: str) -> list[psutil.Process]:
    """The processes running ``sleep marker`` (a background job started with ``setsid``)."""
    return [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


async def test_the_timeout_ends_a_background_job_inside_the_sandbox(
    me: RunIdentity, listening: dict[str, Path], outside: Path
) -> None:
    terms = ShellTerms(sandbox_of(listening, outside))
    # setsid: the job leaves the command's process group, so stopping the group does not end it
    marker, command = "987654.321", "setsid sleep {0} & sleep {0}"
    result = await shell(me, terms, command=command.format(marker), timeout=0.5)
    assert result["timed_out"] is True
    _, left = psutil.wait_procs(_setsid_jobs(marker), timeout=5)
    assert left == [], "a process of the sandboxed job outlived its timeout"
    unconfined_marker = "987654.322"
    unconfined = await shell(me, ShellTerms(), command=command.format(unconfined_marker), timeout=0.5)
    survivors = _setsid_jobs(unconfined_marker)
    for process in survivors:
        process.kill()
    assert unconfined["timed_out"] is True and len(survivors) == 1  # only the sandbox ends it


@pytest.fixture
def daemon_like(outside: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Path]]:
    """The folders of a daemon under ``outside`` (runtime, data) and the sandbox its
    :func:`octipusd.app_security.find_sandbox` finds; a listening socket in the runtime folder (its session
    bus) and a rootless Docker socket there."""
    runtime, data_home = outside / "rt", outside / "share"
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    monkeypatch.delenv("CREDENTIALS_DIRECTORY", raising=False)
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    data = data_home / "octipus"
    (runtime / "octipus").mkdir(parents=True)
    data.mkdir(parents=True)
    servers = []
    for name in ("bus", "docker.sock"):
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(runtime / name))
        server.listen()
        servers.append(server)
    yield {"runtime": runtime, "data": data, "bus": runtime / "bus", "docker": runtime / "docker.sock"}
    for server in servers:
        server.close()


def daemon_sandbox(folders: dict[str, Path]) -> ShellSandbox:
    from octipusd.app_security import find_sandbox
    from octipusd.settings import load_settings

    settings = load_settings(environ={"OCTIPUS_SECURITY__SHELLSANDBOX": "required"})
    found = find_sandbox(settings, folders["data"], folders["data"].parent / "config.toml")
    assert found.in_force, found.unavailable
    return found


async def test_the_user_runtime_folder_and_its_buses_are_out_of_reach(
    me: RunIdentity, daemon_like: dict[str, Path]
) -> None:
    sandbox = daemon_sandbox(daemon_like)
    bus = CONNECT + str(daemon_like["bus"])
    assert (await shell(me, ShellTerms(), command=bus))["exit_code"] == 0  # reachable unconfined
    hidden = await shell(me, ShellTerms(sandbox), command=f"{bus}; ls -A {daemon_like['runtime']} | wc -l")
    assert "FileNotFoundError" in hidden["stderr"] and hidden["stdout"].split() == ["0"], (
        hidden
    )  # the whole runtime folder is an empty tmpfs
    for terms in (ShellTerms(sandbox), ShellTerms(sandbox, host_services=True)):
        assert (await shell(me, terms, command=bus))["exit_code"] != 0  # never the session bus
    # rootless Docker: masked, and bound back into the runtime folder for a run's host services
    docker = CONNECT + str(daemon_like["docker"])
    assert (await shell(me, ShellTerms(sandbox), command=docker))["exit_code"] != 0
    shared = await shell(
        me, ShellTerms(sandbox, host_services=True), command=f"{docker}; ls {daemon_like['runtime']}"
    )
    assert shared["exit_code"] == 0 and shared["stdout"].split() == ["docker.sock"], shared


async def test_a_workspace_inside_the_runtime_folder_still_hides_its_buses(
    identity: RunIdentity, daemon_like: dict[str, Path]
) -> None:
    from dataclasses import replace

    workspace = daemon_like["runtime"] / "ws"
    workspace.mkdir()
    me = replace(identity, workspace=workspace)
    sandbox = daemon_sandbox(daemon_like)
    for path in (daemon_like["bus"], daemon_like["docker"]):
        masked = await shell(me, ShellTerms(sandbox), command=CONNECT + str(path))
        assert masked["exit_code"] != 0 and "ConnectionRefusedError" in masked["stderr"], masked
    wrote = await shell(me, ShellTerms(sandbox), command="echo in > inside.txt")
    assert wrote["exit_code"] == 0 and (workspace / "inside.txt").exists()


async def test_a_workspace_inside_the_data_folder_cannot_read_the_vault_key_nor_the_database(
    identity: RunIdentity, daemon_like: dict[str, Path]
) -> None:
    from dataclasses import replace

    data = daemon_like["data"]
    secrets = {
        name: f"secret of {name}" for name in ("vault.key", "vault.key.next", "octipus.db", "octipus.db-wal")
    }
    for name, text in secrets.items():
        (data / name).write_text(text)
    workspace = data / "workspaces" / "ws"
    workspace.mkdir(parents=True)
    me = replace(identity, workspace=workspace)
    command = "; ".join(f"cat {data / name}" for name in secrets) + "; echo in > inside.txt"
    unconfined = await shell(me, ShellTerms(), command=command)
    assert all(text in unconfined["stdout"] for text in secrets.values()), unconfined
    confined = await shell(me, ShellTerms(daemon_sandbox(daemon_like)), command=command)
    assert confined["exit_code"] == 0 and confined["stdout"] == "", confined  # each file is /dev/null
    assert (workspace / "inside.txt").read_text() == "in\n"


async def test_required_without_a_runner_refuses_naming_the_setting(me: RunIdentity, tmp_path: Path) -> None:
    empty = tmp_path / "no-runners"
    empty.mkdir()
    sandbox = RunnerSearch([empty]).find(ShellSandboxMode.REQUIRED)
    with pytest.raises(NotExecutedError) as refused:
        await shell(me, ShellTerms(sandbox), command="touch ran")
    assert "security.shellSandbox=required" in refused.value.message
    assert not (me.workspace / "ran").exists()
    ran = await shell(me, ShellTerms(RunnerSearch([empty]).find(ShellSandboxMode.AUTO)), command="touch ran")
    assert ran["exit_code"] == 0 and (me.workspace / "ran").exists()  # auto: unconfined


async def test_network_must_be_a_boolean(me: RunIdentity) -> None:
    with pytest.raises(NotExecutedError, match="network: must be true or false"):
        await shell(me, ShellTerms(), command="true", network="yes")
