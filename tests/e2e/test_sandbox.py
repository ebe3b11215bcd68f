"""The shell sandbox through a real octipusd (issue 17 item 5): ``security.shellSandbox`` with this
machine's bubblewrap, and without a runner (the daemon started in a mount namespace where
``/usr/bin/bwrap`` is ``/dev/null``).

The daemons live under ``/var/tmp``, not ``/tmp``: their socket, data folder and workspace must be
outside the private ``/tmp`` for the masks to be what hides them. Calls are started by hand
(``POST /v1/actions/calls``, as ``octipusctl actions call`` does); the run's ``host_services`` is
checked with the real ``claude`` calling ``shell__run`` through the bridge.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import psutil
import pytest

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.harness import DaemonHarness, hiding
from tests.e2e.conftest import HELLO, Env, hello_server

CTL = str(Path(sys.executable).parent / "octipusctl")
#: Reads a URL with the system's Python; prints the body, or the error and exits 7.
FETCH = (
    "python3 -c 'import sys, urllib.request as u\n"
    "try: print(u.urlopen(sys.argv[1], timeout=5).read().decode())\n"
    "except Exception as e: print(type(e).__name__, e); sys.exit(7)' "
)
#: Connects to a Unix socket; exits 0 when it accepted.
CONNECT = "python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "


@pytest.fixture(scope="module")
def web() -> Iterator[str]:
    """A loopback HTTP server outside every sandbox; its URL."""
    with hello_server() as url:
        yield url


class Daemon:
    """One octipusd under /var/tmp with a mode of ``security.shellSandbox``; calls by hand."""

    def __init__(self, mode: str, script: Any, claude: Path, launcher: tuple[str, ...] = ()) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="octipus-e2e-sandbox-", dir="/var/tmp"))
        self.model = ScriptedAnthropicServer(script).start()
        env = {"OCTIPUS_SECURITY__SHELLSANDBOX": mode}
        self.daemon = DaemonHarness(self.root, self.model.base_url, claude, env, launcher=launcher).start()
        self.env = Env(self.model, self.daemon)
        self.http = httpx.Client(
            transport=httpx.HTTPTransport(uds=str(self.daemon.socket)),
            base_url="http://octipusd/v1",
            timeout=120.0,
        )
        assert self.http.post("/rules", json={"level": "allow", "rule": "shell__run"}).status_code == 201
        self.session = self.env.new_session()

    def call(self, command: str, session: str | None = None, **arguments: Any) -> dict[str, Any]:
        """Run ``shell__run`` by hand; the invocation (its ``result`` parsed when there is one)."""
        body = {
            "session_id": session or self.session,
            "tool": "shell__run",
            "arguments": {"command": command, **arguments},
        }
        r = self.http.post("/actions/calls", json={**body, "wait_seconds": 60})
        assert r.status_code == 200, r.text
        invocation = dict(r.json()["invocation"])
        if invocation.get("result") and invocation["status"] == "completed":
            invocation["out"] = json.loads(invocation["result"])
        return invocation

    def ctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([CTL, *args], env=self.daemon.env, capture_output=True, text=True, timeout=120)

    def close(self) -> None:
        self.http.close()
        self.daemon.stop()
        self.model.close()
        shutil.rmtree(self.root, ignore_errors=True)


def _two_fetches(url: str) -> dict[str, Any]:
    fetch = {"type": "tool_use", "name": "mcp__octipus__shell__run", "input": {"command": FETCH + url}}
    done = {"type": "text", "text": "done"}
    return {"steps": [{"content": [fetch]}, {"content": [done]}, {"content": [fetch]}, {"content": [done]}]}


@pytest.fixture(scope="module")
def sandboxed(claude: Path, web: str) -> Iterator[Daemon]:
    """``required`` with this machine's bubblewrap: in force."""
    daemon = Daemon("required", _two_fetches(web), claude)
    yield daemon
    daemon.close()


def test_health_names_the_mode_and_the_runner(sandboxed: Daemon) -> None:
    health = sandboxed.http.get("/health").json()["shell_sandbox"]
    assert health == {
        "mode": "required",
        "in_force": True,
        "runner": "bwrap",
        "runner_path": "/usr/bin/bwrap",
        "reason": None,
    }
    shown = sandboxed.ctl("health")
    assert shown.returncode == 0, shown.stderr
    assert "shell sandbox: security.shellSandbox=required, in force with /usr/bin/bwrap" in shown.stdout


