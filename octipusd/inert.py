"""Text that did not originate in Octipus, made inert for a terminal, a notification or a title.

A model or a vendor controls much of what Octipus shows: assistant text, tool inputs and
outputs, notices, errors, session titles, file names. A terminal acts on the control characters
in such text: an escape sequence (CSI, OSC, DCS, APC, PM, SOS, all introduced by ESC or by a C1
control) can clear the screen, move the cursor and overwrite a status line, write the
clipboard (OSC 52) or hide a link (OSC 8); a lone carriage return overwrites the line it ends.
:func:`inert` is the one rule every client applies before such text reaches a person
(``octipusctl`` through :mod:`octipusd.ctl.output`, the page's titles, the daemon's
notifications): every C0 control except newline and tab, DEL, every C1 control, and every lone
surrogate (which no output encoding can write) is replaced by its visible escape (``\\x1b``,
``\\x9b``, ``\\ud800``), so a person sees that something was there and nothing acts. A carriage
return that ends a line (``\\r\\n``) is a line end and becomes ``\\n``.

The rest of an escape sequence is printable text once its introducer is visible (``\\x1b[2J``
shows as those seven characters), so no sequence needs parsing. Markup of a client's own
renderer (rich's ``[bold]``) is that client's business (:func:`octipusd.ctl.output.safe`).
"""

from __future__ import annotations

from typing import Final

__all__ = ["KEPT_CONTROLS", "inert"]

#: The control characters text keeps as they are: newline and tab.
KEPT_CONTROLS: Final = frozenset("\n\t")

_C0: Final = range(0x00, 0x20)
_DEL_AND_C1: Final = range(0x7F, 0xA0)
_SURROGATES: Final = range(0xD800, 0xE000)

#: code point -> its visible escape, for str.translate.
_VISIBLE: Final[dict[int, str]] = {
    **{c: f"\\x{c:02x}" for c in (*_C0, *_DEL_AND_C1) if chr(c) not in KEPT_CONTROLS},
    **{c: f"\\u{c:04x}" for c in _SURROGATES},
}


def inert(text: str) -> str:
    """``text`` with every control character a terminal acts on shown as its escape.

    Args:
        text: Any text (of a model, a vendor, a tool, a person other than the reader).

    Returns:
        The same text where ``\\r\\n`` is ``\\n`` and every other C0 control but newline and tab,
        DEL, every C1 control and every lone surrogate is its visible escape (``\\x1b``,
        ``\\x07``, ``\\x9b``, ``\\ud800``). It holds no character of Unicode category Cc except
        newline and tab, and no surrogate; text without such characters comes back unchanged.
    """
    return text.replace("\r\n", "\n").translate(_VISIBLE)
