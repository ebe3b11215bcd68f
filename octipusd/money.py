"""Money: US-dollar amounts as exact decimals, from the vendor's figure to what a person reads.

A cost is never a binary float in Octipus (``0.03 - 0.01`` is ``0.019999999999999997`` in one):

- **read once** from the vendor's figure by :func:`usd`: a JSON number is taken by its shortest
  decimal text (``repr``: the text it was written as, for any figure of at most 15 significant
  digits), then rounded to a nano-dollar (:data:`USD_QUANTUM`, :data:`ROUNDING`);
- **computed** as :class:`~decimal.Decimal` (a turn's share of a cumulative figure, a run's sum);
- **stored** as an integer of nano-dollars (the store's ``runs.cost_nano_usd``), summed exactly by
  SQLite and PostgreSQL alike (:func:`to_nanos`, :func:`from_nanos`);
- **sent** by the API (and kept in run events) as a decimal string, ``"0.0245"``, exact whatever
  the client's JSON parser does with numbers (:func:`usd_text`);
- **shown** by one rule everywhere (CLI, page, notifications): :func:`format_usd`, ``$0.0245``.

A stdlib-only foundation module: clients import it without the daemon's dependencies.
"""

from __future__ import annotations

import decimal
import math
from decimal import Decimal
from typing import Final

__all__ = [
    "MAX_FIGURE_USD",
    "MAX_TEXT_CHARS",
    "NANOS_PER_USD",
    "ROUNDING",
    "SHOWN_QUANTUM",
    "USD_QUANTUM",
    "format_usd",
    "from_nanos",
    "to_nanos",
    "usd",
    "usd_text",
]

#: The smallest amount kept (US dollars): a nano-dollar. Vendor figures are computed from prices per
#: million tokens and carry up to 8 decimals (a cached Haiku token costs 0.00000008 USD).
USD_QUANTUM: Final = Decimal("0.000000001")
#: Nano-dollars in a dollar: the unit of the stored integer.
NANOS_PER_USD: Final = 10**9
#: The one rounding rule: to the kept quantum when a figure is read, to :data:`SHOWN_QUANTUM` when
#: one is shown.
ROUNDING: Final = decimal.ROUND_HALF_UP
#: The precision an amount is shown with (US dollars): a hundredth of a cent, four decimals.
SHOWN_QUANTUM: Final = Decimal("0.0001")
#: The largest figure accepted from a vendor (US dollars, either sign); a bigger one is not a cost
#: (it reads as not reported) and could overflow a database's sum of nano-dollars.
MAX_FIGURE_USD: Final = Decimal(1_000_000)
#: Characters of a decimal string :func:`usd` reads at most (longer text is not an amount).
MAX_TEXT_CHARS: Final = 64


def usd(value: object) -> Decimal | None:
    """Read an amount in US dollars exactly; never raises.

    Args:
        value: A decoded JSON number (an int, or a float taken by its shortest decimal text), a
            decimal string (the API's form), or a :class:`~decimal.Decimal`.

    Returns:
        The amount rounded to :data:`USD_QUANTUM` by :data:`ROUNDING`; None for anything else
        (None, a bool, NaN, an infinity, text that is not a plain decimal number, or a figure beyond
        :data:`MAX_FIGURE_USD`).
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, Decimal):
        amount = value
    elif isinstance(value, int):
        amount = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            return None
        amount = Decimal(repr(value))
    elif isinstance(value, str) and len(value) <= MAX_TEXT_CHARS:
        try:
            amount = Decimal(value.strip())
        except decimal.InvalidOperation:
            return None
    else:
        return None
    if not amount.is_finite() or amount.copy_abs() > MAX_FIGURE_USD:
        return None
    return amount.quantize(USD_QUANTUM, rounding=ROUNDING)


def to_nanos(amount: Decimal) -> int:
    """``amount`` (US dollars) as whole nano-dollars, rounded by :data:`ROUNDING`."""
    return int((amount * NANOS_PER_USD).to_integral_value(rounding=ROUNDING))


def from_nanos(nanos: int) -> Decimal:
    """Whole nano-dollars as an amount in US dollars (exact)."""
    return (Decimal(nanos) / NANOS_PER_USD).quantize(USD_QUANTUM)


def usd_text(amount: Decimal) -> str:
    """The exact decimal text of ``amount`` (US dollars) the API sends: no exponent, no trailing
    zeros (``"0.0245"``, ``"0.02"``, ``"12"``, ``"0"``)."""
    text = format(amount, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


def format_usd(amount: Decimal) -> str:
    """``amount`` as a person reads it, the same in every client: dollars to four decimals
    (:data:`SHOWN_QUANTUM`, rounded by :data:`ROUNDING`), thousands separated (``$0.0245``,
    ``$0.0040``, ``$1,234.5000``); a cost above zero that would show as ``$0.0000`` shows as
    ``<$0.0001``."""
    shown = amount.quantize(SHOWN_QUANTUM, rounding=ROUNDING)
    if not shown and amount > 0:
        return f"<${SHOWN_QUANTUM}"
    sign = "-" if shown < 0 else ""
    return f"{sign}${abs(shown):,.4f}"
