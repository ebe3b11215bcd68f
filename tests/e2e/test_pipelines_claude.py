"""Pipelines end to end (issue 27 "Done when"): a real octipusd, the real ``claude`` as every stage
worker, the scripted Anthropic model deciding each stage's answer, driven as a person would (the
API and ``octipusctl``).

* a two-item, two-stage pipeline: the first item's stage stopped and resumed (the same attempt,
  ``claude --resume`` of its vendor session), the second item's stage cut by a daemon SIGKILL; the
  restarted daemon pauses it and spawns nothing until ``resume``, whose replay review outlives one
  more restart (still ``awaiting_approval``; approved after it), which continues the same attempt
  with its resume key and hands the worker its INCOMPLETE text; it completes (SQLite, PostgreSQL);
* a QA stage failing: the implementer retried with the QA issues up to ``maxRetries``, then a person
  asked (denied through ``octipusctl approvals``), a ``fromStage`` rewind whose replay review (seed
  000) is denied first (nothing changes, nothing starts), then approved: asked again and approved;
* every resume of a pipeline that ran answers ``resuming`` and awaits its replay review, which the
  person approves with ``octipusctl approvals approve``;
* items added and reordered mid-run, applied at the next item boundary, then the item a stop cut
  skipped with evidence on ``resume``.

The scripted model picks a conversation by a marker in the stage's prompt: each stage's
``promptTemplate`` is a marker, and the prompt continues with the plan item (``## Plan item\\nTitle:
...``), so ``<marker>\\n\\n## Plan item\\nTitle: <title>`` tells one item's stage from another's. A
stage's step 0 writes text and calls a read-only tool (the vendor confirms its session, the attempt
has text so far); a stalling step 1 is where a stop or a SIGKILL cuts it; its replay ends the
answer with the handoff block the stage contract asks for (pipelines/handoff.py).

The scheduling watchdog (two minutes, not a daemon setting) is tested at unit level:
tests/unit/pipelines/test_walker_watchdog.py; the 15 s status timeout: test_service_status.py.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from octipusd.durable.setup import system_database_url
from octipusd.testing.harness import DaemonHarness
from octipusd.testing.postgres import admin_connect
from tests.conftest import BACKENDS
from tests.e2e.conftest import Env

CTL = str(Path(sys.executable).parent / "octipusctl")
BUILD, CHECK = "BUILD-STAGE", "CHECK-STAGE"
#: Seconds a stalled model answer lasts (a stop, a SIGKILL or the test's end cuts it first).
STALL_S = 600
#: Seconds a pipeline may take to reach a status.
WAIT_S = 120
#: Seconds the test watches a paused pipeline spawn nothing.
QUIET_S = 3
RESTING = {"completed", "failed", "stopped", "paused", "awaiting_approval"}


def template(*, max_retries: int = 3) -> dict[str, Any]:
    """Implement then verify each plan item; each stage's prompt is its marker."""
    return {
        "name": "build-and-check",
        "description": "implement each item, then check it",
        "steps": [
            {"name": "implement", "topic": "coding", "loopOverPlan": True, "promptTemplate": BUILD},
            {
                "name": "verify",
                "topic": "review",
                "stageType": "qa_validation",
                "loopOverPlan": True,
                "maxRetries": max_retries,
                "promptTemplate": CHECK,
            },
        ],
    }


def handoff(status: str, summary: str, issues: tuple[str, ...] = ()) -> str:
    block = json.dumps({"status": status, "summary": summary, "issues": list(issues), "stopped": False})
    return f"{summary}\n\n```json\n{block}\n```"


