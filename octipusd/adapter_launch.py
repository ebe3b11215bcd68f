"""The launch as the runtime starts it: an adapter's launch plus the bridge helper's environment.

Seed 003: "If MCP is unavailable, use the run's provided bridge helper to call shell__run with the
same JSON arguments." Every vendor's launch with a bridge carries the helper's variables under one
set of names and the helper's folder on ``PATH``: the runtime starts :func:`vendor_launch`, so no
adapter sets them (or can forget them). Part of the adapter protocol (foundations, below ``store``).
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Final

from octipusd.adapter import Adapter, BridgeEndpoint, LaunchRequest, LaunchSpec
from octipusd.errors import AdapterError

__all__ = [
    "BRIDGE_HELPER_ENV",
    "BRIDGE_HELPER_NAME",
    "BRIDGE_TOKEN_ENV",
    "BRIDGE_URL_ENV",
    "bridge_helper_path",
    "vendor_launch",
    "with_bridge_helper",
]

#: Command name of the run's bridge helper (``[project.scripts]`` in pyproject.toml): seed 003's
#: "run's provided bridge helper", through which a vendor's own shell lists and calls the run's
#: Octipus tools when MCP is unavailable (``octipusd.bridge.helper``).
BRIDGE_HELPER_NAME: Final = "octipus-bridge"
#: The variable holding the run's bridge URL for the helper.
BRIDGE_URL_ENV: Final = "OCTIPUS_BRIDGE_URL"
#: The variable holding the run's capability for the helper; an adapter whose vendor's MCP client
#: reads its bearer token from a variable names this one (Codex ``bearer_token_env_var``).
BRIDGE_TOKEN_ENV: Final = "OCTIPUS_BRIDGE_TOKEN"
#: The helper's environment, set on every launch with a bridge by :func:`with_bridge_helper` alone.
BRIDGE_HELPER_ENV: Final = (BRIDGE_URL_ENV, BRIDGE_TOKEN_ENV)


def bridge_helper_path() -> str:
    """Return the ``octipus-bridge`` path next to the running interpreter.

    ``octipus-bridge`` is a console script of the ``octipus`` distribution, installed in the same
    ``bin`` folder as the interpreter running the daemon (``sys.executable`` is not resolved: in a
    virtual environment it is the environment's ``bin/python``). No file-system access: a missing
    helper is noticed only when the vendor runs it.

    Returns:
        An absolute path string (``<dirname(sys.executable)>/octipus-bridge``).
    """
    return str(Path(os.path.abspath(sys.executable)).parent / BRIDGE_HELPER_NAME)


def with_bridge_helper(
    spec: LaunchSpec, bridge: BridgeEndpoint | None, helper: str | None = None
) -> LaunchSpec:
    """Give a built launch the bridge helper's environment: the one place every vendor gets it.

    The runtime passes every adapter's :meth:`Adapter.build_launch` through this, so no adapter sets
    (or can forget) :data:`BRIDGE_HELPER_ENV`. Inherited values of those variables are dropped (a
    parent run's or a row's must not reach this run); with a bridge, :data:`BRIDGE_URL_ENV` and
    :data:`BRIDGE_TOKEN_ENV` are set, the token is one of the launch's secrets, and the helper's folder
    is **appended** to ``PATH`` so the vendor's shell finds ``octipus-bridge`` by name. Appended, not
    prefixed: that folder is the daemon's virtual environment ``bin``, whose ``python`` and ``pip``
    must not shadow the user's.

    Args:
        spec: The adapter's launch.
        bridge: The run's bridge, or None for a run without Octipus tools.
        helper: Absolute path of ``octipus-bridge`` (default :func:`bridge_helper_path`).

    Returns:
        A new spec.

    Raises:
        AdapterError: the launch puts the capability on the command line, where any local user reads
            it (``/proc/PID/cmdline``); the message never includes it.
    """
    env = {k: v for k, v in spec.env.items() if k not in BRIDGE_HELPER_ENV}
    if bridge is None:
        return replace(spec, env=env)
    if any(bridge.token in arg for arg in spec.argv):
        raise AdapterError("the launch puts the run's bridge capability on the command line; it must not")
    env[BRIDGE_URL_ENV] = bridge.url
    env[BRIDGE_TOKEN_ENV] = bridge.token
    folder = os.path.dirname(helper if helper is not None else bridge_helper_path())
    parts = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p]
    if folder and folder not in parts:
        parts.append(folder)
    env["PATH"] = os.pathsep.join(parts)
    secrets = spec.secrets if bridge.token in spec.secrets else (*spec.secrets, bridge.token)
    return replace(spec, env=env, secrets=secrets)


def vendor_launch(adapter: Adapter, request: LaunchRequest, *, helper: str | None = None) -> LaunchSpec:
    """Build a vendor invocation as the runtime starts it: the adapter's launch, completed with the
    bridge helper's environment (:func:`with_bridge_helper`).

    Args:
        adapter: The vendor's adapter.
        request: The launch request.
        helper: Absolute path of ``octipus-bridge`` (default :func:`bridge_helper_path`).

    Raises:
        AdapterError: the adapter refused the request, or its launch puts the capability on argv.
    """
    return with_bridge_helper(adapter.build_launch(request), request.bridge, helper)
