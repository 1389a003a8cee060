"""How token reserves are sized and how long they live (see docs/reserves.md)."""

from __future__ import annotations

from dataclasses import dataclass

from zae_limiter.errors import ValidationError
from zae_limiter.keys import RESERVE_EPOCH_MS

#: Past this point of its oldest epoch's life a reserve's tokens are no longer returned:
#: readers may already have stopped counting them as held (clock skew between clients).
RETURN_MARGIN_MS = 5000

@dataclass(frozen=True, slots=True)
class ReserveSettings:
    """How reserves are sized and how long they live (see docs/reserves.md).

    - `writes_per_second`: the target number of reserve writes per second per client per
      bucket; a reserve is sized to last `1 / writes_per_second` at the client's own rate.
    - `hot_rate`: acquires per second on a bucket, in this client, before it takes reserves.
    - `max_share`: the most one reserve may hold, as a share of the shard's capacity.
    - `idle_ms` / `max_age_ms`: unspent tokens go back after this long without an acquire,
      or this long after the reserve was first taken.
    """

    writes_per_second: float = 2.0
    hot_rate: float = 4.0
    max_share: float = 0.1
    idle_ms: int = 2000
    max_age_ms: int = 10_000

    def __post_init__(self) -> None:
        if not self.writes_per_second > 0:
            raise ValidationError("reserve writes_per_second must be a positive number")
        if not self.hot_rate > 0:
            raise ValidationError("reserve hot_rate must be a positive number")
        if not 0 < self.max_share <= 0.5:
            raise ValidationError("reserve max_share must be above 0 and at most 0.5")
        if not 0 < self.idle_ms <= self.max_age_ms:
            raise ValidationError("reserve idle_ms must be positive and at most max_age_ms")
        if self.max_age_ms > RESERVE_EPOCH_MS - RETURN_MARGIN_MS:
            raise ValidationError(
                f"reserve max_age_ms must be at most {RESERVE_EPOCH_MS - RETURN_MARGIN_MS}"
            )

    @property
    def period_ms(self) -> float:
        return 1000 / self.writes_per_second
