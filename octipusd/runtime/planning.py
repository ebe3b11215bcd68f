"""The frozen plan of one turn: everything a run needs, read once before it starts.

:func:`read_basis` reads the session, its model row (and a root turn's reuse records with them),
its space and the adapter's binary and checks them (a missing adapter, binary or workspace fails
the run before anything is connected); :func:`plan_turn` adds the run's tools (Octipus's and the connected ``mcpServers``
ones), the stable instructions, the resolved workspace and the session fingerprint (seed 003
"Session reuse"). The supervisor then never re-reads the session, row or space during the turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from octipusd.adapter import Adapter, PermissionMode
from octipusd.connectors import ConnectorSet
from octipusd.environment import ROW_ONLY_OPTIONS
from octipusd.errors import ConflictError, ExecutableNotFoundError, NotFoundError
from octipusd.policy.spaces import check_space_model
from octipusd.runner.executables import Resolution, resolve_executable
from octipusd.runtime.children import LAZY_DISCOVERY_TOOLS
from octipusd.runtime.levels import may_spawn
from octipusd.runtime.sessions import fingerprint, provider_identity, tool_schema
from octipusd.settings_swarm import LevelDefaults
from octipusd.store.aio import in_thread
from octipusd.store.records import Checkpoint, ModelRow, Run, Session, VendorSession
from octipusd.store.repository import Store
from octipusd.store.turn_store import TurnRecords
from octipusd.toolkit import ToolSpec
from octipusd.tools import (
    MONITOR_TOOLS,
    PIPELINE_TOOLS,
    STAGE_TOOLS,
    child_tools,
    root_tools,
    run_instructions,
)

__all__ = [
    "TurnBasis",
    "TurnPlan",
    "model_row",
    "plan_turn",
    "positive_int",
    "read_basis",
    "stage_tools",
]


@dataclass(frozen=True)
class TurnBasis:
    """What the session says about this turn, checked.

    Attributes:
        session: The session as read when the turn started.
        adapter: Its adapter.
        row: Its model row, or None (no row, or deleted: the session keeps a copy).
        options: The row's ``metadata.cliAgent`` merged with the session's options.
        flags: The row's additive CLI flags.
        binary: The vendor binary to execute.
        workspace: The session's workspace.
        real_workspace: The workspace with symlinks resolved (read with the session).
        mode: The vendor permission mode of this invocation (plan mode overrides the row's).
        in_space: Whether the session belongs to a space.
        vendor_session: A root turn's stored vendor record under its adapter's name, read with the
            session (None: none, or a child run).
        checkpoint: A root turn's latest checkpoint of its clear generation, read with the session.
    """

    session: Session
    adapter: Adapter
    row: ModelRow | None
    options: Mapping[str, Any]
    flags: tuple[str, ...]
    binary: str
    workspace: Path
    real_workspace: Path
    mode: PermissionMode
    in_space: bool
    vendor_session: VendorSession | None = None
    checkpoint: Checkpoint | None = None


@dataclass(frozen=True)
class TurnPlan:
    """The frozen plan of a turn (:class:`TurnBasis` plus the run's tools and fingerprint).

    Attributes:
        basis: The checked session facts.
        tools: The tools the run's bridge exposes.
        instructions: The run's stable system instructions (Octipus's, then a child's role prompt).
        real_workspace: The workspace with symlinks resolved (Claude scopes resume by it).
        fingerprint: The session fingerprint of this invocation (seed 003).
    """

    basis: TurnBasis
    tools: tuple[ToolSpec, ...]
    instructions: str
    real_workspace: Path
    fingerprint: str

    @property
    def session(self) -> Session:
        return self.basis.session

    @property
    def adapter(self) -> Adapter:
        return self.basis.adapter


async def model_row(store: Store, session: Session) -> ModelRow | None:
    """The session's model row, or None (no row, or deleted meanwhile: the session keeps a copy)."""
    if session.model_row_id is None:
        return None
    try:
        return await in_thread(store.get_model_row, session.model_row_id)
    except NotFoundError:
        return None


async def read_basis(
    store: Store,
    adapters: Mapping[str, Adapter],
    resolutions: Mapping[str, Resolution],
    run: Run,
    *,
    generation: int | None = None,
    model: str | None = None,
) -> TurnBasis:
    """Read and check what a turn of ``run``'s session needs (one store read, two in a space).

    Args:
        store: The store.
        adapters: The installed adapters, by name.
        resolutions: Their resolved executables, by adapter name.
        run: The run.
        generation: A root turn's clear generation: its reuse records are read with the session
            (:meth:`~octipusd.store.Store.read_turn`); None for a child run.
        model: A model row (name or id) the run uses instead of the session's (a pipeline stage's
            ``model``): its adapter, model and permission mode; the session's own options apply
            only when it has the session's adapter.

    Raises:
        ConflictError: the adapter is not installed, the workspace is gone, or (in a space) the
            row lost ``sharedUse`` or the adapter its space mode.
        ExecutableNotFoundError: the vendor binary cannot be resolved.
        NotFoundError: the session is gone, or the model row ``model``.
    """
    records, found = await in_thread(_read_session, store, run.session_id, generation)
    session, row = records.session, records.model_row
    if model is not None:
        row = await in_thread(store.get_model_row, model)
        session = dataclasses.replace(
            session,
            adapter=row.adapter,
            model=row.model,
            permission_mode=row.permission_mode,
            model_row_id=row.id,
            options=session.options if row.adapter == session.adapter else {},
        )
    adapter = adapters.get(session.adapter)
    if adapter is None:
        raise ConflictError(f"session uses adapter {session.adapter!r}, which is not installed")
    resolution = resolutions.get(adapter.name)
    if resolution is None:
        raise ExecutableNotFoundError(f"no executable resolution for adapter {adapter.name}")
    if row is not None and row.binary:  # the row's own binary overrides cliModels.<cli>.binaryPath
        resolution = await anyio.to_thread.run_sync(
            resolve_executable, adapter.name, row.binary, resolution.searched_path
        )
    binary = resolution.require()
    workspace = Path(session.workspace)
    if found is None:
        raise ConflictError(f"workspace {workspace} does not exist; create it or start a new session")
    if session.space_id is not None:  # the row may have lost sharedUse, the adapter its space mode
        check_space_model(await in_thread(store.get_space, session.space_id), row, adapter)
    return TurnBasis(
        session=session,
        adapter=adapter,
        row=row,
        options=turn_options(row, session),
        flags=tuple(row.additive_flags) if row else (),
        binary=binary,
        workspace=workspace,
        real_workspace=found,
        # plan mode overrides the row's vendor permission mode for this invocation (seed 003)
        mode=PermissionMode.PLAN if run.plan_mode else PermissionMode(session.permission_mode),
        in_space=session.space_id is not None,
        vendor_session=records.vendor_session,
        checkpoint=records.checkpoint,
    )


def _read_session(store: Store, session_id: str, generation: int | None) -> tuple[TurnRecords, Path | None]:
    """In one worker call: the turn's store records, and its workspace with symlinks resolved (None
    when it is not a folder)."""
    records = store.read_turn(session_id, generation=generation)
    workspace = Path(records.session.workspace)
    return records, workspace.resolve() if workspace.is_dir() else None


async def plan_turn(
    basis: TurnBasis,
    connected: ConnectorSet,
    *,
    depth: int,
    role: str | None,
    levels: LevelDefaults,
    own: tuple[ToolSpec, ...] | None = None,
) -> TurnPlan:
    """Freeze the plan: tools, instructions and fingerprint of this invocation.

    Args:
        basis: The checked session facts.
        connected: The run's connected ``mcpServers`` tools.
        depth: The run's depth (0 for a root run).
        role: A child's role, None for a root run.
        levels: ``swarm.levelDefaults``: a run whose level may not spawn gets no delegation tools
            (:func:`~octipusd.runtime.levels.may_spawn`, the rule ``spawn_child`` refuses by).
        own: The Octipus tools of the run when chosen for it (a pipeline stage's,
            :func:`stage_tools`); None: those of its role and level.
    """
    is_child = role is not None
    if own is None:
        delegates = may_spawn(levels, depth)
        own = child_tools(delegates) if is_child else root_tools(delegates)
    tools = (*own, *connected.tools)
    # seed 003: a root's fingerprint covers the full tool schemas, a keyed child's its tool ids
    # (without the lazy discovery tools)
    covered = (
        [{"name": t.name} for t in tools if t.name not in LAZY_DISCOVERY_TOOLS]
        if is_child
        else [tool_schema(t) for t in tools]
    )
    instructions = run_instructions(role)  # one constant text per role: the fingerprint stays stable
    # Claude's resume is scoped to the real working directory (observed.md §1.7): a workspace
    # path whose target moved is a different conversation scope, detected before spawning
    real = basis.real_workspace
    mode = basis.mode
    fp = fingerprint(
        adapter=basis.adapter.name,
        model=basis.session.model,
        # a space changes what the vendor may do natively: a conversation made outside one is
        # never resumed inside it, nor the reverse
        permission_mode=f"{mode}:space" if basis.in_space else str(mode),
        workspace=real,
        instructions=instructions,
        tools=covered,
        provider=provider_identity(basis.options),
        role=role,
    )
    return TurnPlan(basis=basis, tools=tools, instructions=instructions, real_workspace=real, fingerprint=fp)


#: The ``toolIds`` entry that selects every Octipus tool a root run may have.
ALL_TOOLS = "*"


def stage_tools(
    tool_ids: Sequence[str], levels: LevelDefaults
) -> tuple[tuple[ToolSpec, ...], tuple[str, ...]]:
    """The Octipus tools a pipeline stage worker's bridge publishes, from its step's ``toolIds``.

    An entry selects the tool of that name (``shell__run``), every tool of that family (``shell``
    selects ``shell__run``), or with ``*`` every tool a root run of the top level may have but the
    pipeline and monitor tools (:data:`~octipusd.tools.PIPELINE_TOOLS`, :data:`~octipusd.tools.MONITOR_TOOLS`,
    a root run's only). No entry
    at all gives a child's set without delegation (``get_cli_run_context``, ``get_work_plan``,
    ``shell__run``): a stage works, it does not plan the session or delegate unless its step says
    so; that set and ``*`` add the stage tools (:data:`~octipusd.tools.STAGE_TOOLS`: ``plan__add_items``,
    which a named list selects like any tool: ``plan__add_items`` or ``plan``).
    The vendor's native tools are not chosen here (the permission policy governs them).

    Returns:
        The tools, in their published order, and the entries that named no Octipus tool.
    """
    if not tool_ids:
        return (*child_tools(False), *STAGE_TOOLS), ()
    pipeline_tools = {
        t.name for t in (*PIPELINE_TOOLS, *MONITOR_TOOLS)
    }  # a root run's: a stage never steers them
    universe = tuple(t for t in root_tools(may_spawn(levels, 0)) if t.name not in pipeline_tools)
    if ALL_TOOLS in tool_ids:
        return (*universe, *STAGE_TOOLS), ()
    universe = (*universe, *STAGE_TOOLS)
    wanted = set(tool_ids)
    chosen = tuple(t for t in universe if t.name in wanted or t.name.split("__", 1)[0] in wanted)
    named = {t.name for t in universe} | {t.name.split("__", 1)[0] for t in universe}
    return chosen, tuple(i for i in tool_ids if i not in named)


def turn_options(row: ModelRow | None, session: Session) -> dict[str, Any]:
    """The row's ``metadata.cliAgent`` merged with the session's options; in a shared space the
    options that decide a vendor's credentials come from the row only (:data:`ROW_ONLY_OPTIONS`)."""
    own = session.options
    if session.space_id is not None:
        own = {k: v for k, v in own.items() if k not in ROW_ONLY_OPTIONS}
    return {**(row.cli_agent if row else {}), **own}


def positive_int(value: Any) -> int | None:
    """``metadata.cliAgent.maxTurns`` / ``maxTokens`` as a positive int, else None (vendor default)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
