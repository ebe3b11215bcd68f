"""Vault credentials end to end (seed 003 "Authenticate with a vault credential", issue 17).

A small HTTP client (the way ``gh api user`` uses ``GH_TOKEN``) runs through ``shell__run`` with
``"env": {"TOKEN": "{{secret:api_token}}"}`` against a loopback server that checks the
``Authorization`` header it receives. The call comes from the real ``claude`` through its bridge,
from a person (``octipusctl actions call``), and from the stub ``agy`` through ``octipus-bridge``.
The program receives the value; the agent's tool result, the model's requests, the events, the
journal, the daemon's log, the SQLite file and a PostgreSQL dump hold only ``[REDACTED:api_token]``
(the client also prints the token raw, split across two writes, base64- and URL-encoded, as a
careless program would). The refusals of a misplaced placeholder, an unknown entry, a user the
entry is not shared with and a tool outside its allowlist are each ``not_executed`` with a message
naming the entry.
"""

from __future__ import annotations

import base64
import http.server
import json
import subprocess
import sys
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from octipusd.testing.conformance import octipus as conformance_octipus
from octipusd.testing.kit_antigravity import AgyScript, AntigravityKit
from octipusd.testing.postgres import conninfo, find_bin_dir
from tests.e2e.conftest import Env

CTL = str(Path(sys.executable).parent / "octipusctl")

#: The credential: characters that URL-encode differently, long enough for its base64 to be masked.
TOKEN = "ghs_Vault/Secret+Value=42 x9QpL7mZ"

CLIENT = r"""
import base64, os, sys, time, urllib.error, urllib.parse, urllib.request
token = os.environ["TOKEN"]
request = urllib.request.Request(sys.argv[1], headers={"Authorization": "Bearer " + token})
try:
    with urllib.request.urlopen(request, timeout=10) as answer:
        print("status", answer.status, answer.read().decode())
except urllib.error.URLError as error:  # an HTTP error status, or no way to reach the server
    print("status", getattr(error, "code", "unreachable"))
# a careless program echoing the credential: what masking must catch
print("raw:", token, flush=True)
sys.stdout.write("split: " + token[:9]); sys.stdout.flush(); time.sleep(0.2)
sys.stdout.write(token[9:] + "\n")
print("b64:", base64.b64encode(token.encode()).decode())
print("url:", urllib.parse.quote(token, safe=""))
print("stderr:", token, file=sys.stderr)
"""


def leaked_forms(value: str) -> list[bytes]:
    """The byte strings whose presence anywhere would leak ``value``."""
    return [
        value.encode(),
        base64.b64encode(value.encode()).rstrip(b"=")[:-2],
        urllib.parse.quote(value, safe="").encode(),
        json.dumps(value)[1:-1].encode(),
    ]


def assert_no_leak(what: str, data: bytes | str) -> None:
    raw = data.encode() if isinstance(data, str) else data
    for form in leaked_forms(TOKEN):
        assert form not in raw, f"{what} holds the credential ({form!r})"


class Receiver:
    """A loopback HTTP server that answers 200 only with ``Authorization: Bearer TOKEN``."""

    def __init__(self) -> None:
        self.seen: list[str | None] = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                header = self.headers.get("Authorization")
                receiver.seen.append(header)
                ok = header == f"Bearer {TOKEN}"
                body = b'{"login": "octocat"}' if ok else b'{"message": "Bad credentials"}'
                self.send_response(200 if ok else 401)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/user"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    server = Receiver()
    yield server
    server.close()


def ctl(env: Any, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, *args], env=env.daemon.env, input=stdin, capture_output=True, text=True, timeout=120
    )


