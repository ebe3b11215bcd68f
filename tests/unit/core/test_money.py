"""Money as exact decimals (issue 26 item 4): one reading of a vendor's figure, one wire form, one
rule for showing an amount (:mod:`octipusd.money`), and the adapter SDK's reader built on it."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given, strategies as st

from octipusd.adapterkit import as_cost
from octipusd.money import MAX_FIGURE_USD, format_usd, from_nanos, to_nanos, usd, usd_text


def test_a_vendor_figure_is_read_as_the_decimal_it_was_written_as() -> None:
    for text in ("0.0245", "0.004", "0.0019705", "0.15339075", "12", "0"):
        figure = json.loads(text)
        assert as_cost(figure) == Decimal(text), text
    # float noise below a nano-dollar is not a cost: the difference a float subtraction leaves
    assert as_cost(0.03 - 0.01) == Decimal("0.02")
    assert as_cost(0.013575000000000002) == Decimal("0.013575")
    # what is not a JSON number is not a figure (a bool, NaN, text), nor is an absurd amount
    for value in (True, float("nan"), float("inf"), "0.02", None, {"amount": 1}, 1e300):
        assert as_cost(value) is None, value


def test_the_api_form_is_exact_decimal_text() -> None:
    assert [usd_text(Decimal(t)) for t in ("0.020000000", "0.0245", "12.000000000", "0E-9", "-0E-9")] == [
        "0.02",
        "0.0245",
        "12",
        "0",
        "0",
    ]
    assert usd("0.0245") == Decimal("0.0245") and usd("1e-3") == Decimal("0.001")
    for text in ("abc", "NaN", "sNaN", "Infinity", "1e999999999", "1" * 100, ""):
        assert usd(text) is None, text


def test_every_client_shows_an_amount_by_one_rule() -> None:
    """Four decimals, half up, thousands separated: $0.0245 is not rounded to $0.02 beside $0.0040."""
    shown = [format_usd(Decimal(t)) for t in ("0.0245", "0.004", "0.02", "1.75", "1234.5", "0", "0.00005")]
    assert shown == ["$0.0245", "$0.0040", "$0.0200", "$1.7500", "$1,234.5000", "$0.0000", "$0.0001"]
    assert format_usd(Decimal("0.00000004")) == "<$0.0001"  # a cost, however small, is not $0.0000


@given(st.integers(min_value=-int(MAX_FIGURE_USD) * 10**9, max_value=int(MAX_FIGURE_USD) * 10**9))
def test_nano_dollars_and_text_round_trip_exactly(nanos: int) -> None:
    amount = from_nanos(nanos)
    assert to_nanos(amount) == nanos
    assert usd(usd_text(amount)) == amount
    assert usd(float(usd_text(amount))) == amount  # at most 15 significant digits: a float keeps them


@pytest.mark.parametrize("count", [10, 1000])
def test_a_sum_of_figures_is_exact(count: int) -> None:
    figures = [as_cost(0.1) for _ in range(count)]
    assert sum((f for f in figures if f is not None), Decimal(0)) == Decimal(count) / 10
