"""What starting a process loads (DESIGN.md "Layers"; issue 13's start-up figures), read from
``sys.modules`` of real subprocesses, not timed:

* ``octipusctl`` imports its HTTP client and its commands, nothing of the daemon: not the
  store, the runtime, the API's app or models, the settings (pydantic), SQLAlchemy, FastAPI or
  the MCP SDK, whether it is imported, shows ``--help`` or runs ``health`` with no daemon;
* the daemon's start-up, up to its socket being bound, loads neither the MCP SDK (the bridge
  and the connectors import it on first use) nor psycopg on SQLite, nor any client; on a
  database already at the newest schema it does not load Alembic either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

#: What no client process may load (prefixes of module names).
DAEMON_ONLY = (
    "octipusd.store",
    "octipusd.runtime",
    "octipusd.runner",
    "octipusd.bridge",
    "octipusd.connectors",
    "octipusd.policy",
    "octipusd.journal",
    "octipusd.api.app",
    "octipusd.api.models",
    "octipusd.settings",
    "octipusd.app",
    "pydantic_settings",
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "fastapi",
    "starlette",
    "uvicorn",
    "mcp",
    "mcp_types",
)
#: What the daemon's start-up does not load (the MCP SDK and its HTTP client, the bridge, the
#: PostgreSQL driver on SQLite, the clients' libraries and modules).
NOT_AT_DAEMON_START = (
    "mcp",
    "mcp_types",
    "httpx2",
    "octipusd.bridge.server",
    "octipusd.connectors.http_tracking",
    "psycopg",
    "octipusd.ctl",
    "octipusd.tui",
    "typer",
)

#: Prints the loaded module names as JSON on stderr when the interpreter exits.
DUMP_AT_EXIT = (
    "import atexit, json, sys\n"
    "atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.stderr))\n"
)

#: Runs the daemon until its socket is bound, then writes the loaded module names and stops it.
DAEMON_UNTIL_BOUND = """
import json, os, signal, sys, threading, time
from pathlib import Path
import octipusd.app

sock, out = Path(sys.argv[1]), Path(sys.argv[2])

def watch():
    while not sock.exists():
        time.sleep(0.01)
    out.write_text(json.dumps(sorted(sys.modules)))
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=watch, daemon=True).start()
sys.exit(octipusd.app.main([]))
"""


def _env(tmp_path: Path) -> dict[str, str]:
    for name in ("run", "data", "config", "home", "cli"):
        (tmp_path / name).mkdir(exist_ok=True)
    paths = [str(ROOT), str(ROOT / "adapters"), str(ROOT / "worktrees")]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "HOME": str(tmp_path / "home"),
        "XDG_RUNTIME_DIR": str(tmp_path / "run"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "OCTIPUS_CLI_PATH": str(tmp_path / "cli"),  # no vendor binary: no --version to wait for
        "OCTIPUS_DAEMON__SOCKET": str(tmp_path / "run" / "nothing.sock"),
    }


def _loaded_by_ctl(tmp_path: Path, code: str, expect: int) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", DUMP_AT_EXIT + code],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == expect, done.stderr
    modules: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return modules


def _matching(modules: list[str], prefixes: tuple[str, ...]) -> list[str]:
    return [m for m in modules if any(m == p or m.startswith(p + ".") for p in prefixes)]


def test_octipusctl_loads_nothing_of_the_daemon(tmp_path: Path) -> None:
    run = "from octipusd.ctl.main import main\nsys.argv = ['octipusctl', *{}]\nmain()\n"
    imported = _loaded_by_ctl(tmp_path, "import octipusd.ctl.main\n", expect=0)
    helped = _loaded_by_ctl(tmp_path, run.format(["--help"]), expect=0)
    health = _loaded_by_ctl(tmp_path, run.format(["health"]), expect=3)  # 3: octipusd is not running
    assert "octipusd.ctl.client" in imported and "httpx" in health
    assert _matching(imported, DAEMON_ONLY) == []
    assert _matching(helped, DAEMON_ONLY) == []
    assert _matching(health, DAEMON_ONLY) == []
    # importing the client does not even load pydantic (typer loads it to coerce options)
    assert _matching(imported, ("pydantic",)) == []


def _loaded_by_daemon_start(tmp_path: Path, out: Path) -> list[str]:
    env = _env(tmp_path)
    del env["OCTIPUS_DAEMON__SOCKET"]  # the daemon binds its default socket under XDG_RUNTIME_DIR
    sock = tmp_path / "run" / "octipus" / "octipusd.sock"
    done = subprocess.run(
        [sys.executable, "-c", DAEMON_UNTIL_BOUND, str(sock), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    modules: list[str] = json.loads(out.read_text())
    return modules


def test_daemon_start_up_leaves_the_mcp_sdk_and_clients_unloaded(tmp_path: Path) -> None:
    first = _loaded_by_daemon_start(tmp_path, tmp_path / "first.json")  # a new database: migrated
    again = _loaded_by_daemon_start(tmp_path, tmp_path / "again.json")  # at the newest schema
    for modules in (first, again):
        assert {"octipusd.api.app", "octipusd.store.repository", "fastapi"} <= set(modules)
        assert _matching(modules, NOT_AT_DAEMON_START) == []
    assert "alembic" in first
    assert _matching(again, ("alembic",)) == []