def add_entries(env: Any) -> None:
    """The entries of these tests, added as an operator does (the value on stdin)."""
    for name, value, extra in [
        ("api_token", TOKEN, []),
        ("deploy_key", "deploy-key-value-0123456789", ["--tool", "github.*"]),
        ("alice_only", "alice-only-value-0123456789", ["--user", "alice", "--tool", "shell__run"]),
    ]:
        done = ctl(env, "vault", "add", name, *extra, stdin=value + "\n")
        assert done.returncode == 0, done.stderr
    listed = ctl(env, "vault", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert_no_leak("vault list", listed.stdout)
    names = [entry["name"] for entry in json.loads(listed.stdout)["entries"]]
    assert names == ["alice_only", "api_token", "deploy_key"]


def shell_call(url: str, **env: str) -> dict[str, Any]:
    return {"command": f"python3 client.py {url}", "env": env, "network": True}


#: The refused calls, each with what its error must say.
def refusals(url: str) -> list[tuple[dict[str, Any], list[str]]]:
    return [
        ({"command": "echo {{secret:api_token}}"}, ["placeholder in command", "in env"]),
        (shell_call(url, TOKEN="{{secret:no_such_entry}}"), ["'no_such_entry'", "does not exist"]),
        (shell_call(url, TOKEN="{{secret:alice_only}}"), ["'alice_only'", "vault allow alice_only --user"]),
        (shell_call(url, TOKEN="{{secret:deploy_key}}"), ["'deploy_key'", "allowlist", "--tool shell__run"]),
    ]


def store_bytes(env: Any, database_url: str | None) -> bytes:
    """Everything the store holds on disk: the SQLite file and its WAL, or a PostgreSQL dump."""
    if database_url is None:
        folder = Path(env.daemon.env["XDG_DATA_HOME"]) / "octipus"
        return b"".join(path.read_bytes() for path in sorted(folder.glob("octipus.db*")))
    info = conninfo(database_url)
    dump = subprocess.run(
        [
            str(find_bin_dir() / "pg_dump"),
            "--host",
            str(info["host"]),
            "--port",
            str(info["port"]),
            "--username",
            str(info["user"]),
            "--dbname",
            str(info["dbname"]),
        ],
        capture_output=True,
        timeout=120,
        env={"PGPASSWORD": str(info.get("password") or ""), "PATH": "/usr/bin:/bin"},
    )
    assert dump.returncode == 0, dump.stderr
    assert b"vault_entries" in dump.stdout and b"tool_actions" in dump.stdout
    return dump.stdout


def assert_nothing_on_disk(root: Path) -> None:
    """No file under the daemon's root holds the value: its database, log, prompt dumps
    (``~/.octipus/prompts``), the vendor's own session files and settings (its login store)."""
    files = [path for path in root.rglob("*") if path.is_file() and not path.is_symlink()]
    assert any(".octipus/prompts" in str(path) for path in files)  # the prompt dumps are searched too
    for path in files:
        assert_no_leak(str(path.relative_to(root)), path.read_bytes())


def _tool_results(env: Env, run: str) -> list[dict[str, Any]]:
    return [e["data"] for e in env.events(run) if e["kind"] == "tool_result"]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_claude_uses_a_credential_it_never_sees(
    octipus: Callable[..., Env], receiver: Receiver, request: pytest.FixtureRequest, backend: str
) -> None:
    database_url = request.getfixturevalue("postgres_database_url") if backend == "postgresql" else None
    calls = [shell_call(receiver.url, TOKEN="{{secret:api_token}}"), *(c for c, _ in refusals(receiver.url))]
    steps: list[dict[str, Any]] = [
        {"content": [{"type": "tool_use", "name": "mcp__octipus__shell__run", "input": call}]}
        for call in calls
    ]
    steps.append({"content": [{"type": "text", "text": "authenticated"}]})
    extra = {"OCTIPUS_DATABASE_URL": database_url} if database_url else None
    env = octipus({"steps": steps}, extra_env=extra)
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "shell__run"})
    add_entries(env)
    env.daemon.workspace.joinpath("client.py").write_text(CLIENT)
    session = env.new_session()
    run = env.post(session, "who am I on the API?")
    final = env.wait_final(run)
    assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])

    # the program received the value, once (the refused calls never ran)
    assert receiver.seen == [f"Bearer {TOKEN}"]
    # what the agent got back: the answer, and the value masked in every form it was printed
    results = _tool_results(env, run)
    first = results[0]["content"]
    assert "status 200" in first and "octocat" in first
    for label in ("raw:", "split:", "b64:", "url:", "stderr:"):
        assert f"{label} [REDACTED:api_token]\\n" in first, first
    for (_, expected), result in zip(refusals(receiver.url), results[1:], strict=True):
        assert result["is_error"], result
        for text in expected:
            assert text in result["content"], (text, result["content"])
    # the journal: one completed call, four refusals recorded as not_executed
    actions = env.client.request("GET", "/actions", params={"session_id": session})["actions"]
    assert [a["outcome"] for a in actions] == ["completed"] + ["not_executed"] * 4, actions
    assert "no_such_entry" in actions[2]["detail"]

    # nowhere: the model's requests, the events, the journal, the log, the store
    assert_no_leak("the model's requests", json.dumps([r.body for r in env.model.requests]))
    assert_no_leak("the run's events", json.dumps(env.events(run)))
    assert_no_leak("the journal", json.dumps(actions))
    env.daemon.stop()
    assert_no_leak("the daemon's log", env.daemon.log())
    assert_no_leak("the store", store_bytes(env, database_url))
    assert_nothing_on_disk(env.daemon.root)


