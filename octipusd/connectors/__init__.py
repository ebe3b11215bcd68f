"""MCP connectors: external MCP servers whose tools the per-run bridge offers to agents.

The operator configures servers under ``mcpServers`` (:class:`octipusd.settings.McpServerSettings`).
:class:`ConnectorRegistry` opens one MCP client session per enabled server (the ``mcp`` SDK 2.x
``ClientSession`` over ``stdio_client`` or ``streamable_http_client``), lists its tools and turns
each into a :class:`~octipusd.toolkit.ToolSpec`:

* published name ``<server>__<tool>`` (the ``container__action`` form vendors accept), identity
  ``<server>.<tool>`` (seed 000: "New MCP journal entries identify server.tool");
* ``read_only`` only for a server with ``trustRecoveryHints = true`` whose tool carries exactly
  ``annotations.readOnlyHint: true`` (seed 000 "MCP server recovery declarations"); anything
  else, including a missing annotation or an untrusted server, is a mutation, journaled and
  gated by recovery review. Call arguments are never consulted for this;
* a recovery contract (seed 004) from the configuration: risk class (default
  ``irreversible``), owner, deadline, idempotency key, verification probe and compensation.

How a call's outcome is classified (seed 000 "Implementation and guarantees"):

* proven not to have reached ``tools/call`` -- the connection is closed or already broken, the
  request was refused before the transport accepted it, or (http) the TCP connection to the
  server could not be established -- raises :class:`~octipusd.toolkit.NotExecutedError`
  ("Local bridge refusals before tools/call are also not_executed");
* a result with ``isError: false``: a plain return, i.e. ``completed``;
* ``isError: true`` carrying ``_meta["octipus/recovery"].outcome == "not_executed"`` from a
  trusted server raises ``NotExecutedError`` with the server's text; from an untrusted server the
  declaration is ignored;
* any other ``isError``, a timeout, a transport failure after the request was handed to the
  transport, or an unexpected answer: a :class:`~octipusd.toolkit.ToolOutcome` marked
  uncertain ("Generic errors ... missing results and post-dispatch transport failures remain
  conservative").

Whether ``tools/call`` was handed to the transport is observed, not guessed
(:mod:`~octipusd.connectors.transport`).

Connections are opened per use (:meth:`ConnectorRegistry.connect_all` for a run's bridge,
:meth:`ConnectorRegistry.connect` for one server), and the configuration is read at every new
connection, so an edited server setting applies on the next connection (seed 000).

Modules: :mod:`~octipusd.connectors.registry` (connecting, tool specs, ending a stopped daemon's
sessions), :mod:`~octipusd.connectors.calls` (one call and its outcome),
:mod:`~octipusd.connectors.contracts` (recovery contracts, probes, compensations),
:mod:`~octipusd.connectors.transport` (connections, the hand-over tracking).

A stdio server starts with the login variables of the daemon's environment
(:func:`octipusd.environment.login_environment`: HOME, PATH, locale, proxies, CA bundles...) and
then its configured ``env``; never the daemon's settings, API keys or other credentials. A server
that needs a credential gets it in its ``env``, as when a vendor CLI starts it from its own config.
"""

from __future__ import annotations

from octipusd.connectors.calls import RECOVERY_META_KEY
from octipusd.connectors.registry import ConnectorRegistry, ConnectorSet
from octipusd.connectors.transport import MCP_SESSION_HEADER, url_digest

__all__ = [
    "MCP_SESSION_HEADER",
    "RECOVERY_META_KEY",
    "ConnectorRegistry",
    "ConnectorSet",
    "url_digest",
]
