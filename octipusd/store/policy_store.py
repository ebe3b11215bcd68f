"""Store methods for the permission policy and shared spaces (mixed into :class:`Store`).

Stored rules (``permission_rules``: the runtime "per-tool policies" of seed 003), scoped grants
(``permission_grants``: conditions, expiry, usage limits), shared spaces and their members
(``spaces``, ``space_members``, FACTS.md §5) and the flow guard's session flags
(``sessions.flow_label``, FACTS.md §9). Same conventions as ``repository.py``: one committed
transaction per method, frozen records out, "exactly once" changes as conditional ``UPDATE``
statements (a grant's use is counted by ``UPDATE ... WHERE uses < max_uses``).

The methods that change rules, grants or flow labels also keep the in-memory
:class:`~octipusd.store.policy_view.PolicyView` current (published after their transaction
committed), which the permission gate reads instead of the database: :meth:`policy_entries` and
:meth:`flow_label`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from sqlalchemy import or_, update
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session as DbSession, col, select

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.store.codec import StoreMixin, enum_member, new_id
from octipusd.store.models import PermissionGrantRow, PermissionRuleRow, SessionRow, SpaceMemberRow, SpaceRow
from octipusd.store.policy_view import PolicyChange, PolicyEntries, PolicyView
from octipusd.store.records import PermissionGrant, PermissionRule, Space, SpaceRole

__all__ = ["LEVELS", "PolicyStoreMixin"]

#: Permission levels a stored rule or grant may carry.
LEVELS: tuple[str, ...] = ("allow", "ask", "deny")


def _check_level(level: str) -> str:
    if level not in LEVELS:
        raise InvalidRequestError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    return level


def _rule(row: PermissionRuleRow) -> PermissionRule:
    return PermissionRule(
        id=row.id, level=row.level, rule=row.rule, created_by=row.created_by, created_at=row.created_at
    )


def _grant(row: PermissionGrantRow) -> PermissionGrant:
    return PermissionGrant(
        id=row.id,
        tool_id=row.tool_id,
        matcher=row.matcher,
        level=row.level,
        session_id=row.session_id,
        workspace=row.workspace,
        expires_at=row.expires_at,
        max_uses=row.max_uses,
        uses=row.uses,
        revoked_at=row.revoked_at,
        revoked_by=row.revoked_by,
        created_by=row.created_by,
        created_at=row.created_at,
        approval_id=row.approval_id,
        note=row.note,
    )


def _space(row: SpaceRow, members: Iterable[SpaceMemberRow]) -> Space:
    return Space(
        id=row.id,
        name=row.name,
        created_by=row.created_by,
        created_at=row.created_at,
        archived_at=row.archived_at,
        members={m.user: SpaceRole(m.role) for m in members},
    )


class PolicyStoreMixin(StoreMixin):
    """Rules, grants, spaces and flow labels; see the module docstring.

    Mixed into :class:`~octipusd.store.Store`, which provides ``_tx``, ``_clock`` and ``_policy_view``.
    """

    _grant_record = staticmethod(_grant)

    # The in-memory view ------------------------------------------------------------------

    @contextmanager
    def _policy_change(self, what: str, *, needed: bool = True) -> Iterator[PolicyChange]:
        """Hold the view's lock for one write of rules or grants; the :class:`PolicyChange` the
        block records is published only if the block (and so its transaction) completes.

        Args:
            what: The write, for a timeout's message.
            needed: False when this call changes no rule or grant (then nothing is held).

        Raises:
            DatabaseTimeoutError: another change held the view past the statement timeout.
        """
        change = PolicyChange()
        if not needed:
            yield change
            return
        view = self._policy_view
        if not view.lock.acquire(timeout=self._timeouts.statement_seconds):
            raise self._timed_out(what, "another change of the permission rules or grants held them")
        try:
            yield change
            view.publish(change, self._clock())
        finally:
            view.lock.release()

    @property
    def policy_view(self) -> PolicyView:
        """The in-memory view of rules, grants and flow labels (read it without I/O; the store's
        writes keep it current)."""
        return self._policy_view

    def policy_entries(self) -> PolicyEntries:
        """The stored rules and the grants neither revoked nor used up, from memory.

        The first call reads them from the database; later ones return the view the store's own
        writes keep current (no I/O). :attr:`PolicyView.entries` is the same without the first read.

        Raises:
            StoreError: the first read failed.
        """
        view = self._policy_view
        entries = view.entries
        if entries is not None:
            return entries
        with self._policy_change("loading the permission rules and grants"):
            entries = view.entries
            if entries is None:
                entries = view.load(self.list_rules(), self.list_grants())
            return entries

    def flow_label(self, session_id: str) -> str:
        """The session's flow label (``sessions.flow_label``), from memory once read.

        Raises:
            NotFoundError: no such session.
            StoreError: the database failed.
        """
        view = self._policy_view
        label = view.flow_label(session_id)
        if label is not None:
            return label
        writes = view.label_writes()
        label = self.get_session(session_id).flow_label
        view.remember_label(session_id, label, read_after=writes)
        return label

    # Stored rules ------------------------------------------------------------------------

    def add_rule(self, *, level: str, rule: str, created_by: str) -> PermissionRule:
        """Store a rule (its syntax is checked by the caller, :func:`octipusd.policy.rules.parse_rule`).

        Args:
            level: ``allow``, ``ask`` or ``deny``.
            rule: Rule text, e.g. ``cli-native:Bash(git:*)``.
            created_by: Who adds it.

        Returns:
            The stored rule.

        Raises:
            InvalidRequestError: unknown level or empty rule.
            ConflictError: the same rule is already stored at that level.
            StoreError: the database failed.
        """
        _check_level(level)
        text = rule.strip()
        if not text:
            raise InvalidRequestError("a rule must not be empty")
        row = PermissionRuleRow(
            id=new_id(), level=level, rule=text, created_by=created_by, created_at=self._clock()
        )
        with (
            self._policy_change("adding a permission rule") as change,
            self._tx("adding a permission rule", write=True) as db,
        ):
            taken = db.exec(
                select(PermissionRuleRow.id).where(
                    col(PermissionRuleRow.level) == level, col(PermissionRuleRow.rule) == text
                )
            ).first()
            if taken is not None:
                raise ConflictError(f"{level} rule {text!r} already exists (id {taken})")
            db.add(row)
            try:
                db.flush()
            except IntegrityError as exc:  # a concurrent writer added it between check and insert
                raise ConflictError(f"{level} rule {text!r} already exists") from exc
            record = _rule(row)
            change.put_rule(record)
        return record

    def list_rules(self) -> list[PermissionRule]:
        """Return every stored rule, oldest first (the order they are evaluated in)."""
        with self._tx("listing permission rules") as db:
            rows = db.exec(
                select(PermissionRuleRow).order_by(
                    col(PermissionRuleRow.created_at), col(PermissionRuleRow.id)
                )
            ).all()
            return [_rule(r) for r in rows]

    def remove_rule(self, rule_id: str) -> PermissionRule:
        """Delete a stored rule by id and return it.

        Raises:
            NotFoundError: no such rule.
        """
        with (
            self._policy_change(f"removing permission rule {rule_id}") as change,
            self._tx(f"removing permission rule {rule_id}", write=True) as db,
        ):
            row = db.get(PermissionRuleRow, rule_id)
            if row is None:
                raise NotFoundError(
                    f"permission rule {rule_id} not found; `octipusctl rules list` shows the ids"
                )
            record = _rule(row)
            db.delete(row)
            change.drop_rule(rule_id)
        return record

    # Scoped grants -----------------------------------------------------------------------

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
    ) -> PermissionGrantRow:
        _check_level(level)
        if not tool_id.strip():
            raise InvalidRequestError("a grant needs a tool id")
        if max_uses is not None and max_uses < 1:
            raise InvalidRequestError(f"max_uses must be at least 1, got {max_uses}")
        if workspace is not None and not workspace.startswith("/"):
            raise InvalidRequestError(f"a grant's workspace must be an absolute path, got {workspace!r}")
        return PermissionGrantRow(
            id=new_id(),
            tool_id=tool_id.strip(),
            matcher=matcher,
            level=level,
            session_id=session_id,
            workspace=workspace,
            expires_at=expires_at,
            max_uses=max_uses,
            uses=0,
            created_by=created_by,
            created_at=self._clock(),
            approval_id=approval_id,
            note=note,
        )

    def create_grant(self, **fields: Any) -> PermissionGrant:
        """Store a scoped grant.

        Args:
            **fields: ``tool_id`` (str), ``level`` (allow/ask/deny), ``created_by`` (str), and
                optionally ``matcher``, ``session_id``, ``workspace`` (absolute path),
                ``expires_at`` (aware datetime), ``max_uses`` (>= 1), ``approval_id``, ``note``.

        Returns:
            The grant (``uses`` 0).

        Raises:
            InvalidRequestError: a bad level, tool id, workspace or ``max_uses``.
            StoreError: the database failed (e.g. an unknown ``session_id``).
        """
        row = self._grant_row(**fields)
        with self._policy_change("creating a permission grant") as change:
            with self._tx("creating a permission grant", write=True) as db:
                db.add(row)
            record = _grant(row)
            change.put_grant(record)
        return record

    def get_grant(self, grant_id: str) -> PermissionGrant:
        """Return one grant.

        Raises:
            NotFoundError: no such grant.
        """
        with self._tx(f"reading grant {grant_id}") as db:
            row = db.get(PermissionGrantRow, grant_id)
            if row is None:
                raise NotFoundError(f"grant {grant_id} not found")
            return _grant(row)

    def list_grants(self, *, include_inactive: bool = False) -> list[PermissionGrant]:
        """Return grants, oldest first; by default only those not revoked, expired or used up."""
        now = self._clock()
        query = select(PermissionGrantRow)
        if not include_inactive:
            query = query.where(
                col(PermissionGrantRow.revoked_at).is_(None),
                or_(col(PermissionGrantRow.expires_at).is_(None), col(PermissionGrantRow.expires_at) > now),
                or_(
                    col(PermissionGrantRow.max_uses).is_(None),
                    col(PermissionGrantRow.uses) < col(PermissionGrantRow.max_uses),
                ),
            )
        query = query.order_by(col(PermissionGrantRow.created_at), col(PermissionGrantRow.id))
        with self._tx("listing permission grants") as db:
            return [_grant(r) for r in db.exec(query).all()]

    def use_grant(self, grant_id: str) -> bool:
        """Count one use of a grant, exactly once, if it still applies.

        One conditional ``UPDATE``: not revoked, not expired, ``uses < max_uses``. Of two
        concurrent calls on a grant with one use left, exactly one returns True.

        Returns:
            True if the use was counted (the call may proceed on this grant), False if the grant
            was revoked, expired or used up meanwhile.
        """
        with (
            self._policy_change(f"using grant {grant_id}") as change,
            self._tx(f"using grant {grant_id}", write=True) as db,
        ):
            return self._count_grant_use(db, change, grant_id)

    def _count_grant_use(self, db: DbSession, change: PolicyChange, grant_id: str) -> bool:
        """Inside a policy change's transaction: count one use of ``grant_id`` if it still applies
        (see :meth:`use_grant`); True if counted."""
        now = self._clock()
        result = db.exec(
            update(PermissionGrantRow)
            .where(
                col(PermissionGrantRow.id) == grant_id,
                col(PermissionGrantRow.revoked_at).is_(None),
                or_(col(PermissionGrantRow.expires_at).is_(None), col(PermissionGrantRow.expires_at) > now),
                or_(
                    col(PermissionGrantRow.max_uses).is_(None),
                    col(PermissionGrantRow.uses) < col(PermissionGrantRow.max_uses),
                ),
            )
            .values(uses=PermissionGrantRow.uses + 1)
            .execution_options(synchronize_session=False)
        )
        counted = bool(result.rowcount)
        if counted:
            change.count_use(grant_id)
        return counted

    def revoke_grant(self, grant_id: str, *, revoked_by: str) -> PermissionGrant:
        """Revoke a grant (idempotent: an already revoked grant keeps its first revocation).

        Raises:
            NotFoundError: no such grant.
        """
        with (
            self._policy_change(f"revoking grant {grant_id}") as change,
            self._tx(f"revoking grant {grant_id}", write=True) as db,
        ):
            db.exec(
                update(PermissionGrantRow)
                .where(col(PermissionGrantRow.id) == grant_id, col(PermissionGrantRow.revoked_at).is_(None))
                .values(revoked_at=self._clock(), revoked_by=revoked_by)
                .execution_options(synchronize_session=False)
            )
            row = db.get(PermissionGrantRow, grant_id)
            if row is None:
                raise NotFoundError(f"grant {grant_id} not found")
            db.refresh(row)
            record = _grant(row)
            change.put_grant(record)
            return record

    # Flow guard labels -------------------------------------------------------------------

    def add_flow_flags(self, session_id: str, flags: Iterable[str]) -> str:
        """Add flags to a session's flow label (flags are never removed); returns the new label.

        The session row is locked for the read-modify-write, so concurrent additions all stay.

        Raises:
            InvalidRequestError: a flag contains a comma or is empty.
            NotFoundError: no such session.
        """
        wanted = set()
        for flag in flags:
            if not flag or "," in flag:
                raise InvalidRequestError(f"a flow flag must be a non-empty word, got {flag!r}")
            wanted.add(flag)
        with self._tx(f"adding flow flags to session {session_id}", write=True) as db:
            row = db.exec(
                select(SessionRow).where(col(SessionRow.id) == session_id).with_for_update(key_share=True)
            ).first()
            if row is None:
                raise NotFoundError(f"session {session_id} not found")
            current = {f for f in row.flow_label.split(",") if f}
            label = ",".join(sorted(current | wanted))
            if label != row.flow_label:
                row.flow_label = label
                db.add(row)
        self._policy_view.remember_label(session_id, label)
        return label

    # Spaces ------------------------------------------------------------------------------

    @staticmethod
    def _space_row(db: DbSession, id_or_name: str, *, lock: bool = False) -> SpaceRow:
        query = select(SpaceRow).where(or_(col(SpaceRow.id) == id_or_name, col(SpaceRow.name) == id_or_name))
        if lock:
            query = query.with_for_update()
        row = db.exec(query).first()
        if row is None:
            raise NotFoundError(f"space {id_or_name!r} not found; `octipusctl spaces list` shows the spaces")
        return row

    @staticmethod
    def _members(db: DbSession, space_id: str) -> list[SpaceMemberRow]:
        return list(
            db.exec(
                select(SpaceMemberRow)
                .where(col(SpaceMemberRow.space_id) == space_id)
                .order_by(col(SpaceMemberRow.user))
            ).all()
        )

    def create_space(self, *, name: str, created_by: str) -> Space:
        """Create a shared space; its creator is its first owner.

        Raises:
            InvalidRequestError: empty name.
            ConflictError: the name is taken.
        """
        name = name.strip()
        if not name:
            raise InvalidRequestError("a space needs a name")
        now = self._clock()
        row = SpaceRow(id=new_id(), name=name, created_by=created_by, created_at=now)
        with self._tx("creating a space", write=True) as db:
            if db.exec(select(SpaceRow).where(col(SpaceRow.name) == name)).first() is not None:
                raise ConflictError(f"a space named {name!r} already exists")
            db.add(row)
            db.flush()
            owner = SpaceMemberRow(space_id=row.id, user=created_by, role=SpaceRole.OWNER.value, added_at=now)
            db.add(owner)
            return _space(row, [owner])

    def get_space(self, id_or_name: str) -> Space:
        """Return a space with its members (read fresh: roles are read on every request).

        Raises:
            NotFoundError: no such space.
        """
        with self._tx(f"reading space {id_or_name}") as db:
            row = self._space_row(db, id_or_name)
            return _space(row, self._members(db, row.id))

    def list_spaces(self) -> list[Space]:
        """Return every space with its members, by name."""
        with self._tx("listing spaces") as db:
            rows = db.exec(select(SpaceRow).order_by(col(SpaceRow.name))).all()
            return [_space(r, self._members(db, r.id)) for r in rows]

    def set_space_member(self, id_or_name: str, user: str, role: SpaceRole | str) -> Space:
        """Add a member or change a member's role.

        Raises:
            InvalidRequestError: unknown role or empty user.
            NotFoundError: no such space.
            ConflictError: the space is archived, or the change would leave it without an owner.
        """
        wanted = enum_member(SpaceRole, role, "space role")
        if not user.strip():
            raise InvalidRequestError("a member needs a user name")
        with self._tx(f"setting a member of space {id_or_name}", write=True) as db:
            row = self._space_row(db, id_or_name, lock=True)
            if row.archived_at is not None:
                raise ConflictError(f"space {row.name!r} is archived")
            members = {m.user: m for m in self._members(db, row.id)}
            existing = members.get(user)
            owners = [u for u, m in members.items() if m.role == SpaceRole.OWNER.value]
            if existing is not None and owners == [user] and wanted is not SpaceRole.OWNER:
                raise ConflictError(
                    f"{user} is the last owner of space {row.name!r}; make another owner first"
                )
            if existing is None:
                db.add(SpaceMemberRow(space_id=row.id, user=user, role=wanted.value, added_at=self._clock()))
            else:
                existing.role = wanted.value
                db.add(existing)
            db.flush()
            return _space(row, self._members(db, row.id))

    def remove_space_member(self, id_or_name: str, user: str) -> Space:
        """Remove a member.

        Raises:
            NotFoundError: no such space or member.
            ConflictError: the member is the last owner.
        """
        with self._tx(f"removing a member of space {id_or_name}", write=True) as db:
            row = self._space_row(db, id_or_name, lock=True)
            members = {m.user: m for m in self._members(db, row.id)}
            member = members.get(user)
            if member is None:
                raise NotFoundError(f"{user} is not a member of space {row.name!r}")
            owners = [u for u, m in members.items() if m.role == SpaceRole.OWNER.value]
            if owners == [user]:
                raise ConflictError(
                    f"{user} is the last owner of space {row.name!r}; make another owner first"
                )
            db.delete(member)
            db.flush()
            return _space(row, self._members(db, row.id))

    def archive_space(self, id_or_name: str) -> Space:
        """Archive a space (idempotent); an archived space refuses writes and new sessions.

        Raises:
            NotFoundError: no such space.
        """
        with self._tx(f"archiving space {id_or_name}", write=True) as db:
            row = self._space_row(db, id_or_name, lock=True)
            if row.archived_at is None:
                row.archived_at = self._clock()
                db.add(row)
            return _space(row, self._members(db, row.id))
