"""The vault: named credentials encrypted at rest, each with its users and its tool allowlist
(seed 003 "Authenticate with a vault credential"; issue 17 item 1).

:class:`Vault` implements :class:`~octipusd.toolkit.secrets.SecretResolver` (the tool-call side
resolves ``{{secret:NAME}}`` placeholders through it) and the operator's administration (add, list,
remove, allow, revoke, rotate the key), which the API offers on the Unix socket only. A value is
encrypted with the key of :class:`~octipusd.vault.keys.VaultKeys` before it reaches the store and
decrypted only to resolve a call; no listing, message or log line of this module holds one.
"""

from __future__ import annotations

import fnmatch
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from octipusd.errors import InvalidRequestError, VaultAccessError, VaultKeyError
from octipusd.store.aio import in_thread
from octipusd.store.repository import Store
from octipusd.store.vault_store import VaultEntry, VaultPut
from octipusd.toolkit.secrets import NAME_CHARS
from octipusd.vault.keys import KeySource, VaultKeys
from octipusd.vault.masking import RESOLVED, ResolvedValues

__all__ = [
    "DEFAULT_TOOLS",
    "MAX_ACCESS_CHARS",
    "MAX_ACCESS_ITEMS",
    "MAX_VALUE_BYTES",
    "MIN_VALUE_CHARS",
    "NAME_PATTERN",
    "Vault",
    "VaultStatus",
    "check_name",
    "tool_allowed",
]

log = logging.getLogger("octipusd.vault")

#: An entry's name: letters, digits, ``_`` and ``-``, 1 to 128 characters (the placeholder grammar).
NAME_PATTERN: Final = re.compile(NAME_CHARS + "{1,128}")
#: Largest value of an entry (bytes, UTF-8): a token, a key, a small certificate.
MAX_VALUE_BYTES: Final = 64 * 1024
#: Shortest value of an entry (characters): a shorter one would be masked wherever those characters
#: appear in an output (a 1-character value: every such letter).
MIN_VALUE_CHARS: Final = 4
#: Most entry names one message lists (the rest are counted).
MAX_NAMED_ENTRIES: Final = 10
#: Most users, and most tools, one entry lists.
MAX_ACCESS_ITEMS: Final = 256
#: Longest user name or tool id (pattern) in an allowlist (characters).
MAX_ACCESS_CHARS: Final = 256
#: The tool allowlist of an entry added without ``--tool``.
DEFAULT_TOOLS: Final = ("shell__run",)
#: Where a control or white-space character is (refused in user names and tool ids).
_BLANK = re.compile(r"[\s\x00-\x1f\x7f]")

#: A named step of a key rotation, handed to the ``fault`` hook (tests crash there).
FaultHook = Callable[[str], None]


@dataclass(frozen=True)
class VaultStatus:
    """What health tells of the vault.

    Attributes:
        key_source: Where the key is read from (a file path, or the systemd credential).
        systemd_credential: The key is systemd's credential.
        key_present: The key exists (a data-dir key is created when the first entry is added).
        rotation_pending: A rotation was begun and not finished (finished at the next start).
        entries: How many entries the vault holds.
        problem: Why entries cannot be decrypted (the key is missing or not theirs) and what to do;
            None when the key decrypts every entry.
    """

    key_source: str
    systemd_credential: bool
    key_present: bool
    rotation_pending: bool
    entries: int
    problem: str | None


def check_name(name: str) -> str:
    """``name`` if it is an entry name, else InvalidRequestError saying the grammar."""
    if not NAME_PATTERN.fullmatch(name):
        raise InvalidRequestError(
            f"vault entry name {name[:140]!r} is not valid: use 1 to 128 letters, digits, '_' or '-'"
        )
    return name


