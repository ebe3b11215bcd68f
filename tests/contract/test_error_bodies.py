"""What the fuzz found, one case each, through a real octipusd on its socket (issue 16 item 4).

* the schema is published under the API version (``/v1/openapi.json``) and declares the error body
  ``{"code", "message"}`` (:class:`~octipusd.api.models.ErrorOut`) on every route;
* a refusal the framework makes before any route runs (a body that is not JSON, a path no route
  matches, a method a route does not take) is such a body, not FastAPI's ``{"detail": "..."}``;
* a run's event stream sends frames as its schema declares them: ``id``, ``event`` and ``data``
  holding an ``EventOut`` (it was declared as a bare string);
* every integer parameter declares its range, its column's (issue 26 item 6): ``after`` from 2^31
  up was a 500 ``NumericValueOutOfRange`` on PostgreSQL (and on ``/stream`` a 200 then a dropped
  connection); it is a 400 naming the parameter on both stores, the stream's before it starts;
* a database failure's answer, a JSON body or a page, names neither the database's URL, password
  or socket nor the daemon's data folder or socket; the log has them (SQLite and PostgreSQL, whose
  URL carries a password).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from typing import Any
from urllib.parse import quote

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from octipusd.api import API_VERSION
from octipusd.api.models import EventOut
from octipusd.api.sse import EVENT_FRAME_SCHEMA
from octipusd.paths import xdg_data_dir
from octipusd.testing.harness import DaemonHarness
from octipusd.testing.postgres import conninfo
from tests.contract.conftest import PG_PASSWORD, integer_schema

V = f"/{API_VERSION}"
#: The stores the tests below run on (``backend`` of conftest.py).
BACKENDS = [pytest.param("sqlite"), pytest.param("postgresql", marks=pytest.mark.postgres)]
#: The smallest integer a 32-bit SQL ``INTEGER`` column (an event's or a message's ``seq``) cannot hold.
PAST_INTEGER = 2**31


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


def test_the_schema_is_published_under_the_api_version_with_error_bodies_and_integer_ranges(
    http: httpx.Client,
) -> None:
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
    # every integer parameter declares its range, its column's (an event's seq: 32 bits)
    undeclared = [
        f"{method.upper()} {path} {p['in']} {p['name']}"
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        for p in op.get("parameters", [])
        if (declared := integer_schema(p["schema"])) is not None
        and not {"minimum", "maximum"} <= set(declared)
    ]
    assert not undeclared, undeclared
    events = spec["paths"][f"{V}/runs/{{run_id}}/events"]["get"]["parameters"]
    assert [p["schema"]["maximum"] for p in events if p["name"] == "after"] == [PAST_INTEGER - 1]


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


def _refusal_names(response: httpx.Response, name: str) -> None:
    response.read()  # a stream's answer too: it must be the refusal, not a stream
    message = _error(response, 400, "invalid_request")
    assert name in message and "less than or equal to" in message, message


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_integer_past_its_column_is_a_400_naming_it_also_before_a_stream(
    http: httpx.Client, known_ids: dict[str, list[str]]
) -> None:
    run_id, session_id = known_ids["run_id"][0], known_ids["session_id"][0]
    past = {"after": PAST_INTEGER}
    _refusal_names(http.get(f"{V}/runs/{run_id}/events", params=past), "query parameter after")
    _refusal_names(http.get(f"{V}/sessions/{session_id}/messages", params=past), "query parameter after")
    _refusal_names(http.get(f"/fragments/runs/{run_id}/events", params=past), "query parameter after")
    with http.stream("GET", f"{V}/runs/{run_id}/stream", params=past) as response:
        _refusal_names(response, "query parameter after")
    resumed = {"last-event-id": str(PAST_INTEGER)}
    with http.stream("GET", f"{V}/runs/{run_id}/stream", headers=resumed) as response:
        _refusal_names(response, "header parameter last-event-id")
    largest = {"after": PAST_INTEGER - 1}
    assert http.get(f"{V}/runs/{run_id}/events", params=largest).json() == []
    assert http.get(f"{V}/sessions/{session_id}/messages", params=largest).json() == []
    with http.stream("GET", f"{V}/runs/{run_id}/stream", params=largest) as response:
        assert response.status_code == 200 and response.read() == b""  # an ended run: nothing after


def _rename_table(daemon: DaemonHarness, database_url: str | None, table: str, new: str) -> None:
    statement = f"ALTER TABLE {table} RENAME TO {new}"
    if database_url is None:
        with closing(sqlite3.connect(xdg_data_dir(daemon.env) / "octipus.db")) as conn:
            conn.execute(statement)
            conn.commit()
        return
    with psycopg.connect(**conninfo(database_url), autocommit=True) as conn:
        conn.execute(statement)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_database_failure_names_neither_the_database_nor_the_daemons_paths(
    daemon: DaemonHarness, http: httpx.Client, known_ids: dict[str, list[str]], database_url: str | None
) -> None:
    session_id = known_ids["session_id"][0]
    _rename_table(daemon, database_url, "work_plans", "work_plans_gone")
    private = [str(xdg_data_dir(daemon.env)), str(daemon.socket), str(daemon.socket.parent)]
    if database_url is not None:
        url = make_url(database_url)
        socket_folder = str(url.query["host"])
        private += [
            database_url,
            str(url.database),
            PG_PASSWORD,
            socket_folder,
            quote(socket_folder, safe=""),
        ]
    answers = {
        "the API": http.get(f"{V}/sessions/{session_id}/plan"),
        "the page": http.get(f"/sessions/{session_id}"),
    }
    for where, response in answers.items():
        assert response.status_code == 500, (where, response.text)
        shown = [text for text in private if text in response.text]
        assert not shown, (where, shown, response.text)
        assert "database error while reading the work plan" in response.text, (where, response.text)
    assert _error(answers["the API"], 500, "store_error").endswith("the octipusd log has the details")
    logged = daemon.log()
    assert ("UndefinedTable" if database_url else "no such table: work_plans") in logged
    assert (make_url(database_url).database if database_url else str(xdg_data_dir(daemon.env))) in logged
