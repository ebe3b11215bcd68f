"""The pipelines' vocabulary shared by the service, the bridge tools, the API and the clients.

Seed 003 ("Executable paths and pipeline recovery"). The pipelines' service
(:class:`octipusd.pipelines.service.PipelineService`, layer 3) satisfies :class:`PipelineOps`; the
bridge tools (:mod:`octipusd.tools.pipeline`, a capability) reach it through
:meth:`octipusd.toolkit.ToolHost.pipeline_access`, which binds the calling run's identity as the
:class:`PipelineCaller`: no tool imports the service, no run's identity comes from arguments.

The requests are frozen values, checked by whoever builds them (a tool, a route) for their shape
and by the service for their meaning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from octipusd.errors import InvalidRequestError, PipelinesUnavailableError
from octipusd.toolkit.identity import RunIdentity

__all__ = [
    "MAX_ITEM_TEXT_CHARS",
    "MAX_ITEM_TITLE_CHARS",
    "MAX_PIPELINE_ITEMS",
    "CreateRequest",
    "ItemChanges",
    "ItemDraft",
    "PipelineAccess",
    "PipelineCaller",
    "PipelineOps",
    "ResumeRequest",
    "pipeline_access",
]

#: Plan items one pipeline holds at most.
MAX_PIPELINE_ITEMS = 500
#: Characters of an item's title at most.
MAX_ITEM_TITLE_CHARS = 500
#: Characters of an item's detail, acceptance or evidence at most.
MAX_ITEM_TEXT_CHARS = 20_000


@dataclass(frozen=True)
class ItemDraft:
    """A plan item to add: its title, and optionally its detail and acceptance criteria."""

    title: str
    detail: str | None = None
    acceptance: str | None = None

    def checked(self, where: str) -> ItemDraft:
        """This draft stripped, or :class:`InvalidRequestError` naming ``where`` and the field."""
        title = self.title.strip() if isinstance(self.title, str) else ""
        if not title:
            raise InvalidRequestError(f"{where}.title: must be a non-empty string")
        if len(title) > MAX_ITEM_TITLE_CHARS:
            raise InvalidRequestError(f"{where}.title: longer than {MAX_ITEM_TITLE_CHARS} characters")
        for name, value in (("detail", self.detail), ("acceptance", self.acceptance)):
            if value is not None and (not isinstance(value, str) or len(value) > MAX_ITEM_TEXT_CHARS):
                raise InvalidRequestError(
                    f"{where}.{name}: must be a string of at most {MAX_ITEM_TEXT_CHARS} characters"
                )
        return ItemDraft(title, self.detail or None, self.acceptance or None)


@dataclass(frozen=True)
class ItemChanges:
    """One ``update_pipeline_items`` request: ids to skip, items to add, an order, the evidence."""

    skip: tuple[str, ...] = ()
    add: tuple[ItemDraft, ...] = ()
    order: tuple[str, ...] = ()
    evidence: str | None = None
    user: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The queued form (``pipelines.pending_changes``)."""
        return {
            "skip": list(self.skip),
            "add": [{"title": d.title, "detail": d.detail, "acceptance": d.acceptance} for d in self.add],
            "order": list(self.order),
            "evidence": self.evidence,
            "user": self.user,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> ItemChanges:
        """The inverse of :meth:`to_json`."""
        return cls(
            skip=tuple(raw.get("skip") or ()),
            add=tuple(
                ItemDraft(a["title"], a.get("detail"), a.get("acceptance")) for a in raw.get("add") or ()
            ),
            order=tuple(raw.get("order") or ()),
            evidence=raw.get("evidence"),
            user=raw.get("user"),
        )


@dataclass(frozen=True)
class PipelineCaller:
    """Who asks.

    Attributes:
        user: The user asking (a person, or the user a run acts for).
        session_id: The session of the root run calling a bridge tool; None for a person (API, page).
        workspace: That run's workspace (absolute path); None for a person.
        attended: False for an unattended run (a schedule's, a monitor's turn): it cannot answer a
            review it causes, such as a resume's replay review.
        run_id: That run (a question forwarded to the person is shown in its conversation); None
            for a person.
    """

    user: str
    session_id: str | None = None
    workspace: str | None = None
    attended: bool = True
    run_id: str | None = None


@dataclass(frozen=True)
class ResumeRequest:
    """``resume_pipeline({id, fromStage?, skipItems?, evidence?})``, checked.

    Attributes:
        from_stage: An exact stage name or node key among retained checkpoints, or None: the latest.
        skip_items: Items earlier work already delivered (every id checked before any is skipped).
        evidence: The commit and check given for them, kept.
    """

    from_stage: str | None = None
    skip_items: tuple[str, ...] = ()
    evidence: str | None = None


@dataclass(frozen=True)
class CreateRequest:
    """``create_pipeline`` / ``POST /v1/pipelines`` / ``octipusctl pipelines run``, as received.

    Attributes:
        template: A template's name or id (looked up: exact, then fuzzy, then the one-stage
            ``Execute`` fallback), or a template document (steps and parameters, or the export envelope).
        params: Parameter values by key.
        session_id: The session it works in (an agent's own; a person may name one), or None: a person
            gives ``workspace`` and a new session is made there.
        workspace: The workspace directory (a person without a session).
        description: The ``{{description}}`` of the prompts (what this run is for).
        items: Plan items to start with (a pipeline whose first stage ``producesPlan`` makes its own).
    """

    template: str | dict[str, Any]
    params: dict[str, Any]
    session_id: str | None = None
    workspace: str | None = None
    description: str | None = None
    items: tuple[ItemDraft, ...] = ()


class PipelineOps(Protocol):
    """The pipelines' use cases every surface calls (implemented by ``PipelineService``).

    Each answers a JSON-ready document (camelCase keys) and checks that ``caller`` may act on the
    pipeline (another user's, or for an agent another session's or workspace's, is refused with
    :class:`~octipusd.errors.ForbiddenError`). Unknown ids raise
    :class:`~octipusd.errors.NotFoundError`, bad input :class:`~octipusd.errors.InvalidRequestError`
    naming the field, a resume of a running pipeline (or a second resume)
    :class:`~octipusd.errors.ConflictError`.
    """

    async def create(self, request: CreateRequest, caller: PipelineCaller) -> dict[str, Any]:
        """Save the graph and initial checkpoint and start the first walk; answers the handle."""
        ...

    async def status(
        self, pipeline_id: str, caller: PipelineCaller, *, include_history: bool = True
    ) -> dict[str, Any]:
        """The status document (read-only; takes no lock of the walker; 15 s at most)."""
        ...

    async def list(self, caller: PipelineCaller, *, limit: int | None = None) -> list[dict[str, Any]]:
        """The caller's pipelines, newest first."""
        ...

    async def resume(
        self, pipeline_id: str, caller: PipelineCaller, request: ResumeRequest
    ) -> dict[str, Any]:
        """Resume (or rewind) a pipeline; answers ``{"id", "status": "resuming"}`` at once."""
        ...

    async def stop(self, pipeline_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """Stop the pipeline's stage worker; it is left resumable ``stopped``."""
        ...

    async def update_items(
        self, pipeline_id: str, caller: PipelineCaller, changes: ItemChanges
    ) -> dict[str, Any]:
        """Queue item edits atomically for the next item boundary."""
        ...

    async def answer_approval(self, pipeline_id: str, caller: PipelineCaller) -> dict[str, Any]:
        """Forward the pipeline's pending approval to the person in the caller's conversation and
        wait (bounded) for their explicit answer; ``decided: false`` leaves it pending."""
        ...

    async def add_plan_items(
        self,
        pipeline_id: str,
        caller: PipelineCaller,
        drafts: Sequence[ItemDraft],
        *,
        node_key: str | None = None,
    ) -> dict[str, Any]:
        """Append items to the pipeline's plan, skipping titles already on it (``plan__add_items``)."""
        ...


@dataclass(frozen=True)
class PipelineAccess:
    """What a bridge call reaches the pipelines with: the service and the calling run as its caller."""

    ops: PipelineOps
    caller: PipelineCaller


def pipeline_access(ops: PipelineOps | None, identity: RunIdentity) -> PipelineAccess:
    """``ops`` with the run of ``identity`` as the caller: its user, session and workspace.

    Raises:
        PipelinesUnavailableError: ``ops`` is None (the daemon has no pipelines' service).
    """
    if ops is None:
        raise PipelinesUnavailableError("this daemon cannot run pipelines: it has no pipelines' service")
    caller = PipelineCaller(
        user=identity.user,
        session_id=identity.session_id,
        workspace=str(identity.workspace),
        attended=identity.attended,
        run_id=identity.run_id,
    )
    return PipelineAccess(ops, caller)
