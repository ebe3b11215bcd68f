"""What octipusctl writes: its two consoles, and text that did not originate in Octipus made inert.

Every command writes through :data:`console` (stdout) or :data:`err` (stderr), asks through
:func:`confirm`, and writes plain text (a diff) with :func:`write_plain`; ``--json`` output is
:func:`octipusd.ctl.common.print_json`'s exact JSON (ASCII: a control character in it is a
``\\u001b`` escape, never the character).

Two rules keep a model's or a vendor's text from acting on the person's terminal:

- **Markup**: a value that did not originate in Octipus is put into a rich markup string only
  through :func:`safe`, which makes its control characters visible (:func:`octipusd.inert.inert`)
  and escapes its rich markup (``rich.markup.escape``), so ``[bold red]`` or ``[link=...]`` in it
  is shown as written. The consoles also never read emoji codes (``:warning:`` stays text).
- **Control characters**: both consoles pass everything they render through
  :func:`~octipusd.inert.inert` once more at the end (a render hook on every segment of text;
  rich's own styles are not text and stay), so a value printed without :func:`safe` still writes
  no escape sequence; only its markup would be read.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from typing import Final

import typer
from rich.console import Console, ConsoleOptions, ConsoleRenderable, RenderHook
from rich.markup import escape
from rich.measure import Measurement
from rich.segment import Segment

from octipusd.inert import inert

__all__ = ["confirm", "console", "err", "inert", "safe", "write_plain"]


#: A backslash before a ``[`` that opens no tag: rich's markup reads ``\\[`` there as ``[``
#: (``rich.markup.escape`` escapes only the ``[`` of what looks like a tag, as this lookahead does).
_BACKSLASH_BEFORE_TEXT_BRACKET: Final = re.compile(r"\\(?=\[(?![a-z#/@][^\[]*?\]))")
#: An empty span of a style: after a value's trailing backslashes (doubled), it makes rich read them
#: as that many backslashes whatever follows the value, a tag, plain text or nothing.
_AFTER_TRAILING_BACKSLASHES: Final = "[dim][/dim]"
#: What may follow the "[" of a tag (rich's markup): a value starting so could end a tag begun before it.
_TAG_START: Final = re.compile(r"[a-z#/@]")


def safe(value: object) -> str:
    """``value`` as text for a rich markup string: control characters visible, markup escaped.

    rich shows the result exactly as :func:`~octipusd.inert.inert` leaves the value, ``[bold]``,
    ``[link=...]``, ``:emoji:`` and backslashes included, wherever it is put in the markup.

    Args:
        value: Anything that did not originate in Octipus (None is "").
    """
    text = _BACKSLASH_BEFORE_TEXT_BRACKET.sub(r"\\\\", inert("" if value is None else str(value)))
    body = text.rstrip("\\")
    if len(body) == len(text):
        shown = escape(text)
    else:
        shown = escape(body) + "\\" * (2 * (len(text) - len(body))) + _AFTER_TRAILING_BACKSLASHES
    # a tag never holds a "[": an empty span before the value keeps a "[" just before it (the format's
    # or another value's) from opening a tag in it, one after it keeps a "[" it leaves open from
    # closing on what follows it (two values side by side: "abc[/x" then "]tail")
    if _TAG_START.match(text):
        shown = _AFTER_TRAILING_BACKSLASHES + shown
    if "[" in text.rpartition("]")[2] and not shown.endswith(_AFTER_TRAILING_BACKSLASHES):
        shown += _AFTER_TRAILING_BACKSLASHES
    return shown


class _Inert:
    """A renderable rendered as its wrapped one, with every text segment made inert."""

    def __init__(self, renderable: ConsoleRenderable) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Segment]:
        for segment in console.render(self.renderable, options):
            if segment.control is None and segment.text:
                shown = inert(segment.text)
                if shown != segment.text:
                    segment = Segment(shown, segment.style)
            yield segment

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)


class _InertHook(RenderHook):
    """Wraps everything a console prints in :class:`_Inert`."""

    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Inert(renderable) for renderable in renderables]


def _inert_console(*, stderr: bool = False, width: int | None = None) -> Console:
    made = Console(stderr=stderr, width=width, highlight=False, soft_wrap=True, emoji=False)
    made.push_render_hook(_InertHook())
    return made


# not a terminal (pipes, logs): wide enough that whole ids and paths fit in tables
console = _inert_console(width=None if sys.stdout.isatty() else 200)
err = _inert_console(stderr=True)


def confirm(question: str, default: bool = False) -> bool:
    """Ask a yes/no question on the terminal; ``question`` may quote text of any origin."""
    return typer.confirm(inert(question), default=default)


def write_plain(text: str, *, unchanged: bool = False) -> None:
    """Write ``text`` (of any origin) on stdout, inert, ending with a newline.

    Args:
        text: The text, e.g. a diff.
        unchanged: Write it as it is (only where the caller made sure that stdout is no terminal).
    """
    shown = text if unchanged else inert(text)
    sys.stdout.write(shown if not shown or shown.endswith("\n") else shown + "\n")
