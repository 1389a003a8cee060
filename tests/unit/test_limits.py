"""Limit constructors, validation and description (limits.py)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from zae_limiter.errors import ValidationError
from zae_limiter.limits import (
    MAX_TOKENS,
    RESERVED_LIMIT_NAMES,
    Limit,
    validate_limit_name,
    validate_limits,
)


@pytest.mark.parametrize(
    ("factory", "period"),
    [
        (Limit.per_second, 1),
        (Limit.per_minute, 60),
        (Limit.per_hour, 3600),
        (Limit.per_day, 86400),
    ],
)
def test_rate_constructors(factory: Callable[..., Limit], period: int) -> None:
    limit = factory("rpm", 100)
    assert limit == Limit("rpm", 100, 100, period)
    assert limit.refill_period_ms == period * 1000
    burst = factory("rpm", 100, burst=250)
    assert (burst.capacity, burst.refill_amount, burst.refill_period_seconds) == (250, 100, period)


def test_burst_equal_to_rate_is_allowed() -> None:
    assert Limit.per_minute("rpm", 100, burst=100).capacity == 100


def test_burst_below_rate_is_rejected() -> None:
    with pytest.raises(ValidationError, match="burst"):
        Limit.per_minute("rpm", 100, burst=99)


def test_custom() -> None:
    limit = Limit.custom("tpm", capacity=5000, refill_amount=300, refill_period_seconds=7)
    assert limit == Limit("tpm", 5000, 300, 7)
    assert (limit.capacity_milli, limit.refill_amount_milli, limit.refill_period_ms) == (
        5_000_000,
        300_000,
        7000,
    )


def test_limits_are_frozen_and_hashable() -> None:
    limit = Limit.per_second("rps", 5)
    with pytest.raises(AttributeError):
        limit.capacity = 6  # type: ignore[misc]
    assert len({limit, Limit.per_second("rps", 5)}) == 1


def test_wcu_is_reserved() -> None:
    assert "wcu" in RESERVED_LIMIT_NAMES
    with pytest.raises(ValidationError, match="reserved"):
        Limit.per_second("wcu", 10)
    with pytest.raises(ValidationError, match="reserved"):
        validate_limit_name("wcu")


@pytest.mark.parametrize(
    "name",
    ["", "RPM", "1rpm", "_rpm", "rpm-x", "r pm", "rpm#", "a" * 33, None, 5, "rpm\n", "ŕpm"],
)
def test_invalid_names(name: object) -> None:
    with pytest.raises(ValidationError, match="invalid limit name"):
        Limit(name, 1, 1, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["r", "rpm", "tokens_per_min", "a" * 32, "x9_"])
def test_valid_names(name: str) -> None:
    assert validate_limit_name(name) == name
    assert Limit(name, 1, 1, 1).name == name


@pytest.mark.parametrize("bad", [0, -1, -100, 1.5, 10.0, "10", None, True, False, MAX_TOKENS + 1])
@pytest.mark.parametrize("field", ["capacity", "refill_amount", "refill_period_seconds"])
def test_invalid_numbers(field: str, bad: object) -> None:
    args = {"name": "rpm", "capacity": 10, "refill_amount": 10, "refill_period_seconds": 60}
    args[field] = bad
    with pytest.raises(ValidationError):
        Limit(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -5, 2.5, True])
def test_invalid_rate_via_constructor(bad: object) -> None:
    with pytest.raises(ValidationError):
        Limit.per_minute("rpm", bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Limit.per_minute("rpm", 10, burst=bad)  # type: ignore[arg-type]


def test_max_tokens_is_accepted() -> None:
    assert Limit("big", MAX_TOKENS, MAX_TOKENS, 1).capacity == MAX_TOKENS


def test_refill_period_longer_than_a_year_is_rejected() -> None:
    Limit("rpy", 1, 1, 366 * 86400)
    with pytest.raises(ValidationError, match="year"):
        Limit("rpy", 1, 1, 366 * 86400 + 1)


def test_validation_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Limit("rpm", 0, 1, 1)


# ---------------------------------------------------------------- validate_limits
def test_validate_limits_accepts_list_and_tuple() -> None:
    a, b = Limit.per_minute("rpm", 10), Limit.per_minute("tpm", 1000)
    assert validate_limits([a, b]) == (a, b)
    assert validate_limits((a,)) == (a,)


def test_validate_limits_rejects_empty() -> None:
    with pytest.raises(ValidationError, match="empty"):
        validate_limits([])


def test_validate_limits_rejects_duplicates() -> None:
    with pytest.raises(ValidationError, match="twice"):
        validate_limits([Limit.per_minute("rpm", 10), Limit.per_second("rpm", 1)])


@pytest.mark.parametrize(
    "value",
    [
        [Limit.per_minute("rpm", 10), "tpm"],
        [{"name": "rpm"}],
        [None],
    ],
)
def test_validate_limits_rejects_non_limits(value: object) -> None:
    with pytest.raises(ValidationError, match="expected a Limit"):
        validate_limits(value)


@pytest.mark.parametrize("value", [Limit.per_minute("rpm", 10), None, "rpm", {"rpm": 1}, 5])
def test_validate_limits_rejects_non_lists(value: object) -> None:
    with pytest.raises(ValidationError, match="list of Limit"):
        validate_limits(value)


# ---------------------------------------------------------------- describe
@pytest.mark.parametrize(
    ("limit", "text"),
    [
        (Limit.per_second("rps", 5), "5/sec"),
        (Limit.per_minute("rpm", 100), "100/min"),
        (Limit.per_hour("rph", 7), "7/hour"),
        (Limit.per_day("rpd", 1000), "1000/day"),
        (Limit.per_minute("tpm", 100000, burst=150000), "100000/min burst 150000"),
        (Limit.custom("odd", 10, 10, 7), "10/7s"),
        (Limit.custom("odd", 20, 10, 7), "10/7s burst 20"),
    ],
)
def test_describe(limit: Limit, text: str) -> None:
    assert limit.describe() == text
