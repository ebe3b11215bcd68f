"""The person's side of pipelines through a real octipusd (issue 27 item 7, "Bad input and failure"),
on SQLite and PostgreSQL, over pipelines written into its store as a walker leaves them:

* ``/v1/pipelines``: the list, the status document (``status`` at its top level, ``history`` on
  request), item edits queued, every bad request a 400 naming the field, an unknown id a 404 naming
  it, a resume of a running pipeline a 409; the live stream of its history;
* ``octipusctl pipelines``: list, show (``--json`` and the readable view, agent text inert), items,
  resume refused with a non-zero exit and the daemon's reason.

Creating, resuming and stopping through the walker: tests/e2e/test_pipeline_surfaces_walk.py.
"""

from __future__ import annotations

import getpass
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from octipusd.ctl.client import Client
from octipusd.errors import ApiError
from octipusd.store import Store
from octipusd.store.pipeline_records import PipelineStatus
from octipusd.testing.harness import DaemonHarness
from tests.unit.pipelines.seed import Seeded, seed_pipeline

CTL = str(Path(sys.executable).parent / "octipusctl")
MISSING_BINARY = Path("/nonexistent/octipus-pipelines/vendor")
ME = getpass.getuser()


@dataclass
class Site:
    daemon: DaemonHarness
    client: Client
    stopped: Seeded
    running: Seeded


@pytest.fixture
def site(tmp_path: Path, migrated_store_url: str) -> Iterator[Site]:
    workspace = tmp_path / "d" / "workspace"
    workspace.mkdir(parents=True)
    with Store.open(migrated_store_url) as store:
        stopped = seed_pipeline(store, user=ME, workspace=str(workspace))
    env = {"OCTIPUS_DATABASE_URL": migrated_store_url}
    with DaemonHarness(tmp_path / "d", "http://127.0.0.1:9", MISSING_BINARY, env) as daemon:
        # seeded once the daemon serves: its start-up pauses the pipelines a previous daemon left running
        with Store.open(migrated_store_url) as store:
            running = seed_pipeline(store, user=ME, workspace=str(workspace), status=PipelineStatus.RUNNING)
        client = daemon.client()
        try:
            yield Site(daemon, client, stopped, running)
        finally:
            client.close()


def refused(site: Site, status: int, method: str, path: str, **kwargs: Any) -> str:
    with pytest.raises(ApiError) as caught:
        site.client.request(method, path, **kwargs)
    assert caught.value.http_status == status, caught.value.message
    return caught.value.message


def test_api_lists_shows_edits_and_refuses_by_field_and_id(site: Site) -> None:
    pid = site.stopped.pipeline_id
    listed = site.client.request("GET", "/pipelines")
    assert {p["id"] for p in listed} == {pid, site.running.pipeline_id}
    doc = site.client.request("GET", f"/pipelines/{pid}")
    assert doc["status"] == "stopped" and doc["id"] == pid and doc["history"]
    assert [s["node"] for s in doc["stages"]] == ["n0", "n1"]
    assert doc["incompleteAttempt"]["stage"] == "implement" and doc["remainingItems"] == list(
        site.stopped.item_ids
    )
    assert "history" not in site.client.request(
        "GET", f"/pipelines/{pid}", params={"includeHistory": "false"}
    )

    queued = site.client.request("POST", f"/pipelines/{pid}/items", json={"add": [{"title": "third"}]})
    assert queued["status"] == "stopped" and queued["queued"][0]["add"][0]["title"] == "third"

    # 400 naming the field
    assert "template" in refused(site, 400, "POST", "/pipelines", json={"workspace": "/w"})
    assert "workspace, session_id" in refused(site, 400, "POST", "/pipelines", json={"template": "t"})
    assert "workspace: '/nonexistent/dir'" in refused(
        site, 400, "POST", "/pipelines", json={"template": "t", "workspace": "/nonexistent/dir"}
    )
    assert "session nope" in refused(
        site, 404, "POST", "/pipelines", json={"template": "t", "session_id": "nope"}
    )
    assert "add.0.title" in refused(
        site, 400, "POST", f"/pipelines/{pid}/items", json={"add": [{"title": ""}]}
    )
    assert "give at least one change" in refused(site, 400, "POST", f"/pipelines/{pid}/items", json={})
    assert "skipItems" in refused(site, 400, "POST", f"/pipelines/{pid}/resume", json={"skipItems": "a"})
    assert "includeHistory" in refused(
        site, 400, "GET", f"/pipelines/{pid}", params={"includeHistory": "maybe"}
    )
    assert "zzz" in refused(site, 400, "POST", f"/pipelines/{pid}/items", json={"skip": ["zzz"]})
    # 404 naming the id
    for method, path in [
        ("GET", "/pipelines/nope"),
        ("POST", "/pipelines/nope/stop"),
        ("POST", "/pipelines/nope/resume"),
        ("GET", "/pipelines/nope/stream"),
    ]:
        assert "pipeline nope not found" in refused(site, 404, method, path)
    assert "nope" in refused(site, 404, "POST", "/pipelines/nope/items", json={"add": [{"title": "x"}]})
    # 409: a resume of a running pipeline
    message = refused(site, 409, "POST", f"/pipelines/{site.running.pipeline_id}/resume", json={})
    assert "is running" in message


