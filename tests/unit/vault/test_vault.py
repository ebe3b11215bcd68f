"""The vault (issue 17 item 1) over a real store (SQLite and PostgreSQL): resolution all or nothing
with each refusal's exact message, the administration's checks, values only as ciphertext, key
rotation, and the crash points of a rotation (a real process killed between the steps)."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError, VaultAccessError, VaultKeyError
from octipusd.store import Store
from octipusd.vault import MAX_VALUE_BYTES, ResolvedValues, Vault, VaultKeys

TOKEN = "ghp_S3cretValue-0123456789abcdef"


def make_vault(store: Store, data: Path, values: ResolvedValues | None = None) -> Vault:
    vault = Vault(
        store,
        VaultKeys(data, {}),
        daemon_user="me",
        values=values if values is not None else ResolvedValues(),
    )
    vault.start()
    return vault


@pytest.fixture
def vault(store: Store, tmp_path: Path) -> Vault:
    return make_vault(store, tmp_path / "data")


def _ciphertexts(store: Store) -> dict[str, str]:
    names = [e.name for e in store.list_vault_entries()]
    return {name: cipher for name, (_, cipher) in store.vault_secrets(names).items()}


@pytest.mark.anyio
async def test_resolve_returns_the_values_and_records_the_use(vault: Vault, store: Store) -> None:
    vault.add("github_token", TOKEN, users=["me", "ann"], tools=["shell__run", "github.*"])
    vault.add("other", "value-v2", users=["ann"], tools=["github.*"])
    assert await vault.resolve("ann", "github.create_issue", ["github_token", "other"]) == {
        "github_token": TOKEN,
        "other": "value-v2",
    }
    used = {e.name: e for e in vault.list_entries()}
    assert used["github_token"].last_used_tool == "github.create_issue"
    assert used["github_token"].last_used_at is not None and used["other"].last_used_at is not None
    assert await vault.resolve("me", "shell__run", ["github_token"]) == {"github_token": TOKEN}
    assert await vault.resolve("me", "shell__run", []) == {}


@pytest.mark.anyio
async def test_each_refusal_names_the_entry_and_the_command_that_would_allow_it(vault: Vault) -> None:
    vault.add("gh", TOKEN, users=["ann"], tools=["shell__run", "github.*"])
    cases = [
        (
            ("ann", "shell__run", ["gh_token"]),
            "vault entry 'gh_token' does not exist; check the exact name with the operator "
            "(octipusctl vault list shows the entries), or ask them to add it (octipusctl vault add gh_token)",
        ),
        (
            ("bob", "shell__run", ["gh"]),
            "vault entry 'gh' may not be used by user 'bob'; the operator can allow it with "
            "octipusctl vault allow gh --user bob",
        ),
        (
            ("ann", "gitlab.create_issue", ["gh"]),
            "vault entry 'gh' may not be used by tool 'gitlab.create_issue' (its tool allowlist: "
            "shell__run, github.*); the operator can allow it with octipusctl vault allow gh --tool "
            "gitlab.create_issue",
        ),
        (  # a pattern does not match a server whose name merely starts the same way
            ("ann", "githubx.read", ["gh"]),
            "vault entry 'gh' may not be used by tool 'githubx.read' (its tool allowlist: "
            "shell__run, github.*); the operator can allow it with octipusctl vault allow gh --tool githubx.read",
        ),
    ]
    for (user, tool, names), message in cases:
        with pytest.raises(VaultAccessError) as caught:
            await vault.resolve(user, tool, names)
        assert caught.value.message == message
        assert TOKEN not in caught.value.message
    # no guess at a near name ("gh" exists; the refusal of "gh_token" does not mention it)
    assert "'gh'" not in cases[0][1]


@pytest.mark.anyio
async def test_resolution_is_all_or_nothing_in_order(vault: Vault) -> None:
    vault.add("a", "value-a", users=["me"])
    vault.add("b", "value-b", users=["ann"])
    with pytest.raises(VaultAccessError, match=r"^vault entry 'missing' does not exist"):
        await vault.resolve("me", "shell__run", ["a", "missing", "b"])
    with pytest.raises(VaultAccessError, match=r"^vault entry 'b' may not be used by user 'me'"):
        await vault.resolve("me", "shell__run", ["a", "b", "missing"])
    assert all(e.last_used_at is None for e in vault.list_entries())  # nothing recorded


def test_add_applies_the_defaults_and_refuses_bad_input_without_quoting_the_value(vault: Vault) -> None:
    put = vault.add("gh", TOKEN)
    assert put.created and put.defaulted == ("users", "tools")
    assert put.entry.users == ("me",) and put.entry.tools == ("shell__run",)
    with pytest.raises(ConflictError, match=r"already exists"):
        vault.add("gh", "other")
    assert not vault.add("gh", "other", replace=True).created
    assert vault.add("gh", "abcd", replace=True).entry.name == "gh"  # 4 characters: the minimum
    with pytest.raises(
        NotFoundError, match=r"^vault entry 'nope' does not exist, so it has no value to replace"
    ):
        vault.add("nope", TOKEN, replace=True)
    bad: list[tuple[dict[str, object], str]] = [
        ({"name": "has space", "value": "v"}, r"vault entry name 'has space' is not valid: use 1 to 128"),
        ({"name": "x" * 129, "value": "v"}, r"is not valid: use 1 to 128 letters"),
        ({"name": "{{secret:x}}", "value": "v"}, r"is not valid"),
        ({"name": "ok", "value": ""}, r"^the vault value is empty"),
        (
            {"name": "ok", "value": "abc"},
            r"^the vault value is 3 characters, under the minimum of 4: a shorter value would be masked",
        ),
        ({"name": "ok", "value": TOKEN + "\x00"}, r"^the vault value holds a NUL character"),
        ({"name": "ok", "value": TOKEN + "\ud800"}, r"^the vault value is not valid Unicode text"),
        (
            {"name": "ok", "value": TOKEN + "é" * MAX_VALUE_BYTES},
            rf"^the vault value is {len(TOKEN) + 2 * MAX_VALUE_BYTES} bytes, over the limit of {MAX_VALUE_BYTES} bytes$",
        ),
        ({"name": "ok", "value": TOKEN, "users": ["a b"]}, r"^user 'a b' is not valid"),
        ({"name": "ok", "value": TOKEN, "tools": [""]}, r"^tool '' is not valid"),
        (
            {"name": "ok", "value": TOKEN, "tools": ["t"] * 257},
            r"^257 tools given; an entry lists at most 256",
        ),
    ]
    for kwargs, message in bad:
        with pytest.raises(InvalidRequestError, match=message) as caught:
            vault.add(**kwargs)  # type: ignore[arg-type]
        assert TOKEN not in caught.value.message
    assert [e.name for e in vault.list_entries()] == ["gh"]


def test_values_are_stored_only_as_ciphertext_and_never_listed(vault: Vault, store: Store) -> None:
    vault.add("gh", TOKEN, users=["me"], tools=["github.*"])
    (entry,) = vault.list_entries()
    listed = repr(dataclasses.asdict(entry))
    assert TOKEN not in listed and "gAAAA" not in listed  # neither the value nor its ciphertext
    cipher = _ciphertexts(store)["gh"]
    assert TOKEN not in cipher and cipher.startswith("gAAAA")  # a Fernet token


def test_allow_and_revoke(vault: Vault) -> None:
    vault.add("gh", TOKEN)
    entry = vault.allow("gh", users=["ann"], tools=["github.*"])
    assert entry.users == ("me", "ann") and entry.tools == ("shell__run", "github.*")
    entry = vault.revoke("gh", users=["me"], tools=["shell__run"])
    assert entry.users == ("ann",) and entry.tools == ("github.*",)
    with pytest.raises(InvalidRequestError, match=r"nothing to allow: give users and/or tools"):
        vault.allow("gh")
    with pytest.raises(NotFoundError, match=r"vault entry 'nope' does not exist"):
        vault.revoke("nope", users=["ann"])
    with pytest.raises(
        InvalidRequestError, match=r"^vault entry 'gh' has no user 'bob' to revoke \(its users: ann\)"
    ):
        vault.revoke("gh", users=["bob"])
    vault.remove("gh")
    with pytest.raises(NotFoundError):
        vault.remove("gh")


@pytest.mark.anyio
async def test_rotation_re_encrypts_every_entry_and_retires_the_old_key(
    vault: Vault, store: Store, tmp_path: Path
) -> None:
    vault.add("a", "value-a")
    vault.add("b", "value-b")
    old_key = (tmp_path / "data" / "vault.key").read_bytes()
    before = _ciphertexts(store)
    assert vault.rotate_key() == 2
    after = _ciphertexts(store)
    assert all(after[n] != before[n] for n in before)
    new_key = (tmp_path / "data" / "vault.key").read_bytes()
    assert new_key != old_key and not (tmp_path / "data" / "vault.key.next").exists()
    assert Fernet(new_key.strip()).decrypt(after["a"].encode()) == b"value-a"
    assert await vault.resolve("me", "shell__run", ["a", "b"]) == {"a": "value-a", "b": "value-b"}
    # a fresh process reads the new key
    assert await make_vault(store, tmp_path / "data").resolve("me", "shell__run", ["b"]) == {"b": "value-b"}


@pytest.mark.anyio
async def test_a_lost_or_wrong_key_is_a_key_error_and_never_replaced_while_entries_exist(
    vault: Vault, store: Store, tmp_path: Path
) -> None:
    vault.add("a", "value-a")
    key = tmp_path / "data" / "vault.key"
    key.write_bytes(Fernet.generate_key())  # someone restored the wrong key
    wrong = make_vault(store, tmp_path / "data")
    with pytest.raises(VaultKeyError, match=r"^vault entry 'a' cannot be decrypted with the key .*vault.key"):
        await wrong.resolve("me", "shell__run", ["a"])
    before = _ciphertexts(store)
    with pytest.raises(VaultKeyError, match=r"nothing was re-encrypted"):
        wrong.rotate_key()
    assert _ciphertexts(store) == before
    # the failed rotation left no pending rotation behind (which would stop the next start)
    assert not (tmp_path / "data" / "vault.key.next").exists()
    assert make_vault(store, tmp_path / "data").status().rotation_pending is False
    for leftover in (tmp_path / "data").glob("vault.key*"):
        leftover.unlink()
    lost = make_vault(store, tmp_path / "data")
    with pytest.raises(VaultKeyError, match=r"is missing while the vault holds 1 entries"):
        lost.add("b", "value-b")
    with pytest.raises(
        VaultKeyError, match=r"^vault entry 'a' cannot be decrypted: the vault key .* is missing"
    ):
        await lost.resolve("me", "shell__run", ["a"])
    assert not key.exists()


@pytest.mark.anyio
async def test_resolved_values_are_remembered_for_the_log_filter(store: Store, tmp_path: Path) -> None:
    values = ResolvedValues()
    vault = make_vault(store, tmp_path / "data", values)
    vault.add("gh", TOKEN)
    assert not values
    await vault.resolve("me", "shell__run", ["gh"])
    assert values.mask(f"token={TOKEN}") == "token=[REDACTED:gh]"


CRASHING_ROTATION = """
import os, sys
from pathlib import Path
from octipusd.store import Store
from octipusd.vault import ResolvedValues, Vault, VaultKeys
url, data, point = sys.argv[1:4]
def fault(step):
    if step == point:
        os._exit(9)
