"""The work plan a pipeline is linked to (issue 27 item 5): linked at launch, updated on progress.

At creation the pipeline links the session's work plan: its id (the session's), title, goal and
step ids are kept, and the pipeline's items are added as steps after the plan's own; a session
without a plan gets one named after the pipeline. As the walk moves, each item's step follows the
item (``pending``, ``in_progress``, ``completed``, ``blocked``). Each save merges into the plan as it is then (:func:`sync_plan`): the root agent's own edits
and another pipeline's steps are kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from octipusd.errors import ConflictError
from octipusd.store.pipeline_records import ItemStatus, Pipeline, PipelineItem
from octipusd.store.repository import Store

__all__ = ["ITEM_STEP_PREFIX", "link_plan", "plan_progress", "sync_plan"]

#: The id of an item's step in the linked plan: this prefix and the item's id.
ITEM_STEP_PREFIX = "pipeline-item-"
#: Characters of a plan step's title at most (``update_work_plan``'s limit).
_MAX_TITLE_CHARS = 4000
#: Steps a work plan holds at most (``update_work_plan``'s limit).
_MAX_STEPS = 200
#: Saves :func:`sync_plan` tries when another writer keeps moving the plan.
_SYNC_TRIES = 3
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


def plan_progress(
    pipeline: Pipeline, items: Sequence[PipelineItem], current: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """The linked work plan as of ``items``, or None when the pipeline links no plan.

    ``current`` is the session's plan as stored now: its steps are kept as they are (the root agent's
    edits and another pipeline's steps included), this pipeline's item steps are updated in place and
    new ones appended. Without it (the plan is gone) the plan is rebuilt from what was linked at launch.
    """
    linked = pipeline.plan
    if not linked:
        return None
    base = current if current is not None else linked
    mine = {f"{ITEM_STEP_PREFIX}{item.id}": item for item in items}
    steps: list[dict[str, Any]] = []
    for step in base.get("steps") or []:
        if isinstance(step, dict):
            item = mine.pop(str(step.get("id")), None)
            steps.append(_item_step(item) if item is not None else step)
    steps.extend(_item_step(item) for item in mine.values())
    plan: dict[str, Any] = {"steps": steps[:_MAX_STEPS]}
    for key in ("title", "goal"):
        if base.get(key):
            plan[key] = base[key]
    return plan


def _item_step(item: PipelineItem) -> dict[str, Any]:
    return {
        "id": f"{ITEM_STEP_PREFIX}{item.id}",
        "title": item.title[:_MAX_TITLE_CHARS],
        "status": _STEP_STATUS[item.status],
    }


def sync_plan(store: Store, pipeline: Pipeline, items: Sequence[PipelineItem]) -> None:
    """Save the linked plan's progress into the session's current plan (blocking): read, merge
    (:func:`plan_progress`), save at the revision read; a save that lost a race with another writer
    (the root agent's ``update_work_plan``) is done again from the newer plan, a few times at most.

    Raises:
        StoreError: The database failed.
        ConflictError: The plan kept changing under every try.
    """
    for attempt in range(_SYNC_TRIES):
        stored = store.get_work_plan(pipeline.session_id)
        plan = plan_progress(pipeline, items, stored.plan if stored is not None else None)
        if plan is None:
            return
        try:
            store.save_work_plan(pipeline.session_id, plan, revision=stored.revision if stored else 0)
            return
        except ConflictError:
            if attempt == _SYNC_TRIES - 1:
                raise
