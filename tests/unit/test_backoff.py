"""Background returns under throttling: backoff, a write budget per bucket, spread ages.

Time is passed in (a fake clock: plain integers) and randomness is seeded.
"""

from __future__ import annotations

import random

import pytest

from zae_limiter.flows.reserves import pacing as backoff
from zae_limiter.flows.reserves.book import RENEW_GRACE_MS, Reserve, ReserveBook, ReserveSettings
from zae_limiter.limits import Limit

T0 = 1_800_000_000_000
LIMITS = (Limit.per_second("rps", 1000),)


def key(i: int = 0) -> tuple[str, str]:
    return (f"e{i}", "api")


def book_with(*keys: tuple[str, str], seed: int = 7) -> ReserveBook:
    book = ReserveBook(ReserveSettings(), random.Random(seed))
    for k in keys:
        book.install(k, 0, LIMITS, {"rps": 5000}, 1, T0)
    return book


def test_backoff_bounds_grow_exponentially_up_to_the_cap() -> None:
    rng = random.Random(1)
    for attempt in range(1, 12):
        bound = min(backoff.CAP_MS, backoff.BASE_MS * 2 ** (attempt - 1))
        waits = [backoff.backoff_ms(attempt, rng) for _ in range(200)]
        assert min(waits) >= 0 and max(waits) <= bound
        assert max(waits) > bound / 2  # full jitter: the whole range is used


def test_a_throttled_return_is_not_due_again_at_once() -> None:
    book = book_with(key())
    [item] = book.drain()
    book.retry_later([item], T0)
    first = book.next_due_ms(T0)
    assert first is not None and first >= T0
    # Throttled again and again: the waits grow (exponential bounds), so over many
    # throttles the retries thin out instead of hammering the partition.
    now = T0
    waits = []
    for _ in range(10):
        due = book.next_due_ms(now)
        assert due is not None
        now = max(now, due)
        out = book.due(now)
        assert out == [item]
        book.retry_later(out, now)
        waits.append(book.next_due_ms(now) - now)  # type: ignore[operator]
    assert sum(waits[5:]) > 4 * sum(waits[:5])
    assert book.pacer.retried == 11


def test_a_return_that_went_through_resets_the_backoff() -> None:
    book = book_with(key())
    [item] = book.drain()
    for i in range(5):
        book.pacer.throttled(key(), T0 + i)
    book.retry_later([item], T0 + 5)
    ready = book.next_due_ms(T0 + 10)
    assert ready is not None
    assert book.due(ready) == [item]
    # Nothing came back: the write was applied. The key's next return goes at once.
    later = ready + backoff.CAP_MS
    assert book.due(later) == []
    other = Reserve(0, LIMITS, {"rps": 1000}, {1: {"rps": 1000}}, later, later)
    book._outgoing.append((key(), other))
    assert book.next_due_ms(later) == later


def test_background_writes_per_bucket_stay_within_the_budget() -> None:
    """Every return of one bucket throttled at once, many times: the writes the book lets
    out over 10 s never pass BUDGET_MULTIPLE x writes_per_second (plus the burst)."""
    book = ReserveBook(ReserveSettings(writes_per_second=2.0), random.Random(3))
    items = [
        (key(), Reserve(0, LIMITS, {"rps": 1000}, {1: {"rps": 1000}}, T0, T0)) for _ in range(50)
    ]
    book._outgoing.extend(items)
    sent = 0
    for now in range(T0, T0 + 10_000, 10):
        out = book.due(now)
        sent += len(out)
        book._outgoing.extend(out)  # refused: straight back, no backoff (worst case)
    allowed = backoff.BUDGET_MULTIPLE * 2.0 * 10 + backoff.BUDGET_BURST
    assert 0 < sent <= allowed
    assert sent >= allowed - 2  # and the budget is what paces it, not something else


def test_the_budget_is_per_bucket() -> None:
    book = ReserveBook(ReserveSettings(writes_per_second=2.0), random.Random(3))
    for i in range(20):
        book._outgoing.append(
            (key(i), Reserve(0, LIMITS, {"rps": 1000}, {1: {"rps": 1000}}, T0, T0))
        )
    assert len(book.due(T0)) == 20  # one each: every bucket within its budget


def test_reserves_taken_together_fall_due_apart() -> None:
    """A hundred reserves taken in the same millisecond and kept busy reach their age
    spread over the last AGE_SPREAD of max_age, not in one instant. (Busy, yet never
    renewed: these acquires never write, so the keeper returns each after its grace.)"""
    keys = [key(i) for i in range(100)]
    book = book_with(*keys)
    settings = book.settings
    grace = min(RENEW_GRACE_MS, settings.idle_ms)
    due_at: dict[tuple[str, str], int] = {}
    for now in range(T0, T0 + settings.max_age_ms + grace + 1, 100):
        for k in keys:
            book.spend(k, LIMITS, {"rps": 1}, now)  # never idle
        for k, _held in book.due(now):
            due_at.setdefault(k, now)
    assert set(due_at) == set(keys)
    earliest = T0 + (1 - backoff.AGE_SPREAD) * settings.max_age_ms + grace
    assert all(earliest <= t <= T0 + settings.max_age_ms + grace for t in due_at.values())
    seconds = {(t - T0) // 1000 for t in due_at.values()}
    assert len(seconds) >= 2
    per_second = max(sum(1 for t in due_at.values() if (t - T0) // 1000 == s) for s in seconds)
    assert per_second <= 60  # about half in each of the last two seconds, never all


def test_full_budgets_of_quiet_buckets_are_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(backoff, "BUDGETS_MAX", 10)
    book = ReserveBook(ReserveSettings(), random.Random(3))
    for i in range(30):
        book._outgoing.append(
            (key(i), Reserve(0, LIMITS, {"rps": 1000}, {1: {"rps": 1000}}, T0, T0))
        )
    assert len(book.due(T0)) == 30
    book.due(T0 + 60_000)  # every budget full again: all but what is needed go
    assert len(book.pacer._budgets) <= 10
