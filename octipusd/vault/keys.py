"""The vault's key: where it is read from, how it is created, how it is rotated.

The key is a Fernet key (``cryptography``: AES-128-CBC with HMAC-SHA256, 32 bytes in URL-safe
base64). It is read from systemd's credential ``octipus-vault-key`` when
``$CREDENTIALS_DIRECTORY/octipus-vault-key`` exists (``LoadCredential=`` in the unit), else from
``<daemon data dir>/vault.key``, which is created on first need: written to a private temporary
file (mode 0600, ``O_EXCL``) and linked into place, so it is never readable by anyone else, never
half-written, and an existing key is never overwritten. A key file readable or writable by group or
others is refused (:class:`~octipusd.errors.VaultKeyError` naming the file and ``chmod 600``).

Rotation (the data-dir key only; a systemd credential is rotated where it is defined):

1. the new key is written to ``vault.key.next`` (as above);
2. the caller re-encrypts every entry with it, in one store transaction;
3. ``vault.key.next`` is renamed over ``vault.key``.

While ``vault.key.next`` exists the keys are ``MultiFernet([next, current])``: it decrypts what
either key encrypted and encrypts with the new one, so a crash between any two steps loses nothing,
and the next start (or rotation) re-encrypts again (idempotent) and finishes the rename. A rotation
that fails before its transaction committed (an entry the current key does not decrypt) removes the
``vault.key.next`` it wrote (:meth:`VaultKeys.discard_rotation`), and so does a start that finds one
no entry is encrypted with (see :meth:`octipusd.vault.Vault.start`).
"""

from __future__ import annotations

import os
import secrets
import stat
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.fernet import Fernet, MultiFernet

from octipusd.errors import VaultKeyError

__all__ = [
    "CREDENTIALS_ENV",
    "CREDENTIAL_NAME",
    "KEY_FILE_NAME",
    "NEXT_SUFFIX",
    "KeySource",
    "VaultKeys",
    "key_files",
]

#: The key file in the daemon's data directory.
KEY_FILE_NAME: Final = "vault.key"
#: Suffix of the new key while a rotation is under way.
NEXT_SUFFIX: Final = ".next"
#: The systemd credential holding the key (``LoadCredential=octipus-vault-key:...``).
CREDENTIAL_NAME: Final = "octipus-vault-key"
#: The variable systemd sets to the folder of a service's credentials.
CREDENTIALS_ENV: Final = "CREDENTIALS_DIRECTORY"
#: Largest key file read (bytes): a Fernet key is 44 characters; anything much longer is not one.
MAX_KEY_FILE_BYTES: Final = 1024
#: Permission bits a key file may not have: any access by group or others.
_OPEN_BITS: Final = stat.S_IRWXG | stat.S_IRWXO


