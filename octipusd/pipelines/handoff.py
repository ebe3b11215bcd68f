"""A stage worker's handoff: the fenced JSON block that ends its answer (issue 27, seed 003).

Every stage worker is asked (:func:`contract_text`) to end its answer with::

    ```json
    {"status": "done" | "pass" | "fail", "summary": "...", "issues": ["..."], "stopped": false,
     "items": [{"title": "...", "detail": "...", "acceptance": "..."}]}
    ```

:func:`parse_handoff` finds the LAST fenced block tagged ``json`` in the answer (prose around it
is fine) and checks it; pure. ``summary``, ``issues``, ``stopped`` and ``items`` may be left out
(empty, false); ``status`` may not. What a missing or malformed handoff means is the stage's
business (:mod:`octipusd.pipelines.stages`): a QA or ``producesPlan`` stage needs one, a standard
stage does not.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

__all__ = ["Handoff", "HandoffItem", "HandoffStatus", "ParsedAnswer", "contract_text", "parse_handoff"]

#: A fenced block tagged ``json``: its body (group 1); an unclosed fence does not match.
_FENCE: Final = re.compile(
    r"^[ \t]*```[ \t]*json[ \t]*\r?\n(.*?)^[ \t]*```[ \t]*$", re.IGNORECASE | re.DOTALL | re.M
)
#: An opening ``json`` fence (to tell an unclosed block from none at all).
_OPENING: Final = re.compile(r"^[ \t]*```[ \t]*json[ \t]*$", re.IGNORECASE | re.M)


class HandoffStatus(StrEnum):
    """``status``: a standard stage is ``done``; a QA stage says ``pass`` or ``fail``."""

    DONE = "done"
    PASS = "pass"
    FAIL = "fail"


@dataclass(frozen=True)
class HandoffItem:
    """One plan item a ``producesPlan`` stage lists (``items[]``)."""

    title: str
    detail: str | None = None
    acceptance: str | None = None


@dataclass(frozen=True)
class Handoff:
    """A checked handoff block.

    Attributes:
        status: done, pass or fail.
        summary: One paragraph on what the stage did ("" when left out).
        issues: A QA stage's findings (or a failed stage's problems), one string each.
        stopped: The worker says it stopped before finishing (a contract failure of the attempt).
        items: The plan items it lists.
    """

    status: HandoffStatus
    summary: str = ""
    issues: tuple[str, ...] = ()
    stopped: bool = False
    items: tuple[HandoffItem, ...] = ()


@dataclass(frozen=True)
class ParsedAnswer:
    """A worker's answer split into its prose and its handoff.

    Attributes:
        prose: The answer without the handoff block (stripped); the whole answer when there is none.
        handoff: The checked handoff, or None.
        problem: Why there is no handoff (one sentence: missing, unclosed, not JSON, a field's
            type), or None when there is one.
    """

    prose: str
    handoff: Handoff | None
    problem: str | None


def parse_handoff(answer: str) -> ParsedAnswer:
    """Split ``answer`` into its prose and the handoff in its LAST fenced ``json`` block."""
    blocks = list(_FENCE.finditer(answer))
    if not blocks:
        whole = answer.strip()
        if _OPENING.search(answer):
            return ParsedAnswer(whole, None, "the handoff's ```json block is not closed with ```")
        return ParsedAnswer(whole, None, "the answer does not end with a ```json handoff block")
    last = blocks[-1]
    prose = (answer[: last.start()] + answer[last.end() :]).strip()
    try:
        raw = json.loads(last.group(1))
    except ValueError as exc:
        return ParsedAnswer(prose, None, f"the handoff block is not valid JSON ({exc})")
    handoff, problem = _checked(raw)
    return ParsedAnswer(prose, handoff, problem)


def _checked(raw: Any) -> tuple[Handoff | None, str | None]:
    """The handoff in ``raw`` (a decoded block), or the first problem found, naming the field."""
    if not isinstance(raw, dict):
        return None, "the handoff block must be a JSON object"
    given = raw.get("status")
    if given not in {s.value for s in HandoffStatus}:
        return None, f"handoff.status must be one of done, pass, fail (got {given!r})"
    status = HandoffStatus(str(given))
    summary, issues, stopped = raw.get("summary", ""), raw.get("issues", []), raw.get("stopped", False)
    if summary is None:
        summary = ""
    if not isinstance(summary, str):
        return None, "handoff.summary must be a string"
    if issues is None:
        issues = []
    if not isinstance(issues, list) or not all(isinstance(i, str) for i in issues):
        return None, "handoff.issues must be a list of strings"
    if not isinstance(stopped, bool):
        return None, "handoff.stopped must be true or false"
    if not isinstance(raw.get("items") or [], list):
        return None, "handoff.items must be a list"
    items: list[HandoffItem] = []
    for index, item in enumerate(raw.get("items") or []):
        where = f"handoff.items[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("title"), str) or not item["title"].strip():
            return None, f"{where} must be an object with a non-empty title"
        texts = [item.get("detail"), item.get("acceptance")]
        if not all(t is None or isinstance(t, str) for t in texts):
            return None, f"{where}: detail and acceptance must be strings"
        items.append(HandoffItem(item["title"].strip(), texts[0] or None, texts[1] or None))
    cleaned = tuple(i.strip() for i in issues if i.strip())
    return Handoff(status, summary.strip(), cleaned, stopped, tuple(items)), None


def contract_text(*, qa: bool, produces_plan: bool) -> str:
    """The handoff contract a stage's prompt ends with (short: the worker reads it every attempt)."""
    status = (
        '"pass" if the work meets its acceptance, else "fail" with one issue per problem to fix'
        if qa
        else '"done" when you finished the stage\'s work, "fail" if you could not'
    )
    lines = [
        "## Handoff",
        "End your answer with this fenced block (the last ```json block of your answer is read):",
        "```json",
        '{"status": "done" | "pass" | "fail", "summary": "<what you did>", "issues": ["<problem>"],'
        ' "stopped": false, "items": [{"title": "...", "detail": "...", "acceptance": "..."}]}',
        "```",
        f"- status: {status}.",
        "- stopped: true only if you stop before finishing; the stage is then tried again.",
    ]
    if produces_plan:
        lines.append(
            "- items: the plan, one item per unit of work with its acceptance criteria"
            " (or add them with the plan__add_items tool); a plan with no items fails the stage."
        )
    else:
        lines.append("- items: leave empty.")
    return "\n".join(lines)
