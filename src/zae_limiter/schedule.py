"""Scheduled limits: a stored limit whose numbers change at cron instants.

Pure: no clock is read here, every function takes `now_ms`.

A scheduled limit is a base limit with overrides. An override applies from each instant
of its `start` cron expression to the next instant of its `end` (both read in its time
zone): "500 rpm from 22:00 to 06:00". The schedule is part of the stored config, so every
client computes the active limit from the time it is given, and the config cache needs
no read at a boundary: each client switches when its own clock passes the instant.

Instants fall on whole minutes (quota.calendar_bounds, cached per minute), so the active
limit is the same for every ms of a minute and is cached per (limit, minute).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from zae_limiter.errors import ValidationError
from zae_limiter.quota import calendar_bounds, calendar_window

if TYPE_CHECKING:
    from zae_limiter.limits import Limit

_MINUTE_MS = 60_000
#: A schedule is short: each override costs a cron evaluation per minute per client.
MAX_OVERRIDES = 8
#: How many instants `next_change` looks through for one that changes the active limit.
_LOOKAHEAD = 64


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


def override(start: object, end: object, tz: object, limit: Limit) -> Override:
    """An override checked: valid cron expressions and zone, a refilling limit."""
    start_window = calendar_window(start, tz)
    end_window = calendar_window(end, tz)
    if start_window.cron == end_window.cron:
        raise ValidationError(
            f"limit {limit.name!r}: a scheduled override needs different start and end "
            f"instants, got {start!r} for both"
        )
    if limit.window is not None or limit.schedule:
        raise ValidationError(
            f"limit {limit.name!r}: a scheduled override is a refilling limit "
            "(Limit.per_minute(...) and the like), not a quota or another schedule"
        )
    return Override(
        start_window.cron or "",
        end_window.cron or "",
        start_window.tz,
        limit.capacity,
        limit.refill_amount,
        limit.refill_period_seconds,
    )


def latest_instant(cron: str, tz: str, now_ms: int) -> int:
    """The last instant of `cron` at or before `now_ms`."""
    return calendar_bounds(cron, tz, now_ms // _MINUTE_MS)[0]


def next_instant(cron: str, tz: str, now_ms: int) -> int:
    """The first instant of `cron` after `now_ms`."""
    return calendar_bounds(cron, tz, now_ms // _MINUTE_MS)[1]


def active(limit: Limit, now_ms: int) -> Limit:
    """The limit in force at `now_ms`: the base, or the override that started last
    among those that apply. It carries `since_ms`, the instant it took over, which a
    bucket under the previous numbers is rebased at (flows/shares.py)."""
    if not limit.schedule:
        return limit
    return _active(limit, now_ms // _MINUTE_MS)


@lru_cache(maxsize=1024)
def _active(limit: Limit, minute: int) -> Limit:
    from zae_limiter.limits import Limit

    now_ms = minute * _MINUTE_MS
    chosen: Override | None = None
    since = None
    for item in limit.schedule:
        applies, changed = item.state_at(now_ms)
        if applies and (chosen is None or changed > (since or 0)):
            chosen, since = item, changed
    if chosen is None:
        # The base took over when the last override ended.
        since = max(item.state_at(now_ms)[1] for item in limit.schedule)
        numbers = (limit.capacity, limit.refill_amount, limit.refill_period_seconds)
    else:
        numbers = (chosen.capacity, chosen.refill_amount, chosen.refill_period_seconds)
    return Limit(limit.name, *numbers, since_ms=since)


def numbers(limit: Limit) -> tuple[int, int, int]:
    return limit.capacity, limit.refill_amount, limit.refill_period_seconds


def next_change(limit: Limit, now_ms: int) -> tuple[int, Limit] | None:
    """(when, the limit from then) of the next instant that changes the limit in force;
    None for a limit without a schedule (or one whose instants change nothing soon)."""
    if not limit.schedule:
        return None
    current = numbers(active(limit, now_ms))
    at = now_ms
    for _ in range(_LOOKAHEAD):
        at = min(
            min(next_instant(o.start, o.tz, at), next_instant(o.end, o.tz, at))
            for o in limit.schedule
        )
        then = active(limit, at)
        if numbers(then) != current:
            return at, then
    return None


def check_schedule(name: str, schedule: object) -> tuple[Override, ...]:
    if not isinstance(schedule, tuple) or not all(isinstance(o, Override) for o in schedule):
        raise ValidationError(f"limit {name!r}: schedule must be a tuple of overrides")
    if len(schedule) > MAX_OVERRIDES:
        raise ValidationError(
            f"limit {name!r}: at most {MAX_OVERRIDES} scheduled overrides, got {len(schedule)}"
        )
    return schedule


def in_force(limits: tuple[Limit, ...], now_ms: int) -> tuple[Limit, ...]:
    """`limits` with each scheduled one replaced by the limit in force at `now_ms`."""
    if not any(limit.schedule for limit in limits):
        return limits
    return tuple(active(limit, now_ms) for limit in limits)
