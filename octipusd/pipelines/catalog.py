"""What the surfaces need of the pipeline templates (list, show, import, export): a seam.

:class:`~octipusd.pipelines.template_service.TemplateService` satisfies :class:`TemplateCatalog`; the
API, the page and ``octipusctl pipelines templates`` call it through this Protocol, so they are
written against the use cases, not the service's module.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

__all__ = ["TemplateCatalog", "TemplateView"]


class TemplateView(Protocol):
    """One template a user sees (stored or a preset)."""

    def summary(self) -> dict[str, Any]:
        """What a listing shows: id, name, description, owner, preset, stages and parameter keys."""
        ...

    def to_json(self) -> dict[str, Any]:
        """The summary and the whole template (its export envelope under ``document``)."""
        ...


class TemplateCatalog(Protocol):
    """The templates' use cases (each raises the error tree's errors: 400 naming the step and field,
    404 naming the template, 409 for a name already taken)."""

    async def list_templates(self, user: str) -> Sequence[TemplateView]:
        """Every template ``user`` sees, by name."""
        ...

    async def show(self, user: str, ref: str) -> TemplateView:
        """The template ``user`` sees whose id or exact name is ``ref``."""
        ...

    async def export(self, user: str, ref: str) -> dict[str, Any]:
        """The export envelope ``{octipusRecipe: 1, name, description, steps, parameters}``."""
        ...

    async def import_template(
        self, user: str | None, document: object, *, name: str | None = None
    ) -> TemplateView:
        """Check and store a template document; answers the stored template."""
        ...
