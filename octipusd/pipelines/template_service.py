"""Pipeline templates as a service: list, show, import, export and lookup (FACTS.md §6 "Lookup").

The API, the page, ``octipusctl pipelines templates`` and the ``create_pipeline`` tool all call
:class:`TemplateService`. A user sees its own templates, the presets (:mod:`octipusd.pipelines.presets`,
marked ``preset``) and the unowned templates. :meth:`TemplateService.lookup` resolves what a run asks
for: an exact id or name (own first, then presets, then unowned), then the closest name (a fuzzy
match, :data:`FUZZY_CUTOFF`), then, when the caller gives the request, a one-stage ``general``
template named ``Execute`` built from it (:func:`fallback_template`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from octipusd.errors import ConflictError, InvalidRequestError, NotFoundError
from octipusd.pipelines.presets import preset_id, presets
from octipusd.pipelines.templates import DEFAULT_MAX_STAGES, Step, Template, parse_template
from octipusd.store.aio import in_thread
from octipusd.store.pipeline_records import PipelineTemplateRecord
from octipusd.store.repository import Store

__all__ = [
    "FALLBACK_NAME",
    "FALLBACK_TOPIC",
    "FUZZY_CUTOFF",
    "LookupSource",
    "TemplateEntry",
    "TemplateMatch",
    "TemplateService",
    "fallback_template",
]

#: The name of the one-stage template a lookup falls back to, and of its stage.
FALLBACK_NAME: Final = "Execute"
#: The topic of that stage.
FALLBACK_TOPIC: Final = "general"
#: How close (``difflib`` ratio, 0 to 1) a name must be to count as a fuzzy match.
FUZZY_CUTOFF: Final = 0.6

_HEX_ID = re.compile(r"^[0-9a-f]{32}$")


class LookupSource(StrEnum):
    """How :meth:`TemplateService.lookup` found the template."""

    EXACT = "exact"
    FUZZY = "fuzzy"
    FALLBACK = "fallback"


@dataclass(frozen=True)
class TemplateEntry:
    """A template a user sees: stored (``owner`` None: unowned) or a preset.

    Attributes:
        id: 32 hex characters, or ``preset:<name>`` for a preset.
        template: The parsed template.
        owner: The user who imported it, or None (unowned, and every preset).
        preset: It ships with Octipus.
        created_at: When it was imported (None for a preset).
        updated_at: When it last changed (None for a preset).
    """

    id: str
    template: Template
    owner: str | None
    preset: bool
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def name(self) -> str:
        """The template's name."""
        return self.template.name

    def summary(self) -> dict[str, Any]:
        """What a listing shows: id, name, description, owner, preset, stages and parameter keys."""
        return {
            "id": self.id,
            "name": self.name,
            "description": self.template.description,
            "owner": self.owner,
            "preset": self.preset,
            "stages": [s.name for s in self.template.steps],
            "parameters": [p.key for p in self.template.parameters],
            "createdAt": self.created_at.isoformat() if self.created_at else None,
            "updatedAt": self.updated_at.isoformat() if self.updated_at else None,
        }

    def to_json(self) -> dict[str, Any]:
        """The summary and the whole template (its export envelope under ``document``)."""
        return {**self.summary(), "document": self.template.to_envelope()}


@dataclass(frozen=True)
class TemplateMatch:
    """The answer of :meth:`TemplateService.lookup`: the template, how it was found, and its entry
    (None for the fallback, which is not stored)."""

    template: Template
    source: LookupSource
    entry: TemplateEntry | None = None


def fallback_template(request: str) -> Template:
    """The one-stage template named ``Execute`` whose stage (topic ``general``) does ``request``."""
    text = request.strip()
    if not text:
        raise InvalidRequestError("description: no template matched, and an empty request cannot be executed")
    step = Step(name=FALLBACK_NAME, topic=FALLBACK_TOPIC, description=text)
    return Template(name=FALLBACK_NAME, description=text, steps=(step,))


def _preset_entries() -> list[TemplateEntry]:
    return [TemplateEntry(preset_id(t.name), t, None, True) for t in presets()]


def _stored_entry(record: PipelineTemplateRecord) -> TemplateEntry:
    template = parse_template(
        record.document, name=record.name, max_stages=len(record.document.get("steps") or [])
    )
    return TemplateEntry(record.id, template, record.owner, False, record.created_at, record.updated_at)


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


