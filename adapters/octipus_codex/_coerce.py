"""Total (never-raising) accessors for vendor JSON of unknown shape.

The parser must never raise on vendor input (``octipusd.adapter`` module docstring), so every
field read goes through these helpers, which return a neutral value when a field is missing or
of an unexpected type instead of failing.
"""

from __future__ import annotations

from octipusd.adapter import Usage
from octipusd.adapterkit import (  # re-exported: this package's parsers import them from here
    as_dict as as_dict,
    as_list as as_list,
    as_str as as_str,
    as_tokens as as_tokens,
    decode_line as decode_line,
    is_zero as is_zero,
    load_object as load_object,
    to_text as to_text,
)


def codex_usage(
    value: object,
    *,
    input_key: str,
    cached_key: str,
    cache_write_key: str,
    output_key: str,
) -> Usage | None:
    """Convert a Codex usage object into Octipus :class:`Usage` (tokens).

    Codex reports OpenAI semantics: the input count *includes* the cached (and cache-written)
    input tokens, and the reasoning tokens are part of the output count. Octipus's
    :class:`Usage` follows Anthropic's split, so the uncached input is
    ``input - cached - cache_write`` (clamped at 0), ``cache_read_input_tokens`` is the cached
    count and ``cache_creation_input_tokens`` the cache-write count.

    Shapes: app-server ``TokenUsageBreakdown`` (``inputTokens``, ``cachedInputTokens``,
    ``cacheWriteInputTokens``, ``outputTokens``; observed-2.md §1.6) and exec
    ``turn.completed.usage`` (``input_tokens``, ``cached_input_tokens``,
    ``cache_write_input_tokens``, ``output_tokens``; observed.md §2.3).

    Args:
        value: The decoded usage object.
        input_key: Name of the total input count.
        cached_key: Name of the cached input count.
        cache_write_key: Name of the cache-write input count.
        output_key: Name of the output count.

    Returns:
        The usage, or None when ``value`` is not an object.
    """
    if not isinstance(value, dict):
        return None
    total_input = as_tokens(value.get(input_key))
    cached = as_tokens(value.get(cached_key))
    written = as_tokens(value.get(cache_write_key))
    return Usage(
        input_tokens=max(total_input - cached - written, 0),
        output_tokens=as_tokens(value.get(output_key)),
        cache_creation_input_tokens=written,
        cache_read_input_tokens=cached,
    )


def flatten_content(content: object) -> str:
    """Flatten an MCP result ``content`` list to text.

    Text blocks give their ``text``; image blocks ``[image]``; anything else compact JSON, one per
    line. A string stays as is; None gives ``""``.

    Args:
        content: The ``result.content`` value of an MCP tool call item.

    Returns:
        The text.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for item in content:
            if isinstance(item, str):
                parts.append(item)
                continue
            block = as_dict(item)
            text = as_str(block.get("text"))
            if block.get("type") == "text" and text is not None:
                parts.append(text)
            elif block.get("type") == "image":
                parts.append("[image]")
            else:
                parts.append(to_text(item))
        return "\n".join(parts)
    return to_text(content)
