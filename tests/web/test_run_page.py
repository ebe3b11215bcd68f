"""The issue's "Done when", in a real headless chromium against a real octipusd and the real claude
on the scripted model: a person opens the page, follows a run live (the transcript grows without a
reload), denies one relayed ``cli-native:Bash`` request and approves the next (the run goes on and
writes its file), answers a two-question AskUserQuestion form, adds plan feedback that the agent then
reads in its run context, and sees the cost of the run."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any, Final
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Browser, Page, expect

from octipusd.money import usd
from octipusd.testing.script import parse_script
from octipusd.web.present import money
from tests.e2e.conftest import Env
from tests.e2e.test_ctl_policy import DB, FEATURES, QUESTIONS
from tests.web.browser import DESKTOP, PHONE, no_horizontal_scroll, screenshot

#: How long the page may take to show what a run does (milliseconds; a real claude is in the loop).
WAIT_MS: Final = 90_000

PLAN = {
    "title": "Service",
    "steps": [
        {"id": "s1", "title": "schema", "status": "in_progress"},
        {"id": "s2", "title": "database", "status": "pending"},
    ],
}


def _bash(command: str, text: str | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    return {"content": [*content, {"type": "tool_use", "name": "Bash", "input": {"command": command}}]}


def _tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"content": [{"type": "tool_use", "name": f"mcp__octipus__{name}", "input": arguments}]}


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _tool_results(env: Env) -> list[tuple[str, str]]:
    """(tool name, result text) of every tool call the model saw in its last request."""
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for message in env.model.message_requests[-1].body["messages"]:
        for block in message.get("content") if isinstance(message.get("content"), list) else []:
            if block.get("type") == "tool_use":
                names[block["id"]] = block["name"]
            elif block.get("type") == "tool_result":
                content = block.get("content")
                text = (
                    "".join(p.get("text", "") for p in content if isinstance(p, dict))
                    if isinstance(content, list)
                    else str(content)
                )
                results.append((names.get(block["tool_use_id"], "?"), text))
    return results


@pytest.fixture
def open_page(browser: Browser) -> Iterator[Callable[[Env], tuple[Page, str]]]:
    """Factory: open the daemon's page in a fresh browser context at the URL ``octipusctl web``
    prints; returns the page and the site's origin."""
    contexts = []
    problems: list[str] = []  # console errors: a CSP refusal of an inline script or style shows here

    def make(env: Env) -> tuple[Page, str]:
        context = browser.new_context(viewport=DESKTOP)
        contexts.append(context)
        page = context.new_page()
        page.on("console", lambda message: problems.append(message.text) if message.type == "error" else None)
        url = env.daemon.web_url()
        page.goto(url)
        expect(page.locator("h1")).to_have_text("Sessions")
        assert "token=" not in page.url  # the token was traded for the session cookie
        parts = urlsplit(url)
        return page, f"{parts.scheme}://{parts.netloc}"

    yield make
    for context in contexts:
        context.close()
    assert not problems, problems


def _goto_live(page: Page, url: str) -> None:
    """Open ``url`` and mark the document, so a later check proves it was never reloaded."""
    page.goto(url)
    page.evaluate("window.octipusNotReloaded = true")


def test_follow_a_run_deny_one_bash_call_approve_the_next_and_see_the_cost(
    octipus: Callable[..., Env], open_page: Callable[[Env], tuple[Page, str]]
) -> None:
    env = octipus(
        {
            "steps": [
                _bash("bash -c 'echo denied > denied.txt'", "I will write two files."),
                _bash("bash -c 'echo approved > approved.txt'"),
                _text("All done: approved.txt is written."),
            ]
        }
    )
    session = env.new_session(title="Write two files")
    page, origin = open_page(env)
    run_id = env.post(session, "Write denied.txt, then approved.txt.")
    _goto_live(page, f"{origin}/runs/{run_id}")

    transcript = page.locator("#transcript")
    card = page.locator("form.approval")
    expect(card).to_contain_text("denied.txt", timeout=WAIT_MS)  # appeared without a reload
    expect(card).to_contain_text("cli-native:Bash")
    expect(card.locator(".explanation")).not_to_be_empty()
    expect(transcript).to_contain_text("I will write two files.")
    expect(transcript).to_contain_text("approval needed")
    screenshot(page, "run-approval")
    note = card.locator("input[name=reason]")
    note.fill("not that file")
    note.press("Enter")  # submits the form (its one text field) but decides nothing
    expect(card.locator(".form-status")).to_contain_text("Nothing was sent")
    [waiting] = env.client.request("GET", "/approvals", params={"run_id": run_id})
    assert waiting["status"] == "pending", waiting
    card.locator("button[value=deny]").click()

    card = page.locator("form.approval")
    expect(card).to_contain_text("approved.txt", timeout=WAIT_MS)
    card.locator("button[value=approve]").click()
    expect(transcript).to_contain_text("All done: approved.txt is written.", timeout=WAIT_MS)
    expect(page.locator("#run-summary")).to_contain_text("succeeded", timeout=WAIT_MS)
    expect(page.locator("#run-summary button.stop")).to_have_count(0)  # nothing left to stop
    expect(transcript).to_contain_text("run succeeded")
    assert page.evaluate("window.octipusNotReloaded") is True

    workspace = env.daemon.workspace
    assert (workspace / "approved.txt").read_text() == "approved\n"
    assert not (workspace / "denied.txt").exists()
    denial = [text for name, text in _tool_results(env) if name == "Bash" and "not that file" in text]
    assert denial, _tool_results(env)  # the model was told, with the person's note, and went on
    decided = [e["data"] for e in env.events(run_id) if e["kind"] == "approval_decided"]
    assert [d["outcome"] for d in decided] == ["denied", "approved"], decided
    assert all(d["decided_by"].endswith(" via web") for d in decided), decided

    final = env.run(run_id)
    expect(page.locator("#run-summary .cost")).to_have_text(money(usd(final["cost_usd"])))
    expect(page.locator("#run-summary .tokens")).to_contain_text(f"{final['output_tokens']} out")
    screenshot(page, "run-transcript")
    page.set_viewport_size(PHONE)
    assert no_horizontal_scroll(page)
    screenshot(page, "run-transcript-phone")


