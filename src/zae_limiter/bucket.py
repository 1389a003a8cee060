"""Token-bucket arithmetic in exact integers. No clock is read here.

A limit stores the time its bucket will be full (GCRA's theoretical arrival time), kept
as one integer `full_at` = full-at time in ms x `ra` (millitokens per `rp` ms). A shard
holds 1/`count` of a limit's capacity and rate; a millitoken of its share is worth
`unit` = `rp` x `count` of `full_at`. At `now` the shard is short of full by

    deficit(now) = ceil(max(0, full_at - now * ra) / unit)    millitokens

and holds `room - deficit(now)`, where `room` is its share of the capacity less what
token reserves hold. Time does the refilling, so nothing is ever written to refill, and
the ceiling rounds in the limiter's favour. A take of n moves `full_at` by n x unit:
an ADD while the bucket is not full, a SET from `now * ra` once it is (an ADD there
would spend the part of the past in which the bucket sat full).

A quota (a limit with a `window`) is the same bucket on a clock that stands still inside
a window: its `ra` refills a whole capacity in 1 ms of that clock, and the clock reads
the window's start (in ms), so nothing refills until the window changes, and then the
clock jumps by at least a second and the bucket is full. Every formula above holds with
`now * ra` replaced by two values:
- `threshold(now)`: the largest `full_at` that means "full now" (the SET form's
  condition, the ADD form's lower bound);
- `base(now)`: the `full_at` of a bucket full now (the SET form's start, the bound's).
For a refilling limit both are `now * ra`. For a calendar quota both are `start * ra`.
For a session quota `full_at // ra` is the session's start (a take adds less than `ra`):
the session is live while `start + length > now`, so `threshold` is the largest value
of an ended session and `base` is the live session's `start * ra` (or `now * ra`, the
session a take would open; also for a session a faster clock opened after `now`, which
then reads as empty: a take planned before a boundary never lands after it). A write
conditioned on a window therefore fails once another client opened the next one: a
reset happens once, and no take planned in one window lands in the next.
"""

from __future__ import annotations

from dataclasses import dataclass

from zae_limiter.quota import Window


