"""The guidance ledger of a run (seed 003 "Plans, feedback and delegation"): when the vendor's input
may end, what a follow-up sends, and what is reported as not applied."""

from __future__ import annotations

from octipusd.adapter import ResultEvent
from octipusd.runtime.steering import Guidance, GuidanceState, follow_up_prompt


def _result(turns: int | None = None) -> ResultEvent:
    return ResultEvent(raw=None, is_error=False, text="ok", turns=turns)


def test_a_turn_waits_for_the_result_after_every_acknowledgement() -> None:
    ledger = Guidance()
    ledger.add("merge this", GuidanceState.SUBMITTED)
    ledger.on_result(_result())  # the first turn's result, before Claude took the guidance
    assert ledger.awaiting_answer()
    ledger.acknowledge("merge this")  # replayed as one more turn
    assert ledger.awaiting_answer()
    ledger.on_result(_result())
    assert not ledger.awaiting_answer() and ledger.unapplied() == []


def test_guidance_merged_into_the_running_request_is_answered_by_its_one_result() -> None:
    ledger = Guidance()
    ledger.add("during the tool", GuidanceState.SUBMITTED)
    ledger.acknowledge("during the tool")  # replayed after the tool result, before the model call
    ledger.on_result(_result(turns=2))
    assert not ledger.awaiting_answer()
    assert ledger.turns_used == 2


def test_unacknowledged_and_refused_guidance_is_kept_for_a_follow_up() -> None:
    ledger = Guidance()
    ledger.add("never replayed", GuidanceState.SUBMITTED)
    ledger.add("refused", GuidanceState.SUBMITTED)
    ledger.add("no live input", GuidanceState.QUEUED)
    ledger.refuse("refused")
    assert ledger.queued() == ["refused", "no live input"]
    ledger.vendor_exited()
    assert [i.text for i in ledger.unapplied()] == ["never replayed", "refused", "no live input"]
    assert ledger.queued() == ["never replayed", "refused", "no live input"]
    assert not ledger.awaiting_answer()


def test_the_follow_up_prompt_lists_the_guidance_and_the_feedback() -> None:
    prompt = follow_up_prompt(["one", "two"], 0)
    assert "1. one\n2. two" in prompt and "feedback" not in prompt
    assert follow_up_prompt([], 3).startswith("[Octipus] 3 feedback items on the work plan are not handled")
