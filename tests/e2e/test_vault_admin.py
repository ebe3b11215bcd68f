"""The vault's administration against a real octipusd on SQLite (issue 17 items 1 and 3-logs):
``octipusctl vault`` add (from standard input), list, allow, revoke, remove, rotate-key; the value is
in no answer, no error body, no log line and no byte of the database file or its WAL; the web
listener refuses every vault route. (Tool calls that use the entries are tested with the real
``claude`` elsewhere.)"""

from __future__ import annotations

import base64
import getpass
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cryptography.fernet import Fernet

from octipusd.store import Store
from octipusd.testing.harness import DaemonHarness
from octipusd.vault import ResolvedValues, Vault, VaultKeys
from tests.e2e.terminal import on_terminal

CTL = str(Path(sys.executable).parent / "octipusctl")
ME = getpass.getuser()
UNUSED_MODEL = "http://127.0.0.1:9"
TOKEN = "ghp_e2eS3cretValue-0123456789abcdefXYZ"


def ctl(daemon: DaemonHarness, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, *args], env=daemon.env, input=stdin, capture_output=True, text=True, timeout=120, check=False
    )


def data_dir(daemon: DaemonHarness) -> Path:
    return daemon.root / "data" / "octipus"


def forms(value: str) -> list[bytes]:
    """The value and its base64, as bytes to search for."""
    return [value.encode(), base64.b64encode(value.encode())]


def assert_nowhere(daemon: DaemonHarness, *texts: str) -> None:
    """No database file (main, WAL, shared memory) and no daemon log byte holds the value."""
    files = [*data_dir(daemon).glob("octipus.db*"), daemon.log_path]
    assert any(f.name == "octipus.db" for f in files), files
    for path in files:
        raw = path.read_bytes()
        for form in forms(TOKEN):
            assert form not in raw, path
    for text in texts:
        assert TOKEN not in text


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonHarness]:
    with DaemonHarness(tmp_path_factory.mktemp("vault") / "d", UNUSED_MODEL) as started:
        yield started


