"""How the pages show things: a run event as one transcript entry, money, tokens, times.

Everything here returns plain text (the templates escape it); nothing returns markup. The
transcript entry of each event kind follows what ``octipusctl run`` prints for it
(:func:`octipusd.ctl.main._render`), so the page and the terminal tell the same story.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Final

from octipusd.api.models import EventOut
from octipusd.money import format_usd, usd

__all__ = ["TranscriptEntry", "entry_for", "money", "pretty_json", "session_name", "short_time"]

#: Characters of a tool input, result or raw event shown in a transcript entry at most (the rest is
#: cut with a note: the JSON API has it whole).
DETAIL_MAX_CHARS: Final = 20_000
#: Characters of a one-line summary (a tool's input beside its name) at most.
SUMMARY_MAX_CHARS: Final = 160


@dataclass(frozen=True)
class TranscriptEntry:
    """One event as the transcript shows it.

    Attributes:
        seq: The event's ``seq``.
        kind: The event's kind (a CSS class and a data attribute).
        tone: How it looks: ``agent``, ``tool``, ``result``, ``error``, ``approval``, ``status``,
            ``person``, ``child`` or ``quiet``.
        label: The short heading (``assistant``, ``tool Bash``, ``run succeeded``...).
        text: The readable body (may be empty).
        detail: Longer text shown collapsed under the entry (a tool's input, its result...), or "".
        link: ``(href, text)`` of a page it points to (a child run, an approval), or None.
        created_at: When it was stored.
    """

    seq: int
    kind: str
    tone: str
    label: str
    text: str
    detail: str
    link: tuple[str, str] | None
    created_at: datetime


def pretty_json(value: Any) -> str:
    """``value`` as indented JSON (unicode kept), cut at :data:`DETAIL_MAX_CHARS`."""
    return _cut(json.dumps(value, indent=2, ensure_ascii=False, default=str), DETAIL_MAX_CHARS)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text) - limit} more characters)"


def _one_line(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return _cut(" ".join(text.split()), SUMMARY_MAX_CHARS)


#: Characters of an id shown where a short one is enough (a session without a title).
SHORT_ID_CHARS: Final = 8


def money(value: Decimal | None) -> str:
    """A cost as every client shows one (:func:`octipusd.money.format_usd`: ``$0.0245``,
    ``$1,234.5000``), or ``unknown`` when the vendor reported none."""
    return "unknown" if value is None else format_usd(value)


def short_time(moment: datetime | str | None) -> str:
    """``2024-05-01 12:03:04 UTC`` (the store keeps UTC; to the second), or "" for none: every page
    shows times this one way. An ISO 8601 text (a time inside a record's JSON) is read first; text
    that is not one is shown as it is."""
    if isinstance(moment, str):
        try:
            parsed: datetime | None = datetime.fromisoformat(moment).astimezone(UTC)
        except ValueError:
            return moment
    else:
        parsed = moment
    return parsed.strftime("%Y-%m-%d %H:%M:%S UTC") if parsed else ""


def session_name(title: str | None, workspace: str, session_id: str) -> str:
    """What a session is called on the pages: its title, else its workspace's folder and a short id
    (``api · 3f9c2a1b``) rather than a 32-character id."""
    if title:
        return title
    folder = PurePath(workspace).name or workspace
    return f"{folder} · {session_id[:SHORT_ID_CHARS]}"


def _result_text(content: Any) -> str:
    if isinstance(content, list):  # MCP / Anthropic content blocks
        parts = [str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in content]
        return "\n".join(parts)
    return content if isinstance(content, str) else pretty_json(content)


# Each describer returns (tone, label, text, detail, link) for one kind's ``data``.
_Parts = tuple[str, str, str, str, tuple[str, str] | None]


def _text(d: Mapping[str, Any]) -> _Parts:
    return "agent", "assistant", str(d.get("text", "")), "", None


def _thinking(d: Mapping[str, Any]) -> _Parts:
    return "quiet", "thinking", "", _cut(str(d.get("text", "")), DETAIL_MAX_CHARS), None


def _tool_use(d: Mapping[str, Any]) -> _Parts:
    tool_input = d.get("input", {})
    return "tool", f"tool {d.get('name')}", _one_line(tool_input), pretty_json(tool_input), None


def _tool_result(d: Mapping[str, Any]) -> _Parts:
    text = _cut(_result_text(d.get("content", "")), DETAIL_MAX_CHARS)
    tone, label = ("error", "tool error") if d.get("is_error") else ("result", "result")
    return tone, label, _one_line(text), text, None


def _permission(d: Mapping[str, Any]) -> _Parts:
    verdict = "allowed" if d.get("allowed") else "denied"
    return (
        ("result" if d.get("allowed") else "error"),
        f"permission {verdict}",
        (f"{d.get('tool_id')}: {d.get('reason')}"),
        "",
        None,
    )


def _policy(d: Mapping[str, Any]) -> _Parts:
    subject = f" {_one_line(d['subject'])}" if d.get("subject") else ""
    where = f"{d['tier']}: " if d.get("tier") else ""
    text = f"{d.get('tool_id')}{subject}: {d.get('level')} ({where}{d.get('explanation')})"
    return "quiet", "policy", text, "", None


def _approval_requested(d: Mapping[str, Any]) -> _Parts:
    approval_id = str(d.get("approval_id"))
    if d.get("kind") == "questionnaire":
        label, text = "questions from the agent", str(d.get("tool_id"))
    else:
        why = d.get("explanation") or d.get("reason")
        label = "approval needed"
        text = f"{d.get('tool_id')} {d.get('subject') or ''}".strip() + (f" ({why})" if why else "")
    return "approval", label, text, "", (f"/approvals/{approval_id}", f"approval {approval_id}")


def _approval_decided(d: Mapping[str, Any]) -> _Parts:
    grant = f", remembered as grant {d['grant_id']}" if d.get("grant_id") else ""
    text = f"{d.get('tool_id')}: {d.get('outcome')} by {d.get('decided_by')}{grant}"
    return "approval", "approval answered", text, "", (f"/approvals/{d.get('approval_id')}", "the approval")


def _run_status(d: Mapping[str, Any]) -> _Parts:
    resumed = " (resumed)" if d.get("resumed") else ""
    return "status", f"run {d.get('status')}{resumed}", str(d.get("reason") or ""), "", None


def _result(d: Mapping[str, Any]) -> _Parts:
    cost = usd(d.get("cost_usd"))  # the exact decimal string the event holds
    text = f"cost {money(cost)}" if cost is not None else ""
    return "quiet", f"result {d.get('subtype') or ''}".strip(), text, "", None


def _notice(d: Mapping[str, Any]) -> _Parts:
    text = " ".join(str(x) for x in (d.get("message") or d.get("event"), d.get("tool")) if x)
    return "quiet", "notice", text, "", None


def _bridge_call(d: Mapping[str, Any]) -> _Parts:
    return "quiet", "bridge", _notice(d)[2], "", None


def _compaction(d: Mapping[str, Any]) -> _Parts:
    if d.get("published"):
        text = (
            f"checkpoint {d.get('checkpoint_id')} covers messages {d.get('first_seq')}-{d.get('through_seq')}; "
            "the next turn starts from it"
        )
        return "status", "compacted", text, "", None
    return "quiet", "compaction", f"nothing published ({d.get('reason')})", "", None


def _child(d: Mapping[str, Any], spawned: bool) -> _Parts:
    child = str(d.get("child_run_id"))
    link = (f"/runs/{child}", f"run {child}")
    if spawned:
        key = f", key {d['resume_key']}" if d.get("resume_key") else ""
        return "child", "child started", f"{d.get('role')}{key}", "", link
    notes = "\n".join(str(n) for n in d.get("notes") or [])
    return "child", f"child {d.get('status')}", notes, "", link


def _error(d: Mapping[str, Any]) -> _Parts:
    label = "vendor error" if d.get("fatal") else "vendor warning"
    return "error", label, str(d.get("message", "")), "", None


_STEERING = {
    "steering_submitted": "guidance written to the running turn",
    "steering_queued": "guidance queued for the run context",
    "steering_delivered": "guidance acknowledged by the vendor",
}


def _steering(how: str, d: Mapping[str, Any]) -> _Parts:
    return "person", how, str(d.get("text", "")), "", None


def _feedback(d: Mapping[str, Any]) -> _Parts:
    step = f" on step {d['step_id']}" if d.get("step_id") else ""
    text = d.get("response") if d.get("action") == "answered" else d.get("text")
    return "person", f"plan feedback {d.get('action')}{step} ({d.get('status')})", str(text or ""), "", None


def _session(d: Mapping[str, Any]) -> _Parts:
    model = f" model {d['model']}" if d.get("model") else ""
    return "quiet", "vendor session", f"{d.get('session_id')}{model}", "", None


_DESCRIBERS: Final[dict[str, Callable[[Mapping[str, Any]], _Parts]]] = {
    "text": _text,
    "thinking": _thinking,
    "tool_use": _tool_use,
    "tool_result": _tool_result,
    "permission_decision": _permission,
    "policy_decision": _policy,
    "approval_requested": _approval_requested,
    "approval_decided": _approval_decided,
    "run_status": _run_status,
    "result": _result,
    "notice": _notice,
    "bridge_call": _bridge_call,
    "compaction": _compaction,
    "child_spawned": lambda d: _child(d, spawned=True),
    "child_finished": lambda d: _child(d, spawned=False),
    "error": _error,
    "plan_feedback": _feedback,
    "session": _session,
    "review_required": lambda d: ("error", "recovery review required", str(d.get("reason", "")), "", None),
    "guidance_pending": lambda d: ("person", "guidance pending", str(d.get("message", "")), "", None),
    "flow_guard": lambda d: ("error", "flow guard", f"{d.get('tool_id')}: {d.get('reason')}", "", None),
    **{kind: functools.partial(_steering, how) for kind, how in _STEERING.items()},
}

#: Kinds the transcript leaves out: per-turn accounting and stream plumbing (their figures are in
#: the run's summary), shown by the JSON API.
HIDDEN_KINDS: Final = frozenset({"usage", "status", "stderr", "control_cancel", "permission_request"})


def entry_for(event: EventOut) -> TranscriptEntry | None:
    """The transcript entry of ``event``, or None for a kind the transcript leaves out.

    An unknown kind is shown as its raw data (collapsed), never dropped.
    """
    if event.kind in HIDDEN_KINDS:
        return None
    describe = _DESCRIBERS.get(event.kind)
    if describe is None:
        parts: _Parts = ("quiet", event.kind, "", pretty_json(event.data), None)
    else:
        parts = describe(event.data)
    tone, label, text, detail, link = parts
    return TranscriptEntry(event.seq, event.kind, tone, label, text, detail, link, event.created_at)
