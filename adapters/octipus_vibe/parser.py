"""The stream parser of one Vibe run, whatever its transport.

``Adapter.new_parser()`` takes no argument, so one :class:`VibeParser` serves both transports
and tells them apart by the first JSON line: JSON-RPC messages (``"jsonrpc": "2.0"``) are
``vibe-acp`` (:class:`~octipus_vibe.acp_parser.AcpParser`), the headless wrapper's header and Vibe's
journal entries are headless (:class:`~octipus_vibe.headless.HeadlessParser`). Lines that are
not JSON objects become :class:`~octipusd.adapter.UnparsedLine` in either case.
"""

from __future__ import annotations

import logging
from typing import Literal

from octipusd.adapter import JSON, StreamParserDefaults, UnknownEvent, UnparsedLine, Usage, VendorEvent

from ._coerce import as_str, decode_line, load_object
from .acp_parser import AcpParser
from .headless import HeadlessParser, is_headless_object

log = logging.getLogger("octipus_vibe")


class VibeParser(StreamParserDefaults):
    """Stateful parser of one Vibe process's stdout (implements :class:`octipusd.adapter.StreamParser`).

    Not thread-safe; one per run. Never raises on vendor input: undecodable bytes are replaced,
    text that is not a JSON object becomes :class:`UnparsedLine`, and an object whose handling
    fails unexpectedly becomes :class:`UnknownEvent`.

    Attributes:
        transport: ``acp`` or ``headless`` once the first JSON line told, else None.
        acp: The ACP state (always present; unused by a headless run).
        headless: The headless state (always present; unused by an ACP run).
    """

    def __init__(self) -> None:
        self.transport: Literal["acp", "headless"] | None = None
        self.acp = AcpParser()
        self.headless = HeadlessParser()

    def feed(self, line: bytes) -> list[VendorEvent]:
        """Parse one complete stdout line (without its newline) into events.

        Args:
            line: The raw line, any length, any bytes.

        Returns:
            Zero or more events, in stream order (see :class:`~octipus_vibe.acp_parser.AcpParser` and
            :class:`~octipus_vibe.headless.HeadlessParser`).
        """
        text = decode_line(line)
        obj = load_object(text)
        if obj is None:
            return [UnparsedLine(raw=None, text=text)]
        try:
            return self._dispatch(obj)
        except Exception:  # last resort, logged: an unforeseen shape must not kill the run
            kind = as_str(obj.get("type")) or as_str(obj.get("method"))
            log.exception("Vibe %s line of an unforeseen shape, kept as an unknown event", kind)
            return [UnknownEvent(raw=obj, type=kind)]

    def _dispatch(self, obj: JSON) -> list[VendorEvent]:
        if self.transport is None:
            if obj.get("jsonrpc") == "2.0":
                self.transport = "acp"
            elif is_headless_object(obj):
                self.transport = "headless"
            else:
                return [UnknownEvent(raw=obj, type=as_str(obj.get("type")))]
        if self.transport == "acp":
            return self.acp.feed_object(obj)
        return self.headless.feed_object(obj)

    def total_usage(self) -> Usage:
        """Usage of the run so far (tokens); estimated and flagged so in headless runs without export."""
        if self.transport == "headless":
            return self.headless.total_usage()
        return self.acp.total_usage()

    def finish(self, exit_code: int | None) -> list[VendorEvent]:
        """Final events after the process ended.

        ACP: a message still being collected, as a :class:`~octipusd.adapter.TextEvent`. Headless:
        the usage and the :class:`~octipusd.adapter.ResultEvent` (see
        :meth:`~octipus_vibe.headless.HeadlessParser.finish`). A run that printed no JSON at all
        gets nothing here: the runtime reports it with the exit code and stderr.

        Args:
            exit_code: The process's exit status (negative: killed by that signal), or None.
        """
        try:
            if self.transport == "acp":
                return self.acp.finish()
            if self.transport == "headless":
                return self.headless.finish(exit_code)
        except Exception:  # logged: never raise on vendor input
            log.exception("Vibe %s output could not be finished; its final events are lost", self.transport)
            return []
        return []
