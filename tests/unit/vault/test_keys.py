"""The vault's key (issue 17 item 1): created 0600 on first need and never overwritten, refused when
open to group or others or not a key, read from systemd's credential when there is one (and then
never created or rotated by Octipus)."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from octipusd.errors import VaultKeyError
from octipusd.vault import CREDENTIAL_NAME, KEY_FILE_NAME, VaultKeys


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask that takes nothing away: the key's mode must come from Octipus, not the umask."""
    previous = os.umask(0)
    try:
        yield
    finally:
        os.umask(previous)


def test_the_key_is_created_0600_on_first_need_and_never_overwritten(
    tmp_path: Path, open_umask: None
) -> None:
    data = tmp_path / "data"
    keys = VaultKeys(data, {})
    assert keys.source.path == data / KEY_FILE_NAME and not keys.source.systemd
    assert keys.crypto() is None and not keys.exists()
    crypto = keys.create()
    mode = stat.S_IMODE(keys.source.path.stat().st_mode)
    assert mode == 0o600, oct(mode)
    assert sorted(p.name for p in data.iterdir()) == [KEY_FILE_NAME]  # no temporary file left
    token = crypto.encrypt(b"x")
    first = keys.source.path.read_bytes()
    # a second creation (another thread, a restart) keeps the key that exists
    assert VaultKeys(data, {}).create().decrypt(token) == b"x"
    assert keys.source.path.read_bytes() == first


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o602])
def test_a_key_open_to_group_or_others_is_refused_naming_the_file_and_chmod(
    tmp_path: Path, mode: int
) -> None:
    keys = VaultKeys(tmp_path, {})
    keys.create()
    keys.source.path.chmod(mode)
    with pytest.raises(VaultKeyError) as caught:
        VaultKeys(tmp_path, {}).load()
    assert f"chmod 600 {keys.source.path}" in caught.value.message
    assert f"mode {mode:04o}" in caught.value.message


def test_a_file_that_is_not_a_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / KEY_FILE_NAME
    path.write_text("not a key\n")
    path.chmod(0o600)
    with pytest.raises(VaultKeyError, match=r"does not hold a Fernet key"):
        VaultKeys(tmp_path, {}).load()


def test_the_systemd_credential_is_read_and_never_created_or_rotated(tmp_path: Path) -> None:
    credentials = tmp_path / "credentials"
    credentials.mkdir()
    key = Fernet.generate_key()
    (credentials / CREDENTIAL_NAME).write_bytes(key)
    (credentials / CREDENTIAL_NAME).chmod(0o400)
    keys = VaultKeys(tmp_path / "data", {"CREDENTIALS_DIRECTORY": str(credentials)})
    assert keys.source.systemd and keys.source.path == credentials / CREDENTIAL_NAME
    assert keys.source.describe() == f"systemd credential {CREDENTIAL_NAME} ({credentials / CREDENTIAL_NAME})"
    crypto = keys.load()
    assert crypto is not None and Fernet(key).decrypt(crypto.encrypt(b"v")) == b"v"
    with pytest.raises(VaultKeyError, match=r"rotate the credential there"):
        keys.begin_rotation()
    with pytest.raises(VaultKeyError, match=r"does not create it"):
        keys.create()
    assert not (tmp_path / "data").exists()


def test_without_the_credential_file_the_data_dir_key_is_used(tmp_path: Path) -> None:
    keys = VaultKeys(tmp_path / "data", {"CREDENTIALS_DIRECTORY": str(tmp_path / "empty")})
    assert not keys.source.systemd and keys.source.path == tmp_path / "data" / KEY_FILE_NAME


def test_a_pending_rotation_reads_both_keys_new_first(tmp_path: Path) -> None:
    keys = VaultKeys(tmp_path, {})
    old = keys.create()
    before = old.encrypt(b"before")
    crypto = keys.begin_rotation()
    assert keys.pending() and stat.S_IMODE(keys.next_path.stat().st_mode) == 0o600
    assert crypto.decrypt(before) == b"before"
    after = crypto.encrypt(b"after")
    assert Fernet(keys.next_path.read_bytes().strip()).decrypt(after) == b"after"
    # a second begin (after a crash) keeps the new key already written
    again = VaultKeys(tmp_path, {}).begin_rotation()
    assert again.decrypt(after) == b"after"
    keys.finish_rotation()
    assert not keys.pending()
    assert Fernet(keys.source.path.read_bytes().strip()).decrypt(after) == b"after"
