"""Parsing agy's buffered print-mode output into typed Octipus events.

agy's print mode (the installed build, seed 003) prints the agent's answer as plain text when the
turn is over: no JSON, no conversation id, no usage. The runtime feeds stdout line by line and
calls :meth:`AntigravityTextParser.finish` once after stdout EOF and process exit; so the parser
collects every line and produces all its events at the end:

======================  ==============================================================
call                    events
======================  ==============================================================
``feed(line)``          none (the line is collected)
``finish(exit_code)``   :class:`TextEvent` with the whole answer (when non-empty), then
                        :class:`UsageEvent` with the estimate, then :class:`ResultEvent`
later calls             none
======================  ==============================================================

No :class:`SessionEvent` is ever emitted: agy has no conversation id to confirm and no MCP
server list (Octipus tools go through the ``octipus-bridge`` terminal helper), so the runtime's
MCP bridge check (``SessionEvent.mcp_servers["octipus"]``) does not apply to this vendor.

Result (``ResultEvent``):

* exit 0 with a non-empty answer: success (``subtype="success"``);
* exit 0 with an empty answer: an error (``subtype="empty_response"``): in print mode a tool that
  waits for a review nobody can give ends the run "successfully" with an empty answer
  (sources.md §4, observed on agy 1.1.18 by a third party), which must not pass for a result;
* any other exit: an error (``subtype="error"``) naming the status; a negative code is a signal.

Text clean-up: ANSI escape sequences are removed (agy is a terminal program; the launch also sets
``NO_COLOR``), a carriage-return-overwritten line keeps its last segment, and leading and trailing
blank lines are dropped. At most :data:`MAX_TEXT_CHARS` characters are kept; the rest is replaced
by a note (the usage estimate still counts everything).

Usage (seed 003 "Permissions and limits"): agy reports none, so it is estimated at one token per
:data:`CHARS_PER_TOKEN` characters (rounded up) of the prompt handed to agy (input) and of the
printed answer (output), flagged ``estimated=True``.
"""

from __future__ import annotations

import re
from typing import Final

from octipusd.adapter import ResultEvent, StreamParserDefaults, TextEvent, Usage, UsageEvent, VendorEvent
from octipusd.adapterkit import decode_line

#: Characters per estimated token (seed 003: "about four characters per token").
CHARS_PER_TOKEN: Final = 4
#: Largest answer kept in events, in characters (a runaway answer must not exhaust the daemon).
MAX_TEXT_CHARS: Final = 4 * 1024 * 1024

#: CSI (``ESC [ ... final``), OSC (``ESC ] ... BEL|ESC \``) and two-character escape sequences.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")

#: Text of the error for an empty answer with exit 0.
EMPTY_RESPONSE_ERROR: Final = (
    "agy exited 0 without printing an answer. In print mode a tool that needs a review nobody can give "
    "(agy's toolPermission 'request-review', the default) ends the turn with an empty answer: set "
    "toolPermission in ~/.gemini/antigravity-cli/settings.json, or use permission mode 'full' "
    "(--dangerously-skip-permissions)"
)


def estimate_tokens(chars: int) -> int:
    """Estimate a token count from a character count.

    Args:
        chars: Number of characters (>= 0).

    Returns:
        ``ceil(chars / CHARS_PER_TOKEN)``; 0 for no characters.
    """
    return max(0, (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN)


def clean_line(raw: bytes | bytearray | memoryview | str) -> str:
    """Decode one stdout line and remove terminal control sequences.

    Args:
        raw: The line without its newline (bytes are decoded as UTF-8 with replacement characters).

    Returns:
        The text without ANSI escapes and without a trailing carriage return; when carriage returns
        remain inside the line, only the text after the last one (what a terminal would show).
    """
    text = decode_line(raw)
    text = _ANSI.sub("", text).rstrip("\r")
    if "\r" in text:
        text = text.rsplit("\r", 1)[-1]
    return text


class AntigravityTextParser(StreamParserDefaults):
    """Per-run parser of agy's buffered print-mode stdout (see the module docstring).

    Args:
        input_chars: Characters of the prompt text handed to agy (the input of the usage estimate).
    """

    def __init__(self, input_chars: int = 0) -> None:
        self.input_chars = max(0, input_chars)
        self._lines: list[str] = []
        self._kept_chars = 0
        self._output_chars = 0
        self._truncated = False
        self._finished = False

    def feed(self, line: bytes) -> list[VendorEvent]:
        """Collect one stdout line; never raises, returns no events.

        Args:
            line: One complete line without its newline.

        Returns:
            ``[]``: the answer is only complete at :meth:`finish`.
        """
        if self._finished:
            return []
        text = clean_line(line)
        # +1 counts the newline that joins this line to the previous one
        self._output_chars += len(text) + (1 if self._lines or self._truncated else 0)
        if self._truncated:
            return []
        room = MAX_TEXT_CHARS - self._kept_chars
        if len(text) > room:
            text = text[:room]
            self._truncated = True
        self._lines.append(text)
        self._kept_chars += len(text) + 1
        return []

    def text(self) -> str:
        """The answer collected so far, without leading and trailing blank lines.

        Returns:
            The text (with a truncation note when over :data:`MAX_TEXT_CHARS`).
        """
        text = "\n".join(self._lines).strip("\n")
        if self._truncated:
            text += f"\n[... answer truncated by Octipus after {MAX_TEXT_CHARS} characters]"
        return text

    def total_usage(self) -> Usage:
        """Estimated usage of the run so far (tokens, ``estimated=True``).

        Returns:
            ``Usage(input_tokens=estimate(prompt), output_tokens=estimate(answer so far), estimated=True)``.
        """
        return Usage(
            input_tokens=estimate_tokens(self.input_chars),
            output_tokens=estimate_tokens(self._output_chars),
            estimated=True,
        )

    def finish(self, exit_code: int | None) -> list[VendorEvent]:
        """Produce the run's text, usage and result; called once after stdout EOF and process exit.

        Args:
            exit_code: agy's exit status (negative: killed by that signal), or None when unknown.

        Returns:
            ``[TextEvent?, UsageEvent, ResultEvent]`` the first time, ``[]`` afterwards.
        """
        if self._finished:
            return []
        self._finished = True
        text = self.text()
        usage = self.total_usage()
        events: list[VendorEvent] = []
        if text:
            events.append(TextEvent(raw=None, text=text))
        events.append(UsageEvent(raw=None, usage=usage))
        if exit_code == 0 and text:
            result = ResultEvent(raw=None, is_error=False, subtype="success", text=text, usage=usage)
        elif exit_code == 0:
            result = ResultEvent(
                raw=None,
                is_error=True,
                subtype="empty_response",
                text=None,
                usage=usage,
                errors=(EMPTY_RESPONSE_ERROR,),
            )
        else:
            if exit_code is None:
                why = "agy ended without an exit status"
            elif exit_code < 0:
                why = f"agy was killed by signal {-exit_code}"
            else:
                why = f"agy exited with status {exit_code}"
                if exit_code == 2:
                    why += " (a usage error such as an unknown flag, or a turn that ended in error)"
            result = ResultEvent(
                raw=None, is_error=True, subtype="error", text=text or None, usage=usage, errors=(why,)
            )
        events.append(result)
        return events
