"""Executable resolution for vendor CLIs (seed 003 "Executable paths and pipeline recovery").

At startup Octipus reads the user's login PATH (``$SHELL -lc``) and adds the standard
``~/.local/bin`` and ``~/.npm-global/bin``; ``cliModels.path`` replaces all of that with an
explicit PATH. A ``binaryPath`` is a command name (looked up on that PATH) or an absolute
path. Health reports the resolved path and version, or the PATH that was searched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from octipusd.errors import ExecutableNotFoundError

#: Seconds allowed for ``$SHELL -lc`` to print the login PATH.
LOGIN_SHELL_TIMEOUT = 5.0
#: Seconds allowed for ``<binary> --version``.
VERSION_TIMEOUT = 15.0


def login_path(environ: Mapping[str, str] | None = None, home: Path | None = None) -> str:
    """Return the PATH used to find vendor CLIs when ``cliModels.path`` is unset.

    Args:
        environ: Environment to read ``SHELL`` and the fallback ``PATH`` from.
        home: Home directory for ``~/.local/bin`` and ``~/.npm-global/bin``.

    Returns:
        The login shell's PATH (or the environment's PATH when the shell fails or takes
        longer than :data:`LOGIN_SHELL_TIMEOUT` seconds), followed by ``~/.local/bin`` and
        ``~/.npm-global/bin`` when they are not already on it. Never raises.
    """
    env = dict(os.environ if environ is None else environ)
    home = home or Path(env.get("HOME") or Path.home())
    shell = env.get("SHELL") or "/bin/sh"
    path = env.get("PATH", os.defpath)
    try:
        out = subprocess.run(
            [shell, "-lc", 'printf "%s" "$PATH"'],
            capture_output=True,
            text=True,
            timeout=LOGIN_SHELL_TIMEOUT,
            env=env,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if out.returncode == 0 and out.stdout.strip():
            path = out.stdout.strip().splitlines()[-1]
    except (OSError, subprocess.SubprocessError):
        pass
    parts = [p for p in path.split(":") if p]
    for extra in (home / ".local" / "bin", home / ".npm-global" / "bin"):
        if str(extra) not in parts:
            parts.append(str(extra))
    return ":".join(parts)


@dataclass(frozen=True)
class Resolution:
    """Where a vendor CLI was found, or why not.

    Attributes:
        adapter: Adapter registry name.
        setting: The ``cliModels.<key>.binaryPath`` value used (or the default command name).
        path: Absolute path of the executable, or None when not found.
        version: Output of ``--version`` (first line), or None.
        searched_path: The PATH that was searched.
        error: Why resolution failed, or None.
    """

    adapter: str
    setting: str
    path: str | None
    version: str | None
    searched_path: str
    error: str | None = None

    def require(self) -> str:
        """Return :attr:`path`.

        Raises:
            ExecutableNotFoundError: the binary was not found; the message names the PATH searched.
        """
        if self.path is None:
            raise ExecutableNotFoundError(
                self.error or f"{self.setting} not found on PATH {self.searched_path}"
            )
        return self.path


def resolve_executable(
    adapter: str,
    binary: str,
    search_path: str,
    version_argv: Callable[[str], Sequence[str]] | None = None,
    env: Mapping[str, str] | None = None,
    setting_key: str = "<cli>",
) -> Resolution:
    """Resolve one vendor binary and read its version.

    Args:
        adapter: Adapter name (for the report).
        binary: A command name or an absolute path.
        search_path: The PATH to search for a command name.
        version_argv: Builds the argv printing the version from the resolved path (an adapter's
            ``version_argv``), or None to skip the version check.
        env: Environment for the version command.
        setting_key: The adapter's ``cliModels`` key, named in the advice when the command is missing.

    Returns:
        A :class:`Resolution`; never raises for a missing binary (``error`` says why).
    """
    if os.path.isabs(binary):
        found: str | None = binary if os.path.isfile(binary) and os.access(binary, os.X_OK) else None
        error = None if found else f"{binary} does not exist or is not executable"
    else:
        found = shutil.which(binary, path=search_path)
        error = (
            None
            if found
            else f"command {binary!r} not found on PATH {search_path}; set cliModels.{setting_key}.binaryPath "
            "to its path, or OCTIPUS_CLI_PATH (cliModels.path) to a PATH that holds it"
        )
    version: str | None = None
    if found and version_argv is not None:
        try:
            out = subprocess.run(
                list(version_argv(found)),
                capture_output=True,
                text=True,
                timeout=VERSION_TIMEOUT,
                env=dict(env) if env is not None else None,
                stdin=subprocess.DEVNULL,
                check=False,
            )
            text = (out.stdout or out.stderr).strip()
            version = text.splitlines()[0] if text else None
            if out.returncode != 0:
                error = f"{found} --version exited {out.returncode}: {text[:200]}"
        except (OSError, subprocess.SubprocessError) as exc:
            error = f"{found} --version failed: {exc}"
    return Resolution(adapter, binary, found, version, search_path, error)
