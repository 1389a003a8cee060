"""The clock watch: an offset interval from `Date` headers, narrowed by each answer."""

from __future__ import annotations

import logging
from email.utils import formatdate

import pytest

from zae_limiter.clock_watch import (
    WARN_AFTER_MS,
    ClockStats,
    ClockWatch,
    parse_http_date,
    response_date,
)

#: A server second boundary (ms since the epoch), far from any real "now".
T0 = 1_700_000_000_000


def date(ms: int) -> str:
    """The `Date` header a server at `ms` sends: whole seconds, the fraction dropped."""
    return formatdate(ms // 1000, usegmt=True)


def answer(ms: int) -> dict[str, object]:
    return {"ResponseMetadata": {"HTTPHeaders": {"date": date(ms)}}}


def feed(watch: ClockWatch, offset_ms: int, server_ms: int, rtt_ms: int = 4) -> None:
    """One request whose answer the server formed at `server_ms`, half a round trip after
    it was sent, seen by a client whose clock is `offset_ms` ahead."""
    local = server_ms + offset_ms
    watch.heard(local - rtt_ms // 2, local + rtt_ms // 2, answer(server_ms))


def test_parse_http_date_reads_the_header_and_refuses_nonsense() -> None:
    assert parse_http_date(date(T0 + 999)) == T0
    assert parse_http_date("yesterday") is None
    assert response_date({"ResponseMetadata": {"HTTPHeaders": {}}}) is None
    assert response_date({}) is None


def test_one_answer_bounds_the_offset_to_a_second_and_a_round_trip() -> None:
    watch = ClockWatch()
    feed(watch, offset_ms=0, server_ms=T0 + 300)
    stats = watch.stats()
    assert stats.low_ms is not None and stats.high_ms is not None
    assert stats.low_ms <= 0 <= stats.high_ms
    assert stats.high_ms - stats.low_ms == 1000 + 4


@pytest.mark.parametrize("offset", [-2000, -37, 0, 250, 2000])
def test_answers_around_a_tick_pin_the_offset_within_the_round_trips(offset: int) -> None:
    watch = ClockWatch(warn_after_ms=None)
    for server_ms in range(T0 + 900, T0 + 1100, 5):  # back to back across a tick
        feed(watch, offset, server_ms)
    stats = watch.stats()
    assert stats.low_ms is not None and stats.high_ms is not None
    assert stats.low_ms <= offset <= stats.high_ms  # never wrong
    assert stats.high_ms - stats.low_ms <= 2 * 4 + 5  # and tight: two round trips, a gap
    assert stats.dates == 2


def test_an_answer_that_contradicts_the_interval_starts_a_new_one() -> None:
    watch = ClockWatch(warn_after_ms=None)
    for server_ms in range(T0 + 900, T0 + 1100, 5):
        feed(watch, 0, server_ms)
    feed(watch, 5000, T0 + 3000)  # our clock was stepped 5 s ahead
    stats = watch.stats()
    assert stats.resets == 1
    assert stats.low_ms is not None and stats.high_ms is not None
    assert stats.low_ms <= 5000 <= stats.high_ms


def test_the_warning_is_logged_once_when_the_offset_is_surely_past_the_threshold(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = ClockWatch()
    with caplog.at_level(logging.WARNING, logger="zae_limiter"):
        feed(watch, 0, T0 + 500)
        feed(watch, 1500, T0 + 2500)  # alone it could be 1.5 s +- 0.5 s: not surely past
        assert not watch.stats().warned
        for server_ms in range(T0 + 2900, T0 + 3100, 5):
            feed(watch, 1500, server_ms)
        for server_ms in range(T0 + 3900, T0 + 4100, 5):
            feed(watch, 1500, server_ms)
    warnings = [r for r in caplog.records if r.name == "zae_limiter"]
    assert len(warnings) == 1
    assert "ahead of DynamoDB's" in warnings[0].getMessage()
    assert watch.stats().warned


def test_no_warning_within_the_threshold(caplog: pytest.LogCaptureFixture) -> None:
    watch = ClockWatch()
    with caplog.at_level(logging.WARNING, logger="zae_limiter"):
        for server_ms in range(T0 + 900, T0 + 1100, 5):
            feed(watch, -(WARN_AFTER_MS - 100), server_ms)
    assert not [r for r in caplog.records if r.name == "zae_limiter"]


def test_sizes_of_the_offset() -> None:
    assert ClockStats(low_ms=-30, high_ms=40).at_least_ms == 0
    assert ClockStats(low_ms=-2010, high_ms=-1990).at_least_ms == 1990
    assert ClockStats(low_ms=-2010, high_ms=-1990).at_most_ms == 2010
    assert ClockStats(low_ms=10, high_ms=30).offset_ms == 20
    assert ClockStats(low_ms=10, high_ms=30).error_ms == 10
    assert ClockStats().offset_ms is None
