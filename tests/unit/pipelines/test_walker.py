"""The pipeline walk on the durable engine (issue 27): real run core, store (SQLite and PostgreSQL),
approval broker and DBOS; the vendor's stream replayed, the model's decisions scripted."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from octipusd.errors import ConflictError, InvalidRequestError
from octipusd.pipelines.service import ResumeRequest
from octipusd.store.pipeline_records import AttemptStatus, ItemStatus, PipelineStatus
from tests.unit.pipelines.conftest import HANG_S, Answer, PipelineRig, handoff

pytestmark = pytest.mark.anyio

P = PipelineStatus

TWO_STAGES: dict[str, Any] = {
    "name": "build",
    "description": "implement then verify each item",
    "steps": [
        {"name": "implement", "topic": "coding", "loopOverPlan": True},
        {"name": "verify", "topic": "qa", "stageType": "qa_validation", "loopOverPlan": True, "maxRetries": 2},
    ],
}


def stage_of(prompt: str) -> str:
    return "verify" if "QA" in prompt.split("## Plan item")[0] or '"pass"' in prompt else "implement"


def passing(prompt: str) -> Answer:
    if '"pass"' in prompt:
        return Answer(handoff(status="pass", summary="verified"))
    return Answer(handoff(status="done", summary="implemented"))


async def test_a_two_item_two_stage_pipeline_completes(pipelines: PipelineRig) -> None:
    pipelines.model.decide = passing
    created = await pipelines.create(TWO_STAGES, items=("one", "two"))
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    status = pipelines.status(created.id)
    assert [i["status"] for i in status["items"]] == ["done", "done"]
    assert [(a["stage"], a["status"]) for a in status["attempts"]] == [
        ("implement", "succeeded"),
        ("verify", "succeeded"),
        ("implement", "succeeded"),
        ("verify", "succeeded"),
    ]
    assert len(pipelines.model.prompts) == 4
    plan = pipelines.store.get_work_plan(done.session_id)
    assert plan is not None and plan.plan["title"] == "build"
    assert [s["status"] for s in plan.plan["steps"]] == ["completed", "completed"]