@dataclass(frozen=True)
class KeySource:
    """Where the vault's key comes from.

    Attributes:
        path: The key file.
        systemd: It is the systemd credential (read-only to Octipus: never created or rotated).
    """

    path: Path
    systemd: bool

    def describe(self) -> str:
        """The source for a person: the systemd credential and its file, or the key file."""
        if self.systemd:
            return f"systemd credential {CREDENTIAL_NAME} ({self.path})"
        return str(self.path)


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_exclusive(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` (0600) unless it exists; False when it already did.

    The bytes go to a fresh private temporary file first, which is hard-linked to ``path`` (a link
    never replaces an existing file) and removed: ``path`` appears complete or not at all.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
    finally:
        temporary.unlink(missing_ok=True)
    _fsync_dir(path.parent)
    return True


def _read_key(path: Path, what: str) -> Fernet:
    """The Fernet key in ``path``, after checking that only its owner can use it.

    Raises:
        VaultKeyError: the file is open to group or others, unreadable, or not a Fernet key.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise VaultKeyError(f"the vault key {what} cannot be opened: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if mode & _OPEN_BITS:
            raise VaultKeyError(
                f"the vault key {what} is open to group or others (mode {stat.S_IMODE(mode):04o}); "
                f"run chmod 600 {path} and start octipusd again"
            )
        raw = os.read(fd, MAX_KEY_FILE_BYTES + 1)
    finally:
        os.close(fd)
    try:
        return Fernet(raw.strip())
    except ValueError:
        raise VaultKeyError(
            f"the vault key {what} does not hold a Fernet key (32 bytes in URL-safe base64, 44 "
            "characters); restore the right file"
        ) from None


def key_files(data_dir: Path, environ: Mapping[str, str] | None = None) -> tuple[Path, ...]:
    """Every file the key may be read from, existing or not: ``vault.key`` and ``vault.key.next``
    in ``data_dir``, and systemd's credentials folder when ``$CREDENTIALS_DIRECTORY`` is set (the
    paths the permission gate keeps agents away from)."""
    env = os.environ if environ is None else environ
    key = data_dir / KEY_FILE_NAME
    folder = env.get(CREDENTIALS_ENV)
    return (key, key.with_name(KEY_FILE_NAME + NEXT_SUFFIX), *((Path(folder),) if folder else ()))


class VaultKeys:
    """The vault's key, loaded once and kept in memory (thread-safe).

    Args:
        data_dir: The daemon's data directory (``vault.key`` lives there).
        environ: The environment (``$CREDENTIALS_DIRECTORY``); the process's when None.
    """

    def __init__(self, data_dir: Path, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        folder = env.get(CREDENTIALS_ENV)
        credential = Path(folder) / CREDENTIAL_NAME if folder else None
        if credential is not None and credential.is_file():
            self.source = KeySource(credential, systemd=True)
        else:
            self.source = KeySource(data_dir / KEY_FILE_NAME, systemd=False)
        self._lock = threading.Lock()
        self._crypto: MultiFernet | None = None

    @property
    def next_path(self) -> Path:
        """Where a rotation writes the new key."""
        return self.source.path.with_name(self.source.path.name + NEXT_SUFFIX)

    def exists(self) -> bool:
        """Whether the key file exists."""
        return self.source.path.exists()

    def pending(self) -> bool:
        """Whether a rotation was begun and not finished (``vault.key.next`` exists)."""
        return not self.source.systemd and self.next_path.exists()

    def load(self) -> MultiFernet | None:
        """Read the key (and a pending rotation's new key) from disk; None when there is no key yet.

        Raises:
            VaultKeyError: a key file is open to group or others, unreadable, or not a Fernet key.
        """
        with self._lock:
            self._crypto = self._read()
            return self._crypto

    def _read(self) -> MultiFernet | None:
        keys: list[Fernet] = []
        if self.pending():
            keys.append(_read_key(self.next_path, f"file {self.next_path} (a rotation's new key)"))
        if self.source.path.exists() or self.source.systemd:
            keys.append(_read_key(self.source.path, self._what()))
        return MultiFernet(keys) if keys else None

    def split(self) -> tuple[Fernet | None, Fernet | None]:
        """The current key and a pending rotation's new key, each read from disk (None: absent).

        Raises:
            VaultKeyError: as :meth:`load`.
        """
        with self._lock:
            current = (
                _read_key(self.source.path, self._what())
                if self.source.path.exists() or self.source.systemd
                else None
            )
            new = (
                _read_key(self.next_path, f"file {self.next_path} (a rotation's new key)")
                if self.pending()
                else None
            )
            return current, new

    def discard_rotation(self) -> None:
        """Remove ``vault.key.next`` (no entry is encrypted with it); the keys in memory become the
        current key alone.

        Raises:
            VaultKeyError: the file cannot be removed, or the current key cannot be read.
        """
        with self._lock:
            try:
                self.next_path.unlink(missing_ok=True)
                _fsync_dir(self.next_path.parent)
            except OSError as exc:
                raise VaultKeyError(
                    f"cannot remove the unused vault key file {self.next_path}: {exc}"
                ) from None
            self._crypto = self._read()

    def _what(self) -> str:
        return self.source.describe() if self.source.systemd else f"file {self.source.path}"

    def crypto(self) -> MultiFernet | None:
        """The keys in memory (read at the first call); None when there is no key yet.

        Raises:
            VaultKeyError: as :meth:`load`.
        """
        with self._lock:
            if self._crypto is None:
                self._crypto = self._read()
            return self._crypto

    def create(self) -> MultiFernet:
        """Create the key file with a new key (0600), unless one appeared meanwhile; return the keys.

        Raises:
            VaultKeyError: the key is the systemd credential (never created here), or the file
                cannot be written or read back.
        """
        if self.source.systemd:
            raise VaultKeyError(f"the vault key is the {self.source.describe()}; octipusd does not create it")
        with self._lock:
            try:
                _write_exclusive(self.source.path, Fernet.generate_key() + b"\n")
            except OSError as exc:
                raise VaultKeyError(f"cannot create the vault key file {self.source.path}: {exc}") from None
            self._crypto = self._read()
            assert self._crypto is not None
            return self._crypto

    def begin_rotation(self) -> MultiFernet:
        """Write a new key to ``vault.key.next`` (or keep the one a crashed rotation left) and
        return ``MultiFernet([new, current])``, which the keys in memory become.

        Raises:
            VaultKeyError: the key is the systemd credential, there is no key yet, or a file
                cannot be written or read.
        """
        if self.source.systemd:
            raise VaultKeyError(
                f"the vault key is the {self.source.describe()}: rotate the credential there (where "
                "LoadCredential= points), not with octipusctl vault rotate-key"
            )
        with self._lock:
            if not self.source.path.exists():
                raise VaultKeyError(f"the vault has no key file {self.source.path} to rotate yet")
            try:
                _write_exclusive(self.next_path, Fernet.generate_key() + b"\n")
            except OSError as exc:
                raise VaultKeyError(f"cannot write the new vault key file {self.next_path}: {exc}") from None
            crypto = self._read()
            assert crypto is not None
            self._crypto = crypto
            return crypto

    def finish_rotation(self) -> None:
        """Rename ``vault.key.next`` over ``vault.key`` (every entry is encrypted with it now); the
        keys in memory become the new key alone.

        Raises:
            VaultKeyError: the rename failed (the rotation stays pending: nothing is lost).
        """
        with self._lock:
            try:
                os.replace(self.next_path, self.source.path)
                _fsync_dir(self.source.path.parent)
            except OSError as exc:
                raise VaultKeyError(
                    f"cannot rename {self.next_path} over {self.source.path}: {exc}; the rotation "
                    "finishes at the next octipusctl vault rotate-key or daemon start"
                ) from None
            self._crypto = self._read()
