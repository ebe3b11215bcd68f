"""The pipeline walk's robustness (issue 27 review): a step that raises, a fork's generation, a stop
before the worker registered, stale resumes, superseded attempts and an attempt that finished
before a kill -- on the walker's rig (real run core, store on SQLite and PostgreSQL, durable engine;
the vendor replayed, the model scripted). Faults are injected at the store method a step calls."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from octipusd.errors import StoreError
from octipusd.pipelines.service import ResumeRequest
from octipusd.pipelines.walk import WalkState, _Walk
from octipusd.store.pipeline_records import AttemptStatus, NodeStatus, PipelineStatus
from tests.unit.pipelines.conftest import HANG_S, USER, WAIT_S, Answer, PipelineRig, handoff
from tests.unit.pipelines.test_walker import TWO_STAGES, _live, _qa_always_fails, passing

pytestmark = pytest.mark.anyio

P = PipelineStatus


def _fail_once(pipelines: PipelineRig, name: str, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The store's ``name`` raises StoreError on its first call; the calls are counted."""
    real = getattr(pipelines.store, name)
    calls: list[int] = []

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise StoreError(f"{name}: the database is gone")
        return real(*args, **kwargs)

    monkeypatch.setattr(pipelines.store, name, flaky)
    return calls


def _then(
    pipelines: PipelineRig, name: str, monkeypatch: pytest.MonkeyPatch, after: Callable[[], None]
) -> None:
    """``after()`` runs once, right after the store's ``name`` first returns."""
    real = getattr(pipelines.store, name)
    done: list[int] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        if not done:
            done.append(1)
            after()
        return result

    monkeypatch.setattr(pipelines.store, name, wrapped)


