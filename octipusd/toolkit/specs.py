"""Tool specifications: what a bridge exposes and how it runs each tool.

A tool is a frozen :class:`ToolSpec`: a name, a description for the model, a JSON input
schema (published as the MCP ``inputSchema``), flags, and an async handler. Handlers get the
run's identity and host from the bridge, never from their arguments, and the arguments
already stripped of identity keys. A handler validates its own arguments and raises
:class:`octipusd.errors.InvalidRequestError` naming the bad field; any exception becomes an
MCP tool error result (``isError: true``) in the bridge, never a crashed bridge.

Octipus's own tools (:mod:`octipusd.tools`) and the MCP connectors' tools
(:mod:`octipusd.connectors`) are both specs; the bridge publishes them and the runtime runs
them for a call started by hand.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from octipusd.toolkit.contracts import DispatchRef, RecoveryContract, RiskClass
from octipusd.toolkit.host import ToolHost
from octipusd.toolkit.identity import RESERVED_IDENTITY_ARGUMENTS, RunIdentity
from octipusd.toolkit.outcomes import ToolOutcome

__all__ = ["UNDECLARED_CONTRACT", "ToolHandler", "ToolResult", "ToolSpec", "validate_tool_specs"]

#: What a handler returns: plain text, or a JSON object (sent as JSON-encoded text).
ToolResult = str | dict[str, Any]

#: ``async (identity, host, arguments) -> str | dict | ToolOutcome``. A handler returns a
#: :class:`~octipusd.toolkit.ToolOutcome` when its call finished with an uncertain
#: effect (a timeout, a signal) and raises
#: :class:`~octipusd.toolkit.NotExecutedError` when it proved nothing ran.
ToolHandler = Callable[[RunIdentity, ToolHost, dict[str, Any]], Awaitable[ToolResult | ToolOutcome]]

#: Contract of a mutating tool that declares none: conservative.
UNDECLARED_CONTRACT = RecoveryContract(RiskClass.IRREVERSIBLE, intended_effects="undeclared effects")

# MCP tool names: 1-128 of letters, digits, "_", "-", "." (MCP-SPEC 2025-11-25 "Tool names").
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


@dataclass(frozen=True)
class ToolSpec:
    """One Octipus tool as a bridge exposes it.

    Attributes:
        name: MCP tool name (Claude shows it as ``mcp__octipus__<name>``); also the
            ``tool_id`` passed to :meth:`ToolHost.authorize`.
        description: What the tool does, for the model.
        input_schema: JSON Schema (object) of the arguments. Must not declare identity keys.
        handler: The implementation.
        read_only: The tool changes nothing; its response carries no appended run context
            and it is advertised with ``readOnlyHint``.
        bypass_queue: Run without taking the worker's call lock (only the context/plan reads).
        timeout_seconds: Deadline of one handler run (seconds); a handler that exceeds it
            yields an error result.
        internal: An orchestration or context tool (the work plan, delegation): it changes
            only Octipus's own records, is not journaled and stays available while a recovery
            review is open (seed 000: "Internal orchestration and context tools remain
            available and do not create duplicate outer records").
        contract: The recovery contract of a mutating tool (seed 004); None for read-only and
            internal tools. A mutating tool without one is treated as irreversible.
        identity: The tool's identity for permission rules and the action journal when it
            differs from ``name``: an MCP connector tool is published as ``server__tool`` (the
            ``container__action`` form vendors accept as a tool name) and identified as
            ``server.tool`` (seed 000: "New MCP journal entries identify server.tool").
        dispatch_ref: Where a call made now sends its request (an MCP connector's session),
            recorded with the journal's ``started`` so a restarted daemon can end a request
            it left in flight; None for tools whose work runs in Octipus's own processes.
        secret_env: The values of the tool's ``env`` argument may carry vault placeholders
            (``{{secret:NAME}}``), resolved after the permission checks and masked in the result
            (:func:`octipusd.toolkit.secrets.run_with_secrets`); a placeholder anywhere else, or in
            any argument of a tool without it, is refused.
    """

    name: str
    description: str
    input_schema: Mapping[str, Any]
    handler: ToolHandler = field(compare=False)
    read_only: bool = False
    bypass_queue: bool = False
    timeout_seconds: float = 60.0
    internal: bool = False
    contract: RecoveryContract | None = field(default=None, compare=False)
    identity: str | None = None
    dispatch_ref: Callable[[], DispatchRef | None] | None = field(default=None, compare=False)
    secret_env: bool = False

    def dispatch(self) -> DispatchRef | None:
        """Where a call made now goes (see ``dispatch_ref``)."""
        return self.dispatch_ref() if self.dispatch_ref is not None else None

    @property
    def tool_id(self) -> str:
        """The id rules, approvals and the journal use: ``identity`` or ``name``."""
        return self.identity or self.name

    @property
    def mutating(self) -> bool:
        """True when a call is journaled and gated by recovery review (neither read-only nor
        internal). Arbitrary shell counts as a mutation (seed 000)."""
        return not (self.read_only or self.internal)

    @property
    def recovery_contract(self) -> RecoveryContract:
        """The declared contract, or the conservative irreversible one."""
        return self.contract if self.contract is not None else UNDECLARED_CONTRACT


def validate_tool_specs(tools: Iterable[ToolSpec]) -> tuple[ToolSpec, ...]:
    """Check a tool set before a bridge publishes it.

    Args:
        tools: The specs to expose.

    Returns:
        The specs as a tuple, in the given order.

    Raises:
        ValueError: a name is invalid or duplicated, a schema is not an object schema, a
            schema declares an identity key, or a timeout is not positive.
    """
    specs = tuple(tools)
    seen: set[str] = set()
    for spec in specs:
        if not _TOOL_NAME.match(spec.name):
            raise ValueError(f"invalid tool name {spec.name!r}: use 1-128 letters, digits, '_', '-' or '.'")
        if spec.name in seen:
            raise ValueError(f"duplicate tool name {spec.name!r}")
        seen.add(spec.name)
        if spec.input_schema.get("type") != "object":
            raise ValueError(f"tool {spec.name!r}: input_schema must have type 'object'")
        properties = spec.input_schema.get("properties", {})
        clash = sorted(RESERVED_IDENTITY_ARGUMENTS.intersection(properties))
        if clash:
            raise ValueError(f"tool {spec.name!r}: input_schema declares identity keys {clash}")
        if not spec.timeout_seconds > 0:
            raise ValueError(f"tool {spec.name!r}: timeout_seconds must be positive")
    return specs
