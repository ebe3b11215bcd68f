"""A real octipusd in a private folder, for the demo, the end-to-end tests and the benchmarks.

:class:`DaemonHarness` starts the real ``octipusd`` console script as a subprocess with HOME
and every XDG folder under one root folder, the Claude Code binary given explicitly, the
vendor pointed at a scripted model on 127.0.0.1 and its non-essential traffic switched off
(observed.md §1.1). Claude finds the model through its own ``settings.json`` under HOME, the way
a user's configured CLI would. It stops the daemon with SIGTERM and reports the exit code.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from octipus_claude_code.launch import QUIET_ENV as CLAUDE_QUIET_ENV

from octipusd.ctl.client import Client

ROOT = Path(__file__).resolve().parents[2]
#: The project-local Claude Code installed by scripts/bootstrap.sh.
DEFAULT_CLAUDE = ROOT / ".vendor" / "npm" / "node_modules" / ".bin" / "claude"

#: Variables that keep Claude Code on 127.0.0.1 only (the adapter's, observed.md §1.1), plus no
#: API retries so a scripted error fails at once (observed.md §1.8).
QUIET_ENV = {**CLAUDE_QUIET_ENV, "CLAUDE_CODE_MAX_RETRIES": "0"}


def write_python_stub(path: Path, module: str, env: Mapping[str, str]) -> Path:
    """Write an executable that runs the stub CLI ``python -m <module>`` with this interpreter.

    The daemon hands its vendors an allowlisted environment (:mod:`octipusd.environment`), neither
    the test's variables nor ``PYTHONPATH``: the wrapper exports them itself, so the stub finds its
    script and imports the code under test (``PYTHONPATH`` as this process has it, if set).

    Args:
        path: The wrapper's path (its folder is created).
        module: The stub's module (``octipusd.testing.stub_cli``).
        env: Variables exported before the stub starts (its script, record...).

    Returns:
        ``path`` (mode 0755).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    exported = {**({"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}), **env}
    lines = ["#!/bin/sh"]
    lines += [f"export {name}={shlex.quote(value)}" for name, value in exported.items()]
    lines.append(f'exec {shlex.quote(sys.executable)} -m {module} "$@"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    path.chmod(0o755)
    return path


def claude_binary() -> Path:
    """Return the Claude Code binary to drive: ``$OCTIPUS_CLAUDE_BINARY`` or the project-local one."""
    return Path(os.environ.get("OCTIPUS_CLAUDE_BINARY") or DEFAULT_CLAUDE)


def hiding(*paths: Path) -> tuple[str, ...]:
    """A :class:`DaemonHarness` launcher that starts the daemon in a mount namespace of its own
    where each of ``paths`` is ``/dev/null`` (not a file, not executable): a machine without that
    program, for this daemon only (``unshare --mount`` makes the namespace's mounts private).
    Needs root (or an unprivileged user namespace with ``unshare -r``)."""
    mounts = " && ".join(f"mount --bind /dev/null {shlex.quote(str(p))}" for p in paths)
    return ("unshare", "--mount", "--", "sh", "-c", f'{mounts} && exec "$0"')


class DaemonHarness:
    """Runs one octipusd.

    Args:
        root: Folder holding HOME, XDG folders, the database and the workspace.
        model_base_url: The scripted Anthropic model (``ANTHROPIC_BASE_URL``).
        claude: The vendor binary (default :func:`claude_binary`).
        extra_env: More environment for the daemon (e.g. ``OCTIPUS_DATABASE_URL``).
        launcher: A command the daemon is started through, which must end by ``exec``-ing its last
            argument (the daemon's path) so that the daemon keeps the launcher's pid (e.g. a mount
            namespace hiding a program: :func:`hiding`); empty: started directly.

    Attributes:
        env: The daemon's environment (also right for octipusctl).
        socket: The API socket path.
        workspace: An empty folder to use as a session workspace.
    """

    def __init__(
        self,
        root: Path,
        model_base_url: str,
        claude: Path | None = None,
        extra_env: Mapping[str, str] | None = None,
        launcher: Sequence[str] = (),
    ) -> None:
        self.root = root
        self.launcher = tuple(launcher)
        self.home = root / "home"
        self.workspace = root / "workspace"
        for folder in (self.home, self.workspace, root / "run", root / "data", root / "config"):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        binary = claude or claude_binary()
        self.env: dict[str, str] = {
            **os.environ,
            **QUIET_ENV,
            "HOME": str(self.home),
            "XDG_RUNTIME_DIR": str(root / "run"),
            "XDG_DATA_HOME": str(root / "data"),
            "XDG_CONFIG_HOME": str(root / "config"),
            "CLAUDE_CONFIG_DIR": str(self.home / ".claude"),
            "OCTIPUS_CLAUDE_BINARY": str(binary.resolve() if binary.exists() else binary),
            **(extra_env or {}),
        }
        # Claude's own stored configuration points it at the scripted model, as a user's login
        # would: octipusd does not pass API-key variables to vendors (seed 003, inheritApiKeys).
        claude_dir = self.home / ".claude"
        claude_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        settings = {
            "env": {"ANTHROPIC_BASE_URL": model_base_url, "ANTHROPIC_API_KEY": "sk-ant-scripted-model"}
        }
        (claude_dir / "settings.json").write_text(json.dumps(settings))
        self.socket = root / "run" / "octipus" / "octipusd.sock"
        self.bindir = Path(sys.executable).parent
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path = root / "octipusd.log"

    def start(self, timeout: float = 60.0) -> DaemonHarness:
        """Start octipusd and wait until its socket accepts connections.

        Raises:
            RuntimeError: the daemon exited or did not listen within ``timeout`` seconds
                (the message holds its log).
        """
        log = open(self.log_path, "ab")  # noqa: SIM115 - the daemon writes to it until stop()
        argv = [*self.launcher, str(self.bindir / "octipusd")]
        self.process = subprocess.Popen(argv, env=self.env, stdout=log, stderr=log)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._answers():
                return self
            if self.process.poll() is not None:
                raise RuntimeError(f"octipusd exited {self.process.returncode}: {self.log()}")
            time.sleep(0.05)
        raise RuntimeError(f"octipusd did not listen within {timeout:g} s: {self.log()}")

    def _answers(self) -> bool:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(self.socket))
            return True
        except OSError:
            return False
        finally:
            probe.close()

    def log(self) -> str:
        """The daemon's stdout and stderr so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def wait_until(self, predicate: Callable[[], Any], timeout: float, what: str) -> Any:
        """Poll ``predicate`` every 50 ms until truthy and return its value.

        Raises:
            AssertionError: it stayed falsy for ``timeout`` seconds (the message names ``what``
                and holds the end of the daemon's log).
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        raise AssertionError(
            f"timed out after {timeout:g} s waiting for {what}; daemon log:\n{self.log()[-4000:]}"
        )

    def client(self) -> Client:
        """A new API client on the daemon's socket."""
        return Client(self.socket, client_name="harness")

    def web_url(self) -> str:
        """The page's ready link with its token, as ``octipusctl web`` prints it to a person.

        Raises:
            RuntimeError: ``octipusctl web`` failed (the message holds its output).
        """
        done = subprocess.run(
            [str(self.bindir / "octipusctl"), "--socket", str(self.socket), "web"],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if done.returncode != 0:
            raise RuntimeError(f"octipusctl web exited {done.returncode}: {done.stdout}{done.stderr}")
        return done.stdout.strip().splitlines()[0]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60.0) -> int | None:
        """Signal the daemon and wait for its exit; returns the exit code (None if never started)."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> DaemonHarness:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
