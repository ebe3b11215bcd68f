"""Compaction of a session's transcript into a checkpoint (seed 003 "Compaction").

Octipus summarizes a contiguous prefix of the current generation's messages, keeps the recent
turns, and publishes a checkpoint with its exact message coverage (``first_seq`` to
``through_seq``). The root vendor records (Claude's and Codex's) rotate only after the
checkpoint is published, in the same transaction: the next launch is cold and carries the
checkpoint plus the messages after it. A failed, incomplete or ineffective summary publishes
nothing and rotates nothing. Child task sessions are kept: they never held the root transcript.

The summary is made by Octipus itself, never by a credential-bearing CLI maintenance
subprocess (seed 003). :func:`extractive_summary` is the built-in summarizer: it keeps every
covered message's speaker and opening, so the checkpoint states exactly what it covers. A
:class:`Summarizer` can be swapped in.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from octipusd.runtime.children import is_child_key
from octipusd.store.records import Checkpoint, SessionMessage
from octipusd.store.repository import Store

log = logging.getLogger("octipusd.runtime.compaction")

#: Characters kept of each covered message by :func:`extractive_summary`.
EXCERPT_CHARS = 280
#: Characters of the previous checkpoint's summary kept at the head of the next one.
PREVIOUS_SUMMARY_CHARS = 8000

#: ``(previous checkpoint or None, covered messages) -> summary text``; raises on failure.
Summarizer = Callable[[Checkpoint | None, Sequence[SessionMessage]], str]


@dataclass(frozen=True)
class CompactionReport:
    """What a compaction did.

    Attributes:
        published: A checkpoint was published (and the root vendor records rotated).
        checkpoint_id: The new checkpoint's id, or None.
        first_seq: First message seq the checkpoint covers, or None.
        through_seq: Last message seq it covers, or None.
        covered_messages: Messages newly summarized (after the previous checkpoint).
        covered_chars: Characters summarized (previous summary plus the covered messages).
        summary_chars: Length of the summary.
        rotated: Root reuse keys dropped (the next root launch starts cold with the checkpoint).
        reason: Why nothing was published, or None.
    """

    published: bool
    checkpoint_id: int | None = None
    first_seq: int | None = None
    through_seq: int | None = None
    covered_messages: int = 0
    covered_chars: int = 0
    summary_chars: int = 0
    rotated: list[str] = field(default_factory=list)
    reason: str | None = None


def describe_compaction(report: CompactionReport) -> str:
    """One line for people: what the checkpoint covers, or why nothing was published."""
    if not report.published:
        return f"no checkpoint published: {report.reason}"
    rotated = (
        f"; the next turn of {', '.join(report.rotated)} starts a new vendor conversation from it"
        if report.rotated
        else ""
    )
    return (
        f"checkpoint {report.checkpoint_id} published: messages {report.first_seq}-{report.through_seq} "
        f"({report.covered_chars} characters) summarized in {report.summary_chars}{rotated}"
    )


def _excerpt(text: str) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"


def extractive_summary(previous: Checkpoint | None, messages: Sequence[SessionMessage]) -> str:
    """The built-in summarizer: the previous summary, then one line per covered message.

    Args:
        previous: The checkpoint this one extends, or None.
        messages: The covered messages, ascending by seq.

    Returns:
        The summary text.
    """
    lines: list[str] = []
    if previous is not None:
        head = previous.summary[:PREVIOUS_SUMMARY_CHARS]
        lines.append(f"Earlier (messages {previous.first_seq}-{previous.through_seq}): {head}")
    for message in messages:
        who = "User" if message.role == "user" else f"Assistant ({message.adapter or 'agent'})"
        lines.append(f"- [{message.seq}] {who}: {_excerpt(message.text)}")
    return "\n".join(lines)


def compaction_prefix(messages: Sequence[SessionMessage], keep_turns: int) -> list[SessionMessage]:
    """The contiguous prefix to summarize: everything before the last ``keep_turns`` user turns.

    Args:
        messages: The uncovered messages of the generation, ascending by seq.
        keep_turns: User turns (a user message and what follows it) kept verbatim; >= 0.

    Returns:
        The prefix (possibly empty).
    """
    user_positions = [i for i, m in enumerate(messages) if m.role == "user"]
    if keep_turns <= 0:
        return list(messages)
    if len(user_positions) <= keep_turns:
        return []
    cut = user_positions[-keep_turns]
    return list(messages[:cut])


def compact(
    store: Store,
    session_id: str,
    *,
    keep_turns: int,
    root_keys: Sequence[str],
    summarizer: Summarizer = extractive_summary,
) -> CompactionReport:
    """Summarize the session's prefix and publish a checkpoint, rotating the root records.

    Call it with turn execution of the session held off (the runtime's per-session lock).

    Args:
        store: The store.
        session_id: The session.
        keep_turns: Recent user turns kept verbatim.
        root_keys: Root reuse keys to rotate on publication (adapter names); child keys
            (``<adapter>::...``) are never rotated.
        summarizer: Makes the summary.

    Returns:
        The :class:`CompactionReport`; ``published`` False with a ``reason`` when the summary
        failed, was incomplete or ineffective, or there was nothing to compact.

    Raises:
        NotFoundError: no such session.
        StoreError: the database failed.
    """
    session = store.get_session(session_id)
    generation = session.clear_generation
    previous = store.latest_checkpoint(session_id, generation)
    after = previous.through_seq if previous is not None else 0
    uncovered = store.list_messages(session_id, generation=generation, after_seq=after)
    prefix = compaction_prefix(uncovered, keep_turns)
    if not prefix:
        since = "since the last checkpoint" if previous is not None else "in this conversation"
        need = "no turn" if keep_turns == 0 else f"fewer than {keep_turns + 1} turns"
        return CompactionReport(
            False,
            reason=f"nothing to compact: {need} {since} (a compaction keeps the last {keep_turns} verbatim)",
        )
    covered_chars = sum(len(m.text) for m in prefix) + (len(previous.summary) if previous else 0)
    first_seq = previous.first_seq if previous is not None else prefix[0].seq
    through_seq = prefix[-1].seq
    try:
        summary = summarizer(previous, prefix)
    except Exception as exc:  # a summarizer's failure is the report's reason; nothing rotates
        log.warning("the summary of session %s failed", session_id, exc_info=exc)
        return CompactionReport(False, covered_chars=covered_chars, reason=f"the summary failed: {exc}")
    if not summary.strip():
        return CompactionReport(
            False, covered_chars=covered_chars, reason="the summary is incomplete (empty)"
        )
    missing = (
        [m.seq for m in prefix if f"[{m.seq}]" not in summary] if summarizer is extractive_summary else []
    )
    if missing:
        return CompactionReport(
            False,
            covered_chars=covered_chars,
            reason=f"the summary is incomplete (messages {missing} missing)",
        )
    if len(summary) >= covered_chars:
        return CompactionReport(
            False,
            covered_chars=covered_chars,
            summary_chars=len(summary),
            reason=(
                f"the summary ({len(summary)} characters) would not be shorter than what it covers "
                f"({covered_chars} characters); short conversations are cheaper to resend as they are"
            ),
        )
    existing = {record.key for record in store.list_vendor_sessions(session_id)}
    rotate = [k for k in root_keys if not is_child_key(k) and k in existing]
    checkpoint = store.publish_checkpoint(
        session_id,
        generation=generation,
        first_seq=first_seq,
        through_seq=through_seq,
        summary=summary,
        covered_chars=covered_chars,
        rotate_keys=rotate,
    )
    if checkpoint is None:
        return CompactionReport(False, reason="the session was cleared meanwhile; nothing published")
    return CompactionReport(
        True,
        checkpoint_id=checkpoint.id,
        first_seq=first_seq,
        through_seq=through_seq,
        covered_messages=len(prefix),
        covered_chars=covered_chars,
        summary_chars=len(summary),
        rotated=rotate,
    )


def uncovered_chars(store: Store, session_id: str) -> int:
    """Characters of the current generation's messages after the latest checkpoint (one store read,
    :meth:`~octipusd.store.Store.uncovered_chars`; 0 for an unknown session)."""
    return store.uncovered_chars(session_id)