def test_the_stream_writes_the_history_of_a_pipeline_at_rest_then_ends(site: Site) -> None:
    pid = site.stopped.pipeline_id
    history = site.client.request("GET", f"/pipelines/{pid}")["history"]
    transport = httpx.HTTPTransport(uds=str(site.daemon.socket))
    with httpx.Client(transport=transport, base_url="http://octipusd", timeout=30) as http:
        answer = http.get(f"/v1/pipelines/{pid}/stream", params={"after": 1})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/event-stream")
    frames = [f for f in answer.text.split("\n\n") if f.startswith("id: ")]
    seqs = [int(f.split("\n")[0].removeprefix("id: ")) for f in frames]
    assert seqs == [e["seq"] for e in history if e["seq"] > 1]
    last = json.loads(frames[-1].split("\n")[1].removeprefix("data: "))
    assert last["kind"] == history[-1]["kind"] and last["data"] == history[-1]["data"]


def ctl(site: Site, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, "pipelines", *args], env=site.daemon.env, capture_output=True, text=True, timeout=120
    )


def test_octipusctl_pipelines(site: Site) -> None:
    pid = site.stopped.pipeline_id
    listed = ctl(site, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {p["id"] for p in json.loads(listed.stdout)} == {pid, site.running.pipeline_id}
    shown = ctl(site, "show", pid, "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "stopped"
    readable = ctl(site, "show", pid)
    assert readable.returncode == 0, readable.stderr
    text = readable.stdout
    assert "stopped" in text and "implement" in text and "incomplete attempt" in text
    assert "\x1b" not in text and "\\x1b[31mred" in text  # the agent's escape sequence shown, not run
    items = ctl(site, "items", pid, "--add", "third", "--order", ",".join(reversed(site.stopped.item_ids)))
    assert items.returncode == 0 and "1 change(s) queued" in items.stdout, items.stderr
    resumed = ctl(site, "resume", site.running.pipeline_id)
    assert resumed.returncode == 1 and "is running" in resumed.stderr
    missing = ctl(site, "show", "nope")
    assert missing.returncode == 2 and "pipeline nope not found" in missing.stderr
    bad = ctl(site, "items", pid)
    assert bad.returncode == 2 and "--add, --skip, --order" in bad.stderr


TEMPLATE: dict[str, Any] = {
    "name": "mine",
    "description": "one stage",
    "steps": [{"name": "work", "topic": "general", "promptTemplate": "do {{param.what}}"}],
    "parameters": [{"key": "what", "inputType": "string", "requirement": "required"}],
}


def test_templates_list_show_import_export(site: Site, tmp_path: Path) -> None:
    listed = ctl(site, "templates", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    presets = [t["name"] for t in json.loads(listed.stdout) if t["preset"]]
    assert "plan-implement-verify" in presets
    assert "(preset)" in ctl(site, "templates").stdout
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(TEMPLATE), encoding="utf-8")
    imported = ctl(site, "templates", "import", str(path))
    assert imported.returncode == 0 and "imported template mine" in imported.stdout, imported.stderr
    exported = json.loads(ctl(site, "templates", "export", "mine").stdout)
    assert (
        exported["octipusRecipe"] == 1
        and exported["name"] == "mine"
        and exported["steps"][0]["name"] == "work"
    )
    shown = site.client.request("GET", "/pipelines/templates/mine")
    assert shown["document"] == exported
    assert "nope" in refused(site, 404, "GET", "/pipelines/templates/nope")
    bad = {
        **TEMPLATE,
        "name": "bad",
        "steps": [{"name": "x", "topic": "general", "promptTemplate": "{{param.nope}}"}],
    }
    assert "nope" in refused(site, 400, "POST", "/pipelines/templates", json={"document": bad})
    assert "document" in refused(site, 400, "POST", "/pipelines/templates", json={"name": "x"})
