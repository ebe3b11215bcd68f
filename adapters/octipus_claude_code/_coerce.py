"""Total (never-raising) accessors for vendor JSON of unknown shape.

The parser must never raise on vendor input (``octipusd.adapter`` module docstring), so every
field read goes through these helpers, which return a neutral value when a field is missing or
of an unexpected type instead of failing.
"""

from __future__ import annotations

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


def parse_usage(value: object) -> Usage | None:
    """Read an Anthropic ``usage`` object into :class:`Usage` (tokens).

    Fields read: ``input_tokens``, ``output_tokens``, ``cache_creation_input_tokens``,
    ``cache_read_input_tokens`` (observed.md §1.3 ``result.usage``; the same keys appear in
    ``assistant.message.usage``). Other keys (``server_tool_use``, ``service_tier``...) are ignored.

    Args:
        value: The decoded ``usage`` value.

    Returns:
        The usage, or None when ``value`` is not an object.
    """
    if not isinstance(value, dict):
        return None
    return Usage(
        input_tokens=as_tokens(value.get("input_tokens")),
        output_tokens=as_tokens(value.get("output_tokens")),
        cache_creation_input_tokens=as_tokens(value.get("cache_creation_input_tokens")),
        cache_read_input_tokens=as_tokens(value.get("cache_read_input_tokens")),
    )