def test_add_list_allow_revoke_remove_and_the_value_is_never_stored_or_shown(daemon: DaemonHarness) -> None:
    added = ctl(daemon, "vault", "add", "gh_token", stdin=TOKEN + "\n")
    assert added.returncode == 0, added.stderr
    assert f"added vault entry gh_token: users {ME}; tools shell__run" in added.stdout
    assert (
        "users: the daemon's user, by default" in added.stdout
        and "tools: shell__run, by default" in added.stdout
    )
    key = data_dir(daemon) / "vault.key"
    assert key.stat().st_mode & 0o777 == 0o600
    listed = ctl(daemon, "vault", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = json.loads(listed.stdout)["entries"]
    assert entry["name"] == "gh_token" and entry["users"] == [ME] and entry["tools"] == ["shell__run"]
    assert entry["last_used_at"] is None and json.loads(listed.stdout)["key_source"] == str(key)
    table = ctl(daemon, "vault", "list")
    assert "gh_token" in table.stdout and "never" in table.stdout
    allowed = ctl(daemon, "vault", "allow", "gh_token", "--user", "ann", "--tool", "github.*")
    assert allowed.returncode == 0, allowed.stderr
    assert f"users {ME}, ann; tools shell__run, github.*" in allowed.stdout
    revoked = ctl(daemon, "vault", "revoke", "gh_token", "--user", ME, "--tool", "shell__run")
    assert revoked.returncode == 0 and "users ann; tools github.*" in revoked.stdout
    health = ctl(daemon, "health", "--json")
    assert json.loads(health.stdout)["vault"] == {
        "key_source": str(key),
        "systemd_credential": False,
        "key_present": True,
        "rotation_pending": False,
        "entries": 1,
        "problem": None,
    }
    assert f"vault: 1 entries; key {key}" in ctl(daemon, "health").stdout
    assert_nowhere(
        daemon, added.stdout, added.stderr, listed.stdout, table.stdout, allowed.stdout, health.stdout
    )
    removed = ctl(daemon, "vault", "remove", "gh_token")
    assert removed.returncode == 0 and "removed vault entry gh_token" in removed.stdout
    assert json.loads(ctl(daemon, "vault", "list", "--json").stdout)["entries"] == []


def test_bad_input_is_refused_with_its_exit_code_and_never_echoes_the_value(daemon: DaemonHarness) -> None:
    assert ctl(daemon, "vault", "add", "dup", stdin=TOKEN).returncode == 0
    cases = [
        (("vault", "add", "dup"), TOKEN, 1, "vault entry 'dup' already exists"),
        (("vault", "add", "empty"), "\n", 2, "the value is empty"),
        (("vault", "add", "bad name"), TOKEN, 2, "vault entry name 'bad name' is not valid"),
        (("vault", "add", "big"), "x" * (64 * 1024 + 1), 2, "over the limit of 65536 bytes"),
        (("vault", "add", "x", "--user", "a b"), TOKEN, 2, "user 'a b' is not valid"),
        (("vault", "remove", "nope"), None, 2, "vault entry 'nope' does not exist"),
        (("vault", "allow", "dup"), None, 2, "nothing to allow: give --user U and/or --tool T"),
        (("vault", "revoke", "nope", "--user", "x"), None, 2, "vault entry 'nope' does not exist"),
        (("vault", "allow", "nope", "--user", "x"), None, 2, "vault entry 'nope' does not exist"),
        (
            ("vault", "add", "nope", "--replace"),
            TOKEN,
            2,
            "vault entry 'nope' does not exist, so it has no value",
        ),
        (
            ("vault", "revoke", "dup", "--user", "bob"),
            None,
            2,
            f"vault entry 'dup' has no user 'bob' to revoke (its users: {ME})",
        ),
        (("vault", "add", "short"), "abc\n", 2, "the vault value is 3 characters, under the minimum of 4"),
        (("vault", "allow", "dup", "--tool", ""), None, 2, "--tool must not be empty: give a tool id"),
        (("vault", "add", "x", "--user", ""), TOKEN, 2, "--user must not be empty: give a user name"),
        (
            ("vault", "add", "x", TOKEN, "--user", "ann"),
            None,
            2,
            "1 unexpected argument(s) after the name, not shown: the value is never an argument: type it "
            "at the prompt or pipe it on stdin",
        ),
        (("vault", "add", "x", "-" + TOKEN), None, 2, "the value is never an argument"),
    ]
    for args, stdin, code, message in cases:
        done = ctl(daemon, *args, stdin=stdin)
        assert done.returncode == code, (args, done.stdout, done.stderr)
        assert message in " ".join(done.stderr.split()), (args, done.stderr)
        assert TOKEN not in done.stdout + done.stderr
        assert "pydantic" not in done.stderr and "tools.0" not in done.stderr
    assert "x" not in [
        e["name"] for e in json.loads(ctl(daemon, "vault", "list", "--json").stdout)["entries"]
    ]
    assert ctl(daemon, "vault", "revoke", "dup", "--user", ME, "--tool", "shell__run").returncode == 0
    listed = ctl(daemon, "vault", "list").stdout
    assert "(no users)" in listed and "(no tools)" in listed and "nobody" not in listed
    replaced = ctl(daemon, "vault", "add", "dup", "--replace", stdin="another-value-1234\r\n")
    assert replaced.returncode == 0 and "replaced the value of vault entry dup" in replaced.stdout
    # schema failures of the API name the field and never echo what was sent
    http = httpx.Client(
        transport=httpx.HTTPTransport(uds=str(daemon.socket)), base_url="http://d/v1", timeout=30
    )
    with http:
        for body in (
            {"name": "ok", "value": TOKEN, "users": "not-a-list"},
            {"name": "ok", "value": TOKEN, "unknown": TOKEN},
            {"name": ["ok"], "value": TOKEN},
            {"name": "ok", "value": [TOKEN]},
        ):
            answer = http.post("/vault/entries", json=body)
            assert answer.status_code == 400, answer.text
            assert answer.json()["code"] == "invalid_request" and TOKEN not in answer.text
    assert ctl(daemon, "vault", "remove", "dup").returncode == 0
    assert_nowhere(daemon)


def test_the_web_listener_refuses_every_vault_route(daemon: DaemonHarness) -> None:
    parts = urlsplit(daemon.web_url())
    origin, token = f"{parts.scheme}://{parts.netloc}", parse_qs(parts.query)["token"][0]
    bearer = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{origin}/v1", headers=bearer, timeout=30) as web:
        assert web.get("/sessions").status_code == 200  # the token is good
        for method, path, body in (
            ("GET", "/vault/entries", None),
            ("POST", "/vault/entries", {"name": "web", "value": TOKEN}),
            ("DELETE", "/vault/entries/web", None),
            ("POST", "/vault/entries/web/allow", {"users": ["x"]}),
            ("POST", "/vault/entries/web/revoke", {"users": ["x"]}),
            ("POST", "/vault/rotate-key", None),
        ):
            answer = web.request(method, path, json=body)
            assert answer.status_code == 403, (path, answer.text)
            assert "only on the daemon's Unix socket" in answer.json()["message"] and TOKEN not in answer.text
    assert json.loads(ctl(daemon, "vault", "list", "--json").stdout)["entries"] == []


def test_rotate_key_re_encrypts_and_the_entries_still_resolve(tmp_path: Path) -> None:
    daemon = DaemonHarness(tmp_path / "d", UNUSED_MODEL).start()
    try:
        assert ctl(daemon, "vault", "add", "gh", "--tool", "github.*", stdin=TOKEN).returncode == 0
        assert ctl(daemon, "vault", "add", "other", stdin="other-value-5678").returncode == 0
        old_key = (data_dir(daemon) / "vault.key").read_bytes()
        rotated = ctl(daemon, "vault", "rotate-key")
        assert rotated.returncode == 0, rotated.stderr
        assert "vault key rotated" in rotated.stdout and "2 entries re-encrypted" in rotated.stdout
        assert (data_dir(daemon) / "vault.key").read_bytes() != old_key
        assert not (data_dir(daemon) / "vault.key.next").exists()
        # the daemon still serves the entries after a restart on the new key
        assert daemon.stop() == 0
        daemon.start()
        assert len(json.loads(ctl(daemon, "vault", "list", "--json").stdout)["entries"]) == 2
        assert daemon.stop() == 0
        assert_nowhere(daemon, rotated.stdout)
    finally:
        daemon.stop()
    # the stored entries resolve with the key the daemon left (its database and its data dir)
    with Store.open(f"sqlite:///{data_dir(daemon) / 'octipus.db'}") as store:
        vault = Vault(store, VaultKeys(data_dir(daemon), {}), daemon_user=ME, values=ResolvedValues())
        vault.start()
        assert vault.resolve_now(ME, "github.get_user", ["gh"]) == {"gh": TOKEN}
        assert vault.resolve_now(ME, "shell__run", ["other"]) == {"other": "other-value-5678"}


def test_a_key_that_does_not_decrypt_the_entries_or_is_missing_shows_in_health(tmp_path: Path) -> None:
    daemon = DaemonHarness(tmp_path / "d", UNUSED_MODEL).start()
    key = data_dir(daemon) / "vault.key"
    try:
        assert ctl(daemon, "vault", "add", "gh", stdin=TOKEN).returncode == 0
        assert daemon.stop() == 0
        key.write_bytes(Fernet.generate_key())  # someone restored the wrong key
        daemon.start()  # the daemon starts all the same
        problem = (
            f"the vault key {key} does not decrypt 1 entries (gh): restore the key they were stored "
            "with and restart octipusd"
        )
        assert json.loads(ctl(daemon, "health", "--json").stdout)["vault"]["problem"] == problem
        assert f"vault: {problem}" in " ".join(ctl(daemon, "health").stdout.split())
        assert f"vault: {problem}" in daemon.log_path.read_text()
        refused = ctl(daemon, "vault", "add", "other", stdin="other-value-5678")
        assert refused.returncode == 1 and "would mix two keys" in " ".join(refused.stderr.split())
        assert daemon.stop() == 0
        key.unlink()
        daemon.start()
        health = " ".join(ctl(daemon, "health").stdout.split())
        assert (
            f"the vault key {key} is missing while the vault holds 1 entries (gh): restore it from a backup"
            in health
        )
        assert daemon.stop() == 0
    finally:
        daemon.stop()


def _on_terminal(daemon: DaemonHarness, args: list[str], answers: list[str]) -> tuple[int, str]:
    """Run octipusctl on a terminal; type each answer after the prompt (``...: ``) that asks for it."""
    code, shown = on_terminal(args, daemon.env, [(": ", answer) for answer in answers])
    return code, shown.decode(errors="replace")


def test_add_on_a_terminal_asks_twice_and_never_echoes(daemon: DaemonHarness) -> None:
    code, shown = _on_terminal(daemon, ["vault", "add", "typed"], [TOKEN, TOKEN])
    assert code == 0, shown
    assert "value of vault entry typed (hidden): " in shown and "the same value again: " in shown
    assert "added vault entry typed" in shown and TOKEN not in shown
    code, shown = _on_terminal(daemon, ["vault", "add", "typo"], [TOKEN, TOKEN + "x"])
    assert code == 2 and "the two values differ; nothing was added" in shown and TOKEN not in shown
    names = [e["name"] for e in json.loads(ctl(daemon, "vault", "list", "--json").stdout)["entries"]]
    assert "typed" in names and "typo" not in names
    assert ctl(daemon, "vault", "remove", "typed").returncode == 0


def test_a_key_file_open_to_others_stops_the_start_naming_it(tmp_path: Path) -> None:
    daemon = DaemonHarness(tmp_path / "d", UNUSED_MODEL)
    key = data_dir(daemon) / "vault.key"
    key.parent.mkdir(parents=True, mode=0o700)
    key.write_bytes(Fernet.generate_key())
    key.chmod(0o644)
    with pytest.raises(RuntimeError, match=r"octipusd exited 1") as caught:
        daemon.start()
    assert f"the vault key file {key} is open to group or others (mode 0644); run chmod 600 {key}" in str(
        caught.value
    )
    assert not daemon.socket.exists()