def test_answer_a_two_question_form(
    octipus: Callable[..., Env], open_page: Callable[[Env], tuple[Page, str]]
) -> None:
    env = octipus(
        {
            "steps": [
                {
                    "content": [
                        {"type": "text", "text": "A few questions first."},
                        {"type": "tool_use", "name": "AskUserQuestion", "input": {"questions": QUESTIONS}},
                    ]
                },
                _text("Thanks, noted."),
            ]
        }
    )
    session = env.new_session(title="Questions")
    page, origin = open_page(env)
    run_id = env.post(session, "Ask me what you need.")
    _goto_live(page, f"{origin}/runs/{run_id}")
    form = page.locator("form.approval[data-kind=questionnaire]")
    expect(form).to_be_visible(timeout=WAIT_MS)
    for question in QUESTIONS:
        expect(form).to_contain_text(question["question"])
        for option in question["options"]:
            expect(form).to_contain_text(option["description"])
    page.set_viewport_size(PHONE)
    assert no_horizontal_scroll(page)
    screenshot(page, "questionnaire-phone")
    page.set_viewport_size(DESKTOP)

    form.locator("button[value=approve]").click()  # nothing chosen yet: the page says what is missing
    expect(form.locator(".form-status")).to_contain_text("question 1 needs an answer")
    db, features = form.locator("fieldset.question").all()
    db.get_by_label("SQLite").check()
    features.get_by_label("Auth").check()
    features.locator(".other-text").fill("Webhooks")
    screenshot(page, "questionnaire")
    form.locator("button[value=approve]").click()

    expect(page.locator("#transcript")).to_contain_text("Thanks, noted.", timeout=WAIT_MS)
    assert page.evaluate("window.octipusNotReloaded") is True
    answered = [text for name, text in _tool_results(env) if name == "AskUserQuestion"]
    assert len(answered) == 1, _tool_results(env)
    assert f'"{DB}"="SQLite"' in answered[0] and f'"{FEATURES}"="Auth, Webhooks"' in answered[0], answered


def test_plan_feedback_from_the_page_reaches_the_agent(
    octipus: Callable[..., Env], open_page: Callable[[Env], tuple[Page, str]]
) -> None:
    first_turn = [_tool("update_work_plan", {"revision": 0, "plan": PLAN}), _text("planned")]
    env = octipus({"steps": first_turn})
    session = env.new_session(title="Plan a service")
    assert env.wait_final(env.post(session, "Plan the service."))["status"] == "succeeded"
    page, origin = open_page(env)
    _goto_live(page, f"{origin}/sessions/{session}")
    plan = page.locator("#plan")
    expect(plan).to_contain_text("database")

    form = page.locator("form.feedback-form")
    form.locator("textarea[name=text]").fill("Use PostgreSQL, not SQLite.")
    form.locator("select[name=step_id]").select_option("s2")
    form.locator("button[type=submit]").click()
    expect(form.locator(".form-status")).to_have_text("sent")
    expect(plan).to_contain_text("Use PostgreSQL, not SQLite.")
    [item] = env.client.request("GET", f"/sessions/{session}/plan")["feedback"]
    assert (item["text"], item["step_id"], item["status"]) == ("Use PostgreSQL, not SQLite.", "s2", "pending")

    answer = [{"id": item["id"], "status": "applied", "response": "switched s2 to PostgreSQL"}]
    env.model.script = parse_script(
        {
            "steps": [
                *first_turn,
                _tool("get_cli_run_context", {}),
                _tool("update_work_plan", {"revision": 1, "plan": PLAN, "feedbackResponses": answer}),
                _text("applied the feedback"),
            ]
        }
    )
    controls = page.locator("#session-controls")
    expect(controls.locator("form.steer-form")).to_have_count(0)  # no run is live: nothing to steer
    turn = controls.locator("form.turn-form")
    turn.locator("textarea[name=prompt]").fill("Apply the feedback.")
    turn.locator("button[type=submit]").click()
    runs = page.locator("#session-runs")
    expect(runs.locator(".run-row")).to_have_count(2, timeout=WAIT_MS)  # the new run appears live
    newest = env.client.request("GET", "/runs", params={"session_id": session})[0]
    assert newest["prompt"] == "Apply the feedback."
    assert env.wait_final(newest["id"])["status"] == "succeeded"
    [context_text] = [text for name, text in _tool_results(env) if name.endswith("get_cli_run_context")]
    context = json.JSONDecoder().raw_decode(context_text)[0]
    assert [(f["id"], f["text"], f.get("stepId")) for f in context["feedback"]] == [
        (item["id"], "Use PostgreSQL, not SQLite.", "s2")
    ]
    expect(plan).to_contain_text("switched s2 to PostgreSQL", timeout=WAIT_MS)  # live, no reload
    expect(plan).to_contain_text("applied")
    expect(runs.locator(".status-succeeded")).to_have_count(2, timeout=WAIT_MS)  # the run list is live too
    expect(controls.locator("form.turn-form")).to_have_count(1)  # idle again: the next turn is offered
    expect(controls.locator("form.steer-form")).to_have_count(0)
    assert page.evaluate("window.octipusNotReloaded") is True
    screenshot(page, "session-plan")
