"""Request models of ``/v1/pipelines`` (seed 003 "Executable paths and pipeline recovery").

Field names are the tools' (camelCase: ``fromStage``, ``skipItems``), so a person's request and an
agent's tool call read the same. A body that fails its schema is a 400 naming the field
(:mod:`octipusd.api.error_handlers`). The answers are the pipelines' service's documents (a summary,
the status document), JSON objects with camelCase keys.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from octipusd.api.health_models import ApiModel as _Model
from octipusd.api.limits import API_LIMITS
from octipusd.toolkit.pipelines import MAX_ITEM_TEXT_CHARS, MAX_ITEM_TITLE_CHARS, MAX_PIPELINE_ITEMS

__all__ = ["PipelineCreate", "PipelineItemIn", "PipelineItemsUpdate", "PipelineResume", "TemplateImport"]

#: A name or an id in a request (a template, a session, a stage, an item).
Name = Annotated[str, Field(min_length=1, max_length=API_LIMITS.max_name_chars)]
#: A file-system path in a request.
FsPath = Annotated[str, Field(min_length=1, max_length=API_LIMITS.max_path_chars)]

#: A plan item's detail, acceptance, or the evidence of a skip.
ItemText = Annotated[str, Field(max_length=MAX_ITEM_TEXT_CHARS)]


class PipelineItemIn(_Model):
    """A plan item to add: ``title``, and optionally ``detail`` and ``acceptance`` (how to tell it is done)."""

    title: str = Field(min_length=1, max_length=MAX_ITEM_TITLE_CHARS)
    detail: ItemText | None = None
    acceptance: ItemText | None = None


class PipelineCreate(_Model):
    """``POST /v1/pipelines``: run a template.

    ``template`` is a template's name or id (exact, then a close name, else the one-stage ``Execute``
    fallback doing ``description``), or a template document (its steps and parameters, or the export
    envelope). It works in ``session_id`` (an existing session), or in ``workspace`` (an absolute
    directory; a new session is made there): exactly one of them.
    """

    template: Name | dict[str, Any]
    params: dict[str, Any] = Field(default_factory=dict)
    workspace: FsPath | None = None
    session_id: Name | None = None
    description: ItemText | None = None
    items: list[PipelineItemIn] = Field(default_factory=list, max_length=MAX_PIPELINE_ITEMS)


class PipelineResume(_Model):
    """``POST /v1/pipelines/{id}/resume``: ``fromStage`` (an exact stage name or node key among retained
    checkpoints; omitted: the latest), ``skipItems`` (ids of items earlier work delivered) and the
    ``evidence`` for them."""

    fromStage: Name | None = None
    skipItems: list[Name] = Field(default_factory=list, max_length=MAX_PIPELINE_ITEMS)
    evidence: ItemText | None = None


class PipelineItemsUpdate(_Model):
    """``POST /v1/pipelines/{id}/items``: item edits queued for the next item boundary (at least one
    of ``skip``, ``add``, ``order``)."""

    skip: list[Name] = Field(default_factory=list, max_length=MAX_PIPELINE_ITEMS)
    add: list[PipelineItemIn] = Field(default_factory=list, max_length=MAX_PIPELINE_ITEMS)
    order: list[Name] = Field(default_factory=list, max_length=MAX_PIPELINE_ITEMS)
    evidence: ItemText | None = None


class TemplateImport(_Model):
    """``POST /v1/pipelines/templates``: a template ``document`` (steps and parameters, or the export
    envelope) and its ``name`` when the document has none."""

    document: dict[str, Any]
    name: Name | None = None