def test_a_command_reaches_the_network_only_when_it_asks(sandboxed: Daemon, web: str) -> None:
    cut = sandboxed.call(FETCH + web)
    assert cut["status"] == "completed" and cut["out"]["exit_code"] == 7, cut
    asked = sandboxed.call(FETCH + web, network=True)
    assert asked["out"]["exit_code"] == 0 and asked["out"]["stdout"].strip() == HELLO, asked
    shown = sandboxed.ctl(
        "actions",
        "call",
        "shell__run",
        "--session",
        sandboxed.session,
        "--args",
        json.dumps({"command": FETCH + web}),
    )
    assert HELLO not in shown.stdout and "URLError" in shown.stdout, shown


def test_host_tmp_the_rest_of_the_disk_and_the_daemon_stay_out_of_reach(sandboxed: Daemon) -> None:
    root, daemon = sandboxed.root, sandboxed.daemon
    host_tmp = Path(tempfile.mkstemp(prefix="octipus-host-tmp-", dir="/tmp")[1])
    try:
        host_tmp.write_text("host secret")
        database = root / "data" / "octipus" / "octipus.db"
        assert database.exists() and daemon.socket.exists()
        seen = sandboxed.call(
            f"cat {host_tmp}; echo made > mine.txt; echo out > {root}/outside.txt; cat {database} | wc -c; "
            f"ls -A {daemon.socket.parent} | wc -l; {CONNECT}{daemon.socket} && echo CONNECTED"
        )
        out = seen["out"]
        assert "host secret" not in out["stdout"] and "No such file" in out["stderr"], out
        assert (daemon.workspace / "mine.txt").read_text() == "made\n"
        assert not (root / "outside.txt").exists() and "Read-only file system" in out["stderr"], out
        assert out["stdout"].split() == ["0", "0"], out  # an empty database file, an empty socket folder
        assert "CONNECTED" not in out["stdout"] and "FileNotFoundError" in out["stderr"], out
    finally:
        host_tmp.unlink()


def test_the_user_runtime_folder_is_out_of_reach(sandboxed: Daemon) -> None:
    runtime = Path(sandboxed.daemon.env["XDG_RUNTIME_DIR"])  # the runtime folder given to the daemon
    bus = runtime / "bus"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(bus))
        server.listen()
        with socket.socket(socket.AF_UNIX) as client:
            client.connect(str(bus))  # reachable outside the sandbox
        seen = sandboxed.call(f"{CONNECT}{bus} && echo CONNECTED; ls -A {runtime} | wc -l")
    bus.unlink()
    out = seen["out"]
    assert "CONNECTED" not in out["stdout"] and "FileNotFoundError" in out["stderr"], out
    assert out["stdout"].split() == ["0"], out  # the whole folder is an empty tmpfs


def _setsid_jobs(marker: str) -> list[psutil.Process]:
    return [p for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]


#: A background job leaving the command's process group: only the sandbox's PID namespace ends it.
SETSID_JOB = "setsid sleep {0} & sleep {0}"


def test_the_timeout_ends_a_background_job_inside_the_sandbox(sandboxed: Daemon) -> None:
    marker = "876543.21"
    # its own session: the uncertain call would make the next mutation of a session wait for a review
    ended = sandboxed.call(SETSID_JOB.format(marker), sandboxed.env.new_session(), timeout=0.5)
    assert ended["status"] == "uncertain", ended
    _, left = psutil.wait_procs(_setsid_jobs(marker), timeout=5)
    assert left == []


