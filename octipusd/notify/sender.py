"""One send of one notification to one Apprise URL, in a worker thread, with a deadline.

Apprise is synchronous: :func:`send` runs it in a worker thread under the notifier's own limiter
(abandoned if the caller is cancelled; the send itself is bounded by its deadline), and never raises for a failed
delivery: it returns a :class:`SendOutcome` whose ``error`` is scrubbed of the URL's secret parts
(:func:`scrub`), so it may be logged and shown in health.

A body holds agent-controlled text (a command, a path): it is sent as plain text
(``NotifyFormat.TEXT``), so Apprise escapes it for a target that renders HTML (e-mail) or Markdown
(Telegram, Discord...) and a multi-format target (Slack) sends it unformatted; markup in a subject
arrives as text, never as a live link.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

import anyio
import anyio.to_thread

from octipusd.notify.messages import Notification
from octipusd.settings_notify import SEND_GRACE_S, redact_url

__all__ = ["SendOutcome", "scrub", "send"]

log = logging.getLogger("octipusd.notify")

#: Characters of an error message kept (Apprise's messages may quote a whole response).
ERROR_CHARS: Final = 300
#: Pieces of a URL shorter than this are not masked (``json``, ``80``, ``x``: nothing secret).
_SECRET_MIN_CHARS: Final = 4
#: What separates the pieces of a URL.
_PIECES: Final = re.compile(r"[/:@?&=#,;+]")


@dataclass(frozen=True)
class SendOutcome:
    """What one send to one target came to.

    Attributes:
        target: The redacted target (scheme and host).
        ok: Whether Apprise reported the notification delivered.
        error: Why not (scrubbed of the URL's secrets), or None.
    """

    target: str
    ok: bool
    error: str | None = None


def scrub(text: str, url: str) -> str:
    """``text`` with every piece of ``url`` that is not in its redacted form masked as ``****``
    (its user, password, path and query parts: where services keep their tokens)."""
    shown = redact_url(url)
    pieces = {p for p in _PIECES.split(url) + _PIECES.split(unquote(url)) if len(p) >= _SECRET_MIN_CHARS}
    for piece in sorted(pieces, key=len, reverse=True):
        if piece not in shown:
            text = text.replace(piece, "****")
    return text


def _send_blocking(url: str, message: Notification, timeout_s: float) -> SendOutcome:
    import apprise  # about 100 ms: loaded at the first send, not at the daemon's start-up

    target = redact_url(url)
    sender = apprise.Apprise()
    if not sender.add(url):
        return SendOutcome(target, False, "Apprise cannot read this URL (see notify.urls)")
    try:
        result = sender.notify(
            title=message.title,
            body=message.body,
            body_format=apprise.NotifyFormat.TEXT,  # escaped for HTML and Markdown targets
            timeout=timeout_s,
            log_level=logging.WARNING,
        )
    except Exception as exc:  # a plugin's bug: recorded as this send's failure, with its traceback
        log.exception("notification to %s raised", target)
        return SendOutcome(target, False, scrub(f"{type(exc).__name__}: {exc}", url)[:ERROR_CHARS])
    if result:
        return SendOutcome(target, True)
    said = [entry.message for service in result for entry in service.logs()]
    error = "; ".join(dict.fromkeys(said)) or f"not delivered ({result.status.name.lower()})"
    return SendOutcome(target, False, scrub(error, url)[:ERROR_CHARS])


async def send(
    url: str, message: Notification, timeout_s: float, limiter: anyio.CapacityLimiter
) -> SendOutcome:
    """Send ``message`` to ``url`` once, within about ``timeout_s`` seconds.

    Args:
        url: An Apprise URL (``notify.urls``).
        message: What to send.
        timeout_s: Deadline of the send (Apprise's own call deadline; the thread is waited for a
            little longer, then the send counts as timed out and its thread is left to end).
        limiter: The notifier's own worker-thread tokens: a send that hangs never takes one of the
            tokens the store's calls (anyio's default limiter) need. Waiting for a token counts
            against the deadline.

    Returns:
        The outcome; a failed delivery is an outcome, not an exception.
    """
    outcome: SendOutcome | None = None
    with anyio.move_on_after(timeout_s + SEND_GRACE_S):
        outcome = await anyio.to_thread.run_sync(
            _send_blocking, url, message, timeout_s, abandon_on_cancel=True, limiter=limiter
        )
    if outcome is None:
        return SendOutcome(redact_url(url), False, f"no answer within {timeout_s + SEND_GRACE_S:g} s")
    return outcome
