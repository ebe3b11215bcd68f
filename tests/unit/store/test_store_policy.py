"""Stored rules, scoped grants, spaces, flow labels and questionnaire approvals, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from alembic import command
from racing import race

from octipusd.errors import ApprovalError, ConflictError, InvalidRequestError, NotFoundError
from octipusd.store import ApprovalStatus, SpaceRole, Store, make_engine, upgrade
from octipusd.store.engine import WRITE_OPTION
from octipusd.store.migrate import alembic_config, current_revision

# Stored rules ------------------------------------------------------------------------------


def test_rules_are_added_listed_in_order_and_removed(store: Store) -> None:
    first = store.add_rule(level="deny", rule="cli-native:Bash(rm:*)", created_by="alice")
    second = store.add_rule(level="allow", rule=" cli-native:Read(*) ", created_by="alice")
    assert [r.rule for r in store.list_rules()] == ["cli-native:Bash(rm:*)", "cli-native:Read(*)"]
    assert second.level == "allow"
    removed = store.remove_rule(first.id)
    assert removed.rule == "cli-native:Bash(rm:*)"
    assert [r.id for r in store.list_rules()] == [second.id]
    with pytest.raises(NotFoundError, match="rules list"):
        store.remove_rule(first.id)


def test_duplicate_rule_and_bad_level_are_refused(store: Store) -> None:
    store.add_rule(level="ask", rule="shell__run", created_by="a")
    with pytest.raises(ConflictError, match="already exists"):
        store.add_rule(level="ask", rule="shell__run", created_by="b")
    store.add_rule(level="deny", rule="shell__run", created_by="b")  # another level is another rule
    with pytest.raises(InvalidRequestError, match="allow, ask, deny"):
        store.add_rule(level="maybe", rule="x", created_by="a")
    with pytest.raises(InvalidRequestError, match="empty"):
        store.add_rule(level="ask", rule="  ", created_by="a")
    assert len(store.list_rules()) == 2


# Scoped grants -----------------------------------------------------------------------------


def test_grant_uses_are_counted_exactly_once_under_concurrency(store: Store) -> None:
    grant = store.create_grant(tool_id="cli-native:Bash", level="allow", created_by="alice", max_uses=3)
    results = race(8, lambda _i: store.use_grant(grant.id))
    assert sorted(r for r in results if isinstance(r, bool)) == [False] * 5 + [True] * 3
    assert store.get_grant(grant.id).uses == 3
    assert store.list_grants() == []  # used up: no longer active
    assert [g.id for g in store.list_grants(include_inactive=True)] == [grant.id]


def test_expired_and_revoked_grants_are_not_used(store: Store) -> None:
    past = datetime.now(UTC) - timedelta(seconds=1)
    expired = store.create_grant(tool_id="shell__run", level="allow", created_by="a", expires_at=past)
    live = store.create_grant(tool_id="shell__run", level="allow", created_by="a")
    assert store.use_grant(expired.id) is False
    revoked = store.revoke_grant(live.id, revoked_by="bob")
    assert revoked.revoked_by == "bob" and revoked.revoked_at is not None
    again = store.revoke_grant(live.id, revoked_by="carol")  # idempotent: the first revocation stays
    assert again.revoked_by == "bob"
    assert store.use_grant(live.id) is False
    assert store.list_grants() == []


def test_grant_arguments_are_checked(store: Store) -> None:
    with pytest.raises(InvalidRequestError, match="max_uses"):
        store.create_grant(tool_id="x", level="allow", created_by="a", max_uses=0)
    with pytest.raises(InvalidRequestError, match="absolute"):
        store.create_grant(tool_id="x", level="allow", created_by="a", workspace="rel")
    with pytest.raises(InvalidRequestError, match="tool id"):
        store.create_grant(tool_id=" ", level="allow", created_by="a")
    with pytest.raises(NotFoundError):
        store.get_grant("0" * 32)


# Flow labels -------------------------------------------------------------------------------


def test_flow_flags_only_accumulate_even_concurrently(store: Store) -> None:
    session = store.create_session(workspace="/w", adapter="claude-code")
    flags = ["secret", "private", "suspicious", "secret"]
    race(4, lambda i: store.add_flow_flags(session.id, [flags[i]]))
    assert store.get_session(session.id).flow_label == "private,secret,suspicious"
    assert store.add_flow_flags(session.id, []) == "private,secret,suspicious"
    with pytest.raises(InvalidRequestError, match="non-empty word"):
        store.add_flow_flags(session.id, ["a,b"])
    with pytest.raises(NotFoundError):
        store.add_flow_flags("0" * 32, ["secret"])


# Spaces ------------------------------------------------------------------------------------


def test_space_roles_and_the_last_owner(store: Store) -> None:
    space = store.create_space(name="team", created_by="alice")
    assert space.members == {"alice": SpaceRole.OWNER}
    space = store.set_space_member("team", "bob", "commenter")
    assert space.members["bob"] is SpaceRole.COMMENTER
    with pytest.raises(ConflictError, match="last owner"):
        store.set_space_member(space.id, "alice", "editor")
    with pytest.raises(ConflictError, match="last owner"):
        store.remove_space_member("team", "alice")
    store.set_space_member("team", "bob", "owner")
    space = store.remove_space_member("team", "alice")
    assert space.members == {"bob": SpaceRole.OWNER}
    with pytest.raises(InvalidRequestError):
        store.set_space_member("team", "carol", "admin")
    with pytest.raises(ConflictError, match="already exists"):
        store.create_space(name="team", created_by="x")
    with pytest.raises(NotFoundError, match="spaces list"):
        store.get_space("nope")


def test_sessions_in_spaces_and_archived_spaces(store: Store) -> None:
    space = store.create_space(name="s", created_by="alice")
    session = store.create_session(workspace="/w", adapter="claude-code", space_id=space.id)
    assert session.space_id == space.id
    store.archive_space("s")
    with pytest.raises(ConflictError, match="archived"):
        store.create_session(workspace="/w", adapter="claude-code", space_id=space.id)
    with pytest.raises(ConflictError, match="archived"):
        store.set_space_member("s", "bob", "editor")
    with pytest.raises(NotFoundError):
        store.create_session(workspace="/w", adapter="claude-code", space_id="0" * 32)


# Approvals: questionnaires, answers, grants ---------------------------------------------------


def _pending(store: Store, *, kind: str = "tool") -> tuple[str, str]:
    session = store.create_session(workspace="/w", adapter="claude-code")
    run = store.create_run(session_id=session.id, prompt="p", owner="me", plan_mode=True, author="bob")
    assert run.plan_mode is True and run.author == "bob"
    approval = store.create_approval(
        run_id=run.id,
        session_id=session.id,
        tool_id="cli-native:AskUserQuestion" if kind == "questionnaire" else "cli-native:Bash",
        subject=None,
        reason="r",
        input={"questions": []},
        explanation="ask by default",
        vendor_request_id="req-1",
        expires_at=None,
        kind=kind,
        questions={"questions": [{"question": "Which?", "options": [{"label": "A", "description": "a"}]}]}
        if kind == "questionnaire"
        else None,
    )
    return approval.id, session.id


def test_questionnaire_answers_are_stored_with_the_decision(store: Store) -> None:
    approval_id, _ = _pending(store, kind="questionnaire")
    stored = store.get_approval(approval_id)
    assert stored.kind == "questionnaire" and stored.questions is not None
    assert stored.questions["questions"][0]["options"][0]["description"] == "a"
    decided = store.decide_approval(approval_id, approve=True, decided_by="alice", answers={"Which?": "A"})
    assert decided.answers == {"Which?": "A"} and decided.status is ApprovalStatus.APPROVED
    with pytest.raises(InvalidRequestError, match="kind"):
        store.create_approval(
            run_id=decided.run_id,
            session_id=decided.session_id,
            tool_id="x",
            subject=None,
            reason=None,
            input={},
            explanation=None,
            vendor_request_id=None,
            expires_at=None,
            kind="poll",
        )


def test_a_remembered_answer_creates_its_grant_only_when_it_wins(store: Store) -> None:
    approval_id, session_id = _pending(store)

    def answer(i: int) -> object:
        return store.decide_approval(
            approval_id,
            approve=True,
            decided_by=f"user{i}",
            grant={"tool_id": "cli-native:Bash", "level": "allow", "session_id": session_id, "max_uses": 2},
        )

    results = race(6, answer)
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1
    assert all(isinstance(r, ApprovalError) for r in results if isinstance(r, BaseException))
    grants = store.list_grants()
    assert len(grants) == 1
    final = store.get_approval(approval_id)
    assert final.grant_id == grants[0].id and grants[0].approval_id == approval_id
    assert grants[0].created_by == final.decided_by and grants[0].session_id == session_id


def test_concurrent_answers_to_two_requests_each_apply_once(store: Store) -> None:
    first, _ = _pending(store)
    second, _ = _pending(store)
    ids = [first, second, first, second, second, first]
    results = race(6, lambda i: store.decide_approval(ids[i], approve=i % 2 == 0, decided_by=f"u{i}"))
    won = [r for r in results if not isinstance(r, BaseException)]
    assert sorted(a.id for a in won) == sorted([first, second])
    for approval_id in (first, second):
        final = store.get_approval(approval_id)
        winner = next(a for a in won if a.id == approval_id)
        assert final.decided_by == winner.decided_by and final.status is winner.status


# Migration ---------------------------------------------------------------------------------


def test_upgrade_from_0002_keeps_rows_and_downgrade_round_trips(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        upgrade(engine, "0002")
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO sessions (id, workspace, adapter, permission_mode, attended, created_at, "
                    "updated_at, options) VALUES ('s1', '/w', 'claude-code', 'workspace', true, "
                    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, '{}')"
                )
            )
        upgrade(engine)
        store = Store(engine)
        session = store.get_session("s1")
        assert session.flow_label == "" and session.space_id is None
        config = alembic_config()
        with engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                config.attributes["connection"] = conn
                command.downgrade(config, "0002")
        assert current_revision(engine) == "0002"
        assert "permission_rules" not in sa.inspect(engine).get_table_names()
        upgrade(engine)
        assert Store(engine).get_session("s1").workspace == "/w"
    finally:
        engine.dispose()
