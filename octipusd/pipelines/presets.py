"""The preset pipeline templates that ship with Octipus (``octipusd/pipelines/presets/*.json``).

Each file is a template's export envelope; :func:`presets` parses them once. Presets are not stored
rows: every user sees them, nobody can change them, and their ids are ``preset:<name>``
(:data:`PRESET_ID_PREFIX`). A preset that does not parse is a packaging bug and fails loudly.

* ``plan-implement-verify``: plan the goal as items, then implement each item and verify it with a
  command (a QA stage that sends its issues back to the implementer, twice at most);
* ``review-branch``: a read-only review of a branch against a base;
* ``fix-failing-check``: diagnose a failing command, fix it, verify it passes.
"""

from __future__ import annotations

import json
from functools import cache
from importlib.resources import files
from typing import Final

from octipusd.pipelines.templates import Template, parse_template

__all__ = ["PRESET_ID_PREFIX", "preset_id", "presets"]

#: The id of a preset is this prefix and its name.
PRESET_ID_PREFIX: Final = "preset:"


def preset_id(name: str) -> str:
    """The id of the preset named ``name``."""
    return PRESET_ID_PREFIX + name


@cache
def presets() -> tuple[Template, ...]:
    """The preset templates, by name (parsed once; the default stage limit applies)."""
    folder = files("octipusd.pipelines").joinpath("presets")
    found = [
        parse_template(json.loads(entry.read_text(encoding="utf-8")))
        for entry in folder.iterdir()
        if entry.name.endswith(".json")
    ]
    return tuple(sorted(found, key=lambda t: t.name))
