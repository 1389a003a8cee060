"""Token-bucket arithmetic in integer millitokens and milliseconds. No clock is read here.

Refill is computed against absolute time: the tokens a limit gains between `t0` and `t1`
are `floor(t1 * ra / rp) - floor(t0 * ra / rp)`. The floors telescope, so refilling in
any number of steps gives exactly the tokens of one refill over the whole span, and one
shared `last_refill_ms` serves every limit of an item, whatever their rates.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


def accrued(t_ms: int, refill_amount_milli: int, refill_period_ms: int) -> int:
    """Millitokens a limit has accrued since the epoch; only differences matter."""
    return (t_ms * refill_amount_milli) // refill_period_ms


@dataclass(frozen=True, slots=True)
class LimitState:
    """One limit inside a bucket item, as stored (`b_{name}_{tk,cp,ra,rp,tc}`)."""

    tokens_milli: int
    capacity_milli: int
    refill_amount_milli: int
    refill_period_ms: int
    total_consumed_milli: int = 0

    def refill_gain(self, last_refill_ms: int, now_ms: int) -> int:
        if now_ms <= last_refill_ms:
            return 0
        return accrued(now_ms, self.refill_amount_milli, self.refill_period_ms) - accrued(
            last_refill_ms, self.refill_amount_milli, self.refill_period_ms
        )

    def refilled(self, last_refill_ms: int, now_ms: int) -> LimitState:
        """Tokens at `now_ms`; never above capacity, debt (negative tokens) is repaid first."""
        # min() also brings a bucket whose capacity was lowered down to the new capacity.
        gain = self.refill_gain(last_refill_ms, now_ms)
        return replace(self, tokens_milli=min(self.capacity_milli, self.tokens_milli + gain))

    def ms_until(self, needed_milli: int, last_refill_ms: int, now_ms: int) -> int:
        """Milliseconds from `now_ms` until `needed_milli` tokens are present (0 if they are).

        Returns -1 when the request can never fit (it exceeds the capacity).
        """
        current = self.refilled(last_refill_ms, now_ms).tokens_milli
        if current >= needed_milli:
            return 0
        if needed_milli > self.capacity_milli:
            return -1
        target = accrued(last_refill_ms, self.refill_amount_milli, self.refill_period_ms) + (
            needed_milli - self.tokens_milli
        )
        # The smallest t with floor(t * ra / rp) >= target is ceil(target * rp / ra).
        t = -(-(target * self.refill_period_ms) // self.refill_amount_milli)
        return max(0, t - now_ms)


def to_milli(tokens: int) -> int:
    return tokens * 1000


def from_milli_floor(milli: int) -> int:
    """Whole tokens available (debt counts as negative whole tokens, rounded down)."""
    return milli // 1000
