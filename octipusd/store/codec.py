"""What the store's aggregate modules share: ids, the clock, JSON columns, list limits, and the
declarations (for type checking) of what each mixin of :class:`~octipusd.store.Store` uses from
the others."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Connection
from sqlmodel import Session as DbSession

from octipusd.errors import InvalidRequestError
from octipusd.store.models import ApprovalRow, PermissionGrantRow, RunRow, SessionRow
from octipusd.store.records import ApprovalStatus, Session

if TYPE_CHECKING:
    from octipusd.errors import DatabaseTimeoutError
    from octipusd.store.engine import DatabaseTimeouts
    from octipusd.store.journal_store import ToolAction
    from octipusd.store.policy_view import PolicyChange, PolicyView
    from octipusd.store.records import PermissionGrant

E = TypeVar("E", bound=Enum)

__all__ = [
    "StoreMixin",
    "check_limit",
    "dump_object",
    "enum_member",
    "iso",
    "load_object",
    "load_strings",
    "new_id",
    "utcnow",
]


def new_id() -> str:
    """A new record id: 32 hex characters."""
    return uuid.uuid4().hex


def utcnow() -> datetime:
    """The system clock, aware UTC (the store's default clock)."""
    return datetime.now(UTC)


def iso(moment: datetime | None) -> str:
    """``moment`` to the second for a message, or ``"an unknown time"``."""
    return moment.astimezone(UTC).isoformat(timespec="seconds") if moment is not None else "an unknown time"


def dump_object(value: dict[str, Any], what: str) -> str:
    """Encode a JSON object column (compact, no NaN).

    Raises:
        InvalidRequestError: ``value`` is not a dict or not JSON-serialisable (``what`` names it).
    """
    if not isinstance(value, dict):
        raise InvalidRequestError(f"{what} must be a dict (a JSON object), not {type(value).__name__}")
    try:
        return json.dumps(value, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"{what} is not JSON-serialisable: {exc}") from exc


def load_object(text: str) -> dict[str, Any]:
    """Decode a JSON object column (a non-object is wrapped as ``{"value": ...}``)."""
    value = json.loads(text)
    return value if isinstance(value, dict) else {"value": value}


def load_strings(text: str) -> tuple[str, ...]:
    """Decode a JSON list-of-strings column (anything else is empty)."""
    value = json.loads(text)
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def check_limit(limit: int) -> None:
    """Refuse a list limit below 1 (:class:`~octipusd.errors.InvalidRequestError`)."""
    if limit < 1:
        raise InvalidRequestError(f"limit must be at least 1, got {limit}")


def enum_member(kind: type[E], value: object, what: str) -> E:
    """``value`` as a member of the string enum ``kind``.

    Raises:
        InvalidRequestError: It is none of them; the message lists the accepted values.
    """
    try:
        return kind(value)
    except ValueError:
        accepted = ", ".join(str(m.value) for m in kind)
        raise InvalidRequestError(f"{what} {value!r} is not one of {accepted}") from None


class StoreMixin:
    """Base of the aggregate mixins of :class:`~octipusd.store.Store`: declares, for the type
    checker only, what :class:`Store` itself and the sibling mixins provide."""

    if TYPE_CHECKING:
        _clock: Callable[[], datetime]
        _sqlite: bool
        _timeouts: DatabaseTimeouts
        _policy_view: PolicyView

        def _tx(
            self, what: str, *, write: bool = False, transcript: bool = False
        ) -> AbstractContextManager[DbSession]: ...

        def _timed_out(self, what: str, detail: str) -> DatabaseTimeoutError: ...

        def _policy_change(
            self, what: str, *, needed: bool = True
        ) -> AbstractContextManager[PolicyChange]: ...

        @staticmethod
        def _grant_record(row: PermissionGrantRow) -> PermissionGrant: ...

        def _count_grant_use(self, db: DbSession, change: PolicyChange, grant_id: str) -> bool: ...

        def _link_invocation(
            self, db: DbSession, invocation_id: str, token: str, approval_id: str
        ) -> None: ...

        def get_session(self, session_id: str) -> Session: ...

        def _core(
            self, what: str, *, write: bool = False, single: bool = False, transcript: bool = False
        ) -> AbstractContextManager[Connection]: ...

        @staticmethod
        def _lock_session(db: DbSession, session_id: str) -> SessionRow: ...

        @staticmethod
        def _session_record(row: SessionRow) -> Session: ...

        @staticmethod
        def _lock_run(db: DbSession, run_id: str) -> RunRow: ...

        @staticmethod
        def _run_of_session(db: DbSession, run_id: str, session_id: str, what: str = "run") -> RunRow: ...

        def forget_event_sequences(self, run_ids: Sequence[str]) -> None: ...

        @staticmethod
        def _get_approval_row(db: DbSession, approval_id: str) -> ApprovalRow: ...

        @staticmethod
        def _resolve_pending_for_runs(
            db: DbSession, run_ids: list[str], status: ApprovalStatus, reason: str | None, now: datetime
        ) -> int: ...

        @staticmethod
        def _delete_actions(db: DbSession, ids: list[str]) -> None: ...

        def _grant_row(
            self,
            *,
            tool_id: str,
            level: str,
            created_by: str,
            matcher: str | None = None,
            session_id: str | None = None,
            workspace: str | None = None,
            expires_at: datetime | None = None,
            max_uses: int | None = None,
            approval_id: str | None = None,
            note: str | None = None,
        ) -> PermissionGrantRow: ...

        def _acknowledge_actions(
            self, db: DbSession, review_id: str, action_ids: Iterable[str], by: str, now: datetime
        ) -> None: ...

        def _note_refused_review(
            self,
            db: DbSession,
            review_id: str,
            action_ids: Iterable[str],
            by: str,
            reason: str | None,
            now: datetime,
        ) -> None: ...

        def _follow_approval(
            self, db: DbSession, approval_id: str, status: str, reason: str | None
        ) -> None: ...

        def _lock_key(self, conn: Connection, user: str, tool: str, key: str) -> None: ...

        @staticmethod
        def _later_than(action: ToolAction) -> list[Any]: ...

        def _finish_action(
            self,
            conn: Connection,
            action_id: str,
            *,
            outcome: str,
            detail: str | None,
            data: dict[str, Any] | None,
            answered: bool = False,
        ) -> bool: ...
