"""Who a bridge call runs as: the run's identity, never the caller's arguments.

Seed 003 ("How tools and context work"): calls run "with the original agent, user, session
and workspace. The bridge never accepts an identity or session override from tool
arguments". The bridge therefore binds one :class:`RunIdentity` when it starts and hands
exactly that object to the host and to every tool; identity-looking keys that a caller puts
into tool arguments are dropped before anything sees them (:func:`strip_identity_arguments`).

Every process a run starts (the vendor CLI, ``shell__run`` commands, stdio MCP servers) carries
the environment marker :data:`RUN_MARKER`, by which a restarted daemon finds and stops them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RESERVED_IDENTITY_ARGUMENTS", "RUN_MARKER", "RunIdentity", "StageTag", "strip_identity_arguments"]

#: Environment variable naming the run (or connector session) a process belongs to.
RUN_MARKER = "OCTIPUS_RUN_ID"

#: Top-level argument keys that could be mistaken for an identity override. They are removed
#: from every call's arguments before authorization and execution; no Octipus tool schema
#: declares them.
RESERVED_IDENTITY_ARGUMENTS: frozenset[str] = frozenset(
    {
        "identity",
        "session_id",
        "sessionId",
        "run_id",
        "runId",
        "user",
        "user_id",
        "userId",
        "worker_id",
        "workerId",
    }
)


@dataclass(frozen=True)
class StageTag:
    """What a pipeline stage worker's run works for (stored on its run, carried in its identity).

    Attributes:
        pipeline_id: The pipeline.
        node_key: The graph node of the stage (``"n2"``), the journal's ``node_id``.
        stage: The stage's name.
        item_id: The plan item (a loop body's stage), or None.
        attempt_id: The stage attempt, the same across its resumes.
    """

    pipeline_id: str
    node_key: str
    stage: str
    item_id: str | None
    attempt_id: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for events and logs)."""
        return {
            "pipeline_id": self.pipeline_id,
            "node_key": self.node_key,
            "stage": self.stage,
            "item_id": self.item_id,
            "attempt_id": self.attempt_id,
        }


@dataclass(frozen=True)
class RunIdentity:
    """The identity every bridge call of one run executes with.

    Attributes:
        run_id: The Octipus run the bridge belongs to.
        session_id: The Octipus session of the run (plans, feedback and guidance are scoped to it).
        user: The user the run acts for (permission rules and vault access are theirs).
        worker_id: The worker (agent) running the CLI; calls of one worker are serialized.
        workspace: Absolute working directory of the run (project, user workspace or worktree);
            file-system tools stay inside it.
        attended: True when a person can answer approvals for this run; an unattended run's
            ASK rules are blocked instead of waiting.
        author: The person who started the turn (a space member, ``TurnCreate.author``), the
            author of every call of the run in the journal and the events; None: ``user``.
        stage: A pipeline stage worker's pipeline, node, stage, item and attempt (the journal's
            ``pipeline_id`` and ``node_id`` come from it); None for any other run.
    """

    run_id: str
    session_id: str
    user: str
    worker_id: str
    workspace: Path
    attended: bool
    author: str | None = None
    stage: StageTag | None = None

    @property
    def call_author(self) -> str:
        """Who a call of this run is recorded as made by: :attr:`author`, else :attr:`user`."""
        return self.author or self.user

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready view (``workspace`` as a string) for events and logs."""
        return {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "user": self.user,
            "worker_id": self.worker_id,
            "workspace": str(self.workspace),
            "attended": self.attended,
            "author": self.call_author,
            **({"stage": self.stage.to_dict()} if self.stage is not None else {}),
        }


def strip_identity_arguments(arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Return a copy of a call's arguments without identity-override keys.

    Args:
        arguments: The ``tools/call`` arguments as received (may be None).

    Returns:
        A new dict holding every top-level key except those in
        :data:`RESERVED_IDENTITY_ARGUMENTS`. Nested values are not inspected.
    """
    if not arguments:
        return {}
    return {key: value for key, value in arguments.items() if key not in RESERVED_IDENTITY_ARGUMENTS}
