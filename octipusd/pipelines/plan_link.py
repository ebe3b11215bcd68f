"""The work plan a pipeline is linked to (issue 27 item 5): linked at launch, updated on progress.

At creation the pipeline links the session's work plan: its id (the session's), title, goal and
step ids are kept, and the pipeline's items are added as steps after the plan's own; a session
without a plan gets one named after the pipeline. As the walk moves, each item's step follows the
item (``pending``, ``in_progress``, ``completed``, ``blocked``). The daemon's own save
(``revision=None``). Pure but for :func:`link_plan`'s read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from octipusd.store.pipeline_records import ItemStatus, Pipeline, PipelineItem
from octipusd.store.repository import Store

__all__ = ["ITEM_STEP_PREFIX", "link_plan", "plan_progress"]

#: The id of an item's step in the linked plan: this prefix and the item's id.
ITEM_STEP_PREFIX = "pipeline-item-"
#: Characters of a plan step's title at most (``update_work_plan``'s limit).
_MAX_TITLE_CHARS = 4000
#: Steps a work plan holds at most (``update_work_plan``'s limit).
_MAX_STEPS = 200
_STEP_STATUS = {
    ItemStatus.PENDING: "pending",
    ItemStatus.RUNNING: "in_progress",
    ItemStatus.DONE: "completed",
    ItemStatus.SKIPPED: "completed",
    ItemStatus.FAILED: "blocked",
}


def link_plan(store: Store, session_id: str, name: str, description: str | None) -> dict[str, Any]:
    """What ``pipelines.plan`` records of the session's work plan at launch (blocking).

    Returns:
        ``{"sessionId", "created", "title", "goal", "stepIds", "steps"}``: the plan's own title, goal
        and steps kept (``created``: the session had none, the pipeline names one after itself).

    Raises:
        StoreError: The database failed.
    """
    current = store.get_work_plan(session_id)
    if current is None:
        return {
            "sessionId": session_id,
            "created": True,
            "title": name,
            "goal": description,
            "stepIds": [],
            "steps": [],
        }
    plan = current.plan
    steps = [s for s in plan.get("steps") or [] if isinstance(s, dict)]
    return {
        "sessionId": session_id,
        "created": False,
        "title": plan.get("title"),
        "goal": plan.get("goal"),
        "stepIds": [str(s.get("id")) for s in steps],
        "steps": steps,
    }


def plan_progress(pipeline: Pipeline, items: Sequence[PipelineItem]) -> dict[str, Any] | None:
    """The linked work plan as of ``items``: its own steps, then one step per item; None when the
    pipeline links no plan."""
    linked = pipeline.plan
    if not linked:
        return None
    own = [s for s in linked.get("steps") or [] if isinstance(s, dict)]
    steps = own + [
        {
            "id": f"{ITEM_STEP_PREFIX}{item.id}",
            "title": item.title[:_MAX_TITLE_CHARS],
            "status": _STEP_STATUS[item.status],
        }
        for item in items
    ]
    plan: dict[str, Any] = {"steps": steps[:_MAX_STEPS]}
    for key in ("title", "goal"):
        if linked.get(key):
            plan[key] = linked[key]
    return plan
