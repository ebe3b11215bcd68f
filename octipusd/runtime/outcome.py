"""How a run ends: a pure function of what happened during it.

:func:`final_status` is the one place the final status and reason of a run are derived; the
supervisor gathers the facts (:class:`Happened`) and stores the verdict. Nothing here touches
a process, the store or the clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from octipusd.adapter import ResultEvent
from octipusd.store.records import RunStatus

__all__ = ["SUBTYPE_REASONS", "Happened", "Verdict", "final_status", "result_failed", "result_failure"]

#: Reasons for the vendor result subtypes that end a turn early (sources.md §1.7).
SUBTYPE_REASONS = {
    "error_max_turns": "the vendor stopped at its turn limit (error_max_turns)",
    "error_max_budget_usd": "the vendor stopped at its budget limit (error_max_budget_usd)",
    "error_max_structured_output_retries": "the vendor gave up on structured output (error_max_structured_output_retries)",
    "error_during_execution": "the vendor failed during execution",
}
#: Characters of the vendor's stderr quoted in a "no result" failure.
STDERR_QUOTE_CHARS = 500


def result_failed(result: ResultEvent) -> bool:
    """A result that ends the turn as failed (``is_error``, or an ``error*`` subtype: error_max_turns
    was seen with is_error false)."""
    return result.is_error or (result.subtype or "").startswith("error")


def result_failure(result: ResultEvent) -> str:
    """A run's failure reason from a vendor result: the subtype's meaning plus the vendor's words."""
    detail = "; ".join(result.errors) or (result.text or "")
    head = SUBTYPE_REASONS.get(result.subtype or "", "the vendor reported an error")
    return f"{head}: {detail}" if detail else head


@dataclass(frozen=True)
class Happened:
    """The facts of a run at its end.

    Attributes:
        stop_status: The status a stop asked for (``cancelled``, ``interrupted``), or None.
        stop_reason: Why it was stopped.
        failure: The first failure recorded during the run (bridge, budget, limit, expiry, crash).
        result: The vendor's accepted result, or None (a result printed after a stop began is
            never accepted).
        exit_code: The vendor's exit code, or None (never started, or not reaped).
        stderr_tail: The end of the vendor's stderr.
        review_required: Notes of calls that need a person's review (kept on a success).
    """

    stop_status: RunStatus | None = None
    stop_reason: str | None = None
    failure: str | None = None
    result: ResultEvent | None = None
    exit_code: int | None = None
    stderr_tail: str = ""
    review_required: Sequence[str] = ()


@dataclass(frozen=True)
class Verdict:
    """The final status of a run and its reason (None on a plain success)."""

    status: RunStatus
    reason: str | None


def final_status(happened: Happened) -> Verdict:
    """Derive the final status: a stop wins, then a recorded failure, then the vendor's result.

    A vendor that exited without a result fails, quoting its exit code and stderr tail; a result
    with an error subtype fails with the subtype's meaning; a success carries the review notes.
    """
    if happened.stop_status is not None:
        return Verdict(happened.stop_status, happened.stop_reason)
    if happened.failure is not None:
        return Verdict(RunStatus.FAILED, happened.failure)
    result = happened.result
    if result is None:
        tail = happened.stderr_tail.strip()[-STDERR_QUOTE_CHARS:]
        reason = f"the vendor CLI exited ({happened.exit_code}) without a result" + (
            f"; stderr: {tail}" if tail else ""
        )
        return Verdict(RunStatus.FAILED, reason)
    if result_failed(result):
        return Verdict(RunStatus.FAILED, result_failure(result))
    return Verdict(RunStatus.SUCCEEDED, "; ".join(happened.review_required) or None)
