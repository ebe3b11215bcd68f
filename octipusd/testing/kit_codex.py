"""Conformance kits for the Codex CLI: the real ``codex`` against the scripted Responses model.

:class:`CodexKit` drives the default ``app-server`` transport (JSON-RPC, with the approval relay);
:class:`CodexExecKit` the ``exec`` transport (no relay). Both point Codex at
:class:`~octipusd.testing.responses_server.ScriptedResponsesServer` through ``$CODEX_HOME/config.toml``
under the daemon's HOME, the way a user's own Codex configuration would (observed.md §2.1,
observed-2.md §1.1).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from octipusd.testing.conformance import ModelServer, Step
from octipusd.testing.responses_server import ScriptedResponsesServer

ROOT: Final = Path(__file__).resolve().parents[2]
#: The project-local Codex CLI installed by scripts/install-codex.sh.
DEFAULT_CODEX: Final = ROOT / ".vendor" / "npm" / "node_modules" / ".bin" / "codex"

#: Provider id, model name and key of the scripted model in config.toml. The key is stored in the
#: config (``experimental_bearer_token``), as a user's login is stored in CODEX_HOME: the daemon
#: does not pass its own environment's keys to a vendor.
PROVIDER_ID: Final = "mock"
MODEL_NAME: Final = "mock-model"
KEY_VALUE: Final = "sk-mock-codex"


#: How long the scripted model lets Codex wait for a shell command before answering (milliseconds).
SHELL_YIELD_MS: Final = 60_000


def codex_binary() -> Path:
    """Return the Codex binary to drive: ``$OCTIPUS_CODEX_BINARY`` or the project-local one."""
    return Path(os.environ.get("OCTIPUS_CODEX_BINARY") or DEFAULT_CODEX)


def require_codex() -> Path:
    """Return :func:`codex_binary`, or fail with how to install it.

    Raises:
        AssertionError: the binary is missing (run ``scripts/install-codex.sh``).
    """
    path = codex_binary()
    assert path.exists(), f"{path} is missing: run scripts/install-codex.sh (installs the pinned Codex CLI)"
    return path


def _toml(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def config_toml(base_url: str, extra: str = "") -> str:
    """The ``config.toml`` pointing Codex at a scripted model (observed.md §2.1, observed-2.md §1.1).

    The provider ``mock`` uses the Responses wire API with :data:`KEY_VALUE` as its stored key and
    no retries (a scripted error fails at once, observed.md §2.7); analytics, the update check and
    the plugin features (which make DNS look-ups, observed.md §0) are off.

    Args:
        base_url: The scripted server's ``base_url`` (``http://127.0.0.1:PORT/v1``).
        extra: More TOML appended at the end (e.g. an ``[mcp_servers.x]`` table).

    Returns:
        The file's text.
    """
    return "\n".join(
        [
            f"model = {_toml(MODEL_NAME)}",
            f"model_provider = {_toml(PROVIDER_ID)}",
            "check_for_update_on_startup = false",
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[features]",
            "plugins = false",
            "remote_plugin = false",
            "",
            f"[model_providers.{PROVIDER_ID}]",
            f"name = {_toml(PROVIDER_ID)}",
            f"base_url = {_toml(base_url)}",
            'wire_api = "responses"',
            f"experimental_bearer_token = {_toml(KEY_VALUE)}",
            "request_max_retries = 0",
            "stream_max_retries = 0",
            "",
            extra,
        ]
    )


def write_codex_config(codex_home: Path, base_url: str, extra: str = "") -> Path:
    """Write :func:`config_toml` as ``<codex_home>/config.toml`` (creating the folder); return its path."""
    codex_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = codex_home / "config.toml"
    path.write_text(config_toml(base_url, extra), encoding="utf-8")
    return path


class CodexKit:
    """Codex CLI over ``app-server`` (observed-2.md §1): tools ``exec_command`` and ``mcp__octipus__<tool>``
    (played as ``namespace: "mcp__octipus"``), the JSON-RPC approval relay, ``thread/resume``."""

    adapter = "codex"
    relay = True
    resumes = True
    reports_usage = True
    sandbox_without_network = True

    def start_model(self, steps: list[Step]) -> ModelServer:
        """Start the scripted Responses server."""
        return ScriptedResponsesServer({"steps": steps}).start()

    def daemon_env(self, home: Path, model: ModelServer) -> dict[str, str]:
        """Write ``home/.codex/config.toml`` for the model; return CODEX_HOME, TMPDIR and the binary.

        ``TMPDIR`` is a folder beside HOME, as on a user's machine where ``~/.codex`` is not under
        the temporary folder: Codex (0.171.0) refuses to create its helper folder (the
        ``codex-linux-sandbox`` and ``apply_patch`` links it puts first on ``PATH``) under its
        temporary folder, and without it every sandboxed command fails with ``bwrap: execvp
        codex-linux-sandbox: No such file or directory``. A test's HOME is under ``/tmp``, so the
        kit's Codex would run with a broken sandbox; an approved command then worked only when
        Codex took that failure for a sandbox denial and ran it again without sandbox, which it
        does only when the failed attempt has ended and printed before it looks (a race)."""
        codex_home = home / ".codex"
        write_codex_config(codex_home, model.base_url)
        tmp = home.parent / "tmp"
        tmp.mkdir(parents=True, exist_ok=True, mode=0o700)
        return {
            "TMPDIR": str(tmp),
            "CODEX_HOME": str(codex_home),
            "OCTIPUS_CODEX_BINARY": str(require_codex()),
        }

    def text(self, text: str) -> Step:
        """Answer ``text``."""
        return {"content": [{"type": "text", "text": text}]}

    def bridge_call(self, tool: str, arguments: Mapping[str, Any]) -> Step:
        """Call the bridge tool ``tool`` (``mcp__octipus__<tool>``, observed.md §2.5)."""
        return {"content": [{"type": "tool_use", "name": f"mcp__octipus__{tool}", "input": dict(arguments)}]}

    def shell(self, command: str) -> Step:
        """Run ``command`` with Codex's shell tool ``exec_command`` (observed.md §2.2), waiting up to
        :data:`SHELL_YIELD_MS` for it: after Codex's own 10 s the model would get a still-running
        session instead of the output and go on (checked on 0.171.0), which a loaded machine reaches."""
        step_input = {"cmd": command, "yield_time_ms": SHELL_YIELD_MS}
        return {"content": [{"type": "tool_use", "name": "exec_command", "input": step_input}]}

    def session_options(self) -> dict[str, Any]:
        """Default session fields: the default transport (app-server), workspace permission mode."""
        return {}


class CodexExecKit(CodexKit):
    """Codex CLI over ``exec --json`` (observed.md §2): same model and tools, no approval relay."""

    relay = False

    def session_options(self) -> dict[str, Any]:
        """Select the exec transport through the session's adapter options."""
        return {"options": {"transport": "exec"}}