def _check_value(value: str) -> bytes:
    """The value's bytes; InvalidRequestError (never quoting the value) when it is refused."""
    if not value:
        raise InvalidRequestError("the vault value is empty; give the credential's value")
    if len(value) < MIN_VALUE_CHARS:
        raise InvalidRequestError(
            f"the vault value is {len(value)} characters, under the minimum of {MIN_VALUE_CHARS}: a "
            "shorter value would be masked wherever those characters appear in a tool's output"
        )
    if "\x00" in value:
        raise InvalidRequestError(
            "the vault value holds a NUL character, which a process environment cannot carry"
        )
    try:
        raw = value.encode("utf-8", errors="strict")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in JSON): never quote the value
        raise InvalidRequestError(
            "the vault value is not valid Unicode text (it holds a lone surrogate); give the credential's text"
        ) from None
    if len(raw) > MAX_VALUE_BYTES:
        raise InvalidRequestError(
            f"the vault value is {len(raw)} bytes, over the limit of {MAX_VALUE_BYTES} bytes"
        )
    return raw


def _check_access(items: Sequence[str] | None, what: str) -> list[str] | None:
    """Users or tools of an allowlist, de-duplicated; InvalidRequestError naming a bad one."""
    if items is None:
        return None
    if len(items) > MAX_ACCESS_ITEMS:
        raise InvalidRequestError(f"{len(items)} {what} given; an entry lists at most {MAX_ACCESS_ITEMS}")
    for item in items:
        if not item or len(item) > MAX_ACCESS_CHARS or _BLANK.search(item):
            raise InvalidRequestError(
                f"{what[:-1]} {item[:80]!r} is not valid: give 1 to {MAX_ACCESS_CHARS} characters "
                "without spaces or control characters"
            )
    return list(dict.fromkeys(items))


def _named(names: Sequence[str]) -> str:
    """``names`` for a message: the first :data:`MAX_NAMED_ENTRIES`, then how many more."""
    shown = ", ".join(names[:MAX_NAMED_ENTRIES])
    more = len(names) - MAX_NAMED_ENTRIES
    return f"{shown} and {more} more" if more > 0 else shown


def _opens(crypto: MultiFernet | Fernet, ciphertext: str) -> bool:
    """Whether ``crypto`` decrypts ``ciphertext``."""
    try:
        crypto.decrypt(ciphertext.encode("ascii"))
    except (InvalidToken, UnicodeError):
        return False
    return True


def tool_allowed(tool_id: str, allowlist: Sequence[str]) -> bool:
    """Whether ``tool_id`` is in ``allowlist``: an exact id, or an ``fnmatch`` pattern
    (``github.*`` for every tool of the MCP server ``github``)."""
    return any(tool_id == pattern or fnmatch.fnmatchcase(tool_id, pattern) for pattern in allowlist)


