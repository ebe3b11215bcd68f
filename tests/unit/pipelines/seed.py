"""A pipeline written straight into a store, as the walker leaves one: for the surfaces' tests (the
tools, the API, octipusctl, the page) while they do not need a walk.

Text an agent writes carries :data:`HOSTILE` so the tests see it made inert.
"""

from __future__ import annotations

from dataclasses import dataclass

from octipusd.store import Store
from octipusd.store.pipeline_records import AttemptStatus, NodeStatus, PipelineStatus
from octipusd.toolkit import ItemDraft

#: Text written where an agent writes: it must reach a page escaped, a terminal inert.
HOSTILE = '<img src=x id="pwned"> \x1b[31mred'


@dataclass(frozen=True)
class Seeded:
    """Ids of what :func:`seed_pipeline` wrote."""

    pipeline_id: str
    session_id: str
    item_ids: tuple[str, ...]
    run_id: str
    attempt_id: str


def seed_pipeline(
    store: Store,
    *,
    user: str,
    workspace: str,
    status: PipelineStatus = PipelineStatus.STOPPED,
    session_id: str | None = None,
) -> Seeded:
    """A two-stage pipeline (``plan`` n0 done, ``implement`` n1 a foreach over two items) whose
    first item's implement attempt stopped halfway (its INCOMPLETE text saved, its run recorded),
    left in ``status``."""
    if session_id is None:
        session_id = store.create_session(workspace=workspace, adapter="claude-code").id
    pipeline = store.create_pipeline(
        session_id=session_id,
        user=user,
        workspace=workspace,
        name="plan-implement",
        template_id=None,
        template={"name": "plan-implement", "steps": []},
        params={"goal": "two things"},
        graph={"nodes": [{"key": "n0", "name": "plan"}, {"key": "n1", "name": "implement"}]},
        nodes=[("n0", "step"), ("n1", "foreach")],
    )
    one, two = store.add_pipeline_items(
        pipeline.id,
        [ItemDraft(f"first {HOSTILE}", acceptance="tests pass"), ItemDraft("second")],
        node_key="n0",
    )
    store.set_pipeline_node(pipeline.id, "n0", NodeStatus.COMPLETED, output=f"two items {HOSTILE}")
    run = store.create_run(session_id=session_id, prompt="implement the first item", owner="old")
    store.finish_run(run.id, status="cancelled")
    attempt = store.start_pipeline_attempt(
        pipeline.id, node_key="n1", stage="implement", item_id=one.id, start_reason="next item", generation=1
    )
    store.add_attempt_run(attempt.id, run.id)
    store.save_incomplete_text(attempt.id, f"halfway {HOSTILE}")
    store.finish_pipeline_attempt(attempt.id, AttemptStatus.STOPPED)
    store.set_pipeline_node(pipeline.id, "n1", NodeStatus.PENDING)  # the stopped stage runs again on resume
    store.set_pipeline_status(pipeline.id, status, summary=f"implementing {HOSTILE}")
    return Seeded(pipeline.id, session_id, (one.id, two.id), run.id, attempt.id)
