"""A monitor's condition (FACTS.md §7): ``{path, operator, value}`` judged on one read.

``path`` is dotted (``status``, ``items.0.status``; a segment of digits indexes a list); an empty
path means the whole result. Operators: ``equals`` (the value at the path equals ``value``), ``in``
(it is one of the list ``value``), ``contains`` (a string holds the string ``value``, a list holds
``value`` as an element, an object has the key ``value``), ``changed`` (it differs from the
baseline: the first good read, which is taken as the baseline and never matches itself). A missing
field is *unavailable*: never a match and never a change (a ``changed`` baseline is not taken from
it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Final

from octipusd.errors import InvalidRequestError

__all__ = ["OPERATORS", "Condition", "Judgement", "Verdict", "judge", "parse_condition", "value_at"]

#: Characters of a condition's path at most.
MAX_PATH_CHARS: Final = 500


class Operator(enum.StrEnum):
    """The condition's operators."""

    EQUALS = "equals"
    IN = "in"
    CONTAINS = "contains"
    CHANGED = "changed"


OPERATORS: Final = tuple(o.value for o in Operator)


class Verdict(enum.StrEnum):
    """What one read says of the condition."""

    MATCH = "match"
    NO_MATCH = "no_match"
    #: The path is missing from the read: neither a match nor a change.
    UNAVAILABLE = "unavailable"
    #: The first good read of a ``changed`` condition: kept as the baseline.
    BASELINE = "baseline"


@dataclass(frozen=True)
class Condition:
    """A checked condition (see the module)."""

    path: str
    operator: Operator
    value: Any = None

    def to_json(self) -> dict[str, Any]:
        """As stored on the monitor."""
        out: dict[str, Any] = {"path": self.path, "operator": self.operator.value}
        if self.operator is not Operator.CHANGED:
            out["value"] = self.value
        return out


@dataclass(frozen=True)
class Judgement:
    """One read judged: the verdict and the value found at the path (None when unavailable)."""

    verdict: Verdict
    observed: Any = None


_MISSING: Final = object()


def parse_condition(raw: Any, where: str = "condition") -> Condition:
    """A condition from its JSON form, checked.

    Raises:
        InvalidRequestError: naming ``where`` and the field (an unknown operator, an ``in`` whose
            value is not a list, a missing ``value``, a ``contains`` whose value is neither a
            string nor a plain value).
    """
    if not isinstance(raw, dict):
        raise InvalidRequestError(f"{where}: must be an object {{path, operator, value}}")
    unknown = sorted(set(raw) - {"path", "operator", "value"})
    if unknown:
        raise InvalidRequestError(f"{where}.{unknown[0]}: unknown field (path, operator, value)")
    path = raw.get("path", "")
    if not isinstance(path, str) or len(path) > MAX_PATH_CHARS:
        raise InvalidRequestError(f"{where}.path: must be a dotted path (a string; empty: the whole result)")
    try:
        operator = Operator(str(raw.get("operator")))
    except ValueError:
        raise InvalidRequestError(f"{where}.operator: must be one of {', '.join(OPERATORS)}") from None
    if operator is Operator.CHANGED:
        return Condition(path.strip(), operator)
    if "value" not in raw:
        raise InvalidRequestError(f"{where}.value: required for the {operator.value} operator")
    value = raw["value"]
    if operator is Operator.IN and not isinstance(value, list):
        raise InvalidRequestError(f"{where}.value: the in operator takes a list of values")
    if operator is Operator.CONTAINS and isinstance(value, dict | list):
        raise InvalidRequestError(f"{where}.value: the contains operator takes a string or a plain value")
    return Condition(path.strip(), operator, value)


def value_at(result: Any, path: str) -> Any:
    """The value at the dotted ``path`` of ``result`` (the whole result for an empty path), or
    :data:`_MISSING` when a segment is absent."""
    current = result
    for segment in (s for s in path.split(".") if s) if path else ():
        if isinstance(current, dict) and segment in current:
            current = current[segment]
        elif isinstance(current, list) and segment.isdigit() and int(segment) < len(current):
            current = current[int(segment)]
        else:
            return _MISSING
    return current


def judge(condition: Condition, result: Any, baseline: Any = _MISSING) -> Judgement:
    """Judge one read.

    Args:
        condition: The condition.
        result: The read (any JSON value).
        baseline: The ``changed`` baseline's value; leave it out before the first good read.

    Returns:
        The :class:`Judgement`; for ``changed`` without a baseline, :attr:`Verdict.BASELINE` with the
        value to keep.
    """
    observed = value_at(result, condition.path)
    if observed is _MISSING:
        return Judgement(Verdict.UNAVAILABLE)
    op = condition.operator
    if op is Operator.CHANGED:
        if baseline is _MISSING:
            return Judgement(Verdict.BASELINE, observed)
        return Judgement(Verdict.MATCH if observed != baseline else Verdict.NO_MATCH, observed)
    if op is Operator.EQUALS:
        hit = observed == condition.value
    elif op is Operator.IN:
        hit = observed in condition.value
    elif isinstance(observed, str):
        hit = isinstance(condition.value, str) and condition.value in observed
    elif isinstance(observed, list | dict):
        hit = condition.value in observed
    else:
        hit = False
    return Judgement(Verdict.MATCH if hit else Verdict.NO_MATCH, observed)


#: What :func:`judge` takes for "no baseline yet".
NO_BASELINE: Final = _MISSING