class Vault:
    """The vault over the store and the key.

    Args:
        store: The open store (table ``vault_entries``).
        keys: The vault's key.
        daemon_user: The user a new entry is for when added without users.
        values: Where resolved values are remembered for the log filter (:data:`RESOLVED`).
        fault: Called with the name of each step of a key rotation once it is done
            (``next_written``, ``reencrypted``): tests crash the process there.
    """

    def __init__(
        self,
        store: Store,
        keys: VaultKeys,
        *,
        daemon_user: str,
        values: ResolvedValues = RESOLVED,
        fault: FaultHook | None = None,
    ) -> None:
        self._store = store
        self._keys = keys
        self._daemon_user = daemon_user
        self._values = values
        self._fault = fault
        # one administration (or one resolution's read and decryption) at a time: a resolution
        # never sees entries re-encrypted under a key it does not hold yet
        self._lock = threading.Lock()
        # what start (and every change of the entries since) found wrong with the key
        self._problem: str | None = None

    @property
    def key_source(self) -> KeySource:
        """Where the key is read from."""
        return self._keys.source

    def start(self) -> None:
        """Check the key before the daemon serves, and settle a rotation a stopped daemon left.

        Every entry is decrypted once (entries are few): when the key is missing or does not
        decrypt some, an error naming them is logged and kept for health (:attr:`VaultStatus.problem`),
        and the daemon starts (resolutions of those entries fail, naming the key). A pending
        rotation (``vault.key.next``) is finished when every entry decrypts with one of the two
        keys; its new key is removed, with a warning, when no entry is under it and the current key
        decrypts entries.

        Raises:
            VaultKeyError: a key file is open to group or others, unreadable or not a key, or a
                rotation is pending and some entries decrypt with neither key (nothing changed).
            StoreError: The database failed.
        """
        crypto = self._keys.load()
        with self._lock:
            if crypto is not None and self._keys.pending():
                self._settle_rotation(crypto)
            self._problem = self._key_problem()
            if self._problem is not None:
                log.error("vault: %s", self._problem)

    def _settle_rotation(self, crypto: MultiFernet) -> None:
        """Finish a pending rotation, discard its unused new key, or refuse (see :meth:`start`)."""
        ciphertexts = self._store.vault_ciphertexts()
        unreadable = [n for n, c in ciphertexts.items() if not _opens(crypto, c)]
        if not unreadable:
            log.warning("vault: finishing the key rotation a stopped octipusd left pending")
            self._reencrypt(crypto)
            self._keys.finish_rotation()
            return
        current, new = self._keys.split()
        under_new = new is not None and any(_opens(new, c) for c in ciphertexts.values())
        if not under_new and current is not None and len(unreadable) < len(ciphertexts):
            log.warning(
                "vault: removing %s: a rotation left it, no entry is encrypted with it, and the "
                "current key %s decrypts the entries it was meant to re-encrypt",
                self._keys.next_path,
                self._keys.source.describe(),
            )
            self._keys.discard_rotation()
            return
        raise VaultKeyError(
            f"a vault key rotation is pending, and neither the key {self._keys.source.describe()} nor "
            f"{self._keys.next_path} decrypts {len(unreadable)} entries ({_named(unreadable)}); nothing "
            "was changed: restore the key they were stored with (see the README's vault section)"
        )

    def _key_problem(self) -> str | None:
        """Why some entries cannot be decrypted (the key missing or not theirs), or None."""
        ciphertexts = self._store.vault_ciphertexts()
        if not ciphertexts:
            return None
        source = self._keys.source.describe()
        crypto = self._keys.crypto()
        if crypto is None:
            return (
                f"the vault key {source} is missing while the vault holds {len(ciphertexts)} entries "
                f"({_named(list(ciphertexts))}): restore it from a backup and restart octipusd"
            )
        unreadable = [n for n, c in ciphertexts.items() if not _opens(crypto, c)]
        if not unreadable:
            return None
        return (
            f"the vault key {source} does not decrypt {len(unreadable)} entries ({_named(unreadable)}): "
            "restore the key they were stored with and restart octipusd"
        )

    def status(self) -> VaultStatus:
        """The vault's key source, entry count and key problem (for health).

        Raises:
            StoreError: The database failed.
        """
        return VaultStatus(
            key_source=self._keys.source.describe(),
            systemd_credential=self._keys.source.systemd,
            key_present=self._keys.exists(),
            rotation_pending=self._keys.pending(),
            entries=self._store.count_vault_entries(),
            problem=self._problem,
        )

    # resolution ------------------------------------------------------------------------------

    async def resolve(self, user: str, tool_id: str, names: Sequence[str]) -> Mapping[str, str]:
        """Return ``{name: value}`` for one invocation of ``tool_id`` acting for ``user``
        (:class:`~octipusd.toolkit.secrets.SecretResolver`); see :meth:`resolve_now`."""
        return await in_thread(self.resolve_now, user, tool_id, names)

    def resolve_now(self, user: str, tool_id: str, names: Sequence[str]) -> dict[str, str]:
        """Resolve entries, all or nothing; record their use (time and tool) in one write.

        Each name is checked in order: the entry exists, ``user`` is among its users, ``tool_id``
        matches its tool allowlist. The values are remembered for the log filter.

        Raises:
            VaultAccessError: the first name refused; the message names the entry and the
                ``octipusctl vault`` command that would allow it, never another name or a value.
            VaultKeyError: the key is missing or does not decrypt an entry.
            StoreError: The database failed.
        """
        if not names:
            return {}
        with self._lock:
            found = self._store.vault_secrets(names)
            for name in names:
                self._check_access(name, found.get(name), user, tool_id)
            crypto = self._crypto_for_reading(names[0])
            values = {name: self._decrypt(crypto, name, found[name][1]) for name in names}
        self._values.remember(values)
        self._store.note_vault_use(list(values), tool_id, self._store.now())
        return values

    @staticmethod
    def _check_access(name: str, found: tuple[VaultEntry, str] | None, user: str, tool_id: str) -> None:
        if found is None:
            raise VaultAccessError(
                f"vault entry {name!r} does not exist; check the exact name with the operator "
                f"(octipusctl vault list shows the entries), or ask them to add it (octipusctl vault add {name})"
            )
        entry = found[0]
        if user not in entry.users:
            raise VaultAccessError(
                f"vault entry {name!r} may not be used by user {user!r}; the operator can allow it with "
                f"octipusctl vault allow {name} --user {user}"
            )
        if not tool_allowed(tool_id, entry.tools):
            allowlist = ", ".join(entry.tools) or "none"
            raise VaultAccessError(
                f"vault entry {name!r} may not be used by tool {tool_id!r} (its tool allowlist: {allowlist}); "
                f"the operator can allow it with octipusctl vault allow {name} --tool {tool_id}"
            )

    def _crypto_for_reading(self, name: str) -> MultiFernet:
        crypto = self._keys.crypto()
        if crypto is None:
            raise VaultKeyError(
                f"vault entry {name!r} cannot be decrypted: the vault key {self._keys.source.describe()} "
                "is missing; restore it from a backup"
            )
        return crypto

    def _decrypt(self, crypto: MultiFernet, name: str, ciphertext: str) -> str:
        try:
            return crypto.decrypt(ciphertext.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError):
            raise VaultKeyError(
                f"vault entry {name!r} cannot be decrypted with the key {self._keys.source.describe()}: "
                "it is not the key the entry was stored with; restore that key, or add the entry again"
            ) from None

    # administration --------------------------------------------------------------------------

    def add(
        self,
        name: str,
        value: str,
        *,
        users: Sequence[str] | None = None,
        tools: Sequence[str] | None = None,
        replace: bool = False,
    ) -> VaultPut:
        """Add an entry (or replace an existing entry's value when ``replace``).

        A new entry given no users is for the daemon's user; given no tools, for ``shell__run``
        (:data:`DEFAULT_TOOLS`); :attr:`VaultPut.defaulted` says which defaults were taken. A
        replaced entry keeps its users and tools unless given. The key is created on first need.

        Raises:
            InvalidRequestError: a bad name, value, user or tool (the value is never quoted).
            ConflictError: the entry exists and ``replace`` is False.
            NotFoundError: ``replace`` is True and the entry does not exist.
            VaultKeyError: the key cannot be read or created, it is missing while entries exist, or
                it does not decrypt another entry (a new value under it would mix two keys).
            StoreError: The database failed.
        """
        check_name(name)
        raw = _check_value(value)
        checked_users, checked_tools = _check_access(users, "users"), _check_access(tools, "tools")
        with self._lock:
            crypto = self._keys.crypto() or self._create_key()
            self._refuse_mixed_keys(crypto, name, replace)
            ciphertext = crypto.encrypt(raw).decode("ascii")
            put = self._store.put_vault_entry(
                name,
                ciphertext,
                users=checked_users,
                tools=checked_tools,
                default_users=[self._daemon_user],
                default_tools=DEFAULT_TOOLS,
                replace=replace,
            )
            self._problem = None  # every other entry decrypts, and this one is under the key now
            return put

    def _refuse_mixed_keys(self, crypto: MultiFernet, name: str, replace: bool) -> None:
        """VaultKeyError when the key does not decrypt an existing entry (but the one replaced)."""
        ciphertexts = self._store.vault_ciphertexts()
        unreadable = [
            n for n, c in ciphertexts.items() if not (replace and n == name) and not _opens(crypto, c)
        ]
        if unreadable:
            raise VaultKeyError(
                f"vault entry {name!r} was not stored: the vault key {self._keys.source.describe()} does "
                f"not decrypt {len(unreadable)} entries ({_named(unreadable)}), and a value under it "
                "would mix two keys; restore the key they were stored with (or remove those entries)"
            )

    def _create_key(self) -> MultiFernet:
        """Create the key, unless entries exist (they were encrypted with a key now missing)."""
        held = self._store.count_vault_entries()
        if held:
            raise VaultKeyError(
                f"the vault key {self._keys.source.describe()} is missing while the vault holds {held} "
                "entries encrypted with it; restore the key from a backup (a new key would not decrypt them)"
            )
        crypto = self._keys.create()
        log.info("vault: created the key %s", self._keys.source.describe())
        return crypto

    def list_entries(self) -> list[VaultEntry]:
        """Every entry: names, users, tools, times, last use; never a value.

        Raises:
            StoreError: The database failed.
        """
        return self._store.list_vault_entries()

    def remove(self, name: str) -> None:
        """Remove an entry.

        Raises:
            NotFoundError: No such entry.
            StoreError: The database failed.
        """
        with self._lock:
            self._store.remove_vault_entry(name)
            self._problem = self._key_problem() if self._problem is not None else None

    def allow(self, name: str, *, users: Sequence[str] = (), tools: Sequence[str] = ()) -> VaultEntry:
        """Add users and tools to an entry's allowlists.

        Raises:
            InvalidRequestError: neither given, or a bad user or tool.
            NotFoundError: No such entry.
            StoreError: The database failed.
        """
        users, tools = self._changes(name, users, tools, "allow")
        return self._store.change_vault_access(name, add_users=users, add_tools=tools)

    def revoke(self, name: str, *, users: Sequence[str] = (), tools: Sequence[str] = ()) -> VaultEntry:
        """Remove users and tools from an entry's allowlists.

        Raises:
            InvalidRequestError: neither given, a bad user or tool, or one the entry does not have
                (named; nothing changed).
            NotFoundError: No such entry.
            StoreError: The database failed.
        """
        users, tools = self._changes(name, users, tools, "revoke")
        return self._store.change_vault_access(name, remove_users=users, remove_tools=tools)

    @staticmethod
    def _changes(
        name: str, users: Sequence[str], tools: Sequence[str], verb: str
    ) -> tuple[list[str], list[str]]:
        if not users and not tools:
            raise InvalidRequestError(f"nothing to {verb}: give users and/or tools (--user U, --tool T)")
        return _check_access(users, "users") or [], _check_access(tools, "tools") or []

    def rotate_key(self) -> int:
        """Rotate the key: a new key file, every entry re-encrypted in one transaction, the new
        key renamed into place (see :mod:`octipusd.vault.keys`).

        Returns:
            How many entries were re-encrypted.

        Raises:
            VaultKeyError: the key is the systemd credential (rotate it there), it does not decrypt
                an entry (nothing changed: the new key file this call wrote is removed), or a key
                file cannot be written.
            StoreError: The database failed (nothing changed; the rotation stays pending).
        """
        with self._lock:
            if not self._keys.exists() and not self._keys.source.systemd:
                self._create_key()
                return 0
            fresh = not self._keys.pending()
            crypto = self._keys.begin_rotation()
            self._step("next_written")
            try:
                count = self._reencrypt(crypto)
            except VaultKeyError:
                if fresh:  # the transaction rolled back: no entry is under the new key
                    self._keys.discard_rotation()
                raise
            self._step("reencrypted")
            self._keys.finish_rotation()
            self._problem = None
        log.info("vault: key rotated, %d entries re-encrypted", count)
        return count

    def _reencrypt(self, crypto: MultiFernet) -> int:
        def rotate(ciphertext: str) -> str:
            try:
                return crypto.rotate(ciphertext.encode("ascii")).decode("ascii")
            except InvalidToken:
                raise VaultKeyError(
                    f"a vault entry cannot be decrypted with the key {self._keys.source.describe()}; "
                    "nothing was re-encrypted: restore the key the entries were stored with"
                ) from None

        return self._store.reencrypt_vault(rotate)

    def _step(self, name: str) -> None:
        if self._fault is not None:
            self._fault(name)
