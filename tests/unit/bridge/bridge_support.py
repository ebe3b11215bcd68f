"""Helpers of the bridge tests: a real SDK client, result texts, bounded waits, a holding tool.

Kept out of ``conftest.py`` so tests can import them by a unique module name.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent

from octipusd.toolkit import RunIdentity, ToolHost, ToolResult, ToolSpec

#: Bound of every wait in these tests (seconds); nothing should come near it.
WAIT = 10.0


@contextlib.asynccontextmanager
async def connect(url: str, token: str, *, mode: str = "legacy") -> AsyncIterator[Client]:
    """Open an SDK client session on a bridge with ``Authorization: Bearer <token>``.

    ``mode="legacy"`` is the initialize handshake Claude Code uses (observed.md §1.5);
    ``"auto"`` lets the SDK negotiate (2026-07-28 ``server/discover``).
    """
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(WAIT, read=60.0)
    )
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        yield client


def texts(result: CallToolResult) -> list[str]:
    """The text blocks of a tool result."""
    return [block.text for block in result.content if isinstance(block, TextContent)]


async def wait_until(predicate: Callable[[], bool], within: float = WAIT) -> None:
    """Wait (bounded by ``within`` seconds) until ``predicate()`` holds; polls every 5 ms.

    For state that has no event to wait on (a lock's queue length).
    """
    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110
            await anyio.sleep(0.005)


class Holder:
    """A tool that runs until the test releases it, tagged by its ``tag`` argument.

    ``started`` lists the tags in the order their handler started; ``entered(tag)`` is set
    when that handler starts; ``release(tag)`` lets it return.
    """

    def __init__(self, name: str = "hold") -> None:
        self.name = name
        self.started: list[str] = []
        self.identities: list[RunIdentity] = []
        self._entered: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)
        self._released: defaultdict[str, anyio.Event] = defaultdict(anyio.Event)

    def entered(self, tag: str) -> anyio.Event:
        return self._entered[tag]

    def release(self, tag: str) -> None:
        self._released[tag].set()

    async def _handler(self, identity: RunIdentity, host: ToolHost, arguments: dict[str, Any]) -> ToolResult:
        tag = str(arguments["tag"])
        self.started.append(tag)
        self.identities.append(identity)
        self._entered[tag].set()
        await self._released[tag].wait()
        return {"tag": tag, "worker_id": identity.worker_id}

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(
            name=self.name,
            description="Test tool: waits until the test releases it.",
            input_schema={"type": "object", "properties": {"tag": {"type": "string"}}, "required": ["tag"]},
            handler=self._handler,
            timeout_seconds=WAIT * 3,
        )
