"""Argument checks shared by Octipus's own tools.

A handler validates its own arguments (the specs themselves are :class:`octipusd.toolkit.ToolSpec`)
and raises :class:`octipusd.errors.InvalidRequestError` naming the bad field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from octipusd.errors import InvalidRequestError

__all__ = ["optional_str", "reject_unknown", "require_str"]


def reject_unknown(arguments: Mapping[str, Any], allowed: Iterable[str], where: str = "arguments") -> None:
    """Raise if ``arguments`` has keys outside ``allowed``.

    Raises:
        InvalidRequestError: naming the unknown keys and the accepted ones.
    """
    allowed_set = set(allowed)
    unknown = sorted(set(arguments) - allowed_set)
    if unknown:
        accepted = ", ".join(sorted(allowed_set)) or "none"
        raise InvalidRequestError(f"{where}: unknown field(s) {', '.join(unknown)}; accepted: {accepted}")


def require_str(arguments: Mapping[str, Any], key: str, where: str = "", *, allow_empty: bool = False) -> str:
    """Return a required string argument.

    Raises:
        InvalidRequestError: the key is missing, not a string, or empty (unless allowed).
    """
    path = f"{where}.{key}" if where else key
    if key not in arguments:
        raise InvalidRequestError(f"{path}: required")
    value = arguments[key]
    if not isinstance(value, str):
        raise InvalidRequestError(f"{path}: must be a string, got {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise InvalidRequestError(f"{path}: must not be empty")
    return value


def optional_str(arguments: Mapping[str, Any], key: str, where: str = "") -> str | None:
    """Return an optional string argument (None when absent or null).

    Raises:
        InvalidRequestError: the value is present and not a string.
    """
    path = f"{where}.{key}" if where else key
    value = arguments.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidRequestError(f"{path}: must be a string, got {type(value).__name__}")
    return value
