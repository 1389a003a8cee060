"""The one backoff: exponential, capped, and with full jitter when given a generator.

Every retry the library makes after a refusal waits `backoff_ms`: a reserve return a
throttle refused (reserves/pacing.py), a throttled acquire write (scaling/throttled.py),
a lost race on a bucket's first write (write/take.py), BatchGetItem's unprocessed keys
(batch.py). Full jitter (uniform between 0 and the bound) spreads writers that collided,
so they do not collide again in step.
"""

from __future__ import annotations

import random

#: The bound doubles per failed try, from `first_ms`, up to `cap_ms`; the exponent stops
#: growing here (the bound is capped long before).
MAX_DOUBLINGS = 16


def backoff_ms(attempt: int, rng: random.Random | None, first_ms: int, cap_ms: int) -> int:
    """The wait before try number `attempt + 1` (attempt >= 1: this many tries failed):
    uniform in [0, bound] with `rng`, the bound itself without (no jitter)."""
    bound = min(cap_ms, first_ms * 2 ** min(max(attempt, 1) - 1, MAX_DOUBLINGS))
    return bound if rng is None else rng.randint(0, bound)