def text(value: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": value}]}


def marker(stage: str, title: str) -> str:
    """What only the prompt of ``stage`` (a marker) for the item ``title`` holds."""
    return f"{stage}\n\n## Plan item\nTitle: {title}"


def cut_once(title: str) -> list[dict[str, Any]]:
    """The implementer of ``title``: text so far and a tool call, then a stall (once), then done."""
    look = {"type": "tool_use", "name": "mcp__octipus__get_cli_run_context", "input": {}}
    last = {"stall_seconds": STALL_S, "stall_times": 1} | text(handoff("done", f"{title} implemented"))
    return [{"content": [{"type": "text", "text": f"SO-FAR-{title}: half of {title} written"}, look]}, last]


def conversation(match: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"match": match, "steps": steps}


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The daemon's database: its own SQLite file, or a fresh PostgreSQL database (the engine's
    system database beside it is dropped after the test)."""
    if request.param == "sqlite":
        yield {}
        return
    url: str = request.getfixturevalue("postgres_database_url")
    try:
        yield {"OCTIPUS_DATABASE_URL": url}
    finally:
        engine = make_url(system_database_url(url)).database
        with admin_connect(request.getfixturevalue("postgres_url")) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{engine}" WITH (FORCE)')


def ctl(daemon: DaemonHarness, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([CTL, *args], env=daemon.env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


class Pipelines:
    """One daemon's pipelines, through its API."""

    def __init__(self, env: Env, daemon: DaemonHarness | None = None) -> None:
        self.env = env
        self.daemon = daemon or env.daemon
        self.client = self.daemon.client()

    def create(self, doc: dict[str, Any], items: tuple[str, ...]) -> str:
        body = {
            "template": doc,
            "workspace": str(self.env.daemon.workspace),
            "items": [{"title": t, "acceptance": f"{t} works"} for t in items],
        }
        return str(self.client.request("POST", "/pipelines", json=body)["id"])

    def status(self, pid: str) -> dict[str, Any]:
        return dict(self.client.request("GET", f"/pipelines/{pid}"))

    def wait(self, pid: str, wanted: set[str] = RESTING) -> dict[str, Any]:
        return dict(
            self.daemon.wait_until(
                lambda: (d := self.status(pid))["status"] in wanted and d, WAIT_S, f"pipeline {wanted}"
            )
        )

    def wait_for(self, pid: str, check: Callable[[dict[str, Any]], Any], what: str) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            doc = self.status(pid)
            return doc if check(doc) else None

        return dict(self.daemon.wait_until(ready, WAIT_S, what))

    def run(self, run_id: str) -> dict[str, Any]:
        return dict(self.client.request("GET", f"/runs/{run_id}"))


def asked_replay(api: Pipelines, pid: str, *args: str) -> dict[str, Any]:
    """``octipusctl pipelines resume`` of a pipeline that ran a stage: it answers ``resuming`` at once
    and names the replay review it awaits (seed 000); the status shows it as ``pendingApproval``."""
    said = ctl(api.daemon, "pipelines", "resume", pid, *args).stdout
    doc = api.wait(pid)
    review = doc["pendingApproval"] or {}
    assert doc["status"] == "awaiting_approval" and review.get("kind") == "pipeline_replay", doc
    assert "resuming" in said and review["requestId"] in said, said
    return dict(review)


def resume(api: Pipelines, pid: str, *args: str) -> None:
    """Resume as a person does: ``octipusctl pipelines resume``, then approve its replay review."""
    review = asked_replay(api, pid, *args)
    ctl(api.daemon, "approvals", "approve", review["requestId"])


def attempts_of(doc: dict[str, Any], stage: str, title: str) -> list[dict[str, Any]]:
    item = next(i for i in doc["items"] if i["title"] == title)
    return [a for a in doc["attempts"] if a["stage"] == stage and a["itemId"] == item["id"]]


def resumed_prompt(env: Env, conversation_index: int) -> str:
    """The prompt of the last model request of a conversation (a resumed turn's new user text)."""
    last = env.model.requests_in(conversation_index)[-1]
    return json.dumps(last.body["messages"][-1])


