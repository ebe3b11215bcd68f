"""The daemon as a user meets it: start-up refusals, health, the socket's peer check, octipusctl."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import psutil

from octipusd.money import format_usd
from octipusd.runner.process import run_processes
from octipusd.runtime.prompts import PROMPT_HEADER, SYSTEM_HEADER
from octipusd.testing.harness import DaemonHarness
from octipusd.tools import OCTIPUS_INSTRUCTIONS
from tests.e2e.conftest import Env

TEXT_ONLY = {"steps": [{"content": [{"type": "text", "text": "pong"}]}]}
BIN = Path(sys.executable).parent


def test_invalid_setting_exits_2_naming_key_source_and_accepted_values(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[cliModels.claudeCode]\nbinaryPath = "bin/claude"\n')
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path / "run"), "XDG_DATA_HOME": str(tmp_path / "data")}
    done = subprocess.run(
        [str(BIN / "octipusd"), "--config", str(config)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    message = done.stderr.strip().splitlines()
    assert len(message) == 1, done.stderr
    assert "cliModels.claudeCode.binaryPath" in message[0]
    assert f"file {config}" in message[0]
    assert "absolute path" in message[0]
    assert not (tmp_path / "run").exists(), "nothing may be bound before settings are valid"

    bad_env = {**env, "OCTIPUS_DAEMON__APPROVALTIMEOUTSECONDS": "900"}
    done = subprocess.run([str(BIN / "octipusd")], env=bad_env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "OCTIPUS_DAEMON__APPROVALTIMEOUTSECONDS" in done.stderr and "at most 300" in done.stderr


def test_second_daemon_on_the_same_database_refuses_naming_the_holder(octipus: Callable[..., Env]) -> None:
    env = octipus(TEXT_ONLY)
    first = env.daemon.process
    assert first is not None
    other = {**env.daemon.env, "XDG_RUNTIME_DIR": str(env.daemon.root / "run2")}
    done = subprocess.run([str(BIN / "octipusd")], env=other, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f"pid {first.pid}" in done.stderr
    assert env.client.request("GET", "/health")["status"] == "ok"


def test_octipusctl_without_daemon_says_how_to_start_it(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    done = subprocess.run(
        [str(BIN / "octipusctl"), "health"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "octipusd is not running" in lines[0] and "start it" in lines[0]


def test_health_reports_path_and_version_or_the_path_searched(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    env = octipus(TEXT_ONLY)
    health = env.client.request("GET", "/health")
    claude = next(a for a in health["adapters"] if a["adapter"] == "claude-code")
    assert claude["path"] and claude["version"].startswith("2.1.197")
    assert health["process_containment"] in ("cgroup", "subreaper") and health["process_containment_detail"]

    missing = octipus(
        TEXT_ONLY,
        extra_env={
            "OCTIPUS_CLAUDE_BINARY": "no-such-claude",
            "OCTIPUS_CLI_PATH": str(tmp_path),
            "OCTIPUS_AGENT__PROCESSCONTAINMENT": "subreaper",
        },
    )
    forced = missing.client.request("GET", "/health")
    assert forced["process_containment"] == "subreaper"
    assert "forced by agent.processContainment" in forced["process_containment_detail"]
    claude = next(a for a in forced["adapters"] if a["adapter"] == "claude-code")
    assert claude["path"] is None and claude["searched_path"] == str(tmp_path)
    run = missing.post(missing.new_session(), "hello")
    final = missing.wait_final(run)
    assert (
        final["status"] == "failed"
        and "no-such-claude" in final["reason"]
        and str(tmp_path) in final["reason"]
    )


def test_socket_is_private_and_other_users_are_refused(octipus: Callable[..., Env]) -> None:
    env = octipus(TEXT_ONLY)
    sock_path = env.daemon.socket
    assert oct(sock_path.stat().st_mode & 0o777) == "0o600"
    assert oct(sock_path.parent.stat().st_mode & 0o777) == "0o700"
    assert os.geteuid() == 0, "this test switches to the unprivileged postgres user; CI runs as root"
    # open the permissions so only SO_PEERCRED stands between another user and the API
    for folder in (sock_path.parent, *sock_path.parents):
        if folder == Path("/"):
            break
        os.chmod(folder, folder.stat().st_mode | 0o011)
    os.chmod(sock_path, 0o666)
    probe = (
        "import socket,sys\n"
        "s=socket.socket(socket.AF_UNIX); s.settimeout(10); s.connect(sys.argv[1])\n"
        "data=b''\n"
        "try:\n"  # the refused connection may be closed before the request is written
        "    s.sendall(b'GET /v1/health HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\n"
        "    while chunk := s.recv(65536): data += chunk\n"
        "except OSError: pass\n"
        "print(len(data))\n"
    )
    done = subprocess.run(
        ["runuser", "-u", "postgres", "--", "/usr/bin/python3", "-c", probe, str(sock_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "0", "another user's connection got an answer"
    same_user = socket.socket(socket.AF_UNIX)
    same_user.connect(str(sock_path))
    same_user.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert same_user.recv(100).startswith(b"HTTP/1.1 200")
    same_user.close()


def test_daemon_runs_on_postgresql(octipus: Callable[..., Env], postgres_database_url: str) -> None:
    env = octipus(TEXT_ONLY, extra_env={"OCTIPUS_DATABASE_URL": postgres_database_url})
    health = env.client.request("GET", "/health")
    assert health["database"].startswith("postgresql+psycopg://")
    run = env.post(env.new_session(), "ping")
    final = env.wait_final(run)
    assert final["status"] == "succeeded" and final["result_text"] == "pong"
    assert [e["kind"] for e in env.events(run)][-1] == "run_status"


def test_octipusctl_run_streams_json_and_exits_by_outcome(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {"content": [{"type": "text", "text": "pong"}]},
                {"error": {"status": 400, "type": "invalid_request_error", "message": "mock: bad request"}},
            ]
        }
    )
    ctl = str(BIN / "octipusctl")
    ok = subprocess.run(
        [ctl, "run", "ping", "--workspace", str(env.daemon.workspace), "--json"],
        env=env.daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    lines = [json.loads(line) for line in ok.stdout.splitlines()]
    session = lines[0]["session_id"]
    assert any(e.get("kind") == "text" and e["data"]["text"] == "pong" for e in lines)
    bad = subprocess.run(
        [ctl, "run", "again", "--session", session],
        env=env.daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1
    assert "failed" in bad.stdout
    missing = subprocess.run(
        [ctl, "run", "x", "--session", "nope"], env=env.daemon.env, capture_output=True, text=True, timeout=60
    )
    assert missing.returncode == 2 and "nope" in missing.stderr
    # a run shows one token figure (the run's, also with cache tokens and cost), not the result's too
    counted = subprocess.run(
        [ctl, "run", "count", "--workspace", str(env.daemon.workspace)],
        env=env.daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert counted.returncode == 0, counted.stderr
    assert counted.stdout.count("tokens") == 1, counted.stdout
    run = env.client.request("GET", "/runs")[0]
    assert f"tokens in {run['input_tokens']} out {run['output_tokens']}" in counted.stdout
    assert f"cost {format_usd(Decimal(run['cost_usd']))}" in counted.stdout
    listed = env.client.request("GET", "/runs", params={"session_id": session})
    shown = subprocess.run(
        [ctl, "sessions", "show", session], env=env.daemon.env, capture_output=True, text=True, timeout=60
    )
    usage = next(json.loads(line)["usage"] for line in shown.stdout.splitlines() if '"usage"' in line)
    assert usage["runs"] == 2 and usage["output_tokens"] == sum(r["output_tokens"] for r in listed), usage


def test_daemon_restart_marks_a_killed_daemons_runs_interrupted(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {
                    "content": [
                        {"type": "tool_use", "name": "Bash", "input": {"command": "bash -c 'echo x > y'"}}
                    ]
                },
                {"content": [{"type": "text", "text": "ok"}]},
            ]
        }
    )
    run = env.post(env.new_session(), "go")
    approval = env.wait_approval(run)
    vendor_pid = env.run(run)["pid"]
    env.daemon.stop(signal.SIGKILL)
    assert psutil.pid_exists(vendor_pid), "the vendor outlives a SIGKILLed daemon until the next start"
    again = DaemonHarness(env.daemon.root, env.model.base_url)
    with again:
        client = again.client()
        stored = client.request("GET", f"/runs/{run}")
        assert stored["status"] == "interrupted"
        assert "stopped while the run was live" in stored["reason"]
        assert client.request("GET", f"/approvals/{approval['id']}")["status"] == "cancelled"
        assert [p for p in run_processes(run) if p.status() != psutil.STATUS_ZOMBIE] == [], (
            "orphans not reaped"
        )


def test_octipusctl_without_a_terminal_waits_for_another_client(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {
                    "content": [
                        {"type": "tool_use", "name": "Bash", "input": {"command": "bash -c 'echo x > y'"}}
                    ]
                },
                {"content": [{"type": "text", "text": "ok"}]},
            ]
        }
    )
    ctl = subprocess.Popen(
        [str(BIN / "octipusctl"), "run", "go", "--workspace", str(env.daemon.workspace)],
        env=env.daemon.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        runs = env.wait(lambda: env.client.request("GET", "/runs"), 60, "the run")
        approval = env.wait_approval(runs[0]["id"])
        listed = subprocess.run(
            [str(BIN / "octipusctl"), "approvals"],
            env=env.daemon.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert approval["id"] in listed.stdout, "the approvals table must show whole ids"
        answered = subprocess.run(
            [str(BIN / "octipusctl"), "approvals", "approve", approval["id"]],
            env=env.daemon.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert answered.returncode == 0, answered.stderr
        out, errors = ctl.communicate(timeout=120)
    finally:
        if ctl.poll() is None:
            ctl.kill()
    assert ctl.returncode == 0, out + errors
    assert "no terminal to ask on" in errors and approval["id"] in errors


def test_a_root_run_is_told_its_instructions_and_its_dump_holds_them(octipus: Callable[..., Env]) -> None:
    """Issue 14 item 1: the root run's request to the model carries Octipus's instructions in its
    system prompt (``--append-system-prompt``), and the prompt dump holds the whole prompt."""
    env = octipus(TEXT_ONLY)
    run = env.post(env.new_session(), "dump this prompt")
    assert env.wait_final(run)["status"] == "succeeded"
    (request,) = env.model.message_requests
    system = "\n".join(block["text"] for block in request.body["system"])
    assert OCTIPUS_INSTRUCTIONS in system
    assert OCTIPUS_INSTRUCTIONS not in json.dumps(request.body["messages"])  # not in the user's message
    dump = env.daemon.home / ".octipus" / "prompts" / f"{run}.txt"
    assert dump.read_text() == f"{SYSTEM_HEADER}\n{OCTIPUS_INSTRUCTIONS}\n{PROMPT_HEADER}\ndump this prompt"
    assert dump.stat().st_mode & 0o777 == 0o600


def test_prompt_dumps_follow_the_setting(octipus: Callable[..., Env]) -> None:

    quiet = octipus(TEXT_ONLY, extra_env={"OCTIPUS_AGENT__PROMPTDUMPS": "false"})
    run = quiet.post(quiet.new_session(), "do not dump")
    assert quiet.wait_final(run)["status"] == "succeeded"
    assert not (quiet.daemon.home / ".octipus" / "prompts").exists()


def test_a_stalled_vendor_does_not_hold_a_run_past_its_active_work_limit(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {"steps": [{"content": [{"type": "text", "text": "late"}], "stall_seconds": 120}]},
        extra_env={"OCTIPUS_DAEMON__RUNTIMEOUTSECONDS": "3"},
    )
    run = env.post(env.new_session(), "hello")
    final = env.wait_final(run, timeout=60)
    assert final["status"] == "failed"
    assert "exceeded its active-work limit of 3 s" in final["reason"]
    assert [p for p in run_processes(run) if p.status() != psutil.STATUS_ZOMBIE] == []


def test_octipusctl_takes_a_long_prompt_from_a_file_or_stdin(
    octipus: Callable[..., Env], tmp_path: Path
) -> None:
    """Issue 14 item 11: a prompt over the kernel's 128 KiB argument limit comes from --file or -."""
    env = octipus({"steps": [{"content": [{"type": "text", "text": "pong"}]}] * 2})
    ctl = str(BIN / "octipusctl")
    prompt = "long prompt line " + "x" * 200_000 + " end"
    big = tmp_path / "prompt.txt"
    big.write_text(prompt, encoding="utf-8")
    common = ["--workspace", str(env.daemon.workspace), "--json"]
    by_file = subprocess.run(
        [ctl, "run", "--file", str(big), *common],
        env=env.daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert by_file.returncode == 0, by_file.stderr
    by_stdin = subprocess.run(
        [ctl, "run", "-", *common],
        input=prompt,
        env=env.daemon.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert by_stdin.returncode == 0, by_stdin.stderr
    for done in (by_file, by_stdin):
        run_id = json.loads(done.stdout.splitlines()[0])["run_id"]
        assert env.run(run_id)["prompt"] == prompt
    neither = subprocess.run(
        [ctl, "steer", "some-session"], env=env.daemon.env, capture_output=True, text=True
    )
    both = subprocess.run(
        [ctl, "run", "hi", "--file", str(big)], env=env.daemon.env, capture_output=True, text=True, timeout=60
    )
    missing = subprocess.run(
        [ctl, "run", "--file", str(tmp_path / "nope.txt")], env=env.daemon.env, capture_output=True, text=True
    )
    for refused in (neither, both, missing):
        assert refused.returncode == 2, refused.stderr
    assert "--file" in neither.stderr and "only one" in both.stderr and "nope.txt" in missing.stderr