store = Store.open(url)
Vault(store, VaultKeys(Path(data), {}), daemon_user="me", values=ResolvedValues(), fault=fault).rotate_key()
os._exit(0)
"""


@pytest.mark.parametrize("point", ["next_written", "reencrypted"])
@pytest.mark.parametrize("finish", ["start", "rotate"])
def test_a_rotation_killed_between_its_steps_loses_nothing_and_is_finished_later(
    store: Store, migrated_store_url: str, tmp_path: Path, point: str, finish: str
) -> None:
    data = tmp_path / "data"
    vault = make_vault(store, data)
    vault.add("a", "value-a")
    vault.add("b", "value-b")
    old_key = (data / "vault.key").read_bytes()
    before = _ciphertexts(store)
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_ROTATION, migrated_store_url, str(data), point],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 9, done.stderr
    next_key = (data / "vault.key.next").read_bytes()
    assert (data / "vault.key").read_bytes() == old_key
    reencrypted = _ciphertexts(store) != before
    assert reencrypted == (point == "reencrypted")
    # a daemon started now reads both keys: every entry resolves, whichever key it is under
    later = Vault(store, VaultKeys(data, {}), daemon_user="me", values=ResolvedValues())
    assert later.resolve_now("me", "shell__run", ["a", "b"]) == {"a": "value-a", "b": "value-b"}
    if finish == "start":
        later.start()
    else:
        assert later.rotate_key() == 2
    assert not (data / "vault.key.next").exists()
    assert (data / "vault.key").read_bytes() == next_key  # the key the crashed rotation wrote
    only_new = Fernet(next_key.strip())
    assert {n: only_new.decrypt(c.encode()) for n, c in _ciphertexts(store).items()} == {
        "a": b"value-a",
        "b": b"value-b",
    }
    assert later.resolve_now("me", "shell__run", ["a"]) == {"a": "value-a"}


def _write_key(path: Path, key: bytes) -> None:
    path.write_bytes(key + b"\n")
    path.chmod(0o600)


def _put_under(store: Store, name: str, value: str, key: bytes) -> None:
    """An entry encrypted with another key than the vault's (as a restored wrong key leaves them)."""
    cipher = Fernet(key).encrypt(value.encode()).decode()
    store.put_vault_entry(
        name, cipher, users=["me"], tools=None, default_users=[], default_tools=["shell__run"]
    )


