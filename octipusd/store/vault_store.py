"""Store methods of the vault's entries (mixed into :class:`~octipusd.store.Store`; table
``vault_entries``).

The store keeps what :mod:`octipusd.vault` gives it: an entry's value only as ciphertext (the key
never reaches the database), the users and tools allowed to use it, and its latest use. Reads that
return an entry to be listed (:class:`VaultEntry`) never carry the ciphertext;
:meth:`VaultStoreMixin.vault_secrets` is the one read that does, for a resolution. A key rotation
re-encrypts every entry in one transaction (:meth:`VaultStoreMixin.reencrypt_vault`). Same
conventions as ``repository.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select as core_select, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store.codec import StoreMixin, load_strings
from octipusd.store.models import VaultEntryRow

__all__ = ["VaultEntry", "VaultPut", "VaultStoreMixin"]


@dataclass(frozen=True, slots=True)
class VaultEntry:
    """A vault entry as it is listed: never its value, never its ciphertext.

    Attributes:
        name: The entry's name.
        users: The users who may use it.
        tools: The tool ids (or ``fnmatch`` patterns) it may be injected into.
        created_at: When it was added.
        updated_at: When its value or its allowlists last changed.
        last_used_at: Its latest resolution (None: never used).
        last_used_tool: The tool of that resolution.
    """

    name: str
    users: tuple[str, ...]
    tools: tuple[str, ...]
    created_at: datetime
    updated_at: datetime
    last_used_at: datetime | None
    last_used_tool: str | None


@dataclass(frozen=True, slots=True)
class VaultPut:
    """What :meth:`VaultStoreMixin.put_vault_entry` did.

    Attributes:
        entry: The entry as stored.
        created: It is new (False: an existing entry's value was replaced).
        defaulted: Which of ``users`` and ``tools`` took their defaults (a new entry given none).
    """

    entry: VaultEntry
    created: bool
    defaulted: tuple[str, ...]


def _entry(row: VaultEntryRow) -> VaultEntry:
    return VaultEntry(
        name=row.name,
        users=load_strings(row.users),
        tools=load_strings(row.tools),
        created_at=row.created_at,
        updated_at=row.updated_at,
        last_used_at=row.last_used_at,
        last_used_tool=row.last_used_tool,
    )


def _dump(values: Iterable[str]) -> str:
    return json.dumps(list(dict.fromkeys(values)), separators=(",", ":"))


def _missing(name: str) -> NotFoundError:
    return NotFoundError(f"vault entry {name!r} does not exist; octipusctl vault list shows the entries")


def _check_held(name: str, what: str, removed: Sequence[str], held: Sequence[str]) -> None:
    """InvalidRequestError naming the first of ``removed`` that is not in ``held``."""
    missing = [item for item in removed if item not in held]
    if missing:
        listed = ", ".join(held) or f"no {what}s"
        raise InvalidRequestError(
            f"vault entry {name!r} has no {what} {missing[0]!r} to revoke (its {what}s: {listed}); "
            "nothing was changed"
        )


class VaultStoreMixin(StoreMixin):
    """The vault's entries; see the module docstring."""

    def _vault_row(self, db: DbSession, name: str) -> VaultEntryRow:
        """The entry's row, locked for update on PostgreSQL (NotFoundError naming it)."""
        query = select(VaultEntryRow).where(col(VaultEntryRow.name) == name)
        row = db.exec(query if self._sqlite else query.with_for_update()).first()
        if row is None:
            raise _missing(name)
        return row

    def put_vault_entry(
        self,
        name: str,
        ciphertext: str,
        *,
        users: Sequence[str] | None,
        tools: Sequence[str] | None,
        default_users: Sequence[str],
        default_tools: Sequence[str],
        replace: bool = False,
    ) -> VaultPut:
        """Add an entry, or replace an existing entry's value when ``replace`` is asked.

        Args:
            name: The entry's name (checked by the caller).
            ciphertext: The value, encrypted.
            users: Its users (None: a new entry takes ``default_users``, a replaced one keeps its own).
            tools: Its tool allowlist (None: as ``users``, with ``default_tools``).
            default_users: The users of a new entry given none.
            default_tools: The tools of a new entry given none.
            replace: Replace the value of an existing entry instead of refusing.

        Raises:
            ConflictError: The entry exists and ``replace`` is False (nothing changed).
            NotFoundError: ``replace`` is True and the entry does not exist (nothing added).
            StoreError: The database failed.
        """
        now = self._clock()
        with self._tx(f"storing vault entry {name!r}", write=True) as db:
            query = select(VaultEntryRow).where(col(VaultEntryRow.name) == name)
            row = db.exec(query if self._sqlite else query.with_for_update()).first()
            if row is not None and not replace:
                raise ConflictError(
                    f"vault entry {name!r} already exists; replace its value with "
                    f"octipusctl vault add {name} --replace, or remove it first"
                )
            if row is None and replace:
                raise NotFoundError(
                    f"vault entry {name!r} does not exist, so it has no value to replace; add it "
                    f"without --replace (octipusctl vault list shows the entries)"
                )
            defaulted: list[str] = []
            created = row is None
            if row is None:
                if users is None:
                    users, defaulted = default_users, [*defaulted, "users"]
                if tools is None:
                    tools, defaulted = default_tools, [*defaulted, "tools"]
                row = VaultEntryRow(name=name, ciphertext=ciphertext, created_at=now, updated_at=now)
                db.add(row)
            row.ciphertext = ciphertext
            row.updated_at = now
            if users is not None:
                row.users = _dump(users)
            if tools is not None:
                row.tools = _dump(tools)
            try:
                db.flush()
            except IntegrityError:  # a concurrent add of the same name committed first
                raise ConflictError(
                    f"vault entry {name!r} was added by another request at the same time; nothing changed"
                ) from None
            return VaultPut(_entry(row), created=created, defaulted=tuple(defaulted))

    def list_vault_entries(self) -> list[VaultEntry]:
        """Every entry, by name (never a value or ciphertext).

        Raises:
            StoreError: The database failed.
        """
        with self._tx("listing the vault's entries") as db:
            rows = db.exec(select(VaultEntryRow).order_by(col(VaultEntryRow.name))).all()
            return [_entry(row) for row in rows]

    def count_vault_entries(self) -> int:
        """How many entries the vault holds.

        Raises:
            StoreError: The database failed.
        """
        with self._core("counting the vault's entries", single=True) as conn:
            return int(conn.execute(core_select(func.count()).select_from(VaultEntryRow)).scalar_one())

    def vault_ciphertexts(self) -> dict[str, str]:
        """Every entry's ciphertext by name (to check that the key decrypts them).

        Raises:
            StoreError: The database failed.
        """
        query = core_select(col(VaultEntryRow.name), col(VaultEntryRow.ciphertext)).order_by(
            col(VaultEntryRow.name)
        )
        with self._core("reading the vault's ciphertexts", single=True) as conn:
            return {name: ciphertext for name, ciphertext in conn.execute(query).all()}

    def vault_secrets(self, names: Sequence[str]) -> dict[str, tuple[VaultEntry, str]]:
        """The entries named (those that exist) with their ciphertext, read in one transaction.

        Raises:
            StoreError: The database failed.
        """
        with self._tx("reading vault entries") as db:
            rows = db.exec(select(VaultEntryRow).where(col(VaultEntryRow.name).in_(list(names)))).all()
            return {row.name: (_entry(row), row.ciphertext) for row in rows}

    def remove_vault_entry(self, name: str) -> None:
        """Remove an entry.

        Raises:
            NotFoundError: No such entry (nothing removed).
            StoreError: The database failed.
        """
        with self._tx(f"removing vault entry {name!r}", write=True) as db:
            db.delete(self._vault_row(db, name))

    def change_vault_access(
        self,
        name: str,
        *,
        add_users: Sequence[str] = (),
        add_tools: Sequence[str] = (),
        remove_users: Sequence[str] = (),
        remove_tools: Sequence[str] = (),
    ) -> VaultEntry:
        """Add users and tools to an entry's allowlists and remove others, in one transaction.

        Raises:
            NotFoundError: No such entry (nothing changed).
            InvalidRequestError: A user or tool to remove is not on the entry's list (named;
                nothing changed).
            StoreError: The database failed.
        """
        with self._tx(f"changing the access to vault entry {name!r}", write=True) as db:
            row = self._vault_row(db, name)
            _check_held(name, "user", remove_users, load_strings(row.users))
            _check_held(name, "tool", remove_tools, load_strings(row.tools))
            users = [u for u in (*load_strings(row.users), *add_users) if u not in set(remove_users)]
            tools = [t for t in (*load_strings(row.tools), *add_tools) if t not in set(remove_tools)]
            row.users, row.tools, row.updated_at = _dump(users), _dump(tools), self._clock()
            db.add(row)
            db.flush()
            return _entry(row)

    def note_vault_use(self, names: Sequence[str], tool: str, at: datetime) -> None:
        """Record the latest use of entries (one statement; a name no longer stored is skipped).

        Raises:
            StoreError: The database failed.
        """
        statement = (
            update(VaultEntryRow)
            .where(col(VaultEntryRow.name).in_(list(names)))
            .values(last_used_at=at, last_used_tool=tool)
        )
        with self._core(f"recording the use of vault entries by {tool}", write=True, single=True) as conn:
            conn.execute(statement)

    def reencrypt_vault(self, transform: Callable[[str], str]) -> int:
        """Replace every entry's ciphertext with ``transform(ciphertext)``, in one transaction.

        Args:
            transform: Decrypts with the old key and encrypts with the new one; an exception it
                raises rolls the whole transaction back (no entry changes).

        Returns:
            How many entries were re-encrypted.

        Raises:
            StoreError: The database failed (no entry changed).
            Exception: What ``transform`` raised (no entry changed).
        """
        with self._tx("re-encrypting the vault's entries", write=True) as db:
            query = select(VaultEntryRow).order_by(col(VaultEntryRow.name))
            rows = db.exec(query if self._sqlite else query.with_for_update()).all()
            for row in rows:
                row.ciphertext = transform(row.ciphertext)
                db.add(row)
            return len(rows)
