"""Model rows and the session columns that refer to them, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlmodel import SQLModel

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store import ModelRow, Store, make_engine, upgrade
from octipusd.store.engine import WRITE_OPTION
from octipusd.store.migrate import alembic_config, current_revision, head_revision

CLI_AGENT = {"transport": "exec", "inheritApiKeys": True, "sharedUse": False}


class FakeClock:
    """A settable UTC clock."""

    def __init__(self) -> None:
        self.now = datetime(2031, 3, 1, 9, 0, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def _row(store: Store, name: str = "sonnet-fast", **fields: Any) -> ModelRow:
    values: dict[str, Any] = {"adapter": "claude-code", **fields}
    return store.create_model_row(name=name, **values)


def _from_row(store: Store, row: ModelRow, **fields: Any) -> Any:
    return store.create_session(
        workspace="/w",
        adapter=row.adapter,
        model=row.model,
        permission_mode=row.permission_mode,
        model_row_id=row.id,
        **fields,
    )


# Schema ------------------------------------------------------------------------------------


def test_migrations_create_the_models_table_and_match_the_models(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        inspector = sa.inspect(engine)
        assert "models" in inspector.get_table_names()
        columns = {c["name"] for c in inspector.get_columns("sessions")}
        assert {"model_row_id", "options"} <= columns
        fks = inspector.get_foreign_keys("sessions")
        assert any(
            fk["referred_table"] == "models" and fk["constrained_columns"] == ["model_row_id"] for fk in fks
        )
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert list(compare_metadata(context, SQLModel.metadata)) == []
    finally:
        engine.dispose()


def test_upgrade_from_0001_keeps_sessions_and_fills_the_new_columns(store_url: str) -> None:
    engine = make_engine(store_url)
    try:
        upgrade(engine, "0001")
        now = datetime(2031, 1, 1, tzinfo=UTC)
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "INSERT INTO sessions (id, workspace, adapter, permission_mode, attended, created_at, "
                    "updated_at) VALUES ('a' || :tail, '/w', 'claude-code', 'workspace', true, :now, :now)"
                ),
                {"tail": "0" * 31, "now": now},
            )
            conn.execute(
                sa.text(
                    "INSERT INTO runs (id, session_id, turn_index, status, prompt, resumed, input_tokens, "
                    "output_tokens, cache_creation_input_tokens, cache_read_input_tokens, usage_estimated, "
                    "owner, created_at) VALUES (:id, :sid, 1, 'succeeded', 'p', false, 0, 0, 0, 0, false, "
                    "'o', :now)"
                ),
                {"id": "b" * 32, "sid": "a" + "0" * 31, "now": now},
            )
        upgrade(engine)
    finally:
        engine.dispose()
    with Store.open(store_url) as store:
        session = store.get_session("a" + "0" * 31)
        assert session.model_row_id is None and session.options == {}
        assert store.get_run("b" * 32).session_id == session.id


def test_downgrade_to_0001_and_back(store_url: str) -> None:
    with Store.open(store_url) as store:
        row = _row(store)
        session = _from_row(store, row, options={"transport": "exec"})
        store.create_run(session_id=session.id, prompt="p", owner="o")
    engine = make_engine(store_url)
    try:
        config = alembic_config()
        with engine.connect() as conn:
            conn.execution_options(**{WRITE_OPTION: True})
            with conn.begin():
                config.attributes["connection"] = conn
                command.downgrade(config, "0001")
        assert current_revision(engine) == "0001"
        inspector = sa.inspect(engine)
        assert "models" not in inspector.get_table_names()
        assert not {"model_row_id", "options"} & {c["name"] for c in inspector.get_columns("sessions")}
        upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert list(compare_metadata(context, SQLModel.metadata)) == []
    finally:
        engine.dispose()
    with Store.open(store_url) as store:
        kept = store.get_session(session.id)
        assert kept.model_row_id is None and kept.options == {}


# Create, read, list -----------------------------------------------------------------------


def test_create_get_list_model_rows(store_url: str) -> None:
    clock = FakeClock()
    with Store.open(store_url, clock=clock) as store:
        plain = _row(store, "zeta")
        clock.advance(1)
        full = store.create_model_row(
            name="Codex.exec_1",
            adapter="codex",
            binary="/opt/codex/bin/codex",
            model="gpt-5-codex",
            permission_mode="plan",
            additive_flags=["--strict-config", "--color=always"],
            metadata={"cliAgent": CLI_AGENT, "note": ["free", "form"]},
        )
        assert len(plain.id) == 32 and int(plain.id, 16) >= 0
        assert (plain.binary, plain.model, plain.permission_mode) == (None, None, "workspace")
        assert plain.additive_flags == () and plain.metadata == {} and plain.cli_agent == {}
        assert full.additive_flags == ("--strict-config", "--color=always")
        assert full.metadata == {"cliAgent": CLI_AGENT, "note": ["free", "form"]}
        assert full.cli_agent == CLI_AGENT
        assert full.created_at == full.updated_at == clock.now and full.created_at.tzinfo is not None
        assert store.get_model_row(full.id) == full
        assert store.get_model_row("Codex.exec_1") == full
        assert [r.name for r in store.list_model_rows()] == ["Codex.exec_1", "zeta"]


def test_a_duplicate_name_is_a_conflict_naming_it(store: Store) -> None:
    _row(store, "shared")
    with pytest.raises(ConflictError, match="'shared'"):
        _row(store, "shared", adapter="codex")
    assert len(store.list_model_rows()) == 1


def test_concurrent_creates_of_one_name_give_exactly_one_row(store: Store) -> None:
    threads = 6
    barrier = threading.Barrier(threads)

    def work(i: int) -> ModelRow | ConflictError:
        barrier.wait(timeout=10)
        try:
            return _row(store, "raced", model=f"m{i}")
        except ConflictError as exc:  # collected and checked below
            return exc

    with ThreadPoolExecutor(max_workers=threads) as pool:
        results = list(pool.map(work, range(threads)))
    made = [r for r in results if isinstance(r, ModelRow)]
    assert len(made) == 1, results
    assert all(isinstance(r, ConflictError) for r in results if not isinstance(r, ModelRow)), results
    assert [r.id for r in store.list_model_rows()] == [made[0].id]


@pytest.mark.parametrize(
    ("fields", "error", "match"),
    [
        ({"name": ""}, InvalidRequestError, "1-100"),
        ({"name": "x" * 101}, InvalidRequestError, "1-100"),
        ({"name": "has space"}, InvalidRequestError, "has space"),
        ({"name": "a/b"}, InvalidRequestError, "a/b"),
        ({"name": "0123456789abcdef0123456789abcdef"}, InvalidRequestError, "looks like an id"),
        ({"adapter": ""}, InvalidRequestError, "adapter"),
        ({"permission_mode": "bypass"}, InvalidRequestError, "workspace, full, plan, default"),
        ({"binary": "bin/claude"}, InvalidRequestError, "relative path"),
        ({"binary": ""}, InvalidRequestError, "command name"),
        ({"binary": "-x"}, InvalidRequestError, "command name"),
        ({"binary": 7}, InvalidRequestError, "binary"),
        ({"model": " "}, InvalidRequestError, "model"),
        ({"additive_flags": "--no-chrome"}, InvalidRequestError, "list of strings"),
        ({"additive_flags": ["--no-chrome", 3]}, InvalidRequestError, "3"),
        ({"additive_flags": [""]}, InvalidRequestError, "empty"),
        ({"metadata": ["not", "an", "object"]}, InvalidRequestError, "metadata must be an object"),
        ({"metadata": {"cliAgent": "exec"}}, InvalidRequestError, "metadata.cliAgent must be an object"),
        ({"metadata": {"cliAgent": {"transport": 1}}}, InvalidRequestError, "transport must be a string"),
        (
            {"metadata": {"cliAgent": {"sharedUse": "yes"}}},
            InvalidRequestError,
            "sharedUse must be a boolean",
        ),
        (
            {"metadata": {"cliAgent": {"inheritApiKeys": 1}}},
            InvalidRequestError,
            "inheritApiKeys must be a boolean",
        ),
        (
            {"metadata": {"cliAgent": {"passEnv": "AWS_PROFILE"}}},
            InvalidRequestError,
            "passEnv must be a list",
        ),
        (
            {"metadata": {"cliAgent": {"passEnv": ["AWS_PROFILE", 3]}}},
            InvalidRequestError,
            "entry 3 is not a string",
        ),
        (
            {"metadata": {"cliAgent": {"passEnv": ["AWS_*"]}}},
            InvalidRequestError,
            "'AWS_\\*' is not an environment",
        ),
        (
            {"metadata": {"cliAgent": {"passEnv": ["HOME", "Octipus_Database_Url"]}}},
            InvalidRequestError,
            "passEnv: 'Octipus_Database_Url' is one of the daemon's own settings",
        ),
        ({"metadata": {"x": float("nan")}}, InvalidRequestError, "JSON"),
    ],
)
def test_bad_fields_are_refused_naming_the_field(
    store: Store, fields: dict[str, Any], error: type[Exception], match: str
) -> None:
    values: dict[str, Any] = {"name": "ok", "adapter": "claude-code", **fields}
    with pytest.raises(error, match=match):
        store.create_model_row(**values)
    assert store.list_model_rows() == []
    if "name" not in fields:
        row = _row(store, "target")
        with pytest.raises(error, match=match):
            store.update_model_row("target", **fields)
        assert store.get_model_row("target") == row


def test_unknown_cli_agent_keys_and_binary_forms_are_kept(store: Store) -> None:
    row = _row(store, binary="claude", metadata={"cliAgent": {"baseUrl": "http://127.0.0.1:9"}})
    assert row.binary == "claude" and row.cli_agent == {"baseUrl": "http://127.0.0.1:9"}


def test_missing_rows_raise_not_found_naming_the_key(store: Store) -> None:
    for call in (
        lambda: store.get_model_row("nope"),
        lambda: store.update_model_row("nope", model="m"),
        lambda: store.delete_model_row("nope"),
    ):
        with pytest.raises(NotFoundError, match="'nope'"):
            call()
    missing = "f" * 32
    with pytest.raises(NotFoundError, match=missing):
        store.create_session(workspace="/w", adapter="claude-code", model_row_id=missing)


# Update -------------------------------------------------------------------------------------


def test_update_changes_only_the_given_fields(store_url: str) -> None:
    clock = FakeClock()
    with Store.open(store_url, clock=clock) as store:
        row = _row(store, binary="/usr/bin/claude", model="sonnet", metadata={"cliAgent": CLI_AGENT})
        assert store.update_model_row(row.id) == row
        clock.advance(10)
        changed = store.update_model_row(row.name, binary=None, additive_flags=["--no-chrome"])
        assert changed.binary is None and changed.additive_flags == ("--no-chrome",)
        assert (changed.model, changed.metadata, changed.created_at) == (
            row.model,
            row.metadata,
            row.created_at,
        )
        assert changed.updated_at == clock.now
        renamed = store.update_model_row(row.id, name="renamed", metadata={})
        assert renamed.name == "renamed" and renamed.metadata == {}
        assert store.get_model_row("renamed") == renamed
        with pytest.raises(NotFoundError):
            store.get_model_row(row.name)
        assert store.update_model_row("renamed", name="renamed").name == "renamed"


def test_update_refuses_unknown_fields_and_taken_names(store: Store) -> None:
    row = _row(store, "one")
    _row(store, "two")
    with pytest.raises(ValueError, match="created_at"):
        store.update_model_row(row.id, created_at=datetime.now(UTC))
    with pytest.raises(ValueError, match="bogus"):
        store.update_model_row(row.id, bogus=1)
    with pytest.raises(ConflictError, match="'two'"):
        store.update_model_row(row.id, name="two")
    assert store.get_model_row(row.id) == row


def test_sessions_created_from_a_row_follow_its_updates(store_url: str) -> None:
    clock = FakeClock()
    with Store.open(store_url, clock=clock) as store:
        row = _row(store, model="sonnet", permission_mode="default")
        linked = _from_row(store, row, options={"transport": "stream"})
        other = store.create_session(workspace="/w", adapter="claude-code", model="sonnet")
        assert linked.model_row_id == row.id and linked.options == {"transport": "stream"}
        assert (linked.adapter, linked.model, linked.permission_mode) == ("claude-code", "sonnet", "default")
        assert other.model_row_id is None and other.options == {}
        clock.advance(5)
        store.update_model_row(row.id, metadata={"cliAgent": CLI_AGENT})
        assert store.get_session(linked.id) == linked  # no mirrored field changed
        clock.advance(5)
        store.update_model_row(row.id, adapter="codex", model="gpt-5", permission_mode="plan")
        after = store.get_session(linked.id)
        assert (after.adapter, after.model, after.permission_mode) == ("codex", "gpt-5", "plan")
        assert after.updated_at == clock.now and after.options == {"transport": "stream"}
        assert store.get_session(other.id) == other


def test_a_session_from_a_row_must_carry_the_rows_values(store: Store) -> None:
    row = _row(store, model="sonnet", permission_mode="plan")
    with pytest.raises(ConflictError, match=r"differs in model, permission_mode"):
        store.create_session(workspace="/w", adapter="claude-code", model_row_id=row.id)
    with pytest.raises(ConflictError, match="adapter='claude-code'"):
        store.create_session(
            workspace="/w", adapter="codex", model="sonnet", permission_mode="plan", model_row_id=row.id
        )
    assert store.list_sessions() == []


def test_session_options_are_checked(store: Store) -> None:
    with pytest.raises(InvalidRequestError, match="options must be an object"):
        store.create_session(workspace="/w", adapter="claude-code", options=["x"])  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match=r"options\.sharedUse must be a boolean"):
        store.create_session(workspace="/w", adapter="claude-code", options={"sharedUse": "no"})
    with pytest.raises(
        InvalidRequestError, match=r"options\.passEnv is not accepted on a session.*model row"
    ):
        store.create_session(workspace="/w", adapter="claude-code", options={"passEnv": ["AWS_PROFILE"]})
    session = store.create_session(
        workspace="/w", adapter="vibe", options={"transport": "headless", "k": [1]}
    )
    assert store.get_session(session.id).options == {"transport": "headless", "k": [1]}


# Delete -------------------------------------------------------------------------------------


def test_delete_detaches_sessions_and_keeps_them_working(store_url: str) -> None:
    clock = FakeClock()
    with Store.open(store_url, clock=clock) as store:
        row = _row(
            store,
            model="sonnet",
            permission_mode="full",
            binary="/opt/claude",
            additive_flags=["--no-chrome"],
            metadata={"cliAgent": {"inheritApiKeys": True, "transport": "stream"}},
        )
        keep = _row(store, "kept")
        first = _from_row(store, row, options={"transport": "exec"})
        second = _from_row(store, row)
        run = store.create_run(session_id=first.id, prompt="p", owner="me")
        clock.advance(3)
        store.delete_model_row(row.name)
        with pytest.raises(NotFoundError):
            store.get_model_row(row.id)
        assert [r.name for r in store.list_model_rows()] == [keep.name]
        one, two = store.get_session(first.id), store.get_session(second.id)
        for session in (one, two):
            assert session.model_row_id is None and session.updated_at == clock.now
            assert (session.adapter, session.model, session.permission_mode) == (
                "claude-code",
                "sonnet",
                "full",
            )
        # the row's cliAgent is folded under the session's own options (session keys win)
        assert one.options == {"inheritApiKeys": True, "transport": "exec"}
        assert two.options == {"inheritApiKeys": True, "transport": "stream"}
        assert store.create_run(session_id=first.id, prompt="again", owner="me").turn_index == 2
        assert store.get_run(run.id).session_id == first.id
        # a row without sessions or cliAgent deletes cleanly, by id
        store.delete_model_row(keep.id)
        assert store.list_model_rows() == []


def test_a_deleted_rows_name_can_be_reused(store: Store) -> None:
    old = _row(store, "reused")
    store.delete_model_row("reused")
    new = _row(store, "reused", adapter="codex")
    assert new.id != old.id and store.get_model_row("reused").adapter == "codex"


def test_delete_racing_session_creation_never_leaves_a_dangling_reference(store: Store) -> None:
    row = _row(store, "racy")
    barrier = threading.Barrier(2)

    def create() -> object:
        barrier.wait(timeout=10)
        try:
            return _from_row(store, row)
        except NotFoundError as exc:
            return exc

    def remove() -> None:
        barrier.wait(timeout=10)
        store.delete_model_row(row.id)

    with ThreadPoolExecutor(max_workers=2) as pool:
        created = pool.submit(create)
        pool.submit(remove).result(timeout=30)
        outcome = created.result(timeout=30)
    for session in store.list_sessions():
        assert session.model_row_id is None
    assert isinstance(outcome, NotFoundError) or store.get_session(outcome.id).model_row_id is None  # type: ignore[attr-defined]
