"""Notifications through Apprise URLs, off the run's hot path (issue 16, item 3).

:class:`~octipusd.notify.notifier.Notifier` hears committed run events and notifies a person when a
run needs them; :mod:`~octipusd.notify.messages` says what is worth a notification and what it
says; :mod:`~octipusd.notify.sender` sends one, in a worker thread, with a deadline. The settings
are ``notify`` (:mod:`octipusd.settings_notify`).
"""

from octipusd.notify.messages import Notification, PageUrl, compose, compose_pipeline, wanted
from octipusd.notify.notifier import Notifier, NotifierLimits, NotifierSnapshot, TargetSnapshot
from octipusd.notify.sender import SendOutcome, scrub, send

__all__ = [
    "Notification",
    "Notifier",
    "NotifierLimits",
    "NotifierSnapshot",
    "PageUrl",
    "SendOutcome",
    "TargetSnapshot",
    "compose",
    "compose_pipeline",
    "scrub",
    "send",
    "wanted",
]
