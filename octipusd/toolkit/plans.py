"""The work-plan vocabulary: feedback statuses, the agent's answers, one plan update.

Seed 003 "Plans, feedback and delegation", FACTS.md §8. ``update_work_plan``
(:mod:`octipusd.tools.plan`) validates a :class:`PlanUpdate` and hands it to
:meth:`~octipusd.toolkit.ToolHost.save_work_plan`; the store (``plan_store.py``) saves the plan and
the answers in one transaction; the API and the run context show :class:`FeedbackStatus`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["FeedbackResponse", "FeedbackStatus", "PlanUpdate"]


class FeedbackStatus(enum.StrEnum):
    """Where one item of plan feedback stands.

    ``pending``: the agent has not handled it (also after the person replied); ``applied``: the
    agent applied it; ``needs_clarification``: the agent asked the person, whose reply reopens it.
    """

    PENDING = "pending"
    APPLIED = "applied"
    NEEDS_CLARIFICATION = "needs_clarification"


@dataclass(frozen=True)
class FeedbackResponse:
    """The agent's answer to one feedback item, saved with its plan update.

    Attributes:
        id: The feedback item.
        status: ``applied`` or ``needs_clarification``.
        response: The agent's note (what it did, or what it asks), or None.
    """

    id: str
    status: FeedbackStatus
    response: str | None = None


@dataclass(frozen=True)
class PlanUpdate:
    """One validated ``update_work_plan`` call.

    Attributes:
        plan: The whole new plan document (``{title?, goal?, steps}``).
        revision: The plan revision the agent read (0: it saw no plan); a stale one is refused.
        responses: Its answers to feedback items, saved with the plan.
    """

    plan: dict[str, Any]
    revision: int = 0
    responses: tuple[FeedbackResponse, ...] = ()