def test_stop_resume_and_a_sigkill_mid_stage_continue_the_same_attempts(
    octipus: Callable[..., Env], database: dict[str, str], claude: Path
) -> None:
    script = {
        "steps": [],
        "conversations": [
            conversation(marker(BUILD, "alpha"), cut_once("alpha")),
            conversation(marker(BUILD, "beta"), cut_once("beta")),
            conversation(CHECK, [text(handoff("pass", "verified"))]),
        ],
    }
    env = octipus(script, extra_env=database)
    api = Pipelines(env)
    pid = api.create(template(), ("alpha", "beta"))

    # 1. the first item's implementer stalls after writing: stop, then resume the same attempt
    api.wait_for(
        pid,
        lambda d: attempts_of(d, "implement", "alpha") and len(env.model.requests_in(0)) >= 2,
        "alpha stalls",
    )
    ctl(env.daemon, "pipelines", "stop", pid)
    stopped = api.wait(pid)
    assert stopped["status"] == "stopped", stopped
    assert "SO-FAR-alpha" in (stopped["incompleteAttempt"] or {}).get("text", ""), stopped[
        "incompleteAttempt"
    ]
    resume(api, pid)

    # 2. the second item's implementer stalls: once its text so far is saved, SIGKILL the daemon
    cut = api.wait_for(
        pid,
        lambda d: (i := d["incompleteAttempt"]) and "SO-FAR-beta" in (i.get("text") or ""),
        "beta's text so far saved",
    )
    (beta,) = attempts_of(cut, "implement", "beta")
    (killed_run,) = beta["runIds"]
    env.daemon.stop(signal.SIGKILL)
    requests_before = len(env.model.message_requests)
    again = DaemonHarness(env.daemon.root, env.model.base_url, claude, database)
    with again:
        api = Pipelines(env, again)
        paused = api.wait(pid, {"paused"})
        paused = api.wait_for(
            pid,
            lambda d: attempts_of(d, "implement", "beta")[0]["status"] == "interrupted",
            "the attempt interrupted",
        )
        assert (
            paused["incompleteAttempt"]["id"] == beta["id"]
            and "SO-FAR-beta" in paused["incompleteAttempt"]["text"]
        )
        time.sleep(QUIET_S)  # a window to see nothing spawn
        quiet = api.status(pid)
        assert quiet["status"] == "paused" and attempts_of(quiet, "implement", "beta")[0]["runIds"] == [
            killed_run
        ]
        assert len(env.model.message_requests) == requests_before
        review = asked_replay(api, pid)
    # 3. the daemon stops while the replay review awaits the person: the review stays open
    with DaemonHarness(env.daemon.root, env.model.base_url, claude, database) as third:
        api = Pipelines(env, third)
        kept = api.status(pid)
        assert kept["status"] == "awaiting_approval" and kept["pendingApproval"] == review, kept
        ctl(third, "approvals", "approve", review["requestId"])
        done = api.wait(pid, {"completed", "failed"})
        assert done["status"] == "completed", done
        assert [i["status"] for i in done["items"]] == ["done", "done"]
        assert done["incompleteAttempt"] is None
        for index, title in enumerate(("alpha", "beta")):
            (attempt,) = attempts_of(done, "implement", title)  # one attempt, continued
            first, resumed = (api.run(r) for r in attempt["runIds"])
            assert attempt["status"] == "succeeded"
            assert resumed["resumed"] and resumed["vendor_session_id"] == first["vendor_session_id"], (
                first,
                resumed,
            )
            prompt = resumed_prompt(env, index)
            assert "INCOMPLETE" in prompt and f"SO-FAR-{title}" in prompt, prompt


