"""Exact costs through the real daemon (issue 26 item 4), on SQLite and PostgreSQL: a database left
by an octipusd whose costs were binary floats is migrated at start, and the API, the page and
``octipusctl`` then give every figure exactly, by one rule: the API as decimal strings (``"0.02"``,
not ``0.019999999999999997``), a person's view as ``$0.0245`` beside ``$0.0040`` (not ``$0.02``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from octipusd.testing.harness import DaemonHarness
from tests.unit.store.legacy_costs import seed_legacy_costs
from tests.web.review_fixtures import socket_client

UNUSED_MODEL = "http://127.0.0.1:9"
CTL = str(Path(sys.executable).parent / "octipusctl")


def test_existing_figures_are_exact_in_the_api_the_page_and_the_cli(store_url: str, tmp_path: Path) -> None:
    daemon = DaemonHarness(tmp_path / "octipus", UNUSED_MODEL, extra_env={"OCTIPUS_DATABASE_URL": store_url})
    seeded = seed_legacy_costs(store_url, daemon.workspace)
    a, b, c, d = (seeded.runs[key] for key in "abcd")
    with daemon, socket_client(daemon.socket) as http:
        run = http.get(f"/v1/runs/{c}").json()
        assert run["cost_usd"] == "0.02" and http.get(f"/v1/runs/{d}").json()["cost_usd"] is None
        events = http.get(f"/v1/runs/{c}/events").json()
        assert [e["data"]["cost_usd"] for e in events if e["kind"] == "result"] == ["0.02"]
        assert http.get(f"/v1/sessions/{seeded.session_id}/usage").json()["cost_usd"] == "0.0485"
        report = http.get("/v1/usage", params={"by": "run"}).json()
        assert {g["key"]: g["cost_usd"] for g in report["groups"]} == {
            a: "0.0245",
            b: "0.004",
            c: "0.02",
            d: None,
        }
        assert report["cost_usd"] == "0.0485"

        usage = http.get("/usage").text
        per_run = usage[usage.index('data-by="run"') :]
        for shown in ("$0.0245", "$0.0040", "$0.0200"):
            assert f'<span class="amount">{shown}</span>' in per_run, shown
        assert "$0.0485" in usage[: usage.index('data-by="run"')]  # the total above the tables
        run_page = http.get(f"/runs/{c}").text
        assert '<span class="cost">$0.0200</span>' in run_page and "cost $0.0200" in run_page

        shown = subprocess.run(
            [CTL, "runs", "show", c], env=daemon.env, capture_output=True, text=True, timeout=60, check=True
        )
        assert "cost $0.0200" in shown.stdout and "0.0199" not in shown.stdout, shown.stdout
        as_json = subprocess.run(
            [CTL, "runs", "show", c, "--json", "--events"],
            env=daemon.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        lines = [json.loads(line) for line in as_json.stdout.splitlines()]
        assert lines[0]["cost_usd"] == "0.02"
        assert [e["data"]["cost_usd"] for e in lines[1:] if e["kind"] == "result"] == ["0.02"]
