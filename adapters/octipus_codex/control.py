"""Signals Octipus reads from Codex's events and output.

Shapes: the unknown-thread errors of ``thread/resume`` (observed-2.md §1.5) and ``codex exec
resume`` (observed.md §2.6), the MCP start-up statuses (observed-2.md §1.4), ``--version``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

from octipusd.adapter import CapabilityRow, LaunchRequest, ResultEvent, SessionEvent
from octipusd.adapterkit import bridge_not_connected

from .launch import TRANSPORT_EXEC, transport_of

#: Codex's text for a resume id it has no rollout for (app-server JSON-RPC error -32600 and
#: ``codex exec resume`` stderr, observed on 0.171.0).
SESSION_MISSING_TEXT: Final = "no rollout found for thread id"

#: Codex's text for a resume id that is not a UUID (app-server -32600, observed on 0.171.0).
INVALID_SESSION_TEXT: Final = "invalid session id"

#: Codex names its native items differently from Claude; the flow guard classifies them under the
#: Claude tool they behave like (observed-2.md: ``commandExecution`` carries ``command``; exec's
#: ``web_search`` item is named ``webSearch`` by the parser, kept for rules written either way).
TOOL_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "commandExecution": "Bash",
        "fileChange": "Write",
        "webSearch": "WebSearch",
        "web_search": "WebSearch",
    }
)

_VERSION_RE: Final = re.compile(r"\b(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)")


def capabilities(options: Mapping[str, Any]) -> CapabilityRow:
    """Seed 003's "Permissions and limits" row of Codex for a model row's ``metadata.cliAgent``:
    ``app-server`` relays command and MCP approvals, ``exec`` relays none (its sandbox decides)."""
    if options.get("transport") == TRANSPORT_EXEC:
        relay = "Vendor’s noninteractive sandbox policy; no interactive relay"
    else:
        relay = "app-server: command and MCP approvals enter Octipus approvals"
    return CapabilityRow("Codex CLI", "Scoped MCP", "read-only sandbox", "Structured stream", relay)


def session_missing(result: ResultEvent) -> bool:
    """Whether a result says the thread to resume does not exist (seed 003 "Cold fallback").

    app-server answers ``thread/resume`` of an unknown UUID with the JSON-RPC error
    ``{"code":-32600,"message":"no rollout found for thread id <id>"}`` and of a non-UUID with
    ``invalid session id: ...`` (observed-2.md §1.5, re-checked on 0.171.0); the parser turns
    either into a :class:`ResultEvent` (``subtype="resume_failed"``) carrying that text. Either
    way the stored id is useless and the next turn should start a new thread.

    Args:
        result: The parsed result.

    Returns:
        True when one of those texts appears in ``errors`` or in the result text.
    """
    texts = [*result.errors, result.text or ""]
    return any(SESSION_MISSING_TEXT in t or INVALID_SESSION_TEXT in t for t in texts)


def stderr_session_missing(stderr: str) -> bool:
    """Whether ``codex exec resume`` failed because the thread does not exist.

    exec prints nothing on stdout then (rc 1, stdout empty); stderr holds
    ``Error: thread/resume: thread/resume failed: no rollout found for thread id <id> (code -32600)``
    (observed.md §2.6, re-checked on 0.171.0). The parser cannot see stderr, so the runtime has to
    ask this for an exec run that ended without a result.

    Args:
        stderr: The process's stderr (or its tail).

    Returns:
        True when the no-rollout text is present.
    """
    return SESSION_MISSING_TEXT in stderr


def usage_is_cumulative(request: LaunchRequest) -> bool:
    """Whether the run's reported usage includes the thread's earlier turns.

    True only for a resumed ``exec`` run: ``turn.completed.usage`` is cumulative per thread
    across resumes (observed.md §2.3), so that run's figure is the thread's total so far. The
    runtime then supplies the thread's earlier usage as ``LaunchRequest.thread_usage`` and the
    parser subtracts it. app-server usage is always per turn (``last`` of the turn's own
    notifications, :mod:`octipus_codex.parser`).

    Raises:
        AdapterError: an unknown transport in ``request.options``.
    """
    return request.resume and transport_of(request.options) == TRANSPORT_EXEC


def mcp_failure(event: SessionEvent, server_name: str) -> str | None:
    """Reason the bridge is unusable per the session announcement, or None.

    The app-server parser announces the session once the bridge's start-up status is settled
    (``ready``, ``failed``, ``cancelled``, or re-authentication required) or, at the latest, when the
    turn completes; a bridge not ``connected`` by then never served the turn.

    Args:
        event: A parsed :class:`SessionEvent`.
        server_name: The bridge's MCP server name (``BridgeEndpoint.server_name``).

    Returns:
        A one-sentence reason, or None when the bridge is connected.
    """
    failure = bridge_not_connected(event, server_name, "Codex", "its MCP start-up status")
    return failure.reason if failure is not None else None


def parse_version(output: str) -> str | None:
    """Read the version out of ``codex --version`` output (``codex-cli 0.171.0`` -> ``0.171.0``)."""
    match = _VERSION_RE.search(output)
    return match.group(1) if match else None
