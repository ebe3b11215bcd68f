"""The per-run loopback MCP bridge.

Modules:

* :mod:`octipusd.bridge.identity` -- :class:`RunIdentity`, identity-override stripping;
* :mod:`octipusd.bridge.host` -- the :class:`ToolHost` seam and :class:`AuthorizationResult`;
* :mod:`octipusd.bridge.queue` -- per-worker call serialization;
* :mod:`octipusd.bridge.server` -- ``open_bridge``: the MCP server of one run;
* :mod:`octipusd.bridge.fakes` -- ``FakeToolHost`` for tests and benchmarks;
* :mod:`octipusd.bridge.helper` -- the ``octipus-bridge`` terminal helper.

This package module re-exports only the leaf types: importing the server here would make
``octipusd.tools`` (which the server imports) circular.
"""

from __future__ import annotations

from octipusd.bridge.host import AuthorizationResult, ToolHost
from octipusd.bridge.identity import RunIdentity

__all__ = ["AuthorizationResult", "RunIdentity", "ToolHost"]
