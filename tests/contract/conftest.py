"""A real octipusd for the contract tests: every vendor binary missing, seeded through its API.

Every adapter's binary is a path that does not exist, so a turn posted by a test (or by the fuzz)
fails at once with a clear reason and no vendor process ever starts.

The daemon's store is SQLite in its default place (the data folder) unless a test parametrises
``backend`` with ``"postgresql"``: then a fresh PostgreSQL database whose URL carries a password
(:data:`PG_PASSWORD`; the test server trusts its socket, so the password is never checked, only
carried).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from octipusd.testing.harness import DaemonHarness

#: Every adapter's binary: a path that does not exist.
MISSING_BINARY = "/nonexistent/octipus-contract/vendor"
#: The first-boot variables naming each adapter's binary.
BINARY_VARIABLES = (
    "OCTIPUS_CLAUDE_BINARY",
    "OCTIPUS_CODEX_BINARY",
    "OCTIPUS_VIBE_BINARY",
    "OCTIPUS_ANTIGRAVITY_BINARY",
)
#: Seconds the seeded run may take to fail (it fails before any process starts).
SEED_RUN_TIMEOUT_SECONDS = 30.0
TERMINAL = {"succeeded", "failed", "interrupted", "cancelled"}


#: The password in the PostgreSQL daemon's database URL.
PG_PASSWORD = "contract-pg-password-7f3a"


@pytest.fixture
def backend() -> str:
    """The contract daemon's store: ``"sqlite"``, or ``"postgresql"`` where a test parametrises it."""
    return "sqlite"


@pytest.fixture
def database_url(request: pytest.FixtureRequest, backend: str) -> str | None:
    """The daemon's ``OCTIPUS_DATABASE_URL``: None (SQLite in the data folder) or a fresh
    PostgreSQL database's URL with :data:`PG_PASSWORD` in it."""
    if backend == "sqlite":
        return None
    url: str = request.getfixturevalue("postgres_database_url")
    return make_url(url).set(password=PG_PASSWORD).render_as_string(hide_password=False)


@pytest.fixture
def daemon(tmp_path: Path, database_url: str | None) -> Iterator[DaemonHarness]:
    """A real octipusd on ``backend``'s store whose vendors are all missing binaries (no model server
    is needed)."""
    env = dict.fromkeys(BINARY_VARIABLES, MISSING_BINARY)
    if database_url is not None:
        env["OCTIPUS_DATABASE_URL"] = database_url
    with DaemonHarness(tmp_path, "http://127.0.0.1:9", Path(MISSING_BINARY), env) as started:
        yield started


@pytest.fixture
def known_ids(daemon: DaemonHarness) -> dict[str, list[str]]:
    """Real rows stored through the API, their ids by the path parameter names that take them.

    A space ``team`` with the member ``alice``, a model row ``fuzz-row``, a session with one (failed)
    run and its events, a rule and a grant. Plan feedback is not seeded: it needs a plan, which only an
    agent makes.
    """
    client = daemon.client()
    try:
        space = client.request("POST", "/spaces", json={"name": "team"})
        client.request("PUT", "/spaces/team/members/alice", json={"role": "editor"})
        row = client.request("POST", "/models", json={"name": "fuzz-row", "adapter": "claude-code"})
        session = client.request("POST", "/sessions", json={"workspace": str(daemon.workspace)})
        run = client.request("POST", f"/sessions/{session['id']}/turns", json={"prompt": "hi"})
        daemon.wait_until(
            lambda: client.request("GET", f"/runs/{run['id']}")["status"] in TERMINAL,
            SEED_RUN_TIMEOUT_SECONDS,
            "the seeded run to fail",
        )
        rule = client.request("POST", "/rules", json={"level": "allow", "rule": "shell__run(ls:*)"})
        grant = client.request("POST", "/grants", json={"tool_id": "shell__run"})
    finally:
        client.close()
    return {
        "session_id": [session["id"]],
        "run_id": [run["id"]],
        "id_or_name": ["team", space["id"], "fuzz-row", row["id"]],
        "user": ["alice"],
        "rule_id": [str(rule["id"])],
        "grant_id": [str(grant["id"])],
    }


def integer_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The integer branch of a parameter's schema (``anyOf`` an integer or null), or None."""
    for branch in [schema, *schema.get("anyOf", [])]:
        if branch.get("type") == "integer":
            return branch
    return None
