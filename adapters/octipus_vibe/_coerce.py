"""Total (never-raising) accessors for vendor JSON of unknown shape.

The parser must never raise on vendor input (``octipusd.adapter`` module docstring), so every
field read goes through these helpers, which return a neutral value when a field is missing or of
an unexpected type instead of failing.
"""

from __future__ import annotations

import json
import math
from typing import Any

from octipusd.adapter import JSON, Usage


def as_dict(value: object) -> JSON:
    """Return ``value`` if it is a JSON object, else an empty dict (the same object, not a copy)."""
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


def as_int(value: object) -> int | None:
    """Return ``value`` as an int when it is an integral JSON number (bools excluded), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


def as_tokens(value: object) -> int:
    """Read a token count: a non-negative number; anything else (bool, NaN, text, negative) is 0.

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


def difference(a: Usage, b: Usage) -> Usage:
    """Field-wise ``a - b`` clamped at 0 (tokens); ``estimated`` is ``a``'s."""
    return Usage(
        max(a.input_tokens - b.input_tokens, 0),
        max(a.output_tokens - b.output_tokens, 0),
        max(a.cache_creation_input_tokens - b.cache_creation_input_tokens, 0),
        max(a.cache_read_input_tokens - b.cache_read_input_tokens, 0),
        a.estimated,
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


def decode_line(line: bytes | bytearray | memoryview | str) -> str:
    """Decode one output line as UTF-8 with replacement characters (never raises)."""
    if isinstance(line, str):
        return line
    try:
        return bytes(line).decode("utf-8", errors="replace")
    except Exception:  # an odd buffer object: keep something readable
        return repr(line)


def load_object(text: str) -> JSON | None:
    """Parse ``text`` as a JSON object; None when it is not JSON or not an object."""
    try:
        obj: Any = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None
