"""One machine-readable line per benchmark figure, for the table ``make bench`` prints.

Each benchmark calls :func:`record` at the end of its ``main`` for the figures issue 13's table
names; the line goes to stdout with the benchmark's own output, and ``bench/run_all.py`` collects
the lines of every benchmark it runs (:func:`parse`) and prints them as one table. A benchmark run
on its own just prints the lines too.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

__all__ = ["PREFIX", "Result", "parse", "record"]

#: Marks a result line in a benchmark's stdout.
PREFIX = "BENCH-RESULT "


@dataclass(frozen=True)
class Result:
    """One figure of the table.

    Attributes:
        figure: What was measured (e.g. ``"bridge call ratio (get_work_plan)"``).
        measured: The value as shown, with its unit (e.g. ``"1.04"``, ``"12.3 ms"``).
        target: The issue's target (e.g. ``"<= 1.1"``), or ``"-"`` when it names none.
        met: Whether the target is reached; None when there is no target.
    """

    figure: str
    measured: str
    target: str
    met: bool | None


def record(figure: str, measured: str, target: str = "-", met: bool | None = None) -> None:
    """Print one result line (``BENCH-RESULT {json}``) on stdout, flushed at once."""
    print(PREFIX + json.dumps(asdict(Result(figure, measured, target, met))), flush=True)


def parse(line: str) -> Result | None:
    """The result on a line of a benchmark's stdout, or None for any other line."""
    if not line.startswith(PREFIX):
        return None
    data = json.loads(line[len(PREFIX) :])
    return Result(str(data["figure"]), str(data["measured"]), str(data["target"]), data["met"])
