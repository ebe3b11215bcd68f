"""What the fuzz found, one case each, through a real octipusd on its socket (issue 16 item 4).

* the schema is published under the API version (``/v1/openapi.json``) and declares the error body
  ``{"code", "message"}`` (:class:`~octipusd.api.models.ErrorOut`) on every route;
* a refusal the framework makes before any route runs (a body that is not JSON, a path no route
  matches, a method a route does not take) is such a body, not FastAPI's ``{"detail": "..."}``;
* a run's event stream sends frames as its schema declares them: ``id``, ``event`` and ``data``
  holding an ``EventOut`` (it was declared as a bare string).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from octipusd.api import API_VERSION
from octipusd.api.models import EventOut
from octipusd.api.sse import EVENT_FRAME_SCHEMA
from octipusd.testing.harness import DaemonHarness

V = f"/{API_VERSION}"


@pytest.fixture
def http(daemon: DaemonHarness) -> Iterator[httpx.Client]:
    with httpx.Client(
        transport=httpx.HTTPTransport(uds=str(daemon.socket)), base_url="http://octipusd", timeout=30.0
    ) as client:
        yield client


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"code", "message"} and body["code"] == code, body
    return str(body["message"])


def test_the_schema_is_published_under_the_api_version_with_the_error_bodies(http: httpx.Client) -> None:
    assert http.get("/openapi.json").status_code == 404
    spec = http.get(f"{V}/openapi.json").json()
    assert spec["info"]["title"] == "octipusd"
    operations = [(path, op) for path, ops in spec["paths"].items() for op in ops.values()]
    assert len(operations) >= 50
    error = {"$ref": "#/components/schemas/ErrorOut"}
    for path, op in operations:
        for status in ("400", "404", "409"):
            assert op["responses"][status]["content"]["application/json"]["schema"] == error, (path, status)
        unprocessable = op["responses"]["422"]["content"]["application/json"]["schema"]["anyOf"]
        assert error in unprocessable, path
    assert spec["components"]["schemas"]["ErrorOut"]["required"] == ["code", "message"]


def test_refusals_before_any_route_are_error_bodies(http: httpx.Client) -> None:
    for url in (f"{V}/grants", f"{V}/rules", f"{V}/models"):
        message = _error(
            http.post(url, content=b"\xff\xfe not json", headers={"content-type": "application/json"}),
            400,
            "invalid_request",
        )
        assert message.startswith("body: ") and "not valid JSON" in message, message
    message = _error(http.get(f"{V}/runs/a/b/c"), 404, "not_found")
    assert f"GET {V}/runs/a/b/c" in message and "check the id" in message, message
    refused = http.put(f"{V}/health")
    assert "GET" in refused.headers["allow"]
    assert "PUT" in _error(refused, 405, "method_not_allowed")


def test_the_event_stream_sends_the_frames_its_schema_declares(
    http: httpx.Client, known_ids: dict[str, list[str]]
) -> None:
    run_id = known_ids["run_id"][0]
    spec = http.get(f"{V}/openapi.json").json()
    declared = spec["paths"][f"{V}/runs/{{run_id}}/stream"]["get"]["responses"]["200"]["content"]
    assert declared["text/event-stream"]["schema"] == EVENT_FRAME_SCHEMA
    with http.stream("GET", f"{V}/runs/{run_id}/stream") as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = response.read().decode()
    frames: list[dict[str, Any]] = []
    for block in filter(None, text.split("\n\n")):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
        frames.append(fields)
    assert [f["event"] for f in frames] == ["run_status", "run_status"], text
    for frame in frames:
        assert set(frame) == set(EVENT_FRAME_SCHEMA["required"]), frame  # type: ignore[arg-type]
        event = EventOut.model_validate(json.loads(frame["data"]))
        assert (str(event.seq), event.kind, event.run_id) == (frame["id"], frame["event"], run_id)
