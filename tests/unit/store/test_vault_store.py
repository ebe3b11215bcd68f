"""The vault's table (issue 17 item 2), on SQLite and PostgreSQL: entries hold ciphertext only, a
listing never carries it, access changes and uses are recorded, a re-encryption is one transaction."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic import command

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store import Store, make_engine
from octipusd.store.engine import WRITE_OPTION
from octipusd.store.migrate import alembic_config, current_revision, upgrade
from octipusd.store.vault_store import VaultEntry


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(migrated_store_url: str, clock: Clock) -> Iterator[Store]:
    with Store.open(migrated_store_url, clock=clock) as opened:
        yield opened


def test_a_new_entry_takes_the_defaults_it_was_not_given_and_a_listing_has_no_ciphertext(
    store: Store,
) -> None:
    put = store.put_vault_entry(
        "gh", "cipher-gh", users=None, tools=None, default_users=["me"], default_tools=["shell__run"]
    )
    assert put.created and put.defaulted == ("users", "tools")
    assert put.entry.users == ("me",) and put.entry.tools == ("shell__run",)
    given = store.put_vault_entry(
        "aws",
        "cipher-aws",
        users=["ann", "ann", "bob"],
        tools=None,
        default_users=["me"],
        default_tools=["x"],
    )
    assert given.defaulted == ("tools",) and given.entry.users == ("ann", "bob")
    listed = store.list_vault_entries()
    assert [e.name for e in listed] == ["aws", "gh"]
    assert {f.name for f in dataclasses.fields(VaultEntry)}.isdisjoint({"ciphertext", "value"})
    assert all("cipher" not in repr(e) for e in listed)
    assert store.count_vault_entries() == 2
    assert store.vault_secrets(["gh", "missing"]) == {"gh": (listed[1], "cipher-gh")}


def test_an_existing_name_is_a_conflict_unless_replace_which_keeps_the_allowlists(
    store: Store, clock: Clock
) -> None:
    first = store.put_vault_entry(
        "gh", "old", users=["ann"], tools=["github.*"], default_users=["me"], default_tools=["shell__run"]
    ).entry
    with pytest.raises(ConflictError, match=r"vault entry 'gh' already exists.*--replace"):
        store.put_vault_entry("gh", "new", users=None, tools=None, default_users=[], default_tools=[])
    assert store.vault_secrets(["gh"])["gh"][1] == "old"
    clock.now += timedelta(minutes=5)
    put = store.put_vault_entry(
        "gh", "new", users=None, tools=None, default_users=["me"], default_tools=["shell__run"], replace=True
    )
    assert not put.created and put.defaulted == ()
    assert put.entry.users == ("ann",) and put.entry.tools == ("github.*",)
    assert put.entry.created_at == first.created_at and put.entry.updated_at == clock.now
    assert store.vault_secrets(["gh"])["gh"][1] == "new"
    again = store.put_vault_entry(
        "gh", "newer", users=["bob"], tools=None, default_users=[], default_tools=[], replace=True
    )
    assert again.entry.users == ("bob",) and again.entry.tools == ("github.*",)
    with pytest.raises(
        NotFoundError, match=r"^vault entry 'nope' does not exist, so it has no value to replace"
    ):
        store.put_vault_entry(
            "nope", "c", users=None, tools=None, default_users=[], default_tools=[], replace=True
        )
    assert store.vault_ciphertexts() == {"gh": "newer"}


def test_access_changes_uses_and_removal(store: Store, clock: Clock) -> None:
    store.put_vault_entry("gh", "c", users=["ann"], tools=["shell__run"], default_users=[], default_tools=[])
    entry = store.change_vault_access("gh", add_users=["bob", "ann"], add_tools=["github.*"])
    assert entry.users == ("ann", "bob") and entry.tools == ("shell__run", "github.*")
    for users, tools, message in (
        (
            ["ann"],
            ["shell__run", "absent"],
            "has no tool 'absent' to revoke (its tools: shell__run, github.*)",
        ),
        (["carol", "ann"], [], "has no user 'carol' to revoke (its users: ann, bob)"),
    ):
        with pytest.raises(InvalidRequestError, match=rf"^vault entry 'gh' {re.escape(message)}; nothing"):
            store.change_vault_access("gh", remove_users=users, remove_tools=tools)
    (unchanged,) = store.list_vault_entries()
    assert unchanged.users == ("ann", "bob") and unchanged.tools == ("shell__run", "github.*")
    entry = store.change_vault_access("gh", remove_users=["ann"], remove_tools=["shell__run"])
    assert entry.users == ("bob",) and entry.tools == ("github.*",)
    assert entry.last_used_at is None
    used_at = clock.now + timedelta(seconds=3)
    store.note_vault_use(["gh", "gone"], "github.create_issue", used_at)
    (listed,) = store.list_vault_entries()
    assert listed.last_used_at == used_at and listed.last_used_tool == "github.create_issue"
    for call in (
        lambda: store.change_vault_access("nope", add_users=["x"]),
        lambda: store.remove_vault_entry("nope"),
    ):
        with pytest.raises(NotFoundError, match=r"vault entry 'nope' does not exist; octipusctl vault list"):
            call()
    store.remove_vault_entry("gh")
    assert store.list_vault_entries() == [] and store.count_vault_entries() == 0


def test_reencryption_is_one_transaction(store: Store) -> None:
    for name in ("a", "b", "c"):
        store.put_vault_entry(
            name, f"old-{name}", users=["u"], tools=["t"], default_users=[], default_tools=[]
        )
    seen: list[str] = []

    def fail_at_c(cipher: str) -> str:
        seen.append(cipher)
        if cipher == "old-c":
            raise RuntimeError("cannot decrypt")
        return cipher.replace("old", "new")

    with pytest.raises(RuntimeError, match="cannot decrypt"):
        store.reencrypt_vault(fail_at_c)
    assert seen == ["old-a", "old-b", "old-c"]
    assert {n: c for n, (_, c) in store.vault_secrets(["a", "b", "c"]).items()} == {
        "a": "old-a",
        "b": "old-b",
        "c": "old-c",
    }
    assert store.reencrypt_vault(lambda cipher: cipher.replace("old", "new")) == 3
    assert {c for _, c in store.vault_secrets(["a", "b", "c"]).values()} == {"new-a", "new-b", "new-c"}


def test_downgrade_to_0009_drops_the_table_and_upgrade_brings_it_back(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        upgrade(engine)
        Store(engine).put_vault_entry("gh", "c", users=["u"], tools=["t"], default_users=[], default_tools=[])
        config = alembic_config()
        with engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                config.attributes["connection"] = conn
                command.downgrade(config, "0009")
        assert current_revision(engine) == "0009"
        assert "vault_entries" not in sa.inspect(engine).get_table_names()
        upgrade(engine)
        assert Store(engine).list_vault_entries() == []
    finally:
        engine.dispose()