def test_a_call_started_by_hand_resolves_as_the_calling_user(
    octipus: Callable[..., Env], receiver: Receiver
) -> None:
    env = octipus({"steps": [{"content": [{"type": "text", "text": "unused"}]}]})
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "shell__run"})
    add_entries(env)
    env.daemon.workspace.joinpath("client.py").write_text(CLIENT)
    session = env.new_session()
    args = json.dumps(shell_call(receiver.url, TOKEN="{{secret:api_token}}"))
    done = ctl(env, "actions", "call", "shell__run", "--session", session, "--args", args, "--json")
    assert done.returncode == 0, done.stderr
    assert receiver.seen == [f"Bearer {TOKEN}"]
    invocation = json.loads(done.stdout)["invocation"]
    assert invocation["status"] == "completed"
    assert "raw: [REDACTED:api_token]" in invocation["result"]
    assert_no_leak("the hand-started call's answer", done.stdout + done.stderr)

    for call, expected in refusals(receiver.url):
        refused = ctl(
            env, "actions", "call", "shell__run", "--session", session, "--args", json.dumps(call), "--json"
        )
        assert refused.returncode == 1, refused.stdout + refused.stderr
        answer = json.loads(refused.stdout)["invocation"]
        assert answer["status"] == "not_executed", answer
        for text in expected:
            assert text in answer["result"], (text, answer)
    assert receiver.seen == [f"Bearer {TOKEN}"]
    listed = ctl(env, "vault", "list", "--json")
    [used] = [e for e in json.loads(listed.stdout)["entries"] if e["name"] == "api_token"]
    assert used["last_used_at"] is not None and used["last_used_tool"] == "shell__run"
    calls = env.client.request("GET", "/actions/calls", params={"session_id": session})
    env.daemon.stop()
    assert_no_leak("the invocations", json.dumps(calls))
    assert_no_leak("the daemon's log", env.daemon.log())
    assert_no_leak("the store", store_bytes(env, None))


def test_antigravity_reaches_the_credential_through_octipus_bridge(
    tmp_path: Path, receiver: Receiver
) -> None:
    kit = AntigravityKit()
    steps = [
        kit.bridge_call("shell__run", shell_call(receiver.url, TOKEN="{{secret:api_token}}")),
        kit.bridge_call("shell__run", shell_call(receiver.url, TOKEN="{{secret:no_such_entry}}")),
        kit.shell("env"),  # the vendor's own environment: the credential was never installed there
        kit.text("done"),
    ]
    with conformance_octipus(kit, tmp_path, steps) as env:
        env.client.request("POST", "/rules", json={"level": "allow", "rule": "shell__run"})
        add_entries(env)
        env.daemon.workspace.joinpath("client.py").write_text(CLIENT)
        run = env.post(env.new_session(), "who am I?")
        final = env.wait_final(run, 90.0)
        assert final["status"] == "succeeded", (final, env.daemon.log()[-3000:])
        assert receiver.seen == [f"Bearer {TOKEN}"]
        assert isinstance(env.model, AgyScript)
        records = env.model.records()
        [end] = [r for r in records if r["event"] == "end"]
        used, refused, environment = (a for a in end["actions"] if a["action"] == "run")
        assert environment["exit_code"] == 0 and "OCTIPUS_BRIDGE_URL=" in environment["output"]
        assert used["exit_code"] == 0 and "raw: [REDACTED:api_token]" in used["output"], used
        assert refused["exit_code"] == 1 and "no_such_entry" in refused["output"], refused
        assert_no_leak("what agy's terminal printed", json.dumps(records))
        assert_no_leak("the run's events", json.dumps(env.events(run)))


def test_under_the_sandbox_the_value_enters_through_env_only(
    octipus: Callable[..., Env], receiver: Receiver
) -> None:
    env = octipus(
        {"steps": [{"content": [{"type": "text", "text": "unused"}]}]},
        extra_env={"OCTIPUS_SECURITY__SHELLSANDBOX": "required"},
    )
    env.client.request("POST", "/rules", json={"level": "allow", "rule": "shell__run"})
    add_entries(env)
    env.daemon.workspace.joinpath("client.py").write_text(CLIENT)
    session = env.new_session()
    offline = dict(shell_call(receiver.url, TOKEN="{{secret:api_token}}"), network=False)
    # the sandbox's own command line (readable by any local user in /proc) never holds the value:
    # the command prints its sandbox's ancestors' command lines next to what the client prints
    offline["command"] = "cat /proc/1/cmdline | tr '\\0' ' '; echo; " + offline["command"]
    for arguments, reached in (
        (offline, False),
        (shell_call(receiver.url, TOKEN="{{secret:api_token}}"), True),
    ):
        done = ctl(
            env,
            "actions",
            "call",
            "shell__run",
            "--session",
            session,
            "--args",
            json.dumps(arguments),
            "--json",
        )
        assert done.returncode == 0, done.stdout + done.stderr
        result = json.loads(done.stdout)["invocation"]["result"]
        assert "raw: [REDACTED:api_token]" in result, result  # the program had the value in its env
        assert ("status 200" in result) is reached, result
        assert_no_leak("the sandboxed call's answer", done.stdout)
    assert receiver.seen == [f"Bearer {TOKEN}"]  # only the call with network: true reached it
    health = env.client.request("GET", "/health")
    assert health["shell_sandbox"]["in_force"] is True, health["shell_sandbox"]