def _stop_after(pipelines: PipelineRig, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after the store's ``name`` first returns, the (only) pipeline is stopped the way
    ``stop_pipeline`` stops one whose worker is not registered yet (the status only)."""
    created: list[str] = []
    real_create = pipelines.store.create_pipeline

    def create(**kwargs: Any) -> Any:
        pipeline = real_create(**kwargs)
        created.append(pipeline.id)
        return pipeline

    def stop() -> None:
        pipelines.store.set_pipeline_status(created[0], P.STOPPED, summary=f"stopped by {USER}")

    monkeypatch.setattr(pipelines.store, "create_pipeline", create)
    _then(pipelines, name, monkeypatch, stop)


async def test_a_step_that_raises_fails_the_pipeline_and_its_resume_completes_it(
    pipelines: PipelineRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipelines.model.decide = passing
    _fail_once(pipelines, "apply_item_changes", monkeypatch)  # the loop head's step raises
    created = await pipelines.create(TWO_STAGES, items=("one",))
    failed = await pipelines.wait(created.id, P.FAILED, P.COMPLETED)
    assert failed.status is P.FAILED
    assert "the database is gone" in (failed.error or "")
    await pipelines.resume(created.id, ResumeRequest())
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error


async def test_a_walk_that_ended_in_error_is_forked_by_the_resume(
    pipelines: PipelineRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipelines.model.decide = passing
    _fail_once(pipelines, "apply_item_changes", monkeypatch)
    _fail_once(pipelines, "pipeline_snapshot", monkeypatch)  # the park raises too: the workflow errs
    created = await pipelines.create(TWO_STAGES, items=("one",))
    await pipelines.wait(created.id, P.FAILED, P.COMPLETED)

    async def workflow_status() -> str | None:
        info = await pipelines.engine.workflow(created.id)
        return None if info is None else info.status

    with anyio.fail_after(WAIT_S):
        while await workflow_status() != "ERROR":  # noqa: ASYNC110 - the engine signals nothing
            await anyio.sleep(0.05)
    await pipelines.resume(created.id, ResumeRequest())
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    assert done.workflow_id == f"{created.id}.g{done.generation}"


async def test_a_rewound_stage_declined_fails_the_pipeline(pipelines: PipelineRig) -> None:
    pipelines.model.decide = _qa_always_fails
    created = await pipelines.create(TWO_STAGES, items=("one",))
    asking = await pipelines.wait(created.id, P.AWAITING_APPROVAL, P.FAILED)
    await pipelines.broker.answer(
        asking.metadata["pendingApproval"]["requestId"], approve=False, decided_by=USER
    )
    await pipelines.wait(created.id, P.FAILED)
    await pipelines.resume(created.id, ResumeRequest(from_stage="verify"))
    await pipelines.wait_for(
        lambda: (
            pipelines.store.get_pipeline(created.id).metadata.get("pendingApproval") is not None
            and pipelines.store.get_pipeline(created.id).generation == asking.generation + 1
        )
    )
    again = pipelines.store.get_pipeline(created.id)
    assert again.status is P.AWAITING_APPROVAL
    await pipelines.broker.answer(
        again.metadata["pendingApproval"]["requestId"], approve=False, decided_by=USER
    )
    failed = await pipelines.wait(created.id, P.FAILED)
    assert "declined" in (failed.error or "")
    assert pipelines.status(created.id)["pendingApproval"] is None


async def test_a_stop_before_the_worker_starts_starts_no_worker(
    pipelines: PipelineRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipelines.model.decide = passing
    _stop_after(pipelines, "start_pipeline_attempt", monkeypatch)
    created = await pipelines.create(TWO_STAGES, items=("one",))

    def ended() -> bool:
        attempts = pipelines.store.pipeline_snapshot(created.id).attempts
        return bool(attempts) and all(a.status is not AttemptStatus.RUNNING for a in attempts)

    await pipelines.wait_for(ended)
    (attempt,) = pipelines.store.pipeline_snapshot(created.id).attempts
    assert attempt.status is AttemptStatus.STOPPED
    assert pipelines.model.prompts == []  # no worker started
    assert pipelines.store.get_pipeline(created.id).status is P.STOPPED


async def test_a_stop_before_the_worker_registered_stops_it_at_once(
    pipelines: PipelineRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipelines.model.decide = lambda prompt: Answer(handoff(status="done", summary="late"), delay=HANG_S)
    _stop_after(pipelines, "add_attempt_run", monkeypatch)
    created = await pipelines.create(TWO_STAGES, items=("one",))
    await pipelines.wait_for(
        lambda: any(
            a.status is AttemptStatus.STOPPED for a in pipelines.store.pipeline_snapshot(created.id).attempts
        )
    )
    assert pipelines.store.get_pipeline(created.id).status is P.STOPPED


async def test_a_question_asked_after_a_stop_keeps_the_pipeline_stopped(pipelines: PipelineRig) -> None:
    pipelines.model.decide = lambda prompt: Answer(handoff(status="done", summary="late"), delay=HANG_S)
    created = await pipelines.create(TWO_STAGES, items=("one",))
    await pipelines.wait_for(lambda: created.id in pipelines.walker.live)
    await pipelines.service.stop(created.id, pipelines.caller)
    node = pipelines.store.get_pipeline(created.id).current_node or "n1"
    await pipelines.walker.questions.ask(
        created.id, node, None, {"stage": "verify", "reason": "retries ran out"}
    )
    await pipelines.walker.questions.again(created.id, node)
    stopped = pipelines.store.get_pipeline(created.id)
    assert stopped.status is P.STOPPED
    assert stopped.metadata["pendingApproval"]["reason"] == "retries ran out"  # kept for the resume


async def test_a_resume_the_walk_already_walked_under_is_stale() -> None:
    walk = _Walk.__new__(_Walk)
    walk.state = WalkState(node="n1", generation=3)
    assert not walk._fresh({"kind": "resume", "generation": 3})
    assert not walk._fresh({"kind": "resume", "generation": 2})
    assert walk._fresh({"kind": "resume", "generation": 4})
    assert not walk._fresh({"kind": "answer", "generation": 4})


async def test_a_skipped_items_stopped_attempt_is_abandoned(pipelines: PipelineRig) -> None:
    calls: list[str] = []

    def decide(prompt: str) -> Answer:
        if "Title: one" in prompt and not calls:
            calls.append(prompt)
            return Answer(handoff(status="done", summary="late"), delay=HANG_S, partial="half of one")
        return passing(prompt)

    pipelines.model.decide = decide
    created = await pipelines.create(TWO_STAGES, items=("one", "two"))
    await _live(pipelines, created.id)
    await pipelines.service.stop(created.id, pipelines.caller)
    await pipelines.wait_for(
        lambda: any(
            a.status is AttemptStatus.STOPPED for a in pipelines.store.pipeline_snapshot(created.id).attempts
        )
    )
    assert pipelines.status(created.id)["incompleteAttempt"]["text"] == "half of one"
    one, _two = pipelines.store.list_pipeline_items(created.id)
    await pipelines.resume(created.id, ResumeRequest(skip_items=(one.id,)))
    done = await pipelines.wait(created.id, P.COMPLETED, P.FAILED)
    assert done.status is P.COMPLETED, done.error
    assert pipelines.status(created.id)["incompleteAttempt"] is None
    first = pipelines.store.pipeline_snapshot(created.id).attempts[0]
    assert (first.status, first.incomplete_text) == (AttemptStatus.ABANDONED, None)


async def test_an_attempt_that_succeeded_before_the_kill_is_used_not_paid_again(
    pipelines: PipelineRig,
) -> None:
    pipelines.model.decide = _qa_always_fails
    created = await pipelines.create(TWO_STAGES, items=("one",))
    await pipelines.wait(created.id, P.AWAITING_APPROVAL, P.FAILED)
    item = pipelines.store.list_pipeline_items(created.id)[0].id
    graph = pipelines.walker.graph_of(pipelines.store.get_pipeline(created.id))
    implement = await pipelines.walker.settled(created.id, graph.resolve("implement").key, item)
    assert implement is not None and implement["outcome"] == "ok" and implement["output"]
    verify = await pipelines.walker.settled(created.id, graph.resolve("verify").key, item)
    assert verify is not None
    assert (verify["outcome"], verify["issues"]) == ("qa_fail", ["missing tests"])


CHECKED: dict[str, Any] = {
    "name": "checked",
    "description": "build then check",
    "steps": [{"name": "build", "topic": "coding"}, {"name": "check", "topic": "qa", "maxRetries": 1}],
}


async def test_a_stop_and_resume_between_two_steps_do_not_wake_the_next_park(
    pipelines: PipelineRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    def decide(prompt: str) -> Answer:
        if prompt.startswith("Execute: check"):
            return Answer(handoff(status="fail", summary="broken", issues=["broken"]))
        return Answer(handoff(status="done", summary="built"))

    pipelines.model.decide = decide
    entered, release = threading.Event(), threading.Event()
    real = pipelines.store.set_pipeline_node

    def held(pipeline_id: str, node: str, status: Any, **kwargs: Any) -> Any:
        if status is NodeStatus.COMPLETED and not entered.is_set():  # the build's advance: between steps
            entered.set()
            release.wait(WAIT_S)
        return real(pipeline_id, node, status, **kwargs)

    monkeypatch.setattr(pipelines.store, "set_pipeline_node", held)
    created = await pipelines.create(CHECKED)
    await pipelines.wait_for(entered.is_set)
    await pipelines.service.stop(created.id, pipelines.caller)
    await pipelines.resume(created.id, ResumeRequest())  # the walk walks on
    release.set()
    failed = await pipelines.wait(created.id, P.FAILED)
    assert "broke its contract" in (failed.error or "")

    async def after_park() -> list[str]:
        names = [s.name for s in await pipelines.engine.list_steps(created.id)]
        parks = [i for i, name in enumerate(names) if name == "park"]
        return names[parks[0] + 1 :] if parks else []  # the status is written before the park is recorded

    with anyio.fail_after(WAIT_S):
        while len(await after_park()) < 3:  # noqa: ASYNC110 - the engine signals nothing
            await anyio.sleep(0.05)
    assert "resumed" not in await after_park()  # the stale resume was dropped: the walk still waits
    assert pipelines.store.get_pipeline(created.id).status is P.FAILED