class TemplateService:
    """Pipeline templates (see the module docstring).

    Args:
        store: The store (stored templates).
        max_stages: ``orchestrator.maxPipelineStages``: an import or a run of a template with more
            steps is refused.
    """

    def __init__(self, store: Store, *, max_stages: int = DEFAULT_MAX_STAGES) -> None:
        self.store = store
        self.max_stages = max_stages

    def from_document(self, document: object, *, name: str | None = None) -> Template:
        """A template document given with a run (``octipusctl pipelines run FILE``), checked like an
        import (``max_stages`` included) but not stored.

        Raises:
            InvalidRequestError: The document is invalid; the message names the step and field.
        """
        return parse_template(document, name=name, max_stages=self.max_stages)

    async def _visible(self, user: str) -> list[TemplateEntry]:
        """Own, preset and unowned templates, in lookup order."""
        records = await in_thread(self.store.list_pipeline_templates, user)
        stored = [_stored_entry(r) for r in records]
        own = [e for e in stored if e.owner == user]
        unowned = [e for e in stored if e.owner is None]
        return own + _preset_entries() + unowned

    async def list_templates(self, user: str) -> list[TemplateEntry]:
        """Every template ``user`` sees, by name (own before preset before unowned on a tie).

        Raises:
            StoreError: The database failed.
        """
        entries = await self._visible(user)
        rank = {id(e): i for i, e in enumerate(entries)}
        return sorted(entries, key=lambda e: (e.name.lower(), rank[id(e)]))

    @staticmethod
    def _exact(entries: Sequence[TemplateEntry], ref: str) -> TemplateEntry | None:
        for entry in entries:
            if entry.id == ref:
                return entry
        for entry in entries:
            if entry.name == ref:
                return entry
        return None

    @staticmethod
    def _not_found(entries: Sequence[TemplateEntry], ref: str) -> NotFoundError:
        close = difflib.get_close_matches(ref, [e.name for e in entries], n=3, cutoff=FUZZY_CUTOFF)
        hint = (
            f"; did you mean {', '.join(close)}?"
            if close
            else "; octipusctl pipelines templates list shows them"
        )
        return NotFoundError(f"pipeline template {ref!r} not found (no id or name matches){hint}")

    async def show(self, user: str, ref: str) -> TemplateEntry:
        """The template ``user`` sees whose id or exact name is ``ref``.

        Raises:
            NotFoundError: None has that id or name (the message suggests close names).
            StoreError: The database failed.
        """
        entries = await self._visible(user)
        entry = self._exact(entries, ref)
        if entry is None:
            raise self._not_found(entries, ref)
        return entry

    async def export(self, user: str, ref: str) -> dict[str, Any]:
        """The export envelope ``{octipusRecipe: 1, name, description, steps, parameters}`` of a
        template (see :meth:`show` for ``ref`` and the errors)."""
        return (await self.show(user, ref)).template.to_envelope()

    async def import_template(
        self, user: str | None, document: object, *, name: str | None = None
    ) -> TemplateEntry:
        """Check and store a template document (steps and parameters, or the export envelope).

        Args:
            user: Its owner, or None for an unowned template every user sees.
            document: The decoded JSON.
            name: The name when the document has none (a file's stem); the envelope's wins.

        Returns:
            The stored template (normalized: stored as its export envelope).

        Raises:
            InvalidRequestError: The document is invalid (the message names the step and field) or
                has more than ``max_stages`` steps.
            ConflictError: The owner already has a template of that name, or a preset has it.
            StoreError: The database failed.
        """
        template = self.from_document(document, name=name)
        if any(p.name == template.name for p in presets()):
            raise ConflictError(f"{template.name!r} is the name of a preset template; choose another name")
        record = await in_thread(
            self.store.create_pipeline_template,
            name=template.name,
            owner=user,
            description=template.description or None,
            document=template.to_envelope(),
        )
        return _stored_entry(record)

    async def delete(self, user: str | None, ref: str) -> None:
        """Delete a stored template ``user`` owns (None: an unowned one), by id or exact name.

        Raises:
            NotFoundError: ``user`` owns no template with that id or name (a preset cannot be deleted).
            StoreError: The database failed.
        """
        records = await in_thread(self.store.list_pipeline_templates, user)
        mine = [r for r in records if r.owner == user and ref in (r.id, r.name)]
        if not mine:
            raise NotFoundError(f"pipeline template {ref!r} not found among the templates you own")
        await in_thread(self.store.delete_pipeline_template, mine[0].id, user)

    async def lookup(self, user: str, ref: str, *, request: str | None = None) -> TemplateMatch:
        """The template a run asks for: exact id or name, else the closest name, else (with
        ``request``) the one-stage ``Execute`` fallback doing the request.

        Args:
            user: Who asks (own templates first).
            ref: A template id or name.
            request: What the run is for; given, a miss falls back to :func:`fallback_template`.

        Raises:
            NotFoundError: Nothing matches and no ``request`` was given.
            InvalidRequestError: The template found has more than ``max_stages`` steps.
            StoreError: The database failed.
        """
        entries = await self._visible(user)
        entry = self._exact(entries, ref)
        source = LookupSource.EXACT
        if entry is None and not _HEX_ID.match(ref):
            entry = self._closest(entries, ref)
            source = LookupSource.FUZZY
        if entry is None:
            if request is None:
                raise self._not_found(entries, ref)
            return TemplateMatch(fallback_template(request), LookupSource.FALLBACK)
        if len(entry.template.steps) > self.max_stages:
            raise InvalidRequestError(
                f"template: {entry.name!r} has {len(entry.template.steps)} stages, more than "
                f"orchestrator.maxPipelineStages ({self.max_stages})"
            )
        return TemplateMatch(entry.template, source, entry)

    @staticmethod
    def _closest(entries: Sequence[TemplateEntry], ref: str) -> TemplateEntry | None:
        by_norm: dict[str, TemplateEntry] = {}
        for entry in entries:  # lookup order: the first entry of a normalized name wins
            by_norm.setdefault(_norm(entry.name), entry)
        wanted = _norm(ref)
        if not wanted:
            return None
        if wanted in by_norm:
            return by_norm[wanted]
        close = difflib.get_close_matches(wanted, list(by_norm), n=1, cutoff=FUZZY_CUTOFF)
        return by_norm[close[0]] if close else None
