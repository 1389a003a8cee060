"""Fewer, larger reserve writes under throttling (flows/reserves/stretch.py), through the book."""

from __future__ import annotations

from zae_limiter.flows.reserves import stretch
from zae_limiter.flows.reserves.book import DEMAND_TAU_MS, ReserveBook
from zae_limiter.limits import Limit

T0 = 1_800_000_000_000
KEY = ("e1", "api")
LIMITS = (Limit.per_second("rps", 1000),)


def hot_book(rate: int = 20) -> ReserveBook:
    """A book that has known the bucket for a while, and saw `rate` acquires just now."""
    book = ReserveBook()
    book.record(KEY, {}, T0 - 5 * DEMAND_TAU_MS, count=0)
    for _ in range(rate):
        book.record(KEY, {"rps": 1000}, T0)
    return book


def want(book: ReserveBook, now: int = T0) -> int:
    return book.want(KEY, LIMITS, {"rps": 1000}, 1, now).get("rps", 0)


def test_a_throttled_reserve_write_halves_the_write_rate_target() -> None:
    book = hot_book()
    normal = want(book)  # 20/s at 2 writes/s: 10 tokens
    assert normal == 10_000
    book.stretch.throttled(KEY, T0)
    assert want(book) == 2 * normal  # half the writes, twice the tokens each
    book.stretch.throttled(KEY, T0 + 100)  # the same burst: halved once
    assert want(book) == 2 * normal
    book.stretch.throttled(KEY, T0 + stretch.SETTLE_MS)
    assert want(book) == 4 * normal


def test_the_target_comes_back_additively_when_writes_go_through() -> None:
    book = hot_book()
    book.stretch.throttled(KEY, T0)
    factors = []
    for _ in range(5):
        book.stretch.succeeded(KEY)
        factors.append(book.stretch.factor(KEY))
    assert factors == [0.625, 0.75, 0.875, 1.0, 1.0]


def test_the_stretch_is_bounded_below_and_by_max_share() -> None:
    book = hot_book(rate=400)  # 400/s: a stretched reserve would pass 10% of 1,000
    for i in range(20):
        book.stretch.throttled(KEY, T0 + i * stretch.SETTLE_MS)
    assert book.stretch.factor(KEY) == stretch.MIN_FACTOR
    assert want(book) == 100_000  # max_share 0.1 x capacity 1,000: the cap holds


def test_other_buckets_are_not_stretched() -> None:
    book = hot_book()
    book.stretch.throttled(("other", "api"), T0)
    assert want(book) == 10_000
