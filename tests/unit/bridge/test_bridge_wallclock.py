"""A bridge tool request has its own wall clock, approval waits included (seed 003, two hours by default)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from bridge_support import connect, texts

from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.server import BridgeLimits, open_bridge
from octipusd.toolkit import AuthorizationResult, CallWatch, RunIdentity
from octipusd.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio


class NeverAnsweringHost(FakeToolHost):
    """A host whose permission check waits forever, like an approval nobody answers."""

    async def authorize(
        self, identity: RunIdentity, tool_id: str, arguments: dict[str, Any], watch: CallWatch | None = None
    ) -> AuthorizationResult:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")


def test_default_wall_clock_is_two_hours() -> None:
    assert BridgeLimits().request_timeout_seconds == 7200.0


async def test_a_request_past_its_wall_clock_is_stopped_with_an_error(identity: RunIdentity) -> None:
    limits = BridgeLimits(request_timeout_seconds=0.3, authorize_timeout_seconds=600.0)
    async with (
        open_bridge(identity, NeverAnsweringHost(), DEFAULT_TOOLS, limits=limits) as bridge,
        connect(bridge.endpoint.url, bridge.endpoint.token) as client,
    ):
        result = await client.call_tool("update_work_plan", {"plan": {"title": "t", "steps": []}})
    assert result.is_error
    assert "did not complete within the bridge's wall clock of 0.3 s" in " ".join(texts(result))
