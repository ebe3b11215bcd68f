"""Conformance kits for Antigravity (the stub ``agy``) and GLM (the real ``claude`` as ``claude-glm``).

:class:`AntigravityKit` drives the ``antigravity`` adapter against :mod:`octipusd.testing.stub_agy`:
agy talks to no model Octipus could script over HTTP, so the "model server" is
:class:`AgyScript`, which only holds the steps; :meth:`AntigravityKit.daemon_env` writes them as the
stub's script, writes an executable ``agy`` wrapper into ``<home>/bin`` and agy's own settings
(``toolPermission``, the way an operator configures agy for headless use) under ``<home>``.

Steps are stub actions grouped into invocations: a text step ends the turn (like a model's
final answer), a bridge or shell step does not, so ``[bridge_call, text]`` is one agy run that
calls ``octipus-bridge`` from its terminal and then answers, and ``[text, text]`` is two runs.

:class:`GlmKit` is :class:`~octipusd.testing.kit_claude.ClaudeKit` with the ``claude-glm`` adapter:
the real Claude Code binary, pointed by the adapter (model row options ``baseUrl`` and
``authTokenEnv``) at the scripted Anthropic server with a key held in an environment variable.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from octipusd.testing.anthropic_server import ScriptedAnthropicServer
from octipusd.testing.conformance import ModelServer, Step
from octipusd.testing.harness import write_python_stub
from octipusd.testing.kit_claude import ClaudeKit
from octipusd.testing.stub_agy import RECORD_ENV, SCRIPT_ENV, STATE_ENV

#: Where nothing listens: the harness needs a model URL for Claude's variables; agy never uses it.
UNUSED_BASE_URL = "http://127.0.0.1:9"


def group_turns(steps: list[Step]) -> list[list[dict[str, Any]]]:
    """Group kit steps into one action list per agy invocation.

    Args:
        steps: Steps built by :class:`AntigravityKit` (``{"actions": [...], "ends_turn": bool}``).

    Returns:
        The ``turns`` of the stub script: a turn closes after each step with ``ends_turn``; trailing
        steps without one form a last turn.
    """
    turns: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for step in steps:
        current.extend(step["actions"])
        if step.get("ends_turn", True):
            turns.append(current)
            current = []
    if current:
        turns.append(current)
    return turns


def write_agy_wrapper(path: Path, env: Mapping[str, str]) -> Path:
    """Write an executable ``agy`` that runs the stub with this interpreter
    (:func:`octipusd.testing.harness.write_python_stub`).

    Args:
        path: The wrapper's path (its folder is created).
        env: Variables exported by the wrapper before it starts the stub (so the stub finds its
            script and record: the daemon passes its vendors only an allowlisted environment).

    Returns:
        ``path`` (mode 0755).
    """
    return write_python_stub(path, "octipusd.testing.stub_agy", env)


class AgyScript:
    """The ModelServer stand-in for the stub: the steps, and after :meth:`AntigravityKit.daemon_env`
    the script, state and record files.

    Args:
        steps: The kit steps.

    Attributes:
        steps: As given.
        script_path: The stub script file, once written.
        record_path: The stub's JSON-lines record file, once chosen.
    """

    def __init__(self, steps: list[Step]) -> None:
        self.steps = list(steps)
        self.script_path: Path | None = None
        self.record_path: Path | None = None

    @property
    def base_url(self) -> str:
        """A loopback URL nothing listens on (agy needs no HTTP model here)."""
        return UNUSED_BASE_URL

    def records(self) -> list[dict[str, Any]]:
        """Every record line the stub wrote so far (``start``/``turn``/``end`` entries)."""
        if self.record_path is None or not self.record_path.exists():
            return []
        return [
            json.loads(line) for line in self.record_path.read_text(encoding="utf-8").splitlines() if line
        ]

    def conversation_texts(self) -> list[str]:
        """The prompt each stub invocation received, in order."""
        return [str(r.get("prompt", "")) for r in self.records() if r.get("event") == "turn"]

    def close(self) -> None:
        """Nothing to stop."""


class AntigravityKit:
    """Antigravity (stub ``agy``): terminal bridge, no relay, no resume, estimated usage.

    Args:
        tool_permission: agy's ``toolPermission`` written to its settings (``always-proceed`` lets
            terminal commands run headless; agy's default ``request-review`` would make every
            tool wait and the turn end with an empty answer).
    """

    adapter = "antigravity"
    relay = False
    resumes = False
    reports_usage = False
    sandbox_without_network = False

    def __init__(self, tool_permission: str = "always-proceed") -> None:
        self.tool_permission = tool_permission

    def start_model(self, steps: list[Step]) -> ModelServer:
        """Hold the steps; nothing is started."""
        return AgyScript(steps)

    def daemon_env(self, home: Path, model: ModelServer) -> dict[str, str]:
        """Write the stub script, agy's settings and the ``agy`` wrapper under ``home``.

        Returns:
            ``OCTIPUS_ANTIGRAVITY_BINARY`` (the wrapper), ``OCTIPUS_AGY_SCRIPT``, ``OCTIPUS_AGY_STATE``
            and ``OCTIPUS_AGY_RECORD``.
        """
        if not isinstance(model, AgyScript):
            raise TypeError("AntigravityKit.daemon_env needs the AgyScript from start_model")
        script = home / "agy-script.json"
        script.write_text(json.dumps({"turns": group_turns(model.steps)}, indent=2), encoding="utf-8")
        record = home / "agy-record.jsonl"
        model.script_path, model.record_path = script, record
        settings = home / ".gemini" / "antigravity-cli" / "settings.json"
        settings.parent.mkdir(parents=True, exist_ok=True)
        settings.write_text(json.dumps({"toolPermission": self.tool_permission}), encoding="utf-8")
        env = {SCRIPT_ENV: str(script), STATE_ENV: str(home / "agy-script.state"), RECORD_ENV: str(record)}
        wrapper = write_agy_wrapper(home / "bin" / "agy", env)
        return {"OCTIPUS_ANTIGRAVITY_BINARY": str(wrapper), **env}

    def text(self, text: str) -> Step:
        """The agent answers ``text``; the turn ends."""
        return {"actions": [{"say": text}], "ends_turn": True}

    def bridge_call(self, tool: str, arguments: Mapping[str, Any]) -> Step:
        """The agent runs ``octipus-bridge call <tool> '<json>'`` in its terminal."""
        command = f"octipus-bridge call {shlex.quote(tool)} {shlex.quote(json.dumps(dict(arguments)))}"
        return {"actions": [{"run": command}], "ends_turn": False}

    def shell(self, command: str) -> Step:
        """The agent runs ``command`` in its terminal."""
        return {"actions": [{"run": command}], "ends_turn": False}

    def session_options(self) -> dict[str, Any]:
        """Default session fields (workspace mode: ``--mode accept-edits --add-dir=<workspace>``)."""
        return {}


#: The variable holding the scripted GLM "key" in the daemon's environment (not an ``OCTIPUS_*``
#: name: the daemon's own settings never reach a vendor).
GLM_TOKEN_ENV = "SCRIPTED_GLM_KEY"
#: Its value (the scripted server accepts anything).
GLM_TOKEN = "glm-scripted-key-0123456789"
#: The model name the GLM kit configures.
GLM_MODEL = "glm-4.7"


class GlmKit(ClaudeKit):
    """GLM through Claude Code (``claude-glm``) against the scripted Anthropic server.

    The model row options (``session_options()["options"]``) name the scripted server as ``baseUrl``
    and :data:`GLM_TOKEN_ENV` as ``authTokenEnv``; the daemon's environment holds the key.
    """

    adapter = "claude-glm"

    def __init__(self) -> None:
        self.base_url: str | None = None

    def start_model(self, steps: list[Step]) -> ModelServer:
        """Start the scripted Anthropic server and remember its URL for the session options."""
        server = ScriptedAnthropicServer({"steps": steps}).start()
        self.base_url = server.base_url
        return server

    def daemon_env(self, home: Path, model: ModelServer) -> dict[str, str]:
        """Claude's binary plus the key variable."""
        return {**super().daemon_env(home, model), GLM_TOKEN_ENV: GLM_TOKEN}

    def session_options(self) -> dict[str, Any]:
        """``options``: ``baseUrl`` (the scripted server), ``authTokenEnv``, ``model``."""
        if self.base_url is None:
            raise RuntimeError("GlmKit.session_options called before start_model")
        return {
            "options": {"baseUrl": self.base_url, "authTokenEnv": GLM_TOKEN_ENV, "model": GLM_MODEL},
        }
