"""The pages over the daemon's Unix socket (no browser): a real octipusd and the real claude on a
scripted model. Each page answers 200 with what the API shows; agent and vendor text is escaped."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import httpx

from octipusd.money import usd
from octipusd.web.pages import templates
from octipusd.web.present import money
from tests.e2e.conftest import TERMINAL, Env
from tests.e2e.test_ctl_policy import QUESTIONS as E2E_QUESTIONS
from tests.web.conftest import pages

EVIL = "<script>alert('x')</script> & <b>bold</b>"
COMMAND = "bash -c \"echo '<hi>' > out.txt\""
ESCAPED = "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;"

#: The e2e questionnaire, with markup in an option's description.
QUESTIONS: list[dict[str, Any]] = [
    {
        **E2E_QUESTIONS[0],
        "options": [*E2E_QUESTIONS[0]["options"], {"label": "Mine", "description": "a <b>file</b>"}],
    },
    E2E_QUESTIONS[1],
]


def _ok(web: httpx.Client, path: str) -> str:
    response = web.get(path)
    assert response.status_code == 200, f"GET {path}: {response.status_code} {response.text[:500]}"
    assert response.headers["content-type"].startswith("text/html")
    return response.text


def test_home_session_and_run_pages_show_the_run_escaped(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {
                    "content": [
                        {"type": "text", "text": EVIL},
                        {"type": "tool_use", "name": "Bash", "input": {"command": COMMAND}},
                    ]
                },
                {"content": [{"type": "text", "text": "done"}]},
            ]
        }
    )
    session = env.new_session(title="<i>title</i>\x1b]0;pwned\x07")  # markup, and a terminal title
    run_id = env.post(session, f"prompt {EVIL}")
    approval = env.wait_approval(run_id)
    with pages(env) as web:
        run_page = _ok(web, f"/runs/{run_id}")
        # the approval prompt is on the run page while it waits: tool, command, the rule's explanation
        assert f'data-approval="{approval["id"]}"' in run_page
        assert "cli-native:Bash" in run_page and "echo &#39;&lt;hi&gt;&#39; &gt; out.txt" in run_page
        assert approval["explanation"] and str(approval["explanation"]).split()[0] in run_page
        assert 'value="workspace"' in run_page and 'value="everywhere"' in run_page  # remember scopes
        # a run is live: Steer is offered (on the run page and the session page), not a next turn
        assert f'data-api="POST /v1/sessions/{session}/steer"' in run_page
        live_controls = _ok(web, f"/fragments/sessions/{session}/controls")
        assert "steer-form" in live_controls and "turn-form" not in live_controls
        # the run's "awaiting approval" badge links to the approval, on the home and session pages
        waiting = f'href="/approvals/{approval["id"]}">awaiting approval</a>'
        assert waiting in _ok(web, "/") and waiting in _ok(web, f"/sessions/{session}")
        approval_page = _ok(web, f"/approvals/{approval['id']}")
        assert "Approve" in approval_page and "Deny" in approval_page

        env.answer(approval["id"], "approve")
        final = env.wait_final(run_id)
        assert final["status"] == "succeeded"
        run_page = _ok(web, f"/runs/{run_id}")
        assert ESCAPED in run_page and EVIL not in run_page and "<b>bold" not in run_page
        assert "tool Bash" in run_page and "approval answered" in run_page and "run succeeded" in run_page
        assert "data-approval=" not in run_page  # nothing waits any more
        assert f"prompt {ESCAPED}" in run_page
        assert f'<span class="cost">{money(usd(final["cost_usd"]))}</span>' in run_page

        # the transcript fragment: the same entries, after a seq, with the last seq covered
        events = env.events(run_id)
        fragment = web.get(f"/fragments/runs/{run_id}/events", params={"after": 0})
        assert fragment.status_code == 200 and fragment.headers["x-last-seq"] == str(events[-1]["seq"])
        assert ESCAPED in fragment.text and "<html" not in fragment.text
        later = web.get(f"/fragments/runs/{run_id}/events", params={"after": events[-1]["seq"]})
        assert later.text.strip() == "" and later.headers["x-more"] == "0"

        decided = _ok(web, f"/approvals/{approval['id']}")
        assert "approved" in decided and "data-approval=" not in decided

        assert re.search(r"<time[^>]*>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>", run_page)  # times say UTC
        untitled = env.new_session()  # no title: named by its workspace folder and a short id
        home = _ok(web, "/")
        assert f"{env.daemon.workspace.name} · {untitled[:8]}</a>" in home and f">{untitled}<" not in home
        assert f'href="/sessions/{session}"' in home and "&lt;i&gt;title&lt;/i&gt;" in home
        assert f'href="/runs/{run_id}"' in home and "<i>title" not in home
        session_page = _ok(web, f"/sessions/{session}")
        # the window's title shows the control characters as escapes, never passes them on
        assert "<title>&lt;i&gt;title&lt;/i&gt;\\x1b]0;pwned\\x07 · Octipus</title>" in session_page
        assert f'href="/runs/{run_id}"' in session_page and "1 run ·" in session_page
        # no run is live: the session page offers the next turn, the run page nothing to steer
        assert f'data-api="POST /v1/sessions/{session}/turns"' in session_page
        assert "/steer" not in session_page and "/steer" not in run_page
        assert "/steer" not in _ok(web, f"/fragments/runs/{run_id}/controls")
        assert f'data-api="POST /v1/sessions/{session}/plan/feedback"' in session_page
        assert "No work plan yet" in session_page

        # an unknown run or session is a 404: a small HTML page for a person, JSON for the API and
        # the live parts' fragments
        for path in ("/runs/nope", "/sessions/nope", "/approvals/nope"):
            missing = web.get(path)
            assert missing.status_code == 404 and missing.headers["content-type"].startswith("text/html")
            assert "Not found" in missing.text and '<a href="/">Back to the sessions</a>' in missing.text
            assert "nope" in missing.text
        for path in ("/v1/runs/nope", "/fragments/runs/nope/events", "/fragments/sessions/nope/controls"):
            missing = web.get(path)
            assert missing.status_code == 404 and missing.json()["code"] == "not_found", path


def test_the_questionnaire_form_shows_every_question_and_option(octipus: Callable[..., Env]) -> None:
    env = octipus(
        {
            "steps": [
                {
                    "content": [
                        {"type": "tool_use", "name": "AskUserQuestion", "input": {"questions": QUESTIONS}}
                    ]
                },
                {"content": [{"type": "text", "text": "noted"}]},
            ]
        }
    )
    run_id = env.post(env.new_session(), "ask me")
    approval = env.wait_approval(run_id)
    assert approval["kind"] == "questionnaire"
    with pages(env) as web:
        for page in (_ok(web, f"/runs/{run_id}"), _ok(web, f"/approvals/{approval['id']}")):
            assert (
                'data-kind="questionnaire"' in page
                and "Submit answers" in page
                and "Cancel questions" in page
            )
            for question in QUESTIONS:
                assert f'data-question="{question["question"]}"' in page
                for option in question["options"]:
                    assert f'value="{option["label"]}"' in page
                    assert option["description"].replace("<", "&lt;").replace(">", "&gt;") in page
            assert page.count('type="radio"') == 3 and page.count('type="checkbox"') == 3
            assert "a &lt;b&gt;file&lt;/b&gt;" in page
            assert page.count('class="other-text"') == 2
            assert "Remember this answer" not in page  # a questionnaire is never remembered
    env.answer(approval["id"], "deny")
    assert env.wait_final(run_id)["status"] == "succeeded"


def test_the_session_page_shows_the_plan_and_its_feedback(octipus: Callable[..., Env]) -> None:
    plan = {
        "title": "Service <v2>",
        "steps": [
            {"id": "s1", "title": "schema", "status": "in_progress"},
            {"id": "s2", "title": "database", "status": "pending", "notes": "use <pg>"},
        ],
    }
    env = octipus(
        {
            "steps": [
                {
                    "content": [
                        {
                            "type": "tool_use",
                            "name": "mcp__octipus__update_work_plan",
                            "input": {"revision": 0, "plan": plan},
                        }
                    ]
                },
                {"content": [{"type": "text", "text": "planned"}]},
            ]
        }
    )
    session = env.new_session()
    assert env.wait_final(env.post(session, "plan it"))["status"] == "succeeded"
    env.client.request(
        "POST", f"/sessions/{session}/plan/feedback", json={"text": "Use <PostgreSQL>", "step_id": "s2"}
    )
    with pages(env) as web:
        page = _ok(web, f"/sessions/{session}")
        fragment = _ok(web, f"/fragments/sessions/{session}/plan")
    for shown in (page, fragment):
        assert "Service &lt;v2&gt;" in shown and "revision 1" in shown
        assert "schema" in shown and "in progress" in shown and "use &lt;pg&gt;" in shown
        assert "Use &lt;PostgreSQL&gt;" in shown and "on s2" in shown and "pending" in shown
    assert '<option value="s2">s2: database</option>' in page


def _covered(env: Env, run_id: str, frames: list[dict[str, Any]]) -> bool:
    """Whether the run has ended and the frames cover its last event."""
    if env.run(run_id)["status"] not in TERMINAL:
        return False
    last = env.events(run_id)[-1]["seq"]
    return any(f.get("run_id") == run_id and f["last_seq"] >= last for f in frames)


def test_the_activity_feed_names_each_run_that_changed(octipus: Callable[..., Env]) -> None:
    env = octipus({"steps": [{"content": [{"type": "text", "text": "pong"}]}]})
    session = env.new_session()
    frames: list[dict[str, Any]] = []
    with pages(env) as web, web.stream("GET", "/v1/activity", timeout=httpx.Timeout(60)) as feed:
        assert feed.status_code == 200 and feed.headers["content-type"].startswith("text/event-stream")
        run_id = env.post(session, "ping")
        for line in feed.iter_lines():
            if line.startswith("data: "):
                frames.append(json.loads(line.removeprefix("data: ")))
                if _covered(env, run_id, frames):
                    break
    mine = [f for f in frames if f["run_id"] == run_id]
    assert mine and all(f["session_id"] == session for f in mine), frames
    seqs = [f["last_seq"] for f in mine]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    kinds = {k for f in mine for k in f["kinds"]}
    assert {"run_status", "text"} <= kinds, kinds
    assert all("data" not in f for f in frames)  # no event data: pages re-fetch what they show


def test_money_shows_every_amount_to_four_decimals() -> None:
    """One rule for every amount (issue 26 item 4): $0.0245 is not shown as $0.02 beside $0.0042."""
    amounts = [usd(v) for v in ("1.75", "1234.5", "0.0245", "0.0042", "0")]
    assert [money(v) for v in (*amounts, None)] == [
        "$1.7500",
        "$1,234.5000",
        "$0.0245",
        "$0.0042",
        "$0.0000",
        "unknown",
    ]


def test_a_recovery_review_that_holds_its_call_back_shows_until_when_and_offers_run_now() -> None:
    """Issue 26: the approval card of a review whose call waits says until when (one time format)
    and offers "Approve and run now" (the answer's ``run_now``); another review offers neither."""
    card = templates.env.get_template("macros.html").module.approval_card
    base: dict[str, Any] = {
        "id": "p" * 32,
        "kind": "action_recovery",
        "tool_id": "ledger.append_entry",
        "subject": "Check earlier",
        "reason": "action_recovery · retry",
        "explanation": "1 earlier action(s) have uncertain effects",
        "expires_at": None,
        "input": {"actions": [], "note": "Check earlier.", "waits_until": "2026-01-01T00:01:05+00:00"},
    }
    waits = str(card(SimpleNamespace(**base), lambda a: []))
    assert "Runs after" in waits and "2026-01-01 00:01:05 UTC" in waits
    assert 'data-run-now="1"' in waits and "Approve and run now" in waits
    plain = str(
        card(SimpleNamespace(**{**base, "input": {"actions": [], "waits_until": None}}), lambda a: [])
    )
    assert "Runs after" not in plain and "data-run-now" not in plain
