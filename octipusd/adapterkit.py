"""Shared helpers of the adapter SDK: total (never-raising) accessors for vendor JSON.

Every adapter's parser must never raise on vendor input (``octipusd.adapter`` module docstring),
so field reads go through these helpers, which return a neutral value when a field is missing
or of an unexpected type instead of failing. Adapter packages import them from here rather
than keeping copies.
"""

from __future__ import annotations

import json
import math
from typing import Any

from octipusd.adapter import JSON, Usage

__all__ = ["as_cost", "as_dict", "as_list", "as_str", "as_tokens", "field_max", "is_zero", "to_text"]


def as_dict(value: object) -> JSON:
    """Return ``value`` if it is a JSON object (a dict with string keys), else an empty dict.

    Args:
        value: Any decoded JSON value.

    Returns:
        The same dict object (not a copy), or ``{}``.
    """
    if isinstance(value, dict):
        return value
    return {}


def as_list(value: object) -> list[Any]:
    """Return ``value`` if it is a JSON array, else an empty list."""
    if isinstance(value, list):
        return value
    return []


def as_str(value: object) -> str | None:
    """Return ``value`` if it is a string, else None."""
    return value if isinstance(value, str) else None


def as_tokens(value: object) -> int:
    """Read a token count: a non-negative int; anything else (bool, NaN, text, negative) counts as 0.

    Args:
        value: A decoded JSON value expected to be a token count.

    Returns:
        The count (tokens), clamped at 0; floats are truncated.
    """
    if isinstance(value, bool):
        return 0
    if isinstance(value, int):
        return max(value, 0)
    if isinstance(value, float) and math.isfinite(value):
        return max(int(value), 0)
    return 0


def as_cost(value: object) -> float | None:
    """Read a USD amount: a finite number, else None (bools are not numbers here)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
        return number if math.isfinite(number) else None
    return None


def is_zero(usage: Usage) -> bool:
    """Whether every token field of ``usage`` is 0."""
    return not (
        usage.input_tokens
        or usage.output_tokens
        or usage.cache_creation_input_tokens
        or usage.cache_read_input_tokens
    )


def field_max(a: Usage, b: Usage) -> Usage:
    """Field-wise maximum of two usages (tokens); ``estimated`` if either is."""
    return Usage(
        max(a.input_tokens, b.input_tokens),
        max(a.output_tokens, b.output_tokens),
        max(a.cache_creation_input_tokens, b.cache_creation_input_tokens),
        max(a.cache_read_input_tokens, b.cache_read_input_tokens),
        a.estimated or b.estimated,
    )


def to_text(value: object) -> str:
    """Render any decoded JSON value as compact JSON text (strings stay as they are).

    Never raises: values ``json`` cannot encode fall back to ``str``.
    """
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (ValueError, TypeError, RecursionError):
        pass
    try:
        return str(value)
    except RecursionError:
        return "<value nested too deeply to render>"
