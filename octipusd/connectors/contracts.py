"""The recovery contract of a connector tool (seed 004), from the ``mcpServers`` configuration.

Risk class (default ``irreversible``), owner, deadline, idempotency key, verification probe and
compensation. A probe or compensation is a call of another tool of the same server, through a
short-lived connection of its own (``open_one``); the placeholder
:data:`~octipusd.settings.IDEMPOTENCY_KEY_PLACEHOLDER` in its arguments is the action's key.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

from octipusd.connectors.calls import call_tool, describe, one_line, result_text
from octipusd.connectors.transport import Connection
from octipusd.errors import ConnectorCompensationError, OctipusError
from octipusd.settings import IDEMPOTENCY_KEY_PLACEHOLDER, McpServerSettings, McpToolCallSettings
from octipusd.toolkit import (
    ActionRef,
    Compensation,
    IdempotencyKey,
    Probe,
    ProbeResult,
    ProbeStatus,
    RecoveryContract,
    RiskClass,
)

if TYPE_CHECKING:
    from mcp_types import CallToolResult

__all__ = ["OpenOne", "build_contract"]

#: ``(server) -> async context yielding an open connection``; raises when it cannot connect.
OpenOne = Callable[[str], AbstractAsyncContextManager[Connection]]


class _MissingKey(Exception):
    pass


def _substitute(value: Any, key: str | None) -> Any:
    if isinstance(value, str):
        if value == IDEMPOTENCY_KEY_PLACEHOLDER:
            if key is None:
                raise _MissingKey
            return key
        return value
    if isinstance(value, Mapping):
        return {k: _substitute(v, key) for k, v in value.items()}
    if isinstance(value, list):
        return [_substitute(v, key) for v in value]
    return value


def _key_reader(argument: str) -> IdempotencyKey:
    def key_of(arguments: Mapping[str, Any]) -> str | None:
        value = arguments.get(argument)
        return value if isinstance(value, str) and value.strip() else None

    return key_of


def _probe_answer(ref: str, result: CallToolResult) -> ProbeResult:
    text = result_text(result)
    if result.is_error:
        return ProbeResult(
            ProbeStatus.UNKNOWN, one_line(f"probe {ref} reported an error: {text or 'no details'}")
        )
    data: Any = result.structured_content
    if not isinstance(data, dict):
        try:
            data = json.loads(text)
        except ValueError:
            data = None
    if not isinstance(data, dict):
        return ProbeResult(ProbeStatus.UNKNOWN, one_line(f"probe {ref} answered no JSON object: {text}"))
    status = data.get("status")
    if status == "applied":
        return ProbeResult(ProbeStatus.APPLIED, f"probe {ref}: applied")
    if status == "not_applied":
        return ProbeResult(ProbeStatus.NOT_APPLIED, f"probe {ref}: not applied")
    return ProbeResult(ProbeStatus.UNKNOWN, one_line(f"probe {ref} answered status {status!r}"))


def build_contract(server: str, tool: str, cfg: McpServerSettings, open_one: OpenOne) -> RecoveryContract:
    """The contract of ``server.tool`` under ``cfg`` (its probe and compensation connect with
    ``open_one`` when they run)."""
    override = cfg.tools.get(tool)
    risk = cfg.riskClass
    owner = cfg.owner
    deadline = cfg.deadlineSeconds
    key: IdempotencyKey | None = None
    probe: Probe | None = None
    compensation: Compensation | None = None
    if override is not None:
        risk = override.riskClass or risk
        owner = override.owner or owner
        deadline = override.deadlineSeconds or deadline
        if override.idempotencyKey is not None:
            key = _key_reader(override.idempotencyKey)
        if override.probe is not None:
            probe = _make_probe(open_one, server, override.probe)
        if override.compensation is not None:
            compensation = _make_compensation(open_one, server, override.compensation)
    return RecoveryContract(
        RiskClass(risk),
        idempotency_key=key,
        probe=probe,
        compensation=compensation,
        owner=owner,
        deadline_seconds=deadline,
        intended_effects=f"effects of MCP tool {server}.{tool} (declared by that server)",
    )


def _make_probe(open_one: OpenOne, server: str, call: McpToolCallSettings) -> Probe:
    async def probe(action: ActionRef) -> ProbeResult:
        return await _probe(open_one, server, call, action)

    return probe


def _make_compensation(open_one: OpenOne, server: str, call: McpToolCallSettings) -> Compensation:
    async def compensate(action: ActionRef) -> str:
        return await _compensate(open_one, server, call, action)

    return compensate


async def _probe(open_one: OpenOne, server: str, call: McpToolCallSettings, action: ActionRef) -> ProbeResult:
    """Run a verification probe; every failure is ``unknown``, never ``not_applied``."""
    ref = f"{server}.{call.tool}"
    try:
        arguments = _substitute(call.arguments, action.idempotency_key)
    except _MissingKey:
        return ProbeResult(
            ProbeStatus.UNKNOWN, f"probe {ref} needs the action's idempotency key; none was recorded"
        )
    try:
        async with open_one(server) as connection:
            result, failure, _, _ = await call_tool(connection, call.tool, arguments)
    except OctipusError as exc:  # the server is not configured, disabled or unreachable
        return ProbeResult(ProbeStatus.UNKNOWN, one_line(f"probe {ref} could not run: {describe(exc)}"))
    if result is None:
        reason = describe(failure) if failure is not None else "connection closed"
        return ProbeResult(ProbeStatus.UNKNOWN, one_line(f"probe {ref} failed: {reason}"))
    return _probe_answer(ref, result)


async def _compensate(open_one: OpenOne, server: str, call: McpToolCallSettings, action: ActionRef) -> str:
    """Run a compensation; raise :class:`~octipusd.errors.ConnectorCompensationError` unless it succeeded."""
    ref = f"{server}.{call.tool}"
    try:
        arguments = _substitute(call.arguments, action.idempotency_key)
    except _MissingKey:
        raise ConnectorCompensationError(
            f"compensation {ref} needs the action's idempotency key; none was recorded"
        ) from None
    try:
        async with open_one(server) as connection:
            result, failure, _, _ = await call_tool(connection, call.tool, arguments)
    except OctipusError as exc:  # the server is not configured, disabled or unreachable
        raise ConnectorCompensationError(
            one_line(f"compensation {ref} could not run: {describe(exc)}")
        ) from exc
    if result is None:
        reason = describe(failure) if failure is not None else "connection closed"
        raise ConnectorCompensationError(one_line(f"compensation {ref} failed: {reason}"))
    text = result_text(result)
    if result.is_error:
        raise ConnectorCompensationError(
            one_line(f"compensation {ref} reported an error: {text or 'no details'}")
        )
    return one_line(f"compensation {ref} succeeded: {text}")
