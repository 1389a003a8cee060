"""Numbers as DynamoDB keeps them: exact, canonical, in range; sizes; equality and order."""

from __future__ import annotations

from decimal import Decimal

import pytest

from zae_limiter.sim.engine import values as v
from zae_limiter.sim.engine.errors import Validation


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1.50", "1.5"),
        ("1.0", "1"),
        ("-1.0", "-1"),
        ("1E+2", "100"),
        ("0.10", "0.1"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("100.00", "100"),
        ("1e-3", "0.001"),
        ("+5", "5"),
        ("007", "7"),
        ("1.5e1", "15"),
        ("12345678901234567890123456789012345678", "12345678901234567890123456789012345678"),
    ],
)
def test_numbers_come_back_canonical_as_dynamodb_returns_them(text: str, canonical: str) -> None:
    # The same table as DynamoDB Local answered for these inputs.
    assert v.canonical_number(text) == canonical


@pytest.mark.parametrize("text", ["abc", "", " 1", "1 ", "1_000", "NaN", "Infinity", "²"])
def test_what_is_not_a_number_is_refused(text: str) -> None:
    with pytest.raises(Validation, match="cannot be converted into a number"):
        v.parse_number(text)


def test_range_and_precision_are_dynamodbs() -> None:
    with pytest.raises(Validation, match="overflow"):
        v.parse_number("1e400")
    with pytest.raises(Validation, match="underflow"):
        v.parse_number("1e-131")
    with pytest.raises(Validation, match="38 significant digits"):
        v.parse_number("1.23456789012345678901234567890123456789")


def test_integers_stay_exact_and_decimals_use_38_digits() -> None:
    big = 10**37 + 1
    assert v.add_numbers(big, 1) == big + 1 and isinstance(v.add_numbers(big, 1), int)
    assert v.add_numbers(Decimal("0.1"), Decimal("0.2")) == Decimal("0.3")
    assert v.add_numbers(Decimal("0.5"), Decimal("0.5")) == 1  # back to an int
    assert v.format_number(v.sub_numbers(Decimal("1.5"), 3)) == "-1.5"


def test_equality_is_by_value_and_type() -> None:
    assert v.equal({"N": "1"}, {"N": "1.0"})
    assert not v.equal({"N": "1"}, {"S": "1"})
    assert v.equal({"NS": ["1", "2"]}, {"NS": ["2.0", "1"]})
    assert v.equal({"M": {"a": {"L": [{"N": "1"}]}}}, {"M": {"a": {"L": [{"N": "1"}]}}})
    assert v.ordered({"N": "2"}, {"S": "1"}) is None
    assert v.ordered({"BOOL": True}, {"BOOL": False}) is None


def test_stored_values_are_fresh_and_checked() -> None:
    mine = {"SS": ["a", "b"]}
    kept = v.stored(mine)
    mine["SS"].append("c")
    assert kept == {"SS": ["a", "b"]}
    with pytest.raises(Validation, match="duplicates"):
        v.stored({"NS": ["1", "1.0"]})
    with pytest.raises(Validation, match="may not be empty"):
        v.stored({"SS": []})


def test_item_size_counts_names_and_values() -> None:
    assert v.item_bytes({"ab": {"S": "xyz"}}) == 5
    assert v.item_bytes({"n": {"N": "12345"}}) == 1 + 4
    assert v.item_bytes({"é": {"S": "é"}}) == 4
