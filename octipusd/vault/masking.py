"""Masking of resolved vault values in the daemon's log.

:data:`RESOLVED` remembers, in memory only, every value the vault resolved in this process (a
tool call's output is masked by the call itself: :func:`octipusd.toolkit.secrets.run_with_secrets`).
:class:`SecretLogFilter` is a :class:`logging.Filter` the composition root installs on the daemon's
log handlers (:func:`install_log_filter`): in every record it replaces each remembered value (and
its base64 and URL encodings, :class:`~octipusd.toolkit.secrets.Masker`) with ``[REDACTED:NAME]``,
in the formatted message (its arguments included), the traceback and the stack.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from octipusd.toolkit.secrets import Masker, map_strings

__all__ = ["RESOLVED", "ResolvedValues", "SecretLogFilter", "install_log_filter"]


class ResolvedValues:
    """The values resolved in this process and the entry each belongs to (thread-safe).

    A value stays remembered for the life of the process (a replaced entry's old value may still
    be in a call's output or a log line), so it holds at most one value per distinct value ever
    resolved.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._names: dict[str, str] = {}  # value -> entry name
        self._masker = Masker({})

    def remember(self, values: Mapping[str, str]) -> None:
        """Remember ``{name: value}`` (empty values are ignored)."""
        with self._lock:
            fresh = {v: n for n, v in values.items() if v and self._names.get(v) != n}
            if not fresh:
                return
            self._names.update(fresh)
            self._masker = Masker((name, value) for value, name in self._names.items())

    def __bool__(self) -> bool:
        return bool(self._masker)

    def mask(self, text: str) -> str:
        """``text`` with every remembered value (and its common encodings) replaced."""
        return self._masker.mask(text)

    def mask_data(self, data: dict[str, Any]) -> dict[str, Any]:
        """An event's data with every remembered value replaced in its strings (keys included);
        ``data`` itself when nothing was ever resolved (the common case costs nothing)."""
        masker = self._masker
        if not masker:
            return data
        scrubbed: dict[str, Any] = map_strings(data, masker.mask, keys=True)
        return scrubbed

    def clear(self) -> None:
        """Forget every value (tests)."""
        with self._lock:
            self._names.clear()
            self._masker = Masker({})


#: The values resolved in this process.
RESOLVED = ResolvedValues()


class SecretLogFilter(logging.Filter):
    """Replaces resolved vault values in a log record with ``[REDACTED:NAME]``; never drops one.

    Args:
        values: The values to mask (the process's :data:`RESOLVED` by default).
    """

    def __init__(self, values: ResolvedValues = RESOLVED) -> None:
        super().__init__()
        self._values = values

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask ``record`` in place (the formatted message replaces ``msg`` and ``args``)."""
        values = self._values
        if not values:
            return True
        try:
            message = record.getMessage()
        except (TypeError, ValueError, KeyError, IndexError):  # the handler reports the bad format
            return True
        masked = values.mask(message)
        if masked != message:
            record.msg, record.args = masked, ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = values.mask(record.exc_text)
        if record.stack_info:
            record.stack_info = values.mask(record.stack_info)
        return True


def install_log_filter(log_filter: logging.Filter) -> int:
    """Add ``log_filter`` to every handler of the root logger and of every logger configured now
    (uvicorn's included), once each; call it again after something adds handlers.

    Returns:
        How many handlers it was added to by this call.
    """
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values() if isinstance(logger, logging.Logger)
    ]
    added = 0
    for logger in loggers:
        for handler in logger.handlers:
            if log_filter not in handler.filters:
                handler.addFilter(log_filter)
                added += 1
    return added
