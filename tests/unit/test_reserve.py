"""The reserve book and the grant rule: sizing, spending, settling, returning, conservation."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.unit._flowkit import make_level, make_state
from zae_limiter import keys
from zae_limiter.errors import ValidationError
from zae_limiter.flows.reserves.book import (
    DEMAND_TAU_MS,
    RENEW_GRACE_MS,
    ReserveBook,
    ReserveSettings,
)
from zae_limiter.flows.reserves.ops import serve
from zae_limiter.flows.write.grants import grant
from zae_limiter.limits import Limit

T0 = 1_800_000_000_000
KEY = ("key-1", "gpt-4")
LIMITS = (Limit.per_minute("rpm", 6000), Limit.per_minute("tpm", 600_000))
EPOCH = keys.reserve_epoch(T0)


def hot_book(rate: int = 20, settings: ReserveSettings | None = None) -> ReserveBook:
    """A book that has known the bucket for a while (its demand estimate is no longer
    young) and has seen `rate` acquires (1 rpm, 100 tpm each) in the last instant."""
    book = ReserveBook(settings)
    book.record(KEY, {}, T0 - 5 * DEMAND_TAU_MS, count=0)
    for _ in range(rate):
        book.record(KEY, {"rpm": 1000, "tpm": 100_000}, T0)
    return book


def test_a_bucket_is_not_hot_below_the_rate_threshold() -> None:
    book = hot_book(rate=3)
    assert book.want(KEY, LIMITS, {"rpm": 1000}, 1, T0) == {}
    book.record(KEY, {"rpm": 1000}, T0)
    assert book.want(KEY, LIMITS, {"rpm": 1000}, 1, T0) != {}


def test_demand_decays_so_a_bucket_cools_down() -> None:
    book = hot_book(rate=20)
    assert book.rate(KEY, T0) == pytest.approx(20)
    assert book.rate(KEY, T0 + 3000) < 1.0
    assert book.want(KEY, LIMITS, {"rpm": 1000}, 1, T0 + 3000) == {}


def test_a_reserve_lasts_the_target_period_at_the_clients_rate() -> None:
    book = hot_book(rate=20)  # 20 acquires/s, 2 writes/s: 10 acquires' worth
    want = book.want(KEY, LIMITS, {"rpm": 1000, "tpm": 100_000}, 1, T0)
    assert want == {"rpm": 10_000, "tpm": 1_000_000}


def test_a_young_throttled_client_sizes_its_reserve_for_the_rate_it_shows_so_far() -> None:
    """A client that saw the bucket first 250 ms ago, at 20 acquires/s: its decayed sum
    holds about a fifth of what it will at that rate, and the reserve a throttle asks for
    is sized for the rate so far (about 20/s, 2 writes/s: 10 acquires' worth), not for
    the fifth (2 acquires' worth): at a cold start on a throttling partition each reserve
    costs a write the partition barely gives."""
    book = ReserveBook()
    for i in range(5):
        book.record(KEY, {"rpm": 1000}, T0 + 50 * i)
    now = T0 + 250
    want = book.want(KEY, LIMITS, {"rpm": 1000}, 1, now, throttled=True)
    assert 8000 <= want["rpm"] <= 11_000, want
    # Not throttled, a young client stays conservative: a reserve holds tokens from others.
    assert book.want(KEY, LIMITS, {"rpm": 1000}, 1, now) == {"rpm": 2000}
    # A client that has known the bucket long, with the same sum, is at a fifth the rate.
    old = hot_book(rate=4)
    assert old.want(KEY, LIMITS, {"rpm": 1000}, 1, T0, throttled=True)["rpm"] == 2000


def test_a_reserve_never_takes_more_than_its_share_of_the_capacity() -> None:
    book = hot_book(rate=2000)
    want = book.want(KEY, LIMITS, {"rpm": 1000}, 1, T0)
    assert want["rpm"] == 600_000  # 10% of 6,000 rpm
    # Sharded: a share of the shard's capacity.
    assert book.want(KEY, LIMITS, {"rpm": 1000}, 4, T0)["rpm"] == 150_000


def test_a_top_up_asks_only_for_what_the_reserve_lacks() -> None:
    book = hot_book(rate=20)
    book.install(KEY, 0, LIMITS, {"rpm": 4000, "tpm": 1_000_000}, 1, T0)
    assert book.want(KEY, LIMITS, {"rpm": 1000}, 1, T0) == {"rpm": 6000}


def test_spending_debits_and_refuses_what_the_reserve_cannot_cover() -> None:
    book = hot_book()
    book.install(KEY, 2, LIMITS, {"rpm": 2000, "tpm": 150_000}, 1, T0)
    assert book.spend(KEY, LIMITS, {"rpm": 1000, "tpm": 100_000}, T0) == 2
    assert book.spend(KEY, LIMITS, {"rpm": 1000, "tpm": 100_000}, T0) is None  # tpm short
    assert book.spend(KEY, LIMITS, {"rpm": 1000, "tpm": 50_000}, T0) == 2
    assert book.spend(KEY, LIMITS, {"rpm": 1000}, T0) is None  # rpm spent
    assert book.snapshot().hits == 2


def test_a_changed_limit_retires_the_reserve_for_return() -> None:
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 5000}, 1, T0)
    lowered = (Limit.per_minute("rpm", 60), LIMITS[1])
    assert book.spend(KEY, lowered, {"rpm": 1000}, T0) is None
    assert book.holding(KEY) is None
    [(key, held)] = book.due(T0)
    assert key == KEY and held.left == {"rpm": 5000}


def test_settle_credits_and_debits_only_the_same_shard() -> None:
    book = hot_book()
    book.install(KEY, 1, LIMITS, {"tpm": 100_000}, 1, T0)
    assert book.spend(KEY, LIMITS, {"tpm": 5000}, T0) == 1
    # another shard's tokens: the caller writes the whole change
    assert book.apply_change(KEY, 0, {"tpm": -5000}, T0) == {"tpm": -5000}
    assert book.apply_change(KEY, 1, {"tpm": -5000}, T0) == {}  # given back into the reserve
    assert book.apply_change(KEY, 1, {"tpm": 100_000}, T0) == {}  # covered
    assert book.apply_change(KEY, 1, {"tpm": 1}, T0) == {"tpm": 1}  # not covered: written
    held = book.holding(KEY)
    assert held is not None and held.left == {"tpm": 0}


def test_a_give_back_never_leaves_a_reserve_holding_more_than_its_held_counts() -> None:
    """Tokens a write of the bucket took (a refused acquire's, given back as it fails)
    go back to the bucket, not into the reserve: the bucket refills past tokens it
    thinks spent, so a reserve holding them spends them a second time (the simulator's
    seed 384: 4 offered where the ideal bucket held 2)."""
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 2000}, 1, T0)
    # nothing spent: all of it is written
    assert book.apply_change(KEY, 0, {"rpm": -3000}, T0) == {"rpm": -3000}
    assert book.spend(KEY, LIMITS, {"rpm": 1000}, T0) == 0
    # 1 + 2 would pass the 2 held: the one spent settles, the other is written
    assert book.apply_change(KEY, 0, {"rpm": -2000}, T0) == {"rpm": -1000}
    held = book.holding(KEY)
    assert held is not None and held.left == {"rpm": 2000}


def test_a_give_back_settles_what_the_reserve_spent_and_writes_only_the_rest() -> None:
    """A lease served from the reserve that gives back more than it took (seed 12166: 1
    taken, adjusted by -3): the token the reserve spent settles back into it, and only
    the other 2 go to the bucket. Written whole, the give-back reached the bucket's
    full-at time before the spent token was charged there (with the reserve's next
    write), and a bucket at its top dropped one: a token lost with no fault."""
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 1000, "tpm": 100_000}, 1, T0)
    assert book.spend(KEY, LIMITS, {"rpm": 1000, "tpm": 100_000}, T0) == 0
    rest = book.apply_change(KEY, 0, {"rpm": -3000, "tpm": 50_000}, T0)
    # tpm's take more is not covered (nothing left): written; rpm settles its spent one
    assert rest == {"rpm": -2000, "tpm": 50_000}
    held = book.holding(KEY)
    assert held is not None and held.left == {"rpm": 1000, "tpm": 0}


def test_an_aged_reserve_settles_give_backs_and_never_spends() -> None:
    """Past `max_age_ms` a reserve is never spent again, so an adjustment up goes to the
    bucket whole; a give-back still settles up to what it spent (seed 5914: written
    whole while the aged reserve's 10 spent tokens waited for its renewal, the give-back
    reached a bucket at its top by the full-at time, and 3 tokens were lost)."""
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 5000, "tpm": 100_000}, EPOCH, T0)
    assert book.spend(KEY, LIMITS, {"rpm": 2000, "tpm": 100_000}, T0) == 0
    aged = T0 + book.settings.max_age_ms
    rest = book.apply_change(KEY, 0, {"rpm": -3000, "tpm": 10_000}, aged)
    assert rest == {"rpm": -1000, "tpm": 10_000}
    held = book.holding(KEY)
    assert held is not None and held.left == {"rpm": 5000, "tpm": 0}


def test_reserves_fall_due_when_idle_or_old() -> None:
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 5000}, 1, T0)
    assert book.next_due_ms() == T0 + 2000
    assert book.due(T0 + 1999) == []
    book.spend(KEY, LIMITS, {"rpm": 1000}, T0 + 1500)  # used: idle again from here
    assert book.due(T0 + 2000) == []
    for t in range(T0 + 3000, T0 + 10_000, 1000):
        book.spend(KEY, LIMITS, {"rpm": 100}, t)
    # Max age, though in use: the keeper gives an acquire RENEW_GRACE_MS to renew it.
    assert [k for k, _ in book.due(T0 + 10_000 + RENEW_GRACE_MS)] == [KEY]


def test_an_aged_reserve_is_renewed_whole_by_the_next_write() -> None:
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 5000}, EPOCH, T0)
    held = book.holding(KEY)
    assert held is not None
    assert book.renew(KEY, LIMITS, 1, T0 + 100) is None  # young: it serves acquires
    aged = held.born_ms + book.settings.max_age_ms
    for t in range(T0 + 1000, aged, 1000):  # in use all along: never idle
        assert book.spend(KEY, LIMITS, {"rpm": 100}, t) == 0
    left = held.left["rpm"]
    assert book.spend(KEY, LIMITS, {"rpm": 100}, aged) is None  # never spent past its age
    assert book.due(aged) == []  # the keeper waits for an acquire to carry it
    flush = book.renew(KEY, LIMITS, 1, aged)
    assert flush is not None
    # Every count it raised goes down; what it spent is charged; the rest goes back.
    assert flush.released == {EPOCH: {"rpm": 5000}}
    assert (flush.spent, flush.back) == ({"rpm": 5000 - left}, {"rpm": left})
    assert book.holding(KEY) is None and book.next_due_ms() is None


def test_a_return_refused_by_a_throttle_rides_on_the_next_write() -> None:
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 5000}, EPOCH, T0)
    returns = book.drain()
    book.retry_later(returns, T0)  # throttled: it backs off
    assert book.renew(KEY, LIMITS[:1], 1, T0) is None  # under other limits
    flush = book.renew(KEY, LIMITS, 1, T0)
    assert flush is not None and flush.back == {"rpm": 5000}
    assert book.next_due_ms(T0) is None  # nothing left for the keeper


def test_a_reserve_past_its_age_is_never_spent() -> None:
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 5000}, 1, T0)
    assert book.spend(KEY, LIMITS, {"rpm": 1000}, T0 + 10_000) is None
    assert book.drain()[0][1].left == {"rpm": 5000}


def test_a_grant_on_another_shard_retires_the_old_reserve() -> None:
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 5000}, 1, T0)
    book.install(KEY, 3, LIMITS, {"rpm": 2000}, 1, T0)
    held = book.holding(KEY)
    assert held is not None and held.shard_id == 3 and held.left == {"rpm": 2000}
    assert [h.shard_id for _k, h in book.drain()] == [0, 3]


def test_returnable_until_readers_stop_counting_the_held_tokens() -> None:
    book = hot_book()
    epoch = keys.reserve_epoch(T0)
    book.install(KEY, 0, LIMITS, {"rpm": 5000}, epoch, T0)
    held = book.holding(KEY)
    assert held is not None
    end = (epoch + 2) * keys.RESERVE_EPOCH_MS
    assert held.returnable(end - 5001)
    assert not held.returnable(end - 5000)


@pytest.mark.parametrize(
    ("field", "value"),
    [("writes_per_second", 0), ("max_share", 0.9), ("idle_ms", 0), ("max_age_ms", 60_000)],
)
def test_settings_are_checked(field: str, value: float) -> None:
    with pytest.raises(ValidationError, match=field.split("_ms")[0]):
        ReserveSettings(**{field: value})  # type: ignore[arg-type]


# ---------------------------------------------------------------- the grant rule
def test_grant_keeps_as_much_again_behind() -> None:
    assert grant({"rpm": 10_000}, {"rpm": 100_000}, {"rpm": 1000}) == {"rpm": 10_000}
    # 21 left after the acquire: at most 10.5 may leave, every limit shrinks alike, and
    # only whole tokens move.
    asked = {"rpm": 20_000, "tpm": 40_000}
    assert grant(asked, {"rpm": 22_000, "tpm": 10**7}, {"rpm": 1000}) == {
        "rpm": 10_000,
        "tpm": 21_000,
    }


def test_grant_refuses_a_reserve_too_small_to_be_worth_it() -> None:
    assert grant({"rpm": 40_000}, {"rpm": 10_000}, {"rpm": 1000}) == {}
    assert grant({}, {"rpm": 10_000}, {"rpm": 1000}) == {}


# ---------------------------------------------------------------- conservation
ops = st.lists(
    st.tuples(
        st.sampled_from(["acquire", "adjust", "give_back", "return", "tick"]),
        st.integers(min_value=1, max_value=40),
    ),
    max_size=120,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_tokens_are_never_created_or_destroyed(steps: list[tuple[str, int]]) -> None:
    """A model bucket with no refill and one client's book, driven the way the flows drive
    them: whatever the interleaving, bucket + held + spent == capacity, and the bucket and
    the reserve never go below zero."""
    limits = (Limit.custom("rpm", 100, 1, 3600),)
    capacity = 100_000
    bucket = capacity  # millitokens in the item
    held_count = 0  # the item's held count
    spent = 0
    book = ReserveBook()
    now = T0
    for op, amount in steps:
        milli = amount * 1000
        if op == "tick":
            now += amount * 100
            for _key, reserve in book.due(now):
                bucket += sum(reserve.left.values())
                held_count -= sum(reserve.taken_total().values())
                spent += sum(reserve.taken_total().values()) - sum(reserve.left.values())
            continue
        if op == "return":
            for _key, reserve in book.drain():
                bucket += sum(reserve.left.values())
                held_count -= sum(reserve.taken_total().values())
                spent += sum(reserve.taken_total().values()) - sum(reserve.left.values())
            continue
        consume = {"rpm": milli}
        if op == "acquire":
            book.record(KEY, consume, now)
            if book.spend(KEY, limits, consume, now) is not None:
                continue  # spent from the reserve: counted when it goes back
            want = book.want(KEY, limits, consume, 1, now)
            if bucket < milli:
                continue  # rejected
            given = grant(want, {"rpm": bucket}, consume)
            bucket -= milli + given.get("rpm", 0)
            held_count += given.get("rpm", 0)
            spent += milli
            book.install(KEY, 0, limits, given, 1, now)
        elif op == "adjust":  # the lease consumes more: from the reserve, else a write
            if book.apply_change(KEY, 0, consume, now):
                bucket -= milli  # an adjustment may leave debt
                spent += milli
        else:  # a rollback of what leases consumed: into the reserve, else a write
            consumed = spent + sum(
                sum(h.taken_total().values()) - sum(h.left.values())
                for h in filter(None, [book.holding(KEY)])
            )
            milli = min(milli, consumed)
            if not milli:
                continue
            written = -book.apply_change(KEY, 0, {"rpm": -milli}, now).get("rpm", 0)
            bucket += written
            spent -= written
        held = book.holding(KEY)
        assert held is None or all(v >= 0 for v in held.left.values())
    held = book.holding(KEY)
    taken = sum(held.taken_total().values()) if held is not None else 0
    # What the reserve took is out of the bucket: spent from it, or still held.
    assert bucket + taken == capacity - spent
    assert held_count == taken
    for _key, reserve in book.drain():
        bucket += sum(reserve.left.values())
    assert bucket <= capacity


def test_demand_of_quiet_buckets_is_forgotten_when_many_are_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from zae_limiter.flows.reserves import book as reserve

    monkeypatch.setattr(reserve, "DEMAND_KEYS_MAX", 3)
    book = ReserveBook()
    for i in range(3):
        book.record((f"k{i}", "r"), {"rpm": 1000}, T0)
    book.install(("k0", "r"), 0, LIMITS, {"rpm": 1000}, 1, T0)  # held: kept
    book.record(("k9", "r"), {"rpm": 1000}, T0 + 60_000)
    assert book.rate(("k1", "r"), T0 + 60_000) == 0.0
    assert len(book._demand) == 2  # k0 (holds a reserve) and k9


def test_a_flush_reports_spending_and_lowers_the_held_counts_oldest_first() -> None:
    book = hot_book()
    book.install(KEY, 1, LIMITS, {"rpm": 3000}, 7, T0)
    book.install(KEY, 1, LIMITS, {"rpm": 2000}, 8, T0)
    for _ in range(4):
        assert book.spend(KEY, LIMITS, {"rpm": 1000}, T0) == 1
    shard, flush = book.flush(KEY, 2) or (None, None)
    assert shard == 1 and flush is not None
    assert flush.spent == {"rpm": 4000}
    assert flush.released == {7: {"rpm": 3000}, 8: {"rpm": 1000}}
    held = book.holding(KEY)
    assert held is not None and held.taken_total() == {"rpm": 1000} == held.left
    assert book.flush(KEY, 2) is None  # nothing spent since


def test_an_unapplied_flush_is_held_again_or_written_back_on_its_own() -> None:
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 3000}, 7, T0)
    book.spend(KEY, LIMITS, {"rpm": 1000}, T0)
    _shard, flush = book.flush(KEY, 1) or (0, None)
    assert flush is not None
    book.unflush(KEY, flush, T0)
    held = book.holding(KEY)
    assert held is not None and held.taken_total() == {"rpm": 3000}
    _shard, flush = book.flush(KEY, 1) or (0, None)
    assert flush is not None
    book.drain()  # the keeper returned the reserve meanwhile
    book.unflush(KEY, flush, T0)
    [(_key, orphan)] = book.due(T0)
    assert orphan.left == {} and orphan.taken == {7: {"rpm": 1000}}


def test_a_renewal_not_applied_goes_back_whole_beside_a_newer_reserve() -> None:
    book = hot_book()
    book.install(KEY, 0, LIMITS, {"rpm": 5000}, EPOCH, T0)
    returns = book.drain()
    book.retry_later(returns, T0)
    flush = book.renew(KEY, LIMITS, 1, T0)
    assert flush is not None
    book.install(KEY, 0, LIMITS, {"rpm": 2000}, EPOCH, T0)  # another acquire's reserve
    book.unflush(KEY, flush, T0, LIMITS)  # the renewal's write was throttled
    newer = book.holding(KEY)
    assert newer is not None and newer.taken == {EPOCH: {"rpm": 2000}}
    back = [(held.left, held.taken) for _key, held in book.drain()]
    assert back == [
        ({"rpm": 5000}, {EPOCH: {"rpm": 5000}}),  # the renewal's reserve, whole
        ({"rpm": 2000}, {EPOCH: {"rpm": 2000}}),
    ]


def test_a_waiting_return_rides_without_costing_the_held_reserves_flush() -> None:
    """A return waits on the keeper's list (its write was throttled) while a newer reserve
    of the bucket has spending to report: the next acquire's write carries the return, and
    the newer reserve keeps its spending for a later write (a flush drops neither)."""
    state = make_state()
    state.reserves = book = ReserveBook()
    level = make_level()
    key = (level.entity_id, level.resource)
    for _ in range(20):  # hot: the acquire asks for a reserve, and would report a flush
        book.record(key, {"rpm": 1000, "tpm": 100_000}, T0)
    book.install(key, 0, level.limits, {"rpm": 5000, "tpm": 500_000}, EPOCH, T0)
    book.retry_later(book.drain(), T0)  # the first reserve's return was throttled
    book.install(key, 0, level.limits, {"rpm": 3000, "tpm": 300_000}, EPOCH, T0)
    newer = book.holding(key)
    assert newer is not None
    newer.left = {"rpm": 0, "tpm": 0}  # all spent, not reported yet
    served, rest = serve(state, [level], T0 + 10)
    assert not served
    [carried] = rest
    assert carried.hold_milli
    assert carried.flush is not None and carried.flush.back == {"rpm": 5000, "tpm": 500_000}
    assert book.flush(key, 1) is not None  # the spending is still there to report


MIDNIGHT_MS = 1_800_057_600_000  # 2027-01-16 00:00:00 UTC
EPOCH = keys.reserve_epoch(MIDNIGHT_MS - 1000)
QUOTA_LIMITS = (Limit.per_minute("rpm", 6000), Limit.quota("daily", 10_000, reset="0 0 * * *"))


def test_a_reserve_whose_quota_reset_is_never_spent_nor_settled_and_is_due_then() -> None:
    """docs/quotas.md, "Reserves at a reset": past the window it was taken in."""
    book = ReserveBook()
    book.install(KEY, 0, QUOTA_LIMITS, {"rpm": 5000, "daily": 5000}, EPOCH, MIDNIGHT_MS - 1000)
    assert book.spend(KEY, QUOTA_LIMITS, {"rpm": 1000, "daily": 1000}, MIDNIGHT_MS - 500) == 0
    held = book.holding(KEY)
    assert held is not None and held.gone(MIDNIGHT_MS - 1) == frozenset()
    assert held.gone(MIDNIGHT_MS) == {"daily"}, "the rate limit's spending is still charged"
    assert book.next_due_ms() == MIDNIGHT_MS + RENEW_GRACE_MS
    assert book.spend(KEY, QUOTA_LIMITS, {"rpm": 1000, "daily": 1000}, MIDNIGHT_MS) is None
    assert book.apply_change(KEY, 0, {"daily": -1000}, MIDNIGHT_MS) == {"daily": -1000}
    renewal = book.renew(KEY, QUOTA_LIMITS, 1, MIDNIGHT_MS)
    assert renewal is not None and renewal.uncharged == {"daily"}
    assert renewal.spent == {"rpm": 1000, "daily": 1000}  # usage, all of it
    assert renewal.back == {"rpm": 4000, "daily": 4000}


SESSION_LIMITS = (
    Limit.per_minute("rpm", 6000),
    Limit.quota("runs", 10_000, reset_after=timedelta(minutes=1)),
)


def test_a_reserve_taken_in_a_session_is_never_spent_past_its_end() -> None:
    """As at a calendar reset: a session quota's reserve knows the end of the session
    its take's item held (`session_end_ms`), and past it is not spent, its spending is
    usage only (not charged to the next session), and it falls due then."""
    book = ReserveBook()
    end = MIDNIGHT_MS  # the session the take landed in ends here
    book.install(KEY, 0, SESSION_LIMITS, {"rpm": 5000, "runs": 5000}, EPOCH, end - 1000, end)
    assert book.spend(KEY, SESSION_LIMITS, {"rpm": 1000, "runs": 1000}, end - 500) == 0
    held = book.holding(KEY)
    assert held is not None and held.gone(end - 1) == frozenset()
    assert held.gone(end) == {"runs"}, "the rate limit's spending is still charged"
    assert book.next_due_ms() == end + RENEW_GRACE_MS
    assert book.spend(KEY, SESSION_LIMITS, {"rpm": 1000, "runs": 1000}, end) is None
    renewal = book.renew(KEY, SESSION_LIMITS, 1, end)
    assert renewal is not None and renewal.uncharged == {"runs"}


def test_a_reserve_of_an_ended_window_is_never_topped_up() -> None:
    book = ReserveBook()
    book.install(KEY, 0, QUOTA_LIMITS, {"daily": 5000}, EPOCH, MIDNIGHT_MS - 1000)
    old = book.holding(KEY)
    book.install(KEY, 0, QUOTA_LIMITS, {"daily": 2000}, EPOCH + 1, MIDNIGHT_MS + 10)
    new = book.holding(KEY)
    assert new is not old and new is not None and new.left == {"daily": 2000}
    assert {id(reserve) for _key, reserve in book.drain()} == {id(old), id(new)}
