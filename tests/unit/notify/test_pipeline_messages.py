"""A pipeline's end notifies like a run's (issue 27 item 7): a failed one always, a completed or
stopped one only past ``notify.finishedAfterSeconds``, never one still going; its text inert."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from octipusd.notify.messages import PIPELINE_KIND, compose_pipeline
from octipusd.store.pipeline_records import Pipeline, PipelineStatus

START = datetime(2026, 1, 1, tzinfo=UTC)


def page(path: str) -> str | None:
    return f"https://octipus.example:8443{path}"


def pipeline(status: PipelineStatus, minutes: float | None, **fields: object) -> Pipeline:
    base = Pipeline(
        id="p" * 32,
        session_id="s1",
        user="ann",
        workspace="/home/ann/shop",
        name="plan-implement-verify",
        template_id=None,
        template={},
        params={},
        graph={},
        status=status,
        summary="3 of 3 items done",
        error=None,
        plan=None,
        metadata={},
        pending_changes=[],
        tokens_used=0,
        generation=1,
        workflow_id=None,
        current_node=None,
        current_item_id=None,
        created_at=START,
        updated_at=START,
        ended_at=START + timedelta(minutes=minutes) if minutes is not None else None,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def test_a_failed_pipeline_notifies_at_once_with_its_reason_inert() -> None:
    message = compose_pipeline(
        pipeline(PipelineStatus.FAILED, 0.1, error="stage implement: \x1b[31mno files changed"),
        page=page,
        finished_after_s=600,
    )
    assert message is not None and message.kind == PIPELINE_KIND and message.pipeline_id == "p" * 32
    assert message.title == "Octipus: pipeline failed"
    assert "'plan-implement-verify' in 'shop' failed" in message.body
    assert "\x1b" not in message.body and "\\x1b[31mno files changed" in message.body
    assert (
        message.link == f"https://octipus.example:8443/pipelines/{'p' * 32}" and message.link in message.body
    )


@pytest.mark.parametrize("status", [PipelineStatus.COMPLETED, PipelineStatus.STOPPED])
def test_a_completed_or_stopped_pipeline_notifies_only_when_it_took_long(status: PipelineStatus) -> None:
    assert compose_pipeline(pipeline(status, 5), page=page, finished_after_s=600) is None
    long = compose_pipeline(pipeline(status, 30), page=page, finished_after_s=600)
    assert long is not None and f"{status} after 30.0 min." in long.body and "3 of 3 items done" in long.body


@pytest.mark.parametrize(
    "status", [PipelineStatus.RUNNING, PipelineStatus.PAUSED, PipelineStatus.AWAITING_APPROVAL]
)
def test_a_pipeline_still_going_does_not_notify(status: PipelineStatus) -> None:
    assert compose_pipeline(pipeline(status, None), page=page, finished_after_s=0) is None
    assert compose_pipeline(pipeline(status, 60), page=lambda _: None, finished_after_s=0) is None