@pytest.mark.anyio
async def test_a_key_that_does_not_decrypt_entries_is_reported_at_start_and_add_refuses_to_mix_keys(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    vault = make_vault(store, data)
    vault.add("good", "value-good")
    assert vault.status().problem is None
    _put_under(store, "lost_a", "value-a", Fernet.generate_key())
    _put_under(store, "lost_b", "value-b", Fernet.generate_key())
    with caplog.at_level("ERROR", logger="octipusd.vault"):
        started = make_vault(store, data)  # the daemon starts: other work goes on
    problem = (
        f"the vault key {data / 'vault.key'} does not decrypt 2 entries (lost_a, lost_b): restore the key "
        "they were stored with and restart octipusd"
    )
    assert started.status().problem == problem
    assert [r.getMessage() for r in caplog.records] == [f"vault: {problem}"]
    assert await started.resolve("me", "shell__run", ["good"]) == {"good": "value-good"}
    before = _ciphertexts(store)
    with pytest.raises(VaultKeyError) as caught:
        started.add("new", TOKEN)
    assert caught.value.message == (
        f"vault entry 'new' was not stored: the vault key {data / 'vault.key'} does not decrypt 2 entries "
        "(lost_a, lost_b), and a value under it would mix two keys; restore the key they were stored "
        "with (or remove those entries)"
    )
    with pytest.raises(VaultKeyError, match=r"does not decrypt 1 entries \(lost_b\)"):
        started.add("lost_a", "value-a-again", replace=True)  # replacing one still leaves the other
    assert _ciphertexts(store) == before
    started.remove("lost_b")
    assert started.status().problem == problem.replace("2 entries (lost_a, lost_b)", "1 entries (lost_a)")
    started.add("lost_a", "value-a-again", replace=True)  # its value, under the key now
    assert started.status().problem is None
    assert await started.resolve("me", "shell__run", ["lost_a"]) == {"lost_a": "value-a-again"}


def test_a_missing_key_while_entries_exist_is_reported_at_start(store: Store, tmp_path: Path) -> None:
    data = tmp_path / "data"
    make_vault(store, data).add("gh", TOKEN)
    (data / "vault.key").unlink()
    status = make_vault(store, data).status()
    assert status.problem == (
        f"the vault key {data / 'vault.key'} is missing while the vault holds 1 entries (gh): restore it "
        "from a backup and restart octipusd"
    )
    assert not status.key_present and not (data / "vault.key").exists()


def test_a_start_discards_a_new_key_no_entry_is_under_and_refuses_when_neither_key_decrypts(
    store: Store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data"
    make_vault(store, data).add("good", "value-good")
    _put_under(store, "lost", "value-lost", Fernet.generate_key())
    key = (data / "vault.key").read_bytes()
    next_path = data / "vault.key.next"
    _write_key(next_path, Fernet.generate_key())  # a rotation that failed on "lost" left it
    with caplog.at_level("WARNING", logger="octipusd.vault"):
        started = make_vault(store, data)
    assert not next_path.exists() and (data / "vault.key").read_bytes() == key
    assert f"vault: removing {next_path}: a rotation left it, no entry is encrypted with it" in caplog.text
    status = started.status()
    assert not status.rotation_pending and status.problem is not None and "1 entries (lost)" in status.problem
    assert started.resolve_now("me", "shell__run", ["good"]) == {"good": "value-good"}
    # neither the current key nor the new one decrypts "good": nothing is touched, the start refused
    _write_key(data / "vault.key", Fernet.generate_key())
    _write_key(next_path, Fernet.generate_key())
    before = _ciphertexts(store)
    with pytest.raises(VaultKeyError) as caught:
        make_vault(store, data)
    assert caught.value.message == (
        f"a vault key rotation is pending, and neither the key {data / 'vault.key'} nor {next_path} "
        "decrypts 2 entries (good, lost); nothing was changed: restore the key they were stored with "
        "(see the README's vault section)"
    )
    assert next_path.exists() and _ciphertexts(store) == before
