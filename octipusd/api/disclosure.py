"""What no error answer of the daemon carries, and the guard at the error boundary that keeps it out
(issue 26 item 6).

The daemon's private text is its database URL (as configured, as rendered and as displayed), the
database's password, its Unix socket folders and its SQLite file
(:func:`~octipusd.store.engine.private_parts`), the data folder (``$XDG_DATA_HOME/octipus``, which
holds the vault's key, the database and the runs' files), and the API's Unix socket and its folder.
The daemon's log is where they belong.

The messages are written without them (the store's errors name the operation that failed and the
driver's error class, and log the rest: :meth:`octipusd.store.repository.Store._guarded`). The
guard is the net under that: :class:`ErrorBodyGuard` (an ASGI middleware, outermost) reads every
answer of status 400 or more (JSON error bodies and error pages alike) and replaces each piece of
private text, in its plain, URL-, JSON- and HTML-encoded forms, with ``[REDACTED:<what>]``
(``[REDACTED:data folder]/vault.key``); the answer as it was is logged. The 500 of an unexpected
exception is written outside every middleware, so its handler hides the same text itself
(:meth:`PrivateText.hide`).
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from octipusd.toolkit.secrets import Masker

__all__ = ["ErrorBodyGuard", "PrivateText"]

log = logging.getLogger("octipusd.api")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The lowest status whose body is an error answer, read by :class:`ErrorBodyGuard`.
FIRST_ERROR_STATUS = 400


def _encodings(value: str) -> Iterable[str]:
    """``value`` as it appears in a JSON string and in HTML text (the masker adds the URL and
    base64 forms)."""
    yield value
    yield json.dumps(value)[1:-1]
    yield json.dumps(value, ensure_ascii=False)[1:-1]
    yield html.escape(value)


@dataclass(frozen=True)
class PrivateText:
    """The private text of one daemon (the module docstring), hidden where it would be shown.

    Build it with :meth:`of`; the default hides nothing (an app built without a daemon, in tests).

    Attributes:
        masker: Replaces each piece, in each of its forms, with ``[REDACTED:<what>]``.
    """

    masker: Masker = field(default_factory=lambda: Masker({}))

    @classmethod
    def of(cls, pieces: Iterable[tuple[str, str]]) -> PrivateText:
        """The private text made of ``pieces``, each ``(what, text)`` (``("data folder", "/home/...")``)."""
        return cls(Masker((what, form) for what, text in pieces if text for form in _encodings(text)))

    @classmethod
    def of_daemon(cls, database: Iterable[tuple[str, str]], data_dir: Path, socket: Path) -> PrivateText:
        """The private text of a daemon: its database URL's parts
        (:func:`~octipusd.store.engine.private_parts`), its data folder and its socket (and the
        socket's folder)."""
        paths = [("data folder", data_dir), ("API socket", socket), ("API socket folder", socket.parent)]
        return cls.of([*database, *((what, str(path)) for what, path in paths)])

    def hide(self, text: str) -> str:
        """``text`` with every piece of private text replaced by ``[REDACTED:<what>]``."""
        return self.masker.mask(text)


class ErrorBodyGuard:
    """ASGI middleware: every answer of status 400 or more leaves with its private text hidden.

    Other answers (a stream among them) pass untouched. An error answer is small: it is read whole,
    hidden, its ``content-length`` set again, and the original logged when something was hidden.

    Args:
        app: The application.
        private: What to hide.
    """

    def __init__(self, app: ASGIApp, private: PrivateText) -> None:
        self.app = app
        self.private = private

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.private.masker:
            await self.app(scope, receive, send)
            return
        start: Message | None = None
        chunks: list[bytes] = []

        async def guarded(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= FIRST_ERROR_STATUS:
                start = message
                return
            if start is None or message["type"] != "http.response.body":
                await send(message)
                return
            chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                await self._send_hidden(scope, start, b"".join(chunks), send)

        await self.app(scope, receive, guarded)

    async def _send_hidden(self, scope: Scope, start: Message, body: bytes, send: Send) -> None:
        text = body.decode("utf-8", errors="surrogateescape")
        hidden = self.private.hide(text)
        if hidden != text:
            log.warning(
                "the answer %s to %s %s named private text, hidden in the answer; it was: %s",
                start["status"],
                scope.get("method", ""),
                scope.get("path", ""),
                text,
            )
            body = hidden.encode("utf-8", errors="surrogateescape")
        headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        await send({**start, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
