"""The OpenAPI contract (issue 16 item 4): a property-based fuzz of every route of a real daemon.

Every operation of the daemon's own schema (``GET /v1/openapi.json``, so a route added later is
fuzzed too) gets schemathesis cases, valid and invalid ones, sent to a real ``octipusd`` on its
Unix socket over a real store seeded with real rows (``known_ids`` in conftest.py), SQLite and
PostgreSQL, each with its own share of the cases (:data:`SEEDS`): an integer a column cannot hold
fails on PostgreSQL only (issue 26 item 6). Path parameters take a seeded id about half the time,
so routes reach existing rows as well as missing ones. Each answer must not be a server error,
must have a status and a content type the operation declares, and its body must match the
declared schema.

Every integer parameter is also sent its edges (:func:`edge_cases`), with the path's seeded ids so
the value reaches the store: its declared bounds and one past each, and the largest value of each
SQL integer type and one past it. A parameter whose declared range is wider than its column's is
then a 500 on PostgreSQL; one within it is a 400 naming it.

Turns (``POST /sessions/{id}/turns``) are fuzzed too: every adapter's binary is a missing path, so a
run fails at once with a clear reason and no vendor process starts. The SSE stream
(``GET /runs/{id}/stream``) is fuzzed like the rest, each frame checked against its declared schema:
every run ends at once, so a stream closes after its stored events (:data:`REQUEST_TIMEOUT_SECONDS`
bounds it otherwise). The page-wide activity feed never ends by design (:data:`ENDLESS`).

Bounded: :data:`MAX_EXAMPLES` cases per operation and store, from a fixed seed per store (the same
cases every run), no shrinking; the operations are dealt into :data:`SHARDS` tests per store, each
with its own daemon, so xdist spreads them.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from octipusd.api import API_VERSION
from octipusd.testing.harness import DaemonHarness
from tests.contract.conftest import integer_schema
from tests.contract.unix_http import BASE_URL, unix_session

#: The stores the fuzz runs on, each with the seed of its cases (so the two see different ones).
SEEDS = {"sqlite": 0, "postgresql": 1}
#: Cases per operation and store, valid and invalid ones together (with the edges, about as many
#: requests in all as 25 on one store).
MAX_EXAMPLES = 12
#: Tests the operations are dealt into per store (each starts its own daemon; xdist runs them in
#: parallel).
SHARDS = 3
#: Values every integer parameter is sent beside its declared bounds: the largest of each SQL
#: integer type (SMALLINT, INTEGER, BIGINT) and one past it.
SQL_EDGES = tuple(edge for bits in (16, 32, 64) for edge in (2 ** (bits - 1) - 1, 2 ** (bits - 1)))
#: Seconds one request may take (a stream included: an ended run's closes at once).
REQUEST_TIMEOUT_SECONDS = 10.0
#: What every answer is checked for.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
#: Operations that never end by design, so a case could only wait for its timeout: the page-wide
#: activity feed streams until its client leaves (tests/web/test_pages.py reads its frames).
ENDLESS = frozenset({f"GET /{API_VERSION}/activity"})
#: Lines of one operation's failure report kept (schemathesis prints each schema in full).
REPORT_LINES = 60


def edge_cases(operation: APIOperation, known: dict[str, list[str]]) -> list[Any]:
    """One case per edge of each integer parameter of ``operation`` (the module docstring), its
    path parameters the first seeded ids (a made-up one where none is seeded)."""
    path = {p.name: known.get(p.name, ["edge"])[0] for p in operation.path_parameters}
    cases = []
    for parameter in operation.iter_parameters():
        declared = integer_schema(parameter.definition.get("schema", {}))
        if declared is None:
            continue
        bounds = [declared[k] + step for k in ("minimum", "maximum") if k in declared for step in (-1, 0, 1)]
        place = parameter.location.value
        for value in sorted({*bounds, *SQL_EDGES}):
            sent = {parameter.name: str(value) if place == "header" else value}
            cases.append(
                operation.Case(
                    path_parameters=dict(path),
                    query=sent if place == "query" else None,
                    headers=sent if place == "header" else None,
                )
            )
    return cases


def fuzz(
    operation: APIOperation, session: requests.Session, known: dict[str, list[str]], backend: str
) -> int:
    """Send an operation's edge cases and fuzzed cases; return how many were sent (a failing
    check raises)."""
    modes = [operation.as_strategy(generation_mode=mode) for mode in GenerationMode]
    sent = 0
    for case in edge_cases(operation, known):
        sent += 1
        case.call_and_validate(
            base_url=BASE_URL, session=session, checks=CHECKS, timeout=REQUEST_TIMEOUT_SECONDS
        )

    @seed(SEEDS[backend])
    @given(data=st.data())
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=False,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def cases(data: st.DataObject) -> None:
        nonlocal sent
        case = data.draw(st.one_of(modes), label="case")
        for name in case.path_parameters or {}:
            if name in known and data.draw(st.booleans(), label=f"known {name}"):
                case.path_parameters[name] = data.draw(st.sampled_from(known[name]), label=name)
        sent += 1
        case.call_and_validate(
            base_url=BASE_URL, session=session, checks=CHECKS, timeout=REQUEST_TIMEOUT_SECONDS
        )

    cases()
    return sent


@pytest.mark.parametrize(
    ("backend", "shard"),
    [
        pytest.param(
            backend, shard, id=f"{backend}-{shard}", marks=[pytest.mark.postgres] * (backend != "sqlite")
        )
        for backend in SEEDS
        for shard in range(SHARDS)
    ],
)
def test_every_route_answers_by_its_schema(
    daemon: DaemonHarness, known_ids: dict[str, list[str]], backend: str, shard: int
) -> None:
    session = unix_session(str(daemon.socket))
    spec: dict[str, Any] = session.get(f"{BASE_URL}/{API_VERSION}/openapi.json").json()
    schema = schemathesis.openapi.from_dict(spec)
    operations = sorted(
        (op for result in schema.get_all_operations() if (op := result.ok()).label not in ENDLESS),
        key=lambda op: (op.path, op.method),
    )
    assert len(operations) >= 50, [op.label for op in operations]
    failures: list[str] = []
    for operation in operations[shard::SHARDS]:
        try:
            assert fuzz(operation, session, known_ids, backend) > 0, f"{operation.label}: no case sent"
        except Exception as exc:  # noqa: BLE001 - every operation's failure is reported, not only the first
            failures.append(f"{operation.label}:\n" + "\n".join(str(exc).splitlines()[:REPORT_LINES]))
    session.close()
    assert not failures, f"{len(failures)} operations broke the contract:\n\n" + "\n\n".join(failures)
