"""The capability: required on every request, 401 otherwise, per bridge, dead with the run."""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest
from bridge_support import connect, texts

from octipusd.adapter import BridgeEndpoint
from octipusd.bridge.fakes import FakeToolHost
from octipusd.bridge.queue import WorkerQueues
from octipusd.bridge.server import open_bridge
from octipusd.toolkit import RunIdentity
from octipusd.tools import DEFAULT_TOOLS

pytestmark = pytest.mark.anyio

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "octipus-test", "version": "0"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_endpoint_shape(identity: RunIdentity, host: FakeToolHost) -> None:
    async with open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge:
        endpoint = bridge.endpoint
        assert isinstance(endpoint, BridgeEndpoint)
        assert endpoint.url == f"http://127.0.0.1:{bridge.port}/mcp"
        assert endpoint.server_name == "octipus"
        assert len(endpoint.token) >= 43  # token_urlsafe(32): 256 bits
        assert endpoint.token not in repr(bridge)
        assert bridge.running
    assert not bridge.running


async def test_missing_and_wrong_capability_get_401_and_bridge_keeps_serving(
    identity: RunIdentity, host: FakeToolHost
) -> None:
    async with open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge:
        token = bridge.endpoint.token
        async with httpx.AsyncClient(timeout=10) as http:
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": f"Bearer {token}x"},
                {"Authorization": f"Basic {token}"},
                {"Authorization": token},
            ):
                for method in ("POST", "GET", "DELETE"):
                    response = await http.request(
                        method, bridge.url, headers={**MCP_HEADERS, **headers}, json=INITIALIZE
                    )
                    assert response.status_code == 401, (method, headers, response.text)
                    assert response.json() == {"error": "invalid_capability"}
            # Any path needs it, not only /mcp.
            assert (await http.get(bridge.url.replace("/mcp", "/other"))).status_code == 401
            # The right capability still works, raw and through the SDK client; the scheme
            # is case-insensitive.
            ok = await http.post(
                bridge.url, headers={**MCP_HEADERS, "Authorization": f"bearer {token}"}, json=INITIALIZE
            )
            assert ok.status_code == 200, ok.text
        async with connect(bridge.url, token) as client:
            result = await client.call_tool("get_work_plan", {})
        assert not result.is_error, texts(result)
    assert host.authorizations and all(a.tool_id == "get_work_plan" for a in host.authorizations)


async def test_capability_of_one_bridge_does_not_open_another(
    make_identity: Callable[..., RunIdentity], host: FakeToolHost
) -> None:
    queues = WorkerQueues()
    async with (
        open_bridge(make_identity(run_id="run-a"), host, DEFAULT_TOOLS, queues=queues) as bridge_a,
        open_bridge(make_identity(run_id="run-b"), host, DEFAULT_TOOLS, queues=queues) as bridge_b,
    ):
        assert bridge_a.endpoint.token != bridge_b.endpoint.token
        assert bridge_a.port != bridge_b.port
        async with httpx.AsyncClient(timeout=10) as http:
            crossed = await http.post(
                bridge_a.url,
                headers={**MCP_HEADERS, "Authorization": f"Bearer {bridge_b.endpoint.token}"},
                json=INITIALIZE,
            )
            assert crossed.status_code == 401
            own = await http.post(
                bridge_a.url,
                headers={**MCP_HEADERS, "Authorization": f"Bearer {bridge_a.endpoint.token}"},
                json=INITIALIZE,
            )
            assert own.status_code == 200


async def test_foreign_host_header_is_refused_even_with_capability(
    identity: RunIdentity, host: FakeToolHost
) -> None:
    async with open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge:
        auth = {"Authorization": f"Bearer {bridge.endpoint.token}"}
        async with httpx.AsyncClient(timeout=10) as http:
            rebinding = await http.post(
                bridge.url,
                headers={**MCP_HEADERS, **auth, "Host": f"evil.example:{bridge.port}"},
                json=INITIALIZE,
            )
            assert rebinding.status_code == 421
            localhost = await http.post(
                bridge.url,
                headers={**MCP_HEADERS, **auth, "Host": f"localhost:{bridge.port}"},
                json=INITIALIZE,
            )
            assert localhost.status_code == 200


async def test_bridge_stops_with_the_run(identity: RunIdentity, host: FakeToolHost) -> None:
    async with open_bridge(identity, host, DEFAULT_TOOLS, queues=WorkerQueues()) as bridge:
        url, token = bridge.url, bridge.endpoint.token
    async with httpx.AsyncClient(timeout=5) as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(url, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}, json=INITIALIZE)
