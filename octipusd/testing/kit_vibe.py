"""Conformance kits for Mistral Vibe: the real ``vibe-acp`` / ``vibe`` against the scripted Chat Completions model.

The daemon's HOME gets a ``.vibe/config.toml`` (``VIBE_HOME``) the way a user's own Vibe
configuration would look, pointing Vibe at :class:`~octipusd.testing.chat_server.ScriptedChatServer`
(observed.md §3.2): a ``generic`` / ``openai`` provider whose ``api_base`` is the server, one
model aliased ``mock``, and telemetry, update checks, auto-update, notifications, connectors,
the model catalog and experiments off (with these, strace saw Vibe reach only 127.0.0.1,
observed.md §3.2).

How the scripted model drives Vibe (observed.md §3.4):

* text: an assistant message;
* native shell: a ``bash`` function call ``{"command": ...}``;
* an Octipus bridge tool: a ``run_typescript`` call whose code awaits
  ``tools.mcp_octipus.<tool>({...})`` inside ``async function main()`` (Vibe names the connector
  group of an MCP server ``mcp_<server name>``; checked on 3.0.2 with the bridge named ``octipus``).

:class:`VibeKit` drives the default ACP transport: Vibe relays permission requests
(``relay``), resumes with ``session/load`` (``resumes``: the follow-up turn carries the history)
and reports usage. :class:`VibeHeadlessKit` drives ``vibe -p`` (``options.transport =
"headless"``): no relay, so its sessions use permission mode ``full`` (Vibe denies every MCP tool
that needs approval in headless mode, the Octipus bridge included); it does not take part in session
reuse (seed 003: ``--resume`` depends on the user's ``log_interactions`` setting, which Octipus
cannot verify), so every turn is a cold launch carrying the earlier messages; it reports usage
through export.json.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from octipusd.testing.chat_server import ScriptedChatServer
from octipusd.testing.conformance import ModelServer, Step

ROOT: Final = Path(__file__).resolve().parents[2]
#: The project-local Vibe installed by scripts/install-vibe.sh.
VIBE_VENV: Final = ROOT / ".vendor" / "vibe-venv"
DEFAULT_VIBE_ACP: Final = VIBE_VENV / "bin" / "vibe-acp"

#: Variable holding the scripted provider's API key, stored in ``$VIBE_HOME/.env`` (where Vibe's
#: own setup keeps provider keys, loaded at start): the daemon does not pass its own
#: environment's keys to a vendor.
API_KEY_ENV: Final = "SCRIPTED_VIBE_API_KEY"
#: The scripted provider's API key (sent as ``Authorization: Bearer``; the server ignores it).
API_KEY: Final = "sk-scripted-vibe"
#: Alias of the scripted model in config.toml (``active_model``).
MODEL_ALIAS: Final = "mock"


def vibe_acp_binary() -> Path:
    """The ``vibe-acp`` to drive: ``$OCTIPUS_VIBE_BINARY`` or the project-local one."""
    return Path(os.environ.get("OCTIPUS_VIBE_BINARY") or DEFAULT_VIBE_ACP)


def require_vibe() -> Path:
    """Return the ``vibe-acp`` binary, failing clearly when it is not installed.

    Raises:
        AssertionError: the binary (or its ``vibe`` sibling) is missing; the message says to run
            ``scripts/install-vibe.sh``.
    """
    binary = vibe_acp_binary()
    sibling = binary.with_name("vibe")
    for path in (binary, sibling):
        if not os.access(path, os.X_OK):
            raise AssertionError(
                f"{path} is missing: run scripts/install-vibe.sh (installs Mistral Vibe 3.0.2 into "
                ".vendor/vibe-venv with a Python >= 3.12)"
            )
    return binary


def config_toml(api_base: str) -> str:
    """The ``config.toml`` of a Vibe home pointing at a scripted Chat Completions server.

    Args:
        api_base: ``http://127.0.0.1:PORT/v1`` (:attr:`ScriptedChatServer.base_url`).

    Returns:
        The TOML text (observed.md §3.2).
    """
    return "\n".join(
        [
            f'active_model = "{MODEL_ALIAS}"',
            "enable_telemetry = false",
            "enable_update_checks = false",
            "enable_auto_update = false",
            "enable_notifications = false",
            "enable_connectors = false",
            "experimental_enable_model_catalog = false",
            "[experiments]",
            "enable = false",
            "[[providers]]",
            'name = "scripted"',
            f"api_base = {json.dumps(api_base)}",
            f'api_key_env_var = "{API_KEY_ENV}"',
            'api_style = "openai"',
            'backend = "generic"',
            "[[models]]",
            'name = "mock-model"',
            'provider = "scripted"',
            f'alias = "{MODEL_ALIAS}"',
            "input_price = 1.0",
            "output_price = 2.0",
            "",
        ]
    )


def write_vibe_home(vibe_home: Path, api_base: str) -> Path:
    """Create ``vibe_home`` (0700) with :func:`config_toml` and the key in ``.env`` (both 0600);
    return the config path."""
    vibe_home.mkdir(parents=True, exist_ok=True, mode=0o700)
    dotenv = vibe_home / ".env"
    dotenv.write_text(f"{API_KEY_ENV}={API_KEY}\n", encoding="utf-8")
    dotenv.chmod(0o600)
    path = vibe_home / "config.toml"
    path.write_text(config_toml(api_base), encoding="utf-8")
    path.chmod(0o600)
    return path


def bridge_code(tool: str, arguments: Mapping[str, Any], server: str = "octipus") -> str:
    """``run_typescript`` code calling the bridge tool ``tool`` with ``arguments`` (observed.md §3.4)."""
    return (
        f"async function main(){{ return await tools.mcp_{server}.{tool}({json.dumps(dict(arguments))}); }}"
    )


class VibeKit:
    """Mistral Vibe over ACP (``vibe-acp``): relay, ``session/load`` resume, reported usage."""

    adapter = "vibe"
    relay = True
    resumes = True
    reports_usage = True
    sandbox_without_network = False

    def start_model(self, steps: list[Step]) -> ModelServer:
        """Start the scripted Chat Completions server (fails first when Vibe is not installed)."""
        require_vibe()
        return ScriptedChatServer({"steps": steps}).start()

    def daemon_env(self, home: Path, model: ModelServer) -> dict[str, str]:
        """Write ``home/.vibe/config.toml`` and install Vibe for the daemon's user.

        ``vibe-acp`` and ``vibe`` are linked into ``home/.local/bin`` (a pipx-style install, which
        the daemon's executable lookup searches by default). ``OCTIPUS_VIBE_BINARY`` (the Vibe adapter's
        first-boot variable of ``cliModels.mistralVibe``) names the ``vibe-acp`` to run.

        Returns:
            ``VIBE_HOME`` and ``OCTIPUS_VIBE_BINARY`` (the key is in ``VIBE_HOME/.env``).
        """
        vibe_home = home / ".vibe"
        write_vibe_home(vibe_home, model.base_url)
        binary = require_vibe()
        bindir = home / ".local" / "bin"
        bindir.mkdir(parents=True, exist_ok=True)
        for target in (binary, binary.with_name("vibe")):
            link = bindir / target.name
            if not link.exists():
                link.symlink_to(target)
        return {"VIBE_HOME": str(vibe_home), "OCTIPUS_VIBE_BINARY": str(binary)}

    def text(self, text: str) -> Step:
        """Answer ``text``."""
        return {"content": [{"type": "text", "text": text}]}

    def bridge_call(self, tool: str, arguments: Mapping[str, Any]) -> Step:
        """Call the bridge tool through ``run_typescript`` (``tools.mcp_octipus.<tool>``)."""
        code = bridge_code(tool, arguments)
        return {"content": [{"type": "tool_use", "name": "run_typescript", "input": {"code": code}}]}

    def shell(self, command: str) -> Step:
        """Run ``command`` with Vibe's ``bash`` tool."""
        return {"content": [{"type": "tool_use", "name": "bash", "input": {"command": command}}]}

    def session_options(self) -> dict[str, Any]:
        """Default session fields (ACP, workspace permission mode = ``accept-edits``)."""
        return {}


class VibeHeadlessKit(VibeKit):
    """Mistral Vibe headless (``vibe -p``): no relay; never resumed; usage from export.json."""

    relay = False
    resumes = False

    def session_options(self) -> dict[str, Any]:
        """``options.transport = "headless"`` and permission mode ``full`` (see the module docstring)."""
        return {"options": {"transport": "headless"}, "permission_mode": "full"}
