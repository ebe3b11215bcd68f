"""Work-plan revisions and the feedback history of a plan (issue 14 item 2), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from alembic import command

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store import Store, make_engine
from octipusd.store.engine import WRITE_OPTION
from octipusd.store.migrate import alembic_config, current_revision, upgrade
from octipusd.store.plan_store import MAX_FEEDBACK_ENTRIES
from octipusd.toolkit import FeedbackResponse, FeedbackStatus

PLAN = {"title": "T", "steps": [{"id": "s1", "title": "one", "status": "pending"}]}
_SESSION = (
    "id",
    "workspace",
    "adapter",
    "permission_mode",
    "attended",
    "created_at",
    "updated_at",
    "options",
)
PLAN2 = {"title": "T", "steps": [{"id": "s1", "title": "one", "status": "completed"}]}


@pytest.fixture
def store(migrated_store_url: str) -> Iterator[Store]:
    with Store.open(migrated_store_url) as opened:
        yield opened


def _planned(store: Store) -> str:
    session = store.create_session(workspace="/w", adapter="claude-code")
    assert store.save_work_plan(session.id, PLAN, revision=0).revision == 1
    return session.id


def test_revisions_count_saves_and_a_stale_one_is_refused_naming_the_current(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code").id
    with pytest.raises(ConflictError, match="no work plan yet, so its revision is 0, not 3"):
        store.save_work_plan(session, PLAN, revision=3)
    assert store.save_work_plan(session, PLAN, revision=0).revision == 1
    saved = store.save_work_plan(session, PLAN2, revision=1)
    assert saved.revision == 2 and saved.plan == PLAN2
    with pytest.raises(ConflictError) as stale:
        store.save_work_plan(session, PLAN, revision=1)
    assert stale.value.message.startswith("revision: stale: you sent 1, the plan's current revision is 2")
    with pytest.raises(ConflictError, match="revision: required: the plan's current revision is 2"):
        store.save_work_plan(session, PLAN, revision=0)
    current = store.get_work_plan(session)
    assert current is not None and current.revision == 2 and current.plan == PLAN2


def test_feedback_on_the_plan_and_a_step_then_answered_with_the_plan(store: Store) -> None:
    session = _planned(store)
    whole = store.add_plan_feedback(session, "  add a rollback step ", author="ann")
    step = store.add_plan_feedback(session, "use PostgreSQL", author="bob", step_id="s1")
    assert (whole.seq, whole.text, whole.step_id, whole.status) == (1, "add a rollback step", None, "pending")
    assert (step.seq, step.step_id, step.author, step.plan_revision) == (2, "s1", "bob", 1)
    assert store.count_unhandled_feedback(session) == 2
    saved = store.save_work_plan(
        session,
        PLAN2,
        revision=1,
        responses=(
            FeedbackResponse(whole.id, FeedbackStatus.APPLIED, "added step s2"),
            FeedbackResponse(step.id, FeedbackStatus.NEEDS_CLARIFICATION, "which version?"),
        ),
    )
    plan, items = store.read_plan(session)
    assert plan == saved and plan.revision == 2
    assert [(i.id, i.status, i.response, i.responded_revision) for i in items] == [
        (whole.id, FeedbackStatus.APPLIED, "added step s2", 2),
        (step.id, FeedbackStatus.NEEDS_CLARIFICATION, "which version?", 2),
    ]
    # needs_clarification waits for the person: not unhandled
    assert store.count_unhandled_feedback(session) == 0
    replied = store.reply_plan_feedback(session, step.id, "16", author="bob")
    assert replied.status is FeedbackStatus.PENDING
    assert [(r.text, r.author, r.answering) for r in replied.replies] == [("16", "bob", "which version?")]
    assert replied.response == "which version?"  # the history stays
    assert store.count_unhandled_feedback(session) == 1


def test_a_refused_update_records_no_answer(store: Store) -> None:
    session = _planned(store)
    item = store.add_plan_feedback(session, "x", author="ann")
    with pytest.raises(ConflictError):
        store.save_work_plan(
            session, PLAN, revision=5, responses=(FeedbackResponse(item.id, FeedbackStatus.APPLIED),)
        )
    with pytest.raises(InvalidRequestError, match=r"feedbackResponses\[1\].id: no feedback 'nope'"):
        store.save_work_plan(
            session,
            PLAN2,
            revision=1,
            responses=(
                FeedbackResponse(item.id, FeedbackStatus.APPLIED),
                FeedbackResponse("nope", FeedbackStatus.APPLIED),
            ),
        )
    plan, items = store.read_plan(session)
    assert plan is not None and plan.revision == 1 and plan.plan == PLAN  # nothing of the update landed
    assert items[0].status is FeedbackStatus.PENDING and items[0].response is None


def test_bad_feedback_is_refused_naming_the_field(store: Store) -> None:
    bare = store.create_session(workspace="/w", adapter="claude-code").id
    with pytest.raises(ConflictError, match="has no work plan yet"):
        store.add_plan_feedback(bare, "x", author="ann")
    session = _planned(store)
    with pytest.raises(
        InvalidRequestError, match=r"step_id: the plan \(revision 1\) has no step 'nope' \(its steps: 's1'\)"
    ):
        store.add_plan_feedback(session, "x", author="ann", step_id="nope")
    with pytest.raises(InvalidRequestError, match="text: must not be empty"):
        store.add_plan_feedback(session, " \n ", author="ann")
    with pytest.raises(InvalidRequestError, match="text: longer than 4000"):
        store.add_plan_feedback(session, "x" * 4001, author="ann")
    with pytest.raises(NotFoundError, match="feedback_id: no feedback 'nope'"):
        store.reply_plan_feedback(session, "nope", "x", author="ann")
    other = _planned(store)
    foreign = store.add_plan_feedback(other, "x", author="ann")
    with pytest.raises(NotFoundError, match="feedback_id"):
        store.reply_plan_feedback(session, foreign.id, "x", author="ann")
    with pytest.raises(NotFoundError):
        store.add_plan_feedback("0" * 32, "x", author="ann")
    with pytest.raises(NotFoundError):
        store.read_plan("0" * 32)
    assert store.read_plan(session)[1] == []


def test_the_feedback_limit_and_deleting_the_session(store: Store) -> None:
    session = _planned(store)
    for n in range(MAX_FEEDBACK_ENTRIES):
        store.add_plan_feedback(session, f"item {n}", author="ann")
    with pytest.raises(ConflictError, match=f"holds {MAX_FEEDBACK_ENTRIES} feedback entries, the limit"):
        store.add_plan_feedback(session, "one more", author="ann")
    assert [i.seq for i in store.read_plan(session)[1]] == list(range(1, MAX_FEEDBACK_ENTRIES + 1))
    store.delete_session(session)
    assert store.count_unhandled_feedback(session) == 0


def test_migration_0007_gives_existing_plans_revision_1(store_url: str) -> None:
    engine = make_engine(store_url)
    now = datetime(2031, 1, 1, tzinfo=UTC)
    try:
        upgrade(engine, "0006")
        with engine.begin() as conn:
            conn.execute(
                sa.insert(sa.table("sessions", *(sa.column(c) for c in _SESSION))),
                {
                    "id": "s" * 32,
                    "workspace": "/w",
                    "adapter": "claude-code",
                    "permission_mode": "workspace",
                    "attended": True,
                    "created_at": now,
                    "updated_at": now,
                    "options": "{}",
                },
            )
            conn.execute(
                sa.insert(
                    sa.table(
                        "work_plans", sa.column("session_id"), sa.column("plan"), sa.column("updated_at")
                    )
                ),
                {"session_id": "s" * 32, "plan": '{"steps": []}', "updated_at": now},
            )
        upgrade(engine)
        store = Store(engine)
        plan = store.get_work_plan("s" * 32)
        assert plan is not None and plan.revision == 1
        store.add_plan_feedback("s" * 32, "x", author="ann")
        assert store.save_work_plan("s" * 32, {"steps": []}, revision=1).revision == 2
        config = alembic_config()
        with engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                config.attributes["connection"] = conn
                command.downgrade(config, "0006")
        assert current_revision(engine) == "0006"
        assert "plan_feedback" not in sa.inspect(engine).get_table_names()
        upgrade(engine)
        assert Store(engine).read_plan("s" * 32)[1] == []
    finally:
        engine.dispose()
