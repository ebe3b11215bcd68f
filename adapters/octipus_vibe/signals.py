"""What Octipus reads out of Vibe's output besides the event stream: tool names, MCP failures,
session-missing errors, versions and usage estimates.

Everything here is a pure function of text or parsed events; shapes were observed on Mistral Vibe
3.0.2 (``/work/shared/protocols/observed.md`` §3) and re-checked while writing this adapter (see
the package docstring).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from octipusd.adapter import ResultEvent, Usage

#: Characters per estimated token (seed 003 "Permissions and limits": "about four characters per
#: token" for adapters that report no usage).
CHARS_PER_TOKEN: Final = 4

#: First line of the agent message Vibe sends when MCP servers could not be reached
#: (``vibe/acp/agent.py`` ``_notify_mcp_discovery_failures``; observed with a refused bearer
#: token: ``- octipus: authentication was rejected``, and with an unreachable server:
#: ``- lab: mcp_transport_failed``, observed.md §3.4).
MCP_FAILED_PREFIX: Final = "The following MCP servers failed to connect:"

#: Start of the agent message Vibe sends when an MCP server wants an OAuth login
#: (``vibe/acp/agent.py`` ``_notify_mcp_auth``: ``MCP OAuth login is required for: a, b. Run ...``).
MCP_AUTH_PREFIX: Final = "MCP OAuth login is required for:"

#: Text of Vibe's error for an unknown resume id: ACP ``session/load`` answers JSON-RPC error
#: ``-32602`` ``Session not found: <id>``; headless ``--resume`` exits 1 with stderr
#: ``Error: Session not found: <id>`` and export.json ``error.message`` ``Session not found: <id>``
#: (observed.md §3.3, §3.5; reproduced on 3.0.2).
SESSION_MISSING_TEXT: Final = "Session not found"

#: ResultEvent subtype the parsers give an unknown-session failure.
SESSION_MISSING_SUBTYPE: Final = "session_not_found"

_VERSION_RE: Final = re.compile(r"\b(\d+\.\d+\.\d+(?:[-.+]?[0-9A-Za-z.-]+)?)")
_MCP_TOOL_RE: Final = re.compile(r"^mcp_([A-Za-z0-9_-]+)\.(.+)$")


def vendor_tool_name(name: str) -> str:
    """Map a Vibe tool name onto the name Octipus rules and the runtime use.

    * ``mcp_<server>.<tool>`` (Vibe's connector group naming, observed.md §3.4; e.g.
      ``mcp_octipus.update_work_plan``) becomes ``mcp__<server>__<tool>``, the Claude-style name
      the runtime recognises as a bridge tool (``mcp__octipus__`` prefix) and answers itself.
    * A namespaced built-in (``file_system.bash`` in headless effects) keeps its last segment
      (``bash``), the name ACP reports in ``_meta.tool_name``; Octipus rules then see
      ``cli-native:bash``.
    * Anything else is kept as is.

    Args:
        name: The tool name as Vibe reports it.

    Returns:
        The mapped name (``""`` stays ``""``).
    """
    match = _MCP_TOOL_RE.match(name)
    if match:
        return f"mcp__{match.group(1)}__{match.group(2)}"
    if "." in name:
        return name.rsplit(".", 1)[1] or name
    return name


def mcp_statuses(text: str) -> dict[str, str]:
    """Read MCP server statuses out of one of Vibe's MCP notice messages.

    Args:
        text: An agent message's text.

    Returns:
        Server name -> ``failed`` for :data:`MCP_FAILED_PREFIX` messages (one ``- name: error``
        line per server), server name -> ``needs-auth`` for :data:`MCP_AUTH_PREFIX` messages, and
        ``{}`` for any other text.
    """
    stripped = text.strip()
    statuses: dict[str, str] = {}
    if stripped.startswith(MCP_FAILED_PREFIX):
        for line in stripped.splitlines()[1:]:
            item = line.strip()
            if item.startswith("- ") and ":" in item:
                name = item[2:].split(":", 1)[0].strip()
                if name:
                    statuses[name] = "failed"
    elif stripped.startswith(MCP_AUTH_PREFIX):
        names = stripped[len(MCP_AUTH_PREFIX) :].split(". ", 1)[0].rstrip(".")
        for name in names.split(","):
            if name.strip():
                statuses[name.strip()] = "needs-auth"
    return statuses


def is_mcp_notice(text: str) -> bool:
    """Whether an agent message is one of Vibe's MCP notices rather than model output.

    Args:
        text: An agent message's text.

    Returns:
        True when it starts with :data:`MCP_FAILED_PREFIX` or :data:`MCP_AUTH_PREFIX`.
    """
    stripped = text.lstrip()
    return stripped.startswith(MCP_FAILED_PREFIX) or stripped.startswith(MCP_AUTH_PREFIX)


def session_missing(result: ResultEvent) -> bool:
    """Whether a result says the resumed Vibe session does not exist.

    Both transports put Vibe's ``Session not found: <id>`` message in ``errors`` and use the
    subtype :data:`SESSION_MISSING_SUBTYPE` (ACP: the ``session/load`` JSON-RPC error; headless:
    export.json ``error.message``). The runtime then drops the stored id and starts cold.

    Args:
        result: The parsed result.

    Returns:
        True when the subtype or any error text says so.
    """
    if result.subtype == SESSION_MISSING_SUBTYPE:
        return True
    return any(SESSION_MISSING_TEXT in text for text in (*result.errors, result.text or ""))


def parse_version(output: str) -> str | None:
    """Read the version out of ``vibe --version`` / ``vibe-acp --version`` output.

    Args:
        output: The command's stdout, e.g. ``"vibe 3.0.2\\n"`` or ``"vibe-acp 3.0.2\\n"`` (observed on
            the pinned binaries).

    Returns:
        ``"3.0.2"``, or None when no ``MAJOR.MINOR.PATCH`` is found.
    """
    match = _VERSION_RE.search(output)
    return match.group(1) if match else None


def estimate_tokens(chars: int) -> int:
    """Estimate tokens from a character count.

    Args:
        chars: Characters of text.

    Returns:
        ``ceil(chars / CHARS_PER_TOKEN)`` tokens, 0 for ``chars <= 0``.
    """
    if chars <= 0:
        return 0
    return -(-chars // CHARS_PER_TOKEN)


def estimated_usage(input_chars: int, output_chars: int) -> Usage:
    """An estimated :class:`Usage` from character counts (seed 003: ~4 characters per token).

    Args:
        input_chars: Characters the model read (user text, tool results).
        output_chars: Characters the model wrote (assistant text, tool arguments).

    Returns:
        ``Usage(estimated=True)`` with rounded-up token counts.
    """
    return Usage(
        input_tokens=estimate_tokens(input_chars),
        output_tokens=estimate_tokens(output_chars),
        estimated=True,
    )


def merge_statuses(current: Mapping[str, str], update: Mapping[str, str]) -> dict[str, str]:
    """Merge MCP server statuses.

    Args:
        current: Server name -> status so far.
        update: New statuses.

    Returns:
        ``current`` updated with ``update``, except that a ``failed`` or ``needs-auth`` status is
        never replaced.
    """
    merged = dict(current)
    for name, status in update.items():
        if merged.get(name) in ("failed", "needs-auth"):
            continue
        merged[name] = status
    return merged
