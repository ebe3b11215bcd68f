"""The OpenAPI contract (issue 16 item 4): a property-based fuzz of every route of a real daemon.

Every operation of the daemon's own schema (``GET /v1/openapi.json``, so a route added later is
fuzzed too) gets schemathesis cases, valid and invalid ones, sent to a real ``octipusd`` on its
Unix socket over a real SQLite store seeded with real rows (``known_ids`` in conftest.py). Path
parameters take a seeded id about half the time, so routes reach existing rows as well as missing
ones. Each answer must not be a server error, must have a status and a content type the operation
declares, and its body must match the declared schema.

Turns (``POST /sessions/{id}/turns``) are fuzzed too: every adapter's binary is a missing path, so a
run fails at once with a clear reason and no vendor process starts. The SSE stream
(``GET /runs/{id}/stream``) is fuzzed like the rest, each frame checked against its declared schema:
every run ends at once, so a stream closes after its stored events (:data:`REQUEST_TIMEOUT_SECONDS`
bounds it otherwise). The page-wide activity feed never ends by design (:data:`ENDLESS`).

Bounded: :data:`MAX_EXAMPLES` cases per operation, derandomized (the same cases every run), no
shrinking; the operations are dealt into :data:`SHARDS` tests, each with its own daemon, so xdist
spreads them.
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
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
from tests.contract.unix_http import BASE_URL, unix_session

#: Cases per operation, valid and invalid ones together.
MAX_EXAMPLES = 25
#: Tests the operations are dealt into (each starts its own daemon; xdist runs them in parallel).
SHARDS = 6
#: Seconds one request may take (a stream included: an ended run's closes at once).
REQUEST_TIMEOUT_SECONDS = 10.0
#: What every answer is checked for.
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
#: Operations that never end by design, so a case could only wait for its timeout: the page-wide
#: activity feed streams until its client leaves (tests/web/test_pages.py reads its frames).
ENDLESS = frozenset({f"GET /{API_VERSION}/activity"})
#: Lines of one operation's failure report kept (schemathesis prints each schema in full).
REPORT_LINES = 60


def fuzz(operation: APIOperation, session: requests.Session, known: dict[str, list[str]]) -> int:
    """Send an operation's cases; return how many were sent (a failing check raises)."""
    modes = [operation.as_strategy(generation_mode=mode) for mode in GenerationMode]
    sent = 0

    @given(data=st.data())
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
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


@pytest.mark.parametrize("shard", range(SHARDS))
def test_every_route_answers_by_its_schema(
    daemon: DaemonHarness, known_ids: dict[str, list[str]], shard: int
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
            assert fuzz(operation, session, known_ids) > 0, f"{operation.label}: no case sent"
        except Exception as exc:  # noqa: BLE001 - every operation's failure is reported, not only the first
            failures.append(f"{operation.label}:\n" + "\n".join(str(exc).splitlines()[:REPORT_LINES]))
    session.close()
    assert not failures, f"{len(failures)} operations broke the contract:\n\n" + "\n\n".join(failures)
