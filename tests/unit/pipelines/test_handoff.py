"""A stage worker's handoff block (``octipusd.pipelines.handoff``): pure parsing."""

from __future__ import annotations

import json

from hypothesis import given, strategies as st

from octipusd.pipelines.handoff import Handoff, HandoffItem, HandoffStatus, contract_text, parse_handoff


def _block(data: object) -> str:
    return f"```json\n{json.dumps(data)}\n```"


def test_the_last_json_block_is_the_handoff_and_the_prose_around_it_is_kept() -> None:
    first = _block({"status": "fail", "summary": "draft"})
    last = _block(
        {
            "status": "done",
            "summary": " built it ",
            "issues": ["  ", "one"],
            "items": [{"title": " a ", "detail": "d", "acceptance": ""}],
        }
    )
    parsed = parse_handoff(f"I worked.\n{first}\nthen more.\n{last}\nThanks.")
    assert parsed.problem is None
    assert parsed.handoff == Handoff(
        HandoffStatus.DONE, "built it", ("one",), False, (HandoffItem("a", "d", None),)
    )
    assert parsed.prose == f"I worked.\n{first}\nthen more.\n\nThanks."


def test_a_missing_unclosed_or_malformed_handoff_says_why() -> None:
    cases = {
        "just prose": "does not end with a ```json handoff block",
        'text\n```json\n{"status": "done"}\n': "not closed",
        "```json\n{status: done}\n```": "not valid JSON",
        "```json\n[1]\n```": "must be a JSON object",
        '```json\n{"status": "finished"}\n```': "handoff.status must be one of done, pass, fail",
        '```json\n{"status": "pass", "issues": "x"}\n```': "handoff.issues must be a list of strings",
        '```json\n{"status": "pass", "stopped": "no"}\n```': "handoff.stopped must be true or false",
        '```json\n{"status": "done", "items": [{"detail": "x"}]}\n```': "handoff.items[0] must be",
        '```json\n{"status": "done", "items": "x"}\n```': "handoff.items must be a list",
        '```json\n{"status": "done", "summary": 3}\n```': "handoff.summary must be a string",
    }
    for answer, problem in cases.items():
        parsed = parse_handoff(answer)
        assert parsed.handoff is None and parsed.problem is not None and problem in parsed.problem, answer


def test_the_contract_names_every_field_and_the_plan_only_for_a_plan_stage() -> None:
    plan = contract_text(qa=False, produces_plan=True)
    qa = contract_text(qa=True, produces_plan=False)
    for field in ('"status"', '"summary"', '"issues"', '"stopped"', '"items"'):
        assert field in plan and field in qa
    assert "plan__add_items" in plan and "plan__add_items" not in qa
    assert '"pass"' in qa.split("- status:")[1]


_texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="`"), max_size=40)


@given(
    prose=_texts,
    status=st.sampled_from(list(HandoffStatus)),
    summary=_texts,
    issues=st.lists(_texts.filter(str.strip).map(str.strip), max_size=3),
    stopped=st.booleans(),
    titles=st.lists(_texts.filter(str.strip).map(str.strip), max_size=3),
)
def test_any_handoff_survives_any_prose_before_it(
    prose: str, status: HandoffStatus, summary: str, issues: list[str], stopped: bool, titles: list[str]
) -> None:
    data = {
        "status": status.value,
        "summary": summary,
        "issues": issues,
        "stopped": stopped,
        "items": [{"title": t} for t in titles],
    }
    parsed = parse_handoff(f"{prose}\n{_block(data)}")
    assert parsed.handoff == Handoff(
        status, summary.strip(), tuple(issues), stopped, tuple(HandoffItem(t) for t in titles)
    )
    assert parsed.prose == prose.strip()