def test_qa_failures_retry_with_the_issues_then_a_person_decides_and_a_rewind(
    octipus: Callable[..., Env],
) -> None:
    issue = "ISSUE-alpha-has-no-tests"
    script = {
        "steps": [],
        "conversations": [
            conversation(marker(CHECK, "alpha"), [text(handoff("fail", "alpha is not done", (issue,)))]),
            conversation(CHECK, [text(handoff("pass", "verified"))]),
            conversation(BUILD, [text(handoff("done", "implemented"))]),
        ],
    }
    env = octipus(script)
    api = Pipelines(env)
    pid = api.create(template(max_retries=1), ("alpha", "beta"))

    asking = api.wait(pid)
    assert asking["status"] == "awaiting_approval", asking
    question = asking["pendingApproval"]
    assert question["stage"] == "verify" and question["itemTitle"] == "alpha", question
    stages = [(a["stage"], a["startReason"]) for a in asking["attempts"]]
    assert [s for s, _ in stages] == ["implement", "verify"] * 2 and stages[2][1] == "qa_retry", stages
    builds = env.model.requests_in(2)
    assert len(builds) == 2 and issue not in builds[0].body_text() and issue in builds[1].body_text()
    # a person denies in octipusctl: the pipeline fails, the item with it
    ctl(env.daemon, "approvals", "deny", question["requestId"])
    failed = api.wait(pid, {"failed", "completed"})
    assert failed["status"] == "failed" and "declined" in failed["error"], failed
    assert [i["status"] for i in failed["items"]] == ["failed", "pending"]

    # rewind to the reviewer: its replay review denied first changes nothing and starts nothing
    review = asked_replay(api, pid, "--from", "verify")
    requests = len(env.model.message_requests)
    ctl(env.daemon, "approvals", "deny", review["requestId"])
    denied = api.wait(pid, {"failed"})
    assert denied["generation"] == failed["generation"] and denied["attempts"] == failed["attempts"], denied
    assert denied["pendingApproval"] is None and "replay denied" in denied["summary"], denied
    time.sleep(QUIET_S)  # a window to see nothing spawn
    assert api.status(pid)["attempts"] == failed["attempts"]
    assert len(env.model.message_requests) == requests
    # approved, the rewind runs: a new attempt of the reviewer; the implementer's output is reused
    resume(api, pid, "--from", "verify")
    again = api.wait_for(
        pid,
        lambda d: d["status"] == "awaiting_approval" and d["generation"] > failed["generation"],
        "asked again",
    )
    rewound = again["attempts"][-1]
    assert (rewound["stage"], rewound["startReason"]) == ("verify", "rewind") and len(again["attempts"]) == 5
    assert len(env.model.requests_in(2)) == 2
    approval = again["pendingApproval"]["requestId"]
    env.answer(approval, "approve", "good enough")
    done = api.wait(pid, {"completed", "failed"})
    assert done["status"] == "completed", done
    assert [i["status"] for i in done["items"]] == ["done", "done"]


def test_items_added_and_reordered_mid_run_then_a_stopped_item_skipped_with_evidence(
    octipus: Callable[..., Env],
) -> None:
    look = {"type": "tool_use", "name": "mcp__octipus__get_cli_run_context", "input": {}}
    slow = [
        {"content": [{"type": "text", "text": "alpha under way"}, look]},
        {"stall_seconds": 5, "stall_times": 1} | text(handoff("done", "alpha implemented")),
    ]
    script = {
        "steps": [],
        "conversations": [
            conversation(marker(BUILD, "alpha"), slow),
            conversation(marker(BUILD, "beta"), cut_once("beta")),
            conversation(BUILD, [text(handoff("done", "implemented"))]),
            conversation(CHECK, [text(handoff("pass", "verified"))]),
        ],
    }
    env = octipus(script)
    api = Pipelines(env)
    pid = api.create(template(), ("alpha", "beta", "gamma"))
    api.wait_for(pid, lambda _d: len(env.model.requests_in(0)) >= 2, "alpha's implementer at work")
    ids = {i["title"]: i["id"] for i in api.status(pid)["items"]}
    ctl(env.daemon, "pipelines", "items", pid, "--add", "delta", "--order", f"{ids['gamma']},{ids['beta']}")
    queued = api.status(pid)
    assert queued["status"] == "running" and queued["pendingChanges"], queued
    assert [i["title"] for i in queued["items"]] == ["alpha", "beta", "gamma"]  # not before the boundary

    stalled = api.wait_for(pid, lambda d: attempts_of(d, "implement", "beta"), "beta's turn")
    titles = [i["title"] for i in stalled["items"]]  # applied at alpha's end: gamma before beta, delta added
    assert titles.index("gamma") < titles.index("beta") and titles[-1] == "delta", titles
    api.wait_for(pid, lambda _d: len(env.model.requests_in(1)) >= 2, "beta's implementer stalls")
    ctl(env.daemon, "pipelines", "stop", pid)
    assert api.wait(pid)["status"] == "stopped"
    evidence = "beta landed by hand in commit abc123; its tests pass"
    resume(api, pid, "--skip", ids["beta"], "--evidence", evidence)
    done = api.wait(pid, {"completed", "failed"})
    assert done["status"] == "completed", done
    items = {i["title"]: i for i in done["items"]}
    assert (items["beta"]["status"], items["beta"]["evidence"]) == ("skipped", evidence)
    assert [items[t]["status"] for t in ("alpha", "gamma", "delta")] == ["done"] * 3
    implemented = [a["itemId"] for a in done["attempts"] if a["stage"] == "implement"]
    assert implemented == [items[t]["id"] for t in ("alpha", "gamma", "beta", "delta")]
