"""Start a throw-away PostgreSQL server for tests and benchmarks, on a private Unix socket (no TCP).

``start_postgres()`` runs ``initdb`` into a fresh temporary folder, starts the server with
``pg_ctl -w start`` listening only on a socket in a private folder (mode 0700), creates the
database ``octipus_test`` and returns its SQLAlchemy URL plus a ``stop`` function. The tests'
server trades durability for speed (``fsync``, ``synchronous_commit`` and ``full_page_writes``
off); ``start_postgres(durable=True)`` keeps PostgreSQL's durable defaults, for benchmarks
that compare durable writes.

PostgreSQL refuses to run as root: when the tests run as root, the server runs as the
``postgres`` user (``runuser -u postgres --``, or ``su postgres -s /bin/sh -c``); root can
still connect through the socket. As any other user the server runs as that user.

If no PostgreSQL binaries are installed, :class:`PostgresUnavailable` tells to run
``scripts/install-test-deps.sh``.
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
from sqlalchemy.engine import make_url

__all__ = ["PostgresUnavailable", "admin_connect", "conninfo", "find_bin_dir", "start_postgres"]

INSTALL_HINT = "run scripts/install-test-deps.sh (as root) to install PostgreSQL, then rerun the tests"
TEST_DATABASE = "octipus_test"
SERVER_USER = "postgres"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL cannot be started here; the message says why and what to do."""


def find_bin_dir() -> Path:
    """Return the folder holding ``initdb``/``pg_ctl`` (newest version under /usr/lib/postgresql).

    Raises:
        PostgresUnavailable: No ``initdb`` found.
    """

    def version(path: str) -> tuple[int, ...]:
        part = Path(path).parent.parent.name
        return tuple(int(p) for p in part.split(".") if p.isdigit())

    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=version, reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise PostgresUnavailable(
        f"PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin or on PATH); {INSTALL_HINT}"
    )


def conninfo(url: str, dbname: str | None = None) -> dict[str, Any]:
    """Return psycopg connection keywords for a ``postgresql+psycopg://`` URL.

    Args:
        url: The SQLAlchemy URL (host and port may be query parameters).
        dbname: Database to connect to instead of the URL's.
    """
    parsed = make_url(url)
    kwargs: dict[str, Any] = {"user": parsed.username, "dbname": dbname or parsed.database}
    if parsed.password:
        kwargs["password"] = parsed.password
    host = parsed.query.get("host") or parsed.host
    port = parsed.query.get("port") or parsed.port
    if host:
        kwargs["host"] = host if isinstance(host, str) else host[0]
    if port:
        kwargs["port"] = int(port if isinstance(port, (str, int)) else port[0])
    return kwargs


def admin_connect(url: str) -> psycopg.Connection[Any]:
    """Connect (autocommit) to the ``postgres`` maintenance database of ``url``'s server."""
    return psycopg.connect(**conninfo(url, dbname="postgres"), autocommit=True)


def _free_port() -> int:
    # The server listens on no TCP port; the number only names the socket file
    # (.s.PGSQL.<port>). A currently free TCP number keeps it unsurprising.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_server_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", SERVER_USER, "--", *argv]
    return ["su", SERVER_USER, "-s", "/bin/sh", "-c", shlex.join(argv)]


def _run(argv: list[str], cwd: Path, what: str) -> None:
    proc = subprocess.run(
        _as_server_user(argv), cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )
    if proc.returncode != 0:
        raise PostgresUnavailable(
            f"{what} failed (exit {proc.returncode}): {proc.stdout.strip()} {proc.stderr.strip()}".strip()
        )


def start_postgres(*, durable: bool = False) -> tuple[str, Callable[[], None]]:
    """Start a private PostgreSQL server and create the database ``octipus_test``.

    Args:
        durable: Keep PostgreSQL's durable defaults (a commit is flushed to disk before it
            returns); False (tests) turns ``fsync``, ``synchronous_commit`` and
            ``full_page_writes`` off.

    Returns:
        ``(url, stop)``: ``url`` is
        ``postgresql+psycopg://postgres@/octipus_test?host=<socket dir>&port=<port>``;
        ``stop()`` stops the server (``pg_ctl -m fast stop``) and removes its folder. It is
        idempotent and also registered with :mod:`atexit`.

    Raises:
        PostgresUnavailable: PostgreSQL is not installed or failed to start (the message
            includes the server log).
    """
    bin_dir = find_bin_dir()
    root = Path(tempfile.mkdtemp(prefix="octipus-pg-"))
    data = root / "data"
    sock = root / "sock"
    log = root / "server.log"
    sock.mkdir(mode=0o700)
    if os.geteuid() == 0:
        try:
            entry = pwd.getpwnam(SERVER_USER)
        except KeyError as exc:
            shutil.rmtree(root, ignore_errors=True)
            raise PostgresUnavailable(
                f"running as root but there is no {SERVER_USER!r} user to run PostgreSQL as; {INSTALL_HINT}"
            ) from exc
        for path in (root, sock):
            os.chown(path, entry.pw_uid, entry.pw_gid)
    os.chmod(root, 0o700)
    port = _free_port()
    started = False

    def stop() -> None:
        nonlocal started
        if started:
            started = False
            subprocess.run(
                _as_server_user([str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"]),
                cwd="/",
                capture_output=True,
                timeout=60,
                check=False,
            )
        shutil.rmtree(root, ignore_errors=True)

    try:
        _run(
            [
                str(bin_dir / "initdb"),
                "-D",
                str(data),
                "-U",
                SERVER_USER,
                "--auth=trust",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            root,
            "initdb",
        )
        settings = {
            "listen_addresses": "''",
            "unix_socket_directories": f"'{sock}'",
            "unix_socket_permissions": "0700",
            "port": str(port),
            "max_connections": "200",
        }
        if not durable:
            settings.update(fsync="off", synchronous_commit="off", full_page_writes="off")
        with (data / "postgresql.conf").open("a", encoding="utf-8") as conf:
            conf.write("\n# octipus tests and benchmarks\n")
            conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
        started = True
        _run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "60", "start"],
            root,
            "pg_ctl start",
        )
        url = f"postgresql+psycopg://{SERVER_USER}@/{TEST_DATABASE}?host={quote(str(sock))}&port={port}"
        with admin_connect(url) as conn:
            conn.execute(f'CREATE DATABASE "{TEST_DATABASE}"')
    except BaseException as exc:
        server_log = log.read_text(errors="replace") if log.exists() else ""
        stop()
        if isinstance(exc, PostgresUnavailable | psycopg.Error):
            raise PostgresUnavailable(f"{exc}\nserver log:\n{server_log}") from exc
        raise
    atexit.register(stop)
    return url, stop