def accrued(t_ms: int, refill_amount_milli: int, refill_period_ms: int) -> int:
    """Millitokens a limit has accrued since the epoch (legacy `tk`/`rf` items only)."""
    return (t_ms * refill_amount_milli) // refill_period_ms


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitState:
    """One limit inside a bucket item, as stored (`b_{name}_{fa,cp,ra,rp,tc}`).

    `capacity_milli`, `refill_amount_milli` and `refill_period_ms` are the whole limit's;
    a shard's share is taken by the methods' `count`. `full_at` None: never taken (full).
    """

    capacity_milli: int
    refill_amount_milli: int
    refill_period_ms: int
    total_consumed_milli: int = 0
    full_at: int | None = None
    #: A quota's window (None: a refilling limit). Not stored in the item: the limit's
    #: config carries it (flows/write/shares.py).
    window: Window | None = None

    def threshold(self, now_ms: int) -> int:
        """The largest `full_at` that means "full at `now_ms`" (see the module's doc)."""
        ra, window = self.refill_amount_milli, self.window
        if window is None:
            return now_ms * ra
        if window.session_ms is None:
            return window.bounds(now_ms)[0] * ra
        return (now_ms - window.session_ms + 1) * ra - 1

    def base(self, now_ms: int) -> int:
        """The `full_at` of a bucket that is full at `now_ms` (see the module's doc)."""
        ra, window = self.refill_amount_milli, self.window
        if window is None:
            return now_ms * ra
        if window.session_ms is None:
            return window.bounds(now_ms)[0] * ra
        if self.full_at is not None and self.full_at > self.threshold(now_ms):
            start = self.full_at // ra
            # A session a faster clock opened after `now` is not this client's to spend:
            # from `now` its whole content is a deficit, so no take here lands in it.
            return start * ra if start <= now_ms else now_ms * ra
        return now_ms * ra

    def reset_at(self, now_ms: int) -> int | None:
        """A quota: when the window holding `now_ms` ends (None: a refilling limit, or a
        session not opened)."""
        window = self.window
        if window is None:
            return None
        if window.session_ms is None:
            return window.bounds(now_ms)[1]
        if self.full_at is None or self.full_at <= self.threshold(now_ms):
            return None
        return self.full_at // self.refill_amount_milli + window.session_ms

    def unit(self, count: int = 1) -> int:
        """`full_at` per millitoken of a shard's share."""
        return self.refill_period_ms * count

    def room(self, count: int = 1, held: int = 0) -> int:
        """A shard's share of the capacity, less what reserves hold of it."""
        return max(1, self.capacity_milli // count) - max(0, held)

    def deficit(self, now_ms: int, count: int = 1) -> int:
        """Millitokens the shard lacks to be full at `now_ms` (rounded up)."""
        if self.full_at is None:
            return 0
        behind = self.full_at - self.base(now_ms)
        return _ceil_div(behind, self.unit(count)) if behind > 0 else 0

    def tokens(self, now_ms: int, count: int = 1, held: int = 0) -> int:
        """Millitokens the shard holds at `now_ms` (negative: debt)."""
        return self.room(count, held) - self.deficit(now_ms, count)

    def is_full(self, now_ms: int) -> bool:
        return self.full_at is None or self.full_at <= self.threshold(now_ms)

    def full_in_ms(self, now_ms: int) -> int:
        """Milliseconds from `now_ms` until the bucket is full again."""
        if self.full_at is None:
            return 0
        if self.window is not None:
            end = self.reset_at(now_ms)
            return 0 if end is None or self.is_full(now_ms) else end - now_ms
        return max(0, _ceil_div(self.full_at, self.refill_amount_milli) - now_ms)

    def ms_until(self, needed_milli: int, now_ms: int, count: int = 1, held: int = 0) -> int:
        """Milliseconds from `now_ms` until `needed_milli` are present (0 if they are);
        -1 when they never can be (more than the room)."""
        spare = self.room(count, held) - needed_milli
        if spare < 0:
            return -1
        if self.full_at is None:
            return 0
        if self.window is not None:
            # Nothing comes back before the reset, and then the whole room does.
            if self.tokens(now_ms, count, held) >= needed_milli:
                return 0
            end = self.reset_at(now_ms)
            if self.window.session_ms and self.full_at is not None:
                start = self.full_at // self.refill_amount_milli
                if start > now_ms:  # opened in this client's future: wait until it begins
                    end = start
            return 0 if end is None else max(1, end - now_ms)
        # tokens(t) >= needed  <=>  full_at - t * ra <= spare * unit
        t = _ceil_div(self.full_at - spare * self.unit(count), self.refill_amount_milli)
        return max(0, t - now_ms)

    def charged(self, milli: int, now_ms: int, count: int = 1) -> int:
        """`full_at` after taking `milli` >= 0 at `now_ms`: the ADD form from the stored
        value while the bucket is short of full, the SET form from `now` once it is."""
        live = self.full_at is not None and self.full_at > self.threshold(now_ms)
        base = self.full_at if live and self.full_at is not None else self.base(now_ms)
        return base + milli * self.unit(count)

    def given_back(self, milli: int, count: int = 1) -> int:
        """`full_at` after giving `milli` back: always an ADD, since a `full_at` moved into
        the past only says the bucket is full (the deficit's max(0, .) clamps it)."""
        return (self.full_at or 0) - milli * self.unit(count)

    def with_tokens(self, tokens_milli: int, now_ms: int, count: int = 1, held: int = 0) -> int:
        """The `full_at` at which the shard holds `tokens_milli` at `now_ms` (clamped to
        the room: a bucket holds no more than full)."""
        short = max(0, self.room(count, held) - tokens_milli)
        if short == 0 and self.window is not None:
            # Full: a session quota must not open a session for nothing taken.
            return min(self.base(now_ms), self.threshold(now_ms))
        return self.base(now_ms) + short * self.unit(count)


def legacy_tokens(
    state: LimitState, tokens_milli: int, last_refill_ms: int, now_ms: int, count: int, held: int
) -> int:
    """What a schema-v2 limit (`tk` as of `rf`) holds at `now_ms`: refilled at the shard's
    share of the rate, clamped to its room, as v2 clients computed it."""
    ra = max(1, state.refill_amount_milli // count)
    rp = state.refill_period_ms
    gain = 0
    if now_ms > last_refill_ms:
        gain = accrued(now_ms, ra, rp) - accrued(last_refill_ms, ra, rp)
    return min(state.room(count, held), tokens_milli + gain)


def to_milli(tokens: int) -> int:
    return tokens * 1000


def from_milli_floor(milli: int) -> int:
    """Whole tokens available (debt counts as negative whole tokens, rounded down)."""
    return milli // 1000
