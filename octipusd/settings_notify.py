"""``notify``: where Octipus sends notifications (Apprise URLs) and when (issue 16, item 3).

::

    [notify]
    urls = ["ntfy://ntfy.sh/my-octipus-topic"]   # Apprise URLs (empty: notifications off)
    finishedAfterSeconds = 300                   # a run that ended well notifies only past this
    attempts = 4                                 # sends of one notification to one target at most
    backoffSeconds = 2.0                         # wait before the first retry; doubled each retry
    sendTimeoutSeconds = 10.0                    # one send to one target, connecting included

From the environment: ``OCTIPUS_NOTIFY__URLS='["json://127.0.0.1:8080/hook"]'`` (a JSON list).

The URLs carry tokens: nothing shows them whole. :func:`redact_url` gives the form health, the API,
the log and error messages use (scheme and host, as Apprise's privacy form masks them).

This module holds only the models; :mod:`octipusd.settings` mounts them as ``Settings.notify``.
"""

from __future__ import annotations

import logging
from typing import Final
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["MAX_SEND_TIMEOUT_S", "NOTIFY_ACCEPTED", "SEND_GRACE_S", "NotifySettings", "redact_url"]

#: Longest ``notify.sendTimeoutSeconds`` (seconds).
MAX_SEND_TIMEOUT_S: Final = 120.0
#: Seconds a send's worker thread is waited for past Apprise's own deadline (then the send counts
#: as timed out): one send lasts at most ``sendTimeoutSeconds`` plus this.
SEND_GRACE_S: Final = 2.0

#: What each key accepts, for error messages.
NOTIFY_ACCEPTED: Final[dict[str, str]] = {
    "notify.urls": "a list of Apprise URLs (https://github.com/caronc/apprise/wiki), e.g. "
    '["ntfy://ntfy.sh/TOPIC"]; empty (the default) turns notifications off',
    "notify.finishedAfterSeconds": "seconds from 0 to 604800 (default 300)",
    "notify.attempts": "a whole number of sends from 1 to 10 (default 4)",
    "notify.backoffSeconds": "seconds from 0.1 to 600 (default 2)",
    "notify.sendTimeoutSeconds": f"seconds from 1 to {MAX_SEND_TIMEOUT_S:g} (default 10)",
}

# Apprise logs a URL it cannot read (or fails to send to) whole, tokens included: its records stay
# out of the daemon's log. Apprise's own per-call capture (handlers on this logger) still hears them,
# and the notifier logs each outcome with the redacted target.
logging.getLogger("apprise").propagate = False
# Apprise sends through requests and urllib3, whose debug records name each request's URL
# ("POST /bot<TOKEN>/sendMessage") and whose warnings may too: they stay out of the daemon's log as
# well (each already has a NullHandler; nothing else in the daemon uses them).
for _name in ("urllib3", "requests"):
    logging.getLogger(_name).propagate = False

#: Apprise URLs ``notify.urls`` may list at most.
MAX_NOTIFY_URLS: Final = 20


def redact_url(url: str) -> str:
    """The form of an Apprise URL that may be shown: its scheme and host (``ntfy://ntfy.sh``).

    The host is taken from Apprise's privacy form of the URL, so a service whose "host" is a token
    (Slack's, Telegram's) shows it masked; a URL Apprise cannot read shows its scheme only.
    """
    import apprise  # about 100 ms: loaded only once a URL is configured

    scheme = urlsplit(url).scheme or "?"
    plugin = apprise.Apprise.instantiate(url)
    if plugin is None:
        return f"{scheme}://?"
    private = urlsplit(plugin.url(privacy=True))  # type: ignore[no-untyped-call]
    try:
        host = private.hostname or ""
        port = f":{private.port}" if private.port else ""
    except ValueError:  # a masked "host" that is not a valid netloc
        host, port = "****", ""
    return f"{private.scheme or scheme}://{host}{port}"


class NotifySettings(BaseModel):
    """``notify``: see the module.

    Attributes:
        urls: Apprise URLs every notification goes to (empty: none is sent).
        finishedAfterSeconds: A run that ended other than ``failed`` notifies only when it ran
            longer than this (seconds, from its start to its end); a failed run always notifies.
        attempts: Sends of one notification to one target at most (the first included).
        backoffSeconds: Wait before the first retry (seconds); each further retry waits twice the
            one before.
        sendTimeoutSeconds: Deadline of one send to one target (seconds).
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    urls: tuple[str, ...] = Field(default=(), max_length=MAX_NOTIFY_URLS, repr=False)
    finishedAfterSeconds: float = Field(default=300.0, ge=0, le=604_800)
    attempts: int = Field(default=4, ge=1, le=10)
    backoffSeconds: float = Field(default=2.0, ge=0.1, le=600)
    sendTimeoutSeconds: float = Field(default=10.0, ge=1, le=MAX_SEND_TIMEOUT_S)

    @field_validator("urls")
    @classmethod
    def _apprise_urls(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        """Each URL must be one Apprise can send to; a bad one is named by position and redacted form."""
        import apprise

        for index, url in enumerate(urls):
            if apprise.Apprise.instantiate(url) is None:
                raise ValueError(
                    f"urls[{index}] ({redact_url(url)}) is not a URL Apprise can send to: check its "
                    "scheme and its parts against the Apprise wiki page of that service"
                )
        return urls
