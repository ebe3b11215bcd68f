"""Total (never-raising) accessors for vendor JSON of unknown shape.

The parser must never raise on vendor input (``octipusd.adapter`` module docstring), so every
field read goes through these helpers, which return a neutral value when a field is missing or of
an unexpected type instead of failing.
"""

from __future__ import annotations

import math

from octipusd.adapter import Usage
from octipusd.adapterkit import (  # re-exported: this package's parsers import them from here
    as_cost as as_cost,
    as_dict as as_dict,
    as_list as as_list,
    as_str as as_str,
    as_tokens as as_tokens,
    decode_line as decode_line,
    field_max as field_max,
    is_zero as is_zero,
    load_object as load_object,
    to_text as to_text,
)


def as_int(value: object) -> int | None:
    """Return ``value`` as an int when it is an integral JSON number (bools excluded), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def usage_from_totals(prompt: int, completion: int, cached: int, *, estimated: bool = False) -> Usage:
    """Build a :class:`Usage` from OpenAI-style counts (tokens).

    Vibe's counts follow the Chat Completions convention: the prompt count includes the cached
    prompt tokens. Octipus's ``input_tokens`` (like Anthropic's) excludes them, so
    ``input_tokens = prompt - cached`` and ``cache_read_input_tokens = cached``.

    Args:
        prompt: Prompt tokens, cached ones included.
        completion: Completion tokens.
        cached: Cached prompt tokens.
        estimated: Whether the figures are an estimate.

    Returns:
        The usage; every field >= 0.
    """
    cached = max(min(cached, prompt), 0)
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=max(completion, 0),
        cache_read_input_tokens=cached,
        estimated=estimated,
    )
