"""What a launch sends: the turn's text plus what the vendor conversation has not yet seen.

Seed 003 "What resume actually saves": the next launch sends current guidance and the messages
the vendor has not yet seen, including intervening answers or corrections from another
provider. A resumed launch therefore carries the session messages after the vendor record's
acknowledged cursor; a cold launch carries the latest checkpoint (seed 003 "Compaction") and
every message after it. When there is nothing to carry, the prompt is the turn's text alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from octipusd.store.records import Checkpoint, SessionMessage


@dataclass(frozen=True)
class LaunchPrompt:
    """The text handed to the vendor, and what it covers.

    Attributes:
        text: The prompt.
        carried: Session message seqs included before the turn's own text (ascending).
        checkpoint_id: The checkpoint carried (cold launches), or None.
    """

    text: str
    carried: tuple[int, ...] = ()
    checkpoint_id: int | None = None


def _speaker(message: SessionMessage) -> str:
    if message.role == "user":
        return "user"
    return f"assistant ({message.adapter})" if message.adapter else "assistant"


def render_launch_prompt(
    prompt: str,
    *,
    unseen: Sequence[SessionMessage],
    checkpoint: Checkpoint | None = None,
) -> LaunchPrompt:
    """Compose the launch prompt of a turn.

    Args:
        prompt: The turn's own text.
        unseen: Earlier messages of the session the vendor conversation has not seen, ascending
            by seq (for a resume: after the record's cursor; cold: after the checkpoint).
        checkpoint: The checkpoint summarizing the messages before ``unseen`` (cold launches).

    Returns:
        The :class:`LaunchPrompt`; its text is ``prompt`` unchanged when nothing is carried.
    """
    if not unseen and checkpoint is None:
        return LaunchPrompt(prompt)
    parts: list[str] = []
    if checkpoint is not None:
        parts.append(
            f"[Octipus] Summary of the earlier conversation (messages {checkpoint.first_seq}-"
            f"{checkpoint.through_seq}):\n{checkpoint.summary}"
        )
    if unseen:
        lines = ["[Octipus] Messages of this conversation you have not seen yet:"]
        for message in unseen:
            lines.append(f"--- {_speaker(message)} (message {message.seq}) ---\n{message.text}")
        parts.append("\n".join(lines))
    parts.append(f"[Octipus] The current message:\n{prompt}")
    return LaunchPrompt(
        "\n\n".join(parts),
        tuple(m.seq for m in unseen),
        checkpoint.id if checkpoint is not None else None,
    )