def test_the_runs_host_services_share_the_network_with_its_own_commands(sandboxed: Daemon) -> None:
    env = sandboxed.env
    session = env.new_session()
    turns = f"/sessions/{session}/turns"
    shared = env.client.request("POST", turns, json={"prompt": "fetch", "host_services": True})
    assert shared["host_services"] is True
    assert env.wait_final(shared["id"])["status"] == "succeeded"
    events = env.events(shared["id"])
    queued = [e["data"] for e in events if e["kind"] == "run_status" and e["data"]["status"] == "queued"]
    assert queued == [{"status": "queued", "turn_index": queued[0]["turn_index"], "host_services": True}]
    results = json.dumps([e["data"] for e in events if e["kind"] == "tool_result"])
    assert HELLO in results, results
    shown = sandboxed.ctl("runs", "show", shared["id"])
    assert "host services: its own shell commands share the host network" in shown.stdout, shown

    plain = env.post(session, "fetch again")
    assert env.wait_final(plain)["status"] == "succeeded"
    assert env.run(plain)["host_services"] is False
    results = json.dumps([e["data"] for e in env.events(plain) if e["kind"] == "tool_result"])
    assert HELLO not in results and "URLError" in results, results


@pytest.fixture(scope="module")
def no_runner(claude: Path) -> Iterator[dict[str, Daemon]]:
    """``required`` and ``auto`` on a machine without bubblewrap (nor firejail)."""
    assert not Path("/usr/bin/firejail").exists() and not Path("/usr/local/bin/bwrap").exists()
    launcher = hiding(Path("/usr/bin/bwrap"))
    made = {mode: Daemon(mode, {"steps": []}, claude, launcher) for mode in ("required", "auto")}
    yield made
    for daemon in made.values():
        daemon.close()


def test_required_without_a_runner_refuses_naming_the_setting(no_runner: dict[str, Daemon]) -> None:
    daemon = no_runner["required"]
    health = daemon.http.get("/health").json()["shell_sandbox"]
    assert health["mode"] == "required" and health["in_force"] is False and health["runner_path"] is None
    folders = "/usr/bin, /usr/local/bin, /bin"
    assert health["reason"] == f"no bwrap in {folders}; no firejail in {folders}", health
    refused = daemon.call("touch ran.txt")
    assert refused["status"] == "not_executed", refused
    assert "security.shellSandbox=required" in refused["error"], refused
    assert not (daemon.daemon.workspace / "ran.txt").exists()
    shown = daemon.ctl("health")
    assert "no runner" in shown.stdout and "every shell command is refused" in shown.stdout, shown.stdout


def test_auto_without_a_runner_runs_unconfined_and_warns_once(no_runner: dict[str, Daemon]) -> None:
    daemon = no_runner["auto"]
    host_tmp = Path(tempfile.mkstemp(prefix="octipus-host-tmp-", dir="/tmp")[1])
    try:
        host_tmp.write_text("visible unconfined")
        for _ in range(2):
            ran = daemon.call(f"cat {host_tmp}")
            assert ran["out"]["stdout"] == "visible unconfined", ran
    finally:
        host_tmp.unlink()
    warnings = [
        line for line in daemon.daemon.log().splitlines() if "shellSandbox=auto found no runner" in line
    ]
    assert len(warnings) == 1 and "WARNING" in warnings[0], warnings


def test_host_services_is_granted_only_by_the_daemons_user_on_its_socket(sandboxed: Daemon) -> None:
    link = urlsplit(sandboxed.daemon.web_url())
    origin, token = f"{link.scheme}://{link.netloc}", parse_qs(link.query)["token"][0]
    turn = {"prompt": "fetch", "host_services": True}
    path = f"/v1/sessions/{sandboxed.session}/turns"
    web = httpx.post(origin + path, json=turn, headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert web.status_code == 403, web.text
    assert "only on the daemon's Unix socket" in web.json()["message"]
    member = sandboxed.http.post(path.removeprefix("/v1"), json={**turn, "author": "mallory"})
    assert member.status_code == 403, member.text
    assert "not by the space member 'mallory'" in member.json()["message"]
    runs = sandboxed.http.get("/runs", params={"session_id": sandboxed.session}).json()
    assert not any(run["host_services"] for run in runs), runs


def test_unconfined_a_setsid_job_outlives_the_timeout(no_runner: dict[str, Daemon]) -> None:
    daemon, marker = no_runner["auto"], "876543.22"
    ended = daemon.call(SETSID_JOB.format(marker), daemon.env.new_session(), timeout=0.5)
    survivors = _setsid_jobs(marker)
    for process in survivors:
        process.kill()
    assert ended["status"] == "uncertain" and len(survivors) == 1, ended  # what the sandbox is for
