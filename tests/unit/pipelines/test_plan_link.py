"""The work plan a pipeline is linked to keeps what others wrote to it (issue 27 item 5; review
finding 13), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from octipusd.pipelines.plan_link import link_plan, sync_plan
from octipusd.store import Store
from octipusd.store.pipeline_item_store import ItemDraft
from octipusd.store.pipeline_records import ItemStatus


@pytest.fixture
def store(migrated_store_url: str) -> Iterator[Store]:
    with Store.open(migrated_store_url) as opened:
        yield opened


def _pipeline(store: Store, session: str, name: str) -> str:
    plan = link_plan(store, session, name, None)
    pipeline = store.create_pipeline(
        session_id=session,
        user="ann",
        workspace="/w",
        name=name,
        template_id=None,
        template={"name": name, "steps": []},
        params={},
        graph={"nodes": []},
        nodes=[("n0", "step")],
        plan=plan,
    )
    return pipeline.id


def test_progress_merges_into_the_plan_as_it_is_now(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code").id
    store.save_work_plan(
        session, {"title": "Mine", "steps": [{"id": "a", "title": "own", "status": "pending"}]}, revision=0
    )
    first, second = _pipeline(store, session, "one"), _pipeline(store, session, "two")
    (item1,) = store.add_pipeline_items(first, [ItemDraft("first's item")])
    (item2,) = store.add_pipeline_items(second, [ItemDraft("second's item")])
    sync_plan(store, store.get_pipeline(first), store.list_pipeline_items(first))
    sync_plan(store, store.get_pipeline(second), store.list_pipeline_items(second))
    current = store.get_work_plan(session)
    assert current is not None
    # the root agent edits its own step after the pipelines linked the plan
    steps = [dict(s, status="completed") if s["id"] == "a" else s for s in current.plan["steps"]]
    store.save_work_plan(session, {**current.plan, "steps": steps}, revision=current.revision)
    store.set_pipeline_item(item1.id, ItemStatus.DONE)
    sync_plan(store, store.get_pipeline(first), store.list_pipeline_items(first))
    plan = store.get_work_plan(session)
    assert plan is not None and plan.plan["title"] == "Mine"
    by_id = {s["id"]: s for s in plan.plan["steps"]}
    assert by_id["a"]["status"] == "completed"  # the agent's edit is kept
    assert by_id[f"pipeline-item-{item1.id}"]["status"] == "completed"
    assert by_id[f"pipeline-item-{item2.id}"]["title"] == "second's item"  # the other pipeline's step is kept
    assert plan.plan["steps"][0]["id"] == "a"
