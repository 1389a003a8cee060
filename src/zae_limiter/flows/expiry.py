"""When an idle bucket item may expire: the `ttl` each write gives it (keys/expiry.py).

A bucket that is full and holds no reserves is the same as no item: the first acquire
after it is gone creates it full, as it would have found it. So a write gives its item a
`ttl` past the latest time at which the bucket it leaves can still be short of full,
plus the idle period configured (`bucket_ttl`, per level like limits, default a day):

- a refilling limit: a write leaves at most its capacity missing (its condition keeps
  the tokens at or above zero), so it is full again one whole refill later; a charge
  that may leave debt (an adjustment after the fact) adds the time its amount refills;
- a calendar quota: full when its window ends (an expired quota bucket would be a
  reset: it must stay until then); a session quota: when a session opened now would end;
- a reserve taken by the write may be spent from memory for up to its two epochs, so
  the bucket must outlive that too (a holder of a reserve whose bucket was deleted and
  created again would spend tokens the new bucket also has).

A bucket of more than one shard never expires (`None`: the write removes its `ttl`), and
every write that raises a shard count removes it: a shard's share is only right next to
its siblings', and a shard 0 recreated at count 1 beside a live shard 1, or a shard 1
split again from its donor, would hold tokens twice.

Usage counters lose nothing to expiry: the aggregator reads consumption from the table's
stream (each write's `tc` delta, kept 24 h whatever happens to the item), and a stream
REMOVE carries none (aggregator/records.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache

from zae_limiter import keys
from zae_limiter.limits import Limit

#: The idle period after which a full bucket's item may go, when no level sets one.
DEFAULT_BUCKET_TTL_S = 86_400
#: The longest bucket_ttl a level may store (a year); 0 stores "never expire".
MAX_BUCKET_TTL_S = 366 * 86_400
#: How long after its write a reserve may still be spent: its epoch and the next, and the
#: epoch the write was planned in (keys/reserves.py).
RESERVE_HORIZON_MS = 3 * keys.RESERVE_EPOCH_MS


def full_again_ms(limit: Limit, now_ms: int, debt_milli: int = 0) -> int:
    """The latest time at which a bucket of `limit` written at `now_ms` is full again."""
    window = limit.window
    if window is not None:
        if window.cron is not None:
            return window.bounds(now_ms)[1]
        return now_ms + (window.session_ms or 0)
    milli = limit.capacity_milli + max(0, debt_milli)
    # ceil(milli / rate) with the rate in millitokens per ms: whole periods of refill
    return now_ms + -(-milli * limit.refill_period_ms // limit.refill_amount_milli)


@lru_cache(maxsize=1024)
def _refill_span_ms(
    limits: tuple[Limit, ...], full_again: Callable[[Limit, int], int]
) -> int | None:
    """How long after any write the bucket of these refilling limits is full again at the
    latest (reserves included); None when one of them is a quota (its window decides).
    `full_again` is `full_again_ms`, part of the key: a replaced one is asked again."""
    span = RESERVE_HORIZON_MS
    for limit in limits:
        if limit.window is not None:
            return None
        span = max(span, full_again(limit, 0))
    return span


def expires_at_s(
    limits: Iterable[Limit],
    shard_count: int,
    now_ms: int,
    idle_s: int | None,
    debt_milli: Mapping[str, int] | None = None,
) -> int | None:
    """The `ttl` (epoch seconds) a write at `now_ms` gives its bucket item; None: the
    item must carry none (sharded, or a level that set 0: never expire)."""
    if not idle_s or shard_count > 1:
        return None
    if not debt_milli and isinstance(limits, tuple):
        # An acquire's take: for refilling limits the horizon is `now` plus a span known
        # per set of limits (full_again_ms is `now` plus a constant for each).
        span = _refill_span_ms(limits, full_again_ms)
        if span is not None:
            return -(-(now_ms + span) // 1000) + idle_s
    debt = debt_milli or {}
    horizon = now_ms + RESERVE_HORIZON_MS
    for limit in limits:
        horizon = max(horizon, full_again_ms(limit, now_ms, debt.get(limit.name, 0)))
    return -(-horizon // 1000) + idle_s


def check_bucket_ttl(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"bucket_ttl must be a whole number of seconds, got {value!r}")
    if not 0 <= value <= MAX_BUCKET_TTL_S:
        raise ValueError(
            f"bucket_ttl must be between 0 (never expire) and {MAX_BUCKET_TTL_S} seconds "
            f"(366 days), got {value}"
        )
    return value
