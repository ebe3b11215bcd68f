"""The questions of a questionnaire approval (Claude's AskUserQuestion), read from its JSON.

One reading for every place that shows them: ``octipusctl`` (:mod:`octipusd.ctl.questions`), the
page (:mod:`octipusd.web.run_pages`) and notifications (:mod:`octipusd.notify.messages`). The
approval's ``questions`` holds ``{"questions": [{"question", "header", "multiSelect", "options"}]}``;
an approval stored before that field existed has them only in the tool's ``input``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["questions_of"]


def questions_of(approval: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The questions of a questionnaire approval: ``questions.questions``, else the tool input's
    ``questions``; those that are not objects are left out (none: an empty list).

    Args:
        approval: The approval as JSON (``ApprovalOut``'s fields; at least ``questions`` and
            ``input``, either may be missing or None).
    """
    source = approval.get("questions") or approval.get("input") or {}
    found = source.get("questions") if isinstance(source, Mapping) else None
    return [dict(q) for q in found if isinstance(q, Mapping)] if isinstance(found, list) else []
