"""The pipeline tools of the bridge (issue 27 item 5): their arguments checked naming the field, the
calling run as the caller (its session and workspace own the pipeline; another session, workspace or
user is refused), the status read-only beside the worker's queue, edits queued, a resume of a running
pipeline refused, plan__add_items for a stage worker; over a real store, SQLite and PostgreSQL."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from octipusd.bridge.fakes import FakeToolHost
from octipusd.errors import (
    ConflictError,
    ForbiddenError,
    InvalidRequestError,
    NotFoundError,
    PipelinesUnavailableError,
)
from octipusd.pipelines.service import PipelineService
from octipusd.store import Store
from octipusd.store.pipeline_records import REPLAY_REVIEW_KEY, MetadataPatch, PipelineStatus
from octipusd.toolkit import RunIdentity, ToolSpec
from octipusd.toolkit.identity import StageTag
from octipusd.toolkit.pipelines import pipeline_access
from octipusd.tools import DEFAULT_TOOLS, PIPELINE_TOOLS, STAGE_TOOLS
from tests.unit.pipelines.seed import Seeded, seed_pipeline

TOOLS = {t.name: t for t in (*PIPELINE_TOOLS, *STAGE_TOOLS)}
WORKSPACE = "/w/project"


@pytest.fixture
def store(migrated_store_url: str) -> Iterator[Store]:
    with Store.open(migrated_store_url) as opened:
        yield opened


@pytest.fixture
def seeded(store: Store) -> Seeded:
    return seed_pipeline(store, user="ann", workspace=WORKSPACE)


def identity(seeded: Seeded, **changes: Any) -> RunIdentity:
    fields: dict[str, Any] = {
        "run_id": "r1",
        "session_id": seeded.session_id,
        "user": "ann",
        "worker_id": "w1",
        "workspace": Path(WORKSPACE),
        "attended": True,
    }
    return RunIdentity(**{**fields, **changes})


def call(name: str, who: RunIdentity, host: FakeToolHost, arguments: dict[str, Any]) -> Any:
    spec: ToolSpec = TOOLS[name]
    return anyio.run(lambda: spec.handler(who, host, arguments))


def test_the_tools_are_named_as_the_seed_and_flagged() -> None:
    assert [t.name for t in PIPELINE_TOOLS] == [
        "create_pipeline",
        "get_pipeline_status",
        "resume_pipeline",
        "stop_pipeline",
        "update_pipeline_items",
        "answer_pipeline_approval",
    ]
    assert all(t in DEFAULT_TOOLS for t in PIPELINE_TOOLS)
    status = TOOLS["get_pipeline_status"]
    assert status.read_only and status.bypass_queue and status.timeout_seconds > 15
    # orchestration of Octipus's own record: internal, never journaled (see tools/pipeline.py)
    assert all(TOOLS[n].internal and not TOOLS[n].mutating for n in TOOLS if n != "get_pipeline_status")


def test_status_answers_the_owning_session_and_workspace(store: Store, seeded: Seeded) -> None:
    host = FakeToolHost(pipelines=PipelineService(store))
    doc = call("get_pipeline_status", identity(seeded), host, {"id": seeded.pipeline_id})
    assert doc["status"] == "stopped" and doc["incompleteAttempt"]["text"].startswith("halfway")
    assert [i["id"] for i in doc["items"]] == list(seeded.item_ids) and "history" in doc
    quiet = call(
        "get_pipeline_status", identity(seeded), host, {"id": seeded.pipeline_id, "includeHistory": False}
    )
    assert "history" not in quiet


@pytest.mark.parametrize(
    "who",
    [
        {"session_id": "another-session"},
        {"workspace": Path("/w/elsewhere")},
        {"user": "bob"},
    ],
)
def test_another_session_workspace_or_user_is_refused(
    store: Store, seeded: Seeded, who: dict[str, Any]
) -> None:
    host = FakeToolHost(pipelines=PipelineService(store))
    with pytest.raises(ForbiddenError):
        call("get_pipeline_status", identity(seeded, **who), host, {"id": seeded.pipeline_id})
    with pytest.raises(ForbiddenError):
        call("stop_pipeline", identity(seeded, **who), host, {"id": seeded.pipeline_id})


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("get_pipeline_status", {}, "id: required"),
        ("get_pipeline_status", {"id": "x", "includeHistory": "no"}, "includeHistory"),
        ("get_pipeline_status", {"id": "x", "since": 1}, "unknown field(s) since"),
        ("resume_pipeline", {"id": "x", "skipItems": "a"}, "skipItems: must be a list"),
        ("resume_pipeline", {"id": "x", "skipItems": ["a", 3]}, "skipItems[1]"),
        ("resume_pipeline", {"id": "x", "fromStage": 2}, "fromStage"),
        ("update_pipeline_items", {"id": "x"}, "give at least one change"),
        ("update_pipeline_items", {"id": "x", "add": [{"title": " "}]}, "add[0].title"),
        (
            "update_pipeline_items",
            {"id": "x", "add": [{"title": "t", "owner": "me"}]},
            "add[0]: unknown field",
        ),
        ("create_pipeline", {}, "template: required"),
        ("create_pipeline", {"template": 3}, "template: must be"),
        ("create_pipeline", {"template": "t", "params": []}, "params: must be an object"),
        ("plan__add_items", {}, "items: required"),
    ],
)
def test_bad_arguments_name_the_field(
    store: Store, seeded: Seeded, name: str, arguments: dict[str, Any], field: str
) -> None:
    host = FakeToolHost(pipelines=PipelineService(store))
    with pytest.raises(InvalidRequestError, match=re.escape(field)):
        call(name, identity(seeded), host, arguments)


def test_unknown_pipeline_is_named(store: Store, seeded: Seeded) -> None:
    host = FakeToolHost(pipelines=PipelineService(store))
    with pytest.raises(NotFoundError, match="pipeline nope not found"):
        call("get_pipeline_status", identity(seeded), host, {"id": "nope"})


def test_item_edits_are_queued_for_the_boundary(store: Store, seeded: Seeded) -> None:
    host = FakeToolHost(pipelines=PipelineService(store))
    first, second = seeded.item_ids
    answer = call(
        "update_pipeline_items",
        identity(seeded),
        host,
        {
            "id": seeded.pipeline_id,
            "add": [{"title": "third", "acceptance": "it works"}],
            "order": [second, first],
        },
    )
    assert answer["id"] == seeded.pipeline_id and answer["status"] == "stopped" and len(answer["queued"]) == 1
    assert answer["queued"][0]["add"][0]["title"] == "third" and answer["queued"][0]["user"] == "ann"
    with pytest.raises(InvalidRequestError, match="zzz"):  # an unknown id queues nothing
        call("update_pipeline_items", identity(seeded), host, {"id": seeded.pipeline_id, "skip": ["zzz"]})
    assert len(store.get_pipeline(seeded.pipeline_id).pending_changes) == 1


def test_a_running_pipeline_cannot_be_resumed(store: Store) -> None:
    seeded = seed_pipeline(store, user="ann", workspace=WORKSPACE, status=PipelineStatus.RUNNING)
    host = FakeToolHost(pipelines=PipelineService(store))
    with pytest.raises(ConflictError, match="is running: it cannot be resumed now"):
        call("resume_pipeline", identity(seeded), host, {"id": seeded.pipeline_id})


def test_a_resume_awaiting_its_replay_review_refuses_another_and_the_caller_carries_attended(
    store: Store, seeded: Seeded
) -> None:
    store.set_pipeline_status(
        seeded.pipeline_id,
        PipelineStatus.AWAITING_APPROVAL,
        metadata=MetadataPatch(
            put={REPLAY_REVIEW_KEY: {"approvalId": "a" * 32, "previousStatus": "stopped"}}
        ),
    )
    host = FakeToolHost(pipelines=PipelineService(store))
    with pytest.raises(ConflictError, match=r"already awaiting its replay review \(approval a{32}\)"):
        call("resume_pipeline", identity(seeded), host, {"id": seeded.pipeline_id})
    # a schedule's or monitor's run is unattended: the service hears it (it cannot approve a replay)
    assert pipeline_access(host.pipelines, identity(seeded, attended=False)).caller.attended is False
    assert pipeline_access(host.pipelines, identity(seeded)).caller.attended is True


def test_without_the_engine_or_the_service_the_tools_refuse(store: Store, seeded: Seeded) -> None:
    with pytest.raises(PipelinesUnavailableError):  # the walker is not wired in
        call(
            "resume_pipeline",
            identity(seeded),
            FakeToolHost(pipelines=PipelineService(store)),
            {"id": seeded.pipeline_id},
        )
    with pytest.raises(PipelinesUnavailableError):  # no pipelines' service at all
        call("get_pipeline_status", identity(seeded), FakeToolHost(), {"id": seeded.pipeline_id})


def test_plan_add_items_skips_titles_already_on_the_plan(store: Store, seeded: Seeded) -> None:
    host = FakeToolHost(pipelines=PipelineService(store))
    stage = StageTag(seeded.pipeline_id, "n0", "plan", None, "a1")
    answer = call(
        "plan__add_items",
        identity(seeded, stage=stage),
        host,
        {"items": [{"title": "second"}, {"title": "third", "detail": "more"}]},
    )
    assert [a["title"] for a in answer["added"]] == ["third"] and answer["skipped"] == ["second"]
    items = store.list_pipeline_items(seeded.pipeline_id)
    assert [i.title for i in items][-1] == "third" and items[-1].created_by_node_key == "n0"
    with pytest.raises(InvalidRequestError, match="only a pipeline's stage worker"):
        call("plan__add_items", identity(seeded), host, {"items": [{"title": "x"}]})


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("create_pipeline", {"template": "t"}),
        ("get_pipeline_status", {}),
        ("resume_pipeline", {}),
        ("stop_pipeline", {}),
        ("update_pipeline_items", {"add": [{"title": "x"}]}),
    ],
)
def test_a_stage_worker_is_refused_the_root_runs_pipeline_tools(
    store: Store, seeded: Seeded, name: str, arguments: dict[str, Any]
) -> None:
    host = FakeToolHost(pipelines=PipelineService(store))
    stage = StageTag(seeded.pipeline_id, "n0", "plan", None, "a1")
    if name != "create_pipeline":
        arguments = {"id": seeded.pipeline_id, **arguments}
    before = store.get_pipeline(seeded.pipeline_id)
    with pytest.raises(ForbiddenError, match="only add plan items"):
        call(name, identity(seeded, stage=stage), host, arguments)
    after = store.get_pipeline(seeded.pipeline_id)
    assert (after.status, after.pending_changes) == (before.status, before.pending_changes)
    assert [p.id for p in store.list_pipelines()] == [seeded.pipeline_id]  # nothing created
