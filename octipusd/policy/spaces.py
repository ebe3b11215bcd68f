"""Who may run which agent in a shared space (seed 003 "In shared spaces", FACTS.md §5).

Pure checks over a :class:`~octipusd.store.records.Space` read fresh from the store on every
request (roles are never cached):

* a session in an archived space takes no turns (409);
* someone who is not a member gets 404 (the space's existence is not revealed); a member
  whose role lacks the right gets 403: viewers cannot run the agent; a commenter or a guest
  may run it only with read and comment tools, which a CLI agent (with its write tools) cannot
  be limited to, so on this CLI-only install only an owner or editor runs a turn (the refusal
  says so);
* an install CLI model is the operator's personal subscription: it serves a space only when
  its model row sets ``metadata.cliAgent.sharedUse: true``;
* an adapter without a declared space mode (Mistral Vibe) is refused.
"""

from __future__ import annotations

from octipusd.adapter import Adapter
from octipusd.errors import ConflictError, ForbiddenError, NotFoundError
from octipusd.store.records import ModelRow, Space, SpaceRole

__all__ = ["RUN_ROLES", "check_space_comment", "check_space_model", "check_space_turn"]

#: Roles that may run a CLI agent (with write tools) in a space (FACTS.md §5 roles table).
RUN_ROLES: frozenset[SpaceRole] = frozenset({SpaceRole.OWNER, SpaceRole.EDITOR})


def check_space_model(space: Space, row: ModelRow | None, adapter: Adapter | None) -> None:
    """Refuse a CLI model that may not serve ``space``.

    Args:
        space: The space.
        row: The session's model row (None: the session was made without one).
        adapter: The session's adapter (None: not installed); its declared
            :attr:`~octipusd.adapter.Adapter.space_mode` (None: it has none) says whether it can
            run in a space.

    Raises:
        ConflictError: no model row, the row does not set ``sharedUse: true``, or the adapter
            declares no space mode.
    """
    if row is None:
        raise ConflictError(
            f"a session in space {space.name!r} needs a model row with metadata.cliAgent.sharedUse: true "
            "(an install CLI model is the operator's personal subscription); create one with "
            "octipusctl models create NAME --adapter claude-code --meta cliAgent.sharedUse=true"
        )
    if row.cli_agent.get("sharedUse") is not True:
        raise ConflictError(
            f"model row {row.name!r} does not set metadata.cliAgent.sharedUse: true, so it does not serve "
            f"shared spaces (it is the operator's personal subscription); set it on the row (octipusctl models update "
            f"{row.name} --meta cliAgent.sharedUse=true) to let it serve "
            f"space {space.name!r}"
        )
    if adapter is None or adapter.space_mode is None:
        name = row.adapter if adapter is None else adapter.name
        raise ConflictError(
            f"adapter {name} declares no space mode and is refused in shared spaces; use a Claude Code, "
            "GLM, Kimi, Codex or Antigravity model row with metadata.cliAgent.sharedUse: true"
        )


def check_space_turn(space: Space, author: str) -> SpaceRole:
    """Check that ``author`` may run the space's CLI agent now; return their role.

    Raises:
        NotFoundError: ``author`` is not a member (404, FACTS.md §5; the message names no space).
        ConflictError: the space is archived.
        ForbiddenError: a viewer (cannot run the agent), or a commenter or guest (they may run it
            only with read and comment tools, and every agent here is a CLI with write tools).
    """
    role = space.members.get(author)
    if role is None:
        raise NotFoundError(
            f"{author} is not a member of this space; an owner can add them (octipusctl spaces member)"
        )
    if space.archived_at is not None:
        raise ConflictError(f"space {space.name!r} is archived; it takes no turns")
    if role is SpaceRole.VIEWER:
        raise ForbiddenError(f"{author} is a viewer of space {space.name!r}; viewers cannot run the agent")
    if role not in RUN_ROLES:
        who = role.value
        raise ForbiddenError(
            f"{author} is a {who} of space {space.name!r}, and only an owner or an editor may run a turn "
            f"here: a {who} may run the agent with read and comment tools only, but every agent of "
            "this install is a vendor CLI that works with write tools (edits, shell commands), so "
            f"it cannot run a {who}'s turn; ask an owner or editor to run it, or an owner to make "
            f"you an editor (octipusctl spaces member {space.name} {author} editor)"
        )
    return role


def check_space_comment(space: Space, author: str) -> SpaceRole:
    """Check that ``author`` may comment in the space now (e.g. give feedback on its session's work
    plan, FACTS.md §5 "comment": every role but viewer); return their role.

    Raises:
        NotFoundError: ``author`` is not a member (404; the message names no space).
        ConflictError: the space is archived (409: an archived space answers writes so).
        ForbiddenError: a viewer (403).
    """
    role = space.members.get(author)
    if role is None:
        raise NotFoundError(
            f"{author} is not a member of this space; an owner can add them (octipusctl spaces member)"
        )
    if space.archived_at is not None:
        raise ConflictError(f"space {space.name!r} is archived; it takes no feedback")
    if role is SpaceRole.VIEWER:
        raise ForbiddenError(f"{author} is a viewer of space {space.name!r}; viewers cannot comment")
    return role
