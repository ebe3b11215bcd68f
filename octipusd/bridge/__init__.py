"""The per-run loopback MCP bridge.

Modules:

* :mod:`octipusd.bridge.queue` -- per-worker call serialization;
* :mod:`octipusd.bridge.server` -- ``open_bridge``: the MCP server of one run;
* :mod:`octipusd.bridge.fakes` -- ``FakeToolHost`` for tests and benchmarks;
* :mod:`octipusd.bridge.helper` -- the ``octipus-bridge`` terminal helper.

The types the bridge shares with its host and its tools (:class:`~octipusd.toolkit.RunIdentity`,
:class:`~octipusd.toolkit.ToolHost`, :class:`~octipusd.toolkit.ToolSpec`) live in
:mod:`octipusd.toolkit`.
"""
