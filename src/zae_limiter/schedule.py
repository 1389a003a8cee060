"""Scheduled limits: a stored limit whose numbers change at cron instants.

Pure: no clock is read here, every function takes `now_ms`.

A scheduled limit is a base limit with overrides. An override applies from each instant
of its `start` cron expression to the next instant of its `end` (both read in its time
zone): "500 rpm from 22:00 to 06:00". The schedule is part of the stored config, so every
client computes the active limit from the time it is given, and the config cache needs
no read at a boundary: each client switches when its own clock passes the instant.

Instants fall on whole minutes (quota.calendar_bounds, cached per minute), so the active
limit is the same for every ms of a minute and is cached per (schedule, minute).
The Limit-level functions (`active`, `in_force`, `next_change`) are in limits.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from zae_limiter.errors import ValidationError
from zae_limiter.quota import calendar_bounds, calendar_window

#: (capacity, refill amount, refill period in seconds): the numbers a schedule changes.
Numbers = tuple[int, int, int]

_MINUTE_MS = 60_000
#: A schedule is short: each override costs a cron evaluation per minute per client.
MAX_OVERRIDES = 8
#: How many instants `limits.next_change` looks through for one that changes the limit.
LOOKAHEAD = 64


@dataclass(frozen=True, slots=True)
class Override:
    """From each `start` instant to the next `end` instant (cron, in `tz`), the limit
    holds `capacity` and refills `refill_amount` per `refill_period_seconds`."""

    start: str
    end: str
    tz: str
    capacity: int
    refill_amount: int
    refill_period_seconds: int

    def state_at(self, now_ms: int) -> tuple[bool, int]:
        """(applies at `now_ms`, the instant its state last changed or may have)."""
        on = latest_instant(self.start, self.tz, now_ms)
        off = latest_instant(self.end, self.tz, now_ms)
        return on > off, max(on, off)

    def describe(self) -> str:
        return f"from '{self.start}' to '{self.end}' {self.tz}"


def override(name: str, start: object, end: object, tz: object, numbers: Numbers) -> Override:
    """An override checked: valid cron expressions and zone, different instants."""
    start_window = calendar_window(start, tz)
    end_window = calendar_window(end, tz)
    if start_window.cron == end_window.cron:
        raise ValidationError(
            f"limit {name!r}: a scheduled override needs different start and end "
            f"instants, got {start!r} for both"
        )
    return Override(start_window.cron or "", end_window.cron or "", start_window.tz, *numbers)


def latest_instant(cron: str, tz: str, now_ms: int) -> int:
    """The last instant of `cron` at or before `now_ms`."""
    return calendar_bounds(cron, tz, now_ms // _MINUTE_MS)[0]


def next_instant(cron: str, tz: str, now_ms: int) -> int:
    """The first instant of `cron` after `now_ms`."""
    return calendar_bounds(cron, tz, now_ms // _MINUTE_MS)[1]


@lru_cache(maxsize=1024)
def pick(schedule: tuple[Override, ...], base: Numbers, minute: int) -> tuple[Numbers, int]:
    """(the numbers in force during `minute`, the instant they took over): the base, or
    the override that started last among those that apply."""
    now_ms = minute * _MINUTE_MS
    chosen: Override | None = None
    since = 0
    for item in schedule:
        applies, changed = item.state_at(now_ms)
        if applies and (chosen is None or changed > since):
            chosen, since = item, changed
    if chosen is None:
        # The base took over when the last override ended.
        return base, max(item.state_at(now_ms)[1] for item in schedule)
    return (chosen.capacity, chosen.refill_amount, chosen.refill_period_seconds), since


def next_instant_of(schedule: tuple[Override, ...], now_ms: int) -> int:
    """The first instant after `now_ms` at which some override starts or ends."""
    return min(
        min(next_instant(o.start, o.tz, now_ms), next_instant(o.end, o.tz, now_ms))
        for o in schedule
    )


def check_schedule(name: str, schedule: object) -> tuple[Override, ...]:
    if not isinstance(schedule, tuple) or not all(isinstance(o, Override) for o in schedule):
        raise ValidationError(f"limit {name!r}: schedule must be a tuple of overrides")
    if len(schedule) > MAX_OVERRIDES:
        raise ValidationError(
            f"limit {name!r}: at most {MAX_OVERRIDES} scheduled overrides, got {len(schedule)}"
        )
    return schedule
