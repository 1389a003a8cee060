"""Quota windows (quota.py), a quota's arithmetic (bucket.py on a window clock), the
Limit.quota API, and the writes a quota plans (flows/write/plan.py, flows/write/charge.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit._flowkit import KEY, TABLE, limit_part, make_level
from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.errors import ValidationError
from zae_limiter.flows.write.charge import _quota_give
from zae_limiter.flows.write.levels import Rejected, WritePlan
from zae_limiter.flows.write.plan import new_bucket, plan_write
from zae_limiter.flows.write.shares import stored_config
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState
from zae_limiter.quota import Window, calendar_bounds, parse_spec


def ms(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp()) * 1000  # type: ignore[arg-type,misc]


def bounds(cron: str, tz: str, at: int) -> tuple[int, int]:
    return calendar_bounds(cron, tz, at // 60_000)


MONTHLY = Limit.quota("monthly", 10)
SESSION = Limit.quota("session", 10, reset_after=timedelta(hours=1))


# ---------------------------------------------------------------- window math
def test_monthly_window_runs_from_the_first_to_the_first() -> None:
    assert bounds("0 0 1 * *", "UTC", ms(2027, 1, 15, 8)) == (ms(2027, 1, 1), ms(2027, 2, 1))
    # the boundary instant belongs to the new window; the ms before it to the old one
    assert bounds("0 0 1 * *", "UTC", ms(2027, 2, 1)) == (ms(2027, 2, 1), ms(2027, 3, 1))
    assert bounds("0 0 1 * *", "UTC", ms(2027, 2, 1) - 1) == (ms(2027, 1, 1), ms(2027, 2, 1))


def test_month_ends_skip_months_without_the_day() -> None:
    assert bounds("0 0 31 * *", "UTC", ms(2027, 2, 10)) == (ms(2027, 1, 31), ms(2027, 3, 31))
    assert bounds("0 0 29 2 *", "UTC", ms(2027, 2, 10)) == (ms(2024, 2, 29), ms(2028, 2, 29))


def test_a_time_zone_moves_the_instants() -> None:
    # midnight in New York is 05:00 UTC in winter, 04:00 in summer
    assert bounds("0 0 * * *", "America/New_York", ms(2027, 1, 15, 3)) == (
        ms(2027, 1, 14, 5),
        ms(2027, 1, 15, 5),
    )
    assert bounds("0 0 * * *", "America/New_York", ms(2027, 7, 15, 3)) == (
        ms(2027, 7, 14, 4),
        ms(2027, 7, 15, 4),
    )


def test_dst_a_skipped_time_fires_after_the_gap_a_repeated_one_fires_twice() -> None:
    # Paris, 28 March 2027: 02:00 -> 03:00 local; 02:30 does not exist that day
    assert bounds("30 2 * * *", "Europe/Paris", ms(2027, 3, 28, 12)) == (
        ms(2027, 3, 28, 1),  # 03:00 CEST, the end of the gap
        ms(2027, 3, 29, 0, 30),
    )
    # 31 October 2027: 03:00 -> 02:00 local; 02:30 happens at 00:30 and 01:30 UTC
    assert bounds("30 2 * * *", "Europe/Paris", ms(2027, 10, 31, 1)) == (
        ms(2027, 10, 31, 0, 30),
        ms(2027, 10, 31, 1, 30),
    )


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(
        [
            ("0 0 1 * *", "UTC"),
            ("0 0 * * *", "Europe/Paris"),
            ("30 2 * * *", "Europe/Paris"),
            ("15 */6 * * 1-5", "America/New_York"),
            ("0 0 31 * *", "Australia/Lord_Howe"),
        ]
    ),
    st.integers(ms(2026, 1, 1), ms(2029, 1, 1)),
)
def test_windows_tile_time(schedule: tuple[str, str], at: int) -> None:
    """Every instant is in exactly one window, the same for every instant of it."""
    cron, tz = schedule
    start, end = bounds(cron, tz, at)
    assert start <= at < end
    assert bounds(cron, tz, start) == (start, end)
    assert bounds(cron, tz, end - 1) == (start, end)
    assert bounds(cron, tz, end)[0] == end


def test_specs_round_trip() -> None:
    for window in (MONTHLY.window, SESSION.window, Limit.quota("d", 1, tz="Asia/Tokyo").window):
        assert window is not None and parse_spec(window.spec()) == window


# ---------------------------------------------------------------- Limit.quota
def test_quota_api_and_its_errors() -> None:
    assert MONTHLY.window == Window(cron="0 0 1 * *", tz="UTC")
    assert SESSION.window == Window(session_ms=3_600_000)
    assert MONTHLY.describe() == "10 per window, resets at '0 0 1 * *' UTC"
    with pytest.raises(ValidationError, match="drips or resets, never both"):
        Limit("q", 10, 1, 60, window=Window(cron="0 0 1 * *"))
    with pytest.raises(ValidationError, match="must be a quota"):
        Limit("q", 10, 0, 0)
    with pytest.raises(ValidationError, match="not both"):
        Limit.quota("q", 10, reset="0 0 * * *", reset_after=timedelta(hours=1))
    # The published library's name for the schedule, the same limit.
    assert Limit.quota("q", 10, cron="0 0 * * *") == Limit.quota("q", 10, reset="0 0 * * *")
    with pytest.raises(ValidationError, match="pass one"):
        Limit.quota("q", 10, reset="0 0 * * *", cron="0 0 * * *")
    with pytest.raises(ValidationError, match="not both"):
        Limit.quota("q", 10, cron="0 0 * * *", reset_after=timedelta(hours=1))
    with pytest.raises(ValidationError, match="5-field cron"):
        Limit.quota("q", 10, reset="every day")
    with pytest.raises(ValidationError, match="unknown time zone"):
        Limit.quota("q", 10, tz="Mars/Olympus")
    with pytest.raises(ValidationError, match="between 1 second"):
        Limit.quota("q", 10, reset_after=timedelta(milliseconds=10))
    with pytest.raises(ValidationError, match="between 1 and"):
        Limit.quota("q", 0)


# ---------------------------------------------------------------- arithmetic
def _state(limit: Limit, full_at: int | None = None) -> LimitState:
    return replace(stored_config(limit), full_at=full_at)


def test_calendar_quota_holds_what_is_left_until_the_reset_then_all() -> None:
    now = ms(2027, 1, 15)
    st0 = _state(MONTHLY)
    taken = _state(MONTHLY, st0.charged(7000, now))
    assert taken.tokens(now) == 3000
    assert taken.tokens(ms(2027, 2, 1) - 1) == 3000  # nothing refills inside a window
    assert taken.tokens(ms(2027, 2, 1)) == 10_000
    assert taken.ms_until(4000, now) == ms(2027, 2, 1) - now
    assert taken.ms_until(3000, now) == 0
    assert taken.ms_until(10_001, now) == -1
    assert taken.reset_at(now) == ms(2027, 2, 1)
    # in the next window a take starts from the window's start, not from the old value
    later = ms(2027, 2, 3)
    again = _state(MONTHLY, taken.charged(1000, later))
    assert again.tokens(later) == 9000 and again.full_at == taken.base(later) + 1000


def test_session_quota_opens_at_first_use_and_ends_its_length_after() -> None:
    opened = ms(2027, 1, 15, 8)
    st0 = _state(SESSION)
    assert st0.reset_at(opened) is None  # no session yet
    taken = _state(SESSION, st0.charged(4000, opened))
    assert taken.full_at is not None and taken.full_at // taken.refill_amount_milli == opened
    assert taken.tokens(opened + 3_599_999) == 6000
    assert taken.reset_at(opened + 60_000) == opened + 3_600_000
    assert taken.ms_until(7000, opened + 60_000) == 3_540_000
    assert taken.is_full(opened + 3_600_000) and taken.tokens(opened + 3_600_000) == 10_000
    # a take in the session adds to it; one after it opens the next one where it is
    assert taken.charged(1000, opened + 5) == taken.full_at + 1000
    assert taken.charged(1000, opened + 3_600_000) // taken.refill_amount_milli == (
        opened + 3_600_000
    )


def test_a_session_opened_in_this_clients_future_reads_as_empty() -> None:
    opened = ms(2027, 1, 15, 8)
    taken = _state(SESSION, _state(SESSION).charged(1000, opened))
    behind = opened - 5  # a client whose clock is 5 ms slow
    assert taken.tokens(behind) < 0
    assert taken.ms_until(1000, behind) == 5


# ---------------------------------------------------------------- planned writes
def _bucket(limit: Limit, full_at: int | None) -> BucketState:
    return BucketState(
        entity_id="e1",
        resource="gpt",
        shard_id=0,
        shard_count=1,
        last_refill_ms=0,
        limits={limit.name: replace(stored_config(limit), full_at=full_at)},
    )


def _planned(limit: Limit, full_at: int | None, now: int) -> tuple[str, dict[str, int]]:
    level = make_level({limit.name: 1000}, (limit,))
    plan = plan_write(_bucket(limit, full_at), level, now, TABLE, KEY)
    assert isinstance(plan, WritePlan)
    return limit_part(plan.params, limit.name)


def test_a_take_names_its_window_in_the_condition() -> None:
    ra = MONTHLY.refill_amount_milli
    jan, feb = ms(2027, 1, 15), ms(2027, 2, 1)
    used = _state(MONTHLY).charged(4000, jan)
    # in January: ADD under January's bounds
    form, values = _planned(MONTHLY, used, jan)
    assert form == "add"
    assert values["now"] == ms(2027, 1, 1) * ra
    # at most 9 used after it, less half of the 5 it leaves (headroom for reserves, plan.py)
    assert values["bound"] == ms(2027, 1, 1) * ra + 6500
    # at the boundary: SET from February's start, only while the item is still January's
    form, values = _planned(MONTHLY, used, feb)
    assert form == "set"
    assert values["now"] == feb * ra and values["amount"] == feb * ra + 1000


def test_a_spent_quota_is_rejected_until_its_reset() -> None:
    jan = ms(2027, 1, 15)
    spent = _state(MONTHLY).charged(10_000, jan)
    level = make_level({"monthly": 1000}, (MONTHLY,))
    plan = plan_write(_bucket(MONTHLY, spent), level, jan, TABLE, KEY)
    assert isinstance(plan, Rejected)
    assert plan.retry_after_ms == ms(2027, 2, 1) - jan


def test_a_session_take_after_its_end_opens_the_next_only_if_none_is_open() -> None:
    ra = SESSION.refill_amount_milli
    opened = ms(2027, 1, 15, 8)
    used = _state(SESSION).charged(4000, opened)
    later = opened + 3_600_000
    form, values = _planned(SESSION, used, later)
    assert form == "set"
    # the item's value must be one of an ended session (start <= later - length)
    assert values["now"] == (later - 3_600_000 + 1) * ra - 1
    assert values["amount"] == later * ra + 1000


def test_a_give_back_lands_only_in_the_window_it_was_taken_from() -> None:
    jan, feb = ms(2027, 1, 15), ms(2027, 2, 3)
    ra = MONTHLY.refill_amount_milli
    window = ms(2027, 1, 1) * ra
    in_jan = _bucket(MONTHLY, _state(MONTHLY).charged(4000, jan))
    give = _quota_give(in_jan, 1, MONTHLY, -2000, window)
    assert give is not None and give.form == keys.GIVE
    assert (give.now_ra, give.bound, give.amount) == (window, window + ra - 1, -2000)
    in_feb = _bucket(MONTHLY, _state(MONTHLY).charged(1000, feb))
    assert _quota_give(in_feb, 1, MONTHLY, -2000, window) is None  # January is gone
    params = keys.take_write(TABLE, KEY, [give], shard_count=1, now_ms=feb)
    assert "#full_at_0 > :now_0 AND #full_at_0 <= :bound_0" in params["ConditionExpression"]


def test_new_bucket_and_item_record_the_window() -> None:
    level = make_level({"monthly": 1000}, (MONTHLY,))
    made = new_bucket(level, ms(2027, 1, 15), 1000)
    assert made.limits["monthly"].window == MONTHLY.window
    item = keys.new_bucket_item("ns", made, ms(2027, 1, 15))
    assert item["b_monthly_qr"] == {"S": "cron:0 0 1 * *@UTC"}
    assert keys.decode_bucket(item).limits["monthly"].window == MONTHLY.window


# ---------------------------------------------------------------- reserves
def test_a_reserve_is_never_spent_past_its_calendar_window_and_goes_back() -> None:
    from zae_limiter.flows.reserves.book import ReserveBook

    key = ("e1", "gpt")
    limits = (MONTHLY,)
    feb = ms(2027, 2, 1)
    book = ReserveBook()
    book.install(key, 0, limits, {"monthly": 5000}, keys.reserve_epoch(feb - 2000), feb - 2000)
    assert book.spend(key, limits, {"monthly": 1000}, feb - 1) == 0
    assert book.spend(key, limits, {"monthly": 1000}, feb) is None  # the window reset
    renewal = book.renew(key, limits, 1, feb)
    assert renewal is not None  # it goes back with the acquire's write
    assert book.holding(key) is None


def test_the_aggregator_never_merges_a_quotas_shards() -> None:
    from zae_limiter.aggregator.merge import plan_merge
    from zae_limiter.aggregator.plan import AggregatorConfig, MergeCandidate

    jan = ms(2027, 1, 15)
    items = {}
    for shard in (0, 1):
        level = make_level({"monthly": 1000}, (MONTHLY,), shard_count=2)
        made = replace(new_bucket(level, jan, 1000), shard_id=shard)
        items[shard] = keys.new_bucket_item("ns", made, jan)
    cand = MergeCandidate("ns", "e1", "gpt", 2, "1")
    # a merge would place the shards' deficits against `now`, not the window's start:
    # their usage would be lost (tokens created)
    assert plan_merge(items, cand, AggregatorConfig(table=TABLE), jan) is None
