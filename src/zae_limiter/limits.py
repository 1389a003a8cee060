"""Limit definitions: what a bucket allows, in whole tokens, and the rules for names.

A limit is stored and computed in millitokens and milliseconds (see `bucket.py`);
this module is where user-facing numbers are validated and converted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import timedelta

from zae_limiter.errors import ValidationError
from zae_limiter.quota import Window, calendar_window, session_window
from zae_limiter.schedule import (
    LOOKAHEAD,
    Override,
    check_schedule,
    next_instant_of,
    override,
    pick,
)

#: Names the library keeps for itself. `wcu` tracks the write pressure of one
#: DynamoDB partition and must never be confused with an application limit.
RESERVED_LIMIT_NAMES = frozenset({"wcu"})

_LIMIT_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
MAX_TOKENS = 10**12  # keeps millitoken arithmetic far inside DynamoDB's 38 digits


def validate_limit_name(name: object) -> str:
    if not isinstance(name, str) or not _LIMIT_NAME.fullmatch(name):
        raise ValidationError(
            f"invalid limit name {name!r}: use 1-32 characters, lowercase letters, digits "
            "and '_', starting with a letter (for example 'rpm' or 'tpm')"
        )
    if name in RESERVED_LIMIT_NAMES:
        raise ValidationError(
            f"limit name {name!r} is reserved for the partition write limit; choose another name"
        )
    return name


def _positive_int(what: str, value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"limit {name!r}: {what} must be a whole number, got {value!r}")
    if value <= 0 or value > MAX_TOKENS:
        raise ValidationError(
            f"limit {name!r}: {what} must be between 1 and {MAX_TOKENS}, got {value}"
        )
    return value


@dataclass(frozen=True, slots=True)
class Limit:
    """A token bucket: holds up to `capacity` tokens, gains `refill_amount` every
    `refill_period_seconds`; or, with a `window` (see `Limit.quota`), a quota: up to
    `capacity` tokens per window, all back at once when the window resets.

    `soft=True`: the limit counts and reports but never rejects (docs/quotas.md, "Soft
    limits"); an acquire takes its tokens as from any limit, so its bucket can go below
    zero, and the acquires it would have rejected are counted."""

    name: str
    capacity: int
    refill_amount: int
    refill_period_seconds: int
    window: Window | None = field(default=None, kw_only=True)
    soft: bool = field(default=False, kw_only=True)
    #: Scheduled overrides (schedule.py): the limit in force changes at cron instants.
    schedule: tuple[Override, ...] = field(default=(), kw_only=True)
    #: On a limit `limits.active` chose: the instant it took over (not compared: the
    #: same numbers are the same limit).
    since_ms: int | None = field(default=None, kw_only=True, compare=False)

    def __post_init__(self) -> None:
        validate_limit_name(self.name)
        if not isinstance(self.soft, bool):
            raise ValidationError(f"limit {self.name!r}: soft must be True or False")
        _positive_int("capacity", self.capacity, self.name)
        if self.schedule:
            check_schedule(self.name, self.schedule)
            if self.window is not None:
                raise ValidationError(
                    f"limit {self.name!r}: a quota cannot be scheduled; schedule a "
                    "refilling limit, or store another quota when it should change"
                )
        if self.window is not None or (self.refill_amount, self.refill_period_seconds) == (0, 0):
            self._check_quota()
            return
        _positive_int("refill amount", self.refill_amount, self.name)
        _positive_int("refill period (seconds)", self.refill_period_seconds, self.name)
        if self.refill_period_seconds > 366 * 86400:
            raise ValidationError(f"limit {self.name!r}: refill period is longer than a year")

    def _check_quota(self) -> None:
        if not isinstance(self.window, Window):
            raise ValidationError(
                f"limit {self.name!r}: a limit without a refill must be a quota; "
                "use Limit.quota(name, amount, reset=... or reset_after=...)"
            )
        if (self.refill_amount, self.refill_period_seconds) != (0, 0):
            raise ValidationError(
                f"limit {self.name!r}: a limit drips or resets, never both: a quota "
                "(reset / reset_after) takes no refill amount or period"
            )

    @property
    def is_quota(self) -> bool:
        return self.window is not None

    @classmethod
    def quota(
        cls,
        name: str,
        amount: int,
        *,
        reset: str | None = None,
        tz: str = "UTC",
        reset_after: timedelta | None = None,
        soft: bool = False,
        cron: str | None = None,
    ) -> Limit:
        """Up to `amount` tokens per window, all back at once when the window resets.

        `reset`: a 5-field cron expression read in time zone `tz` (default: monthly,
        "0 0 1 * *"): every entity's window starts at the same instants (`cron`: the same,
        under the published library's name). `reset_after`: a session window instead,
        opened by the first admitted use and lasting this long.
        """
        if cron is not None:
            if reset is not None:
                raise ValidationError(
                    f"limit {name!r}: reset= and cron= both name the reset schedule; pass one"
                )
            reset = cron
        if reset is not None and reset_after is not None:
            raise ValidationError(
                f"limit {name!r}: a quota resets on a schedule (reset=) or after its first "
                "use (reset_after=), not both"
            )
        if reset_after is not None:
            if not isinstance(reset_after, timedelta):
                raise ValidationError(
                    f"limit {name!r}: reset_after must be a timedelta, got {reset_after!r}"
                )
            window = session_window(int(reset_after / timedelta(milliseconds=1)))
        else:
            window = calendar_window("0 0 1 * *" if reset is None else reset, tz)
        return cls(name, amount, 0, 0, window=window, soft=soft)

    def during(self, start: str, end: str, limit: Limit, *, tz: str = "UTC") -> Limit:
        """This limit, with `limit`'s numbers in force from each instant of the cron
        expression `start` to the next instant of `end` (read in time zone `tz`), e.g.
        `Limit.per_minute("rpm", 100).during("0 22 * * *", "0 6 * * *",
        Limit.per_minute("rpm", 500))`. Chain it for several overrides; where two
        apply, the one that started last wins."""
        if limit.name != self.name:
            raise ValidationError(
                f"limit {self.name!r}: a scheduled override changes this limit's numbers; "
                f"it must have the same name, got {limit.name!r}"
            )
        if limit.window is not None or limit.schedule:
            raise ValidationError(
                f"limit {self.name!r}: a scheduled override is a refilling limit "
                "(Limit.per_minute(...) and the like), not a quota or another schedule"
            )
        added = override(self.name, start, end, tz, _numbers(limit))
        return Limit(
            self.name,
            self.capacity,
            self.refill_amount,
            self.refill_period_seconds,
            window=self.window,
            schedule=(*self.schedule, added),
        )

    @classmethod
    def custom(
        cls,
        name: str,
        capacity: int,
        refill_amount: int,
        refill_period_seconds: int,
        *,
        soft: bool = False,
    ) -> Limit:
        return cls(name, capacity, refill_amount, refill_period_seconds, soft=soft)

    @classmethod
    def per_second(
        cls, name: str, rate: int, burst: int | None = None, *, soft: bool = False
    ) -> Limit:
        return cls._rate(name, rate, 1, burst, soft)

    @classmethod
    def per_minute(
        cls, name: str, rate: int, burst: int | None = None, *, soft: bool = False
    ) -> Limit:
        return cls._rate(name, rate, 60, burst, soft)

    @classmethod
    def per_hour(
        cls, name: str, rate: int, burst: int | None = None, *, soft: bool = False
    ) -> Limit:
        return cls._rate(name, rate, 3600, burst, soft)

    @classmethod
    def per_day(
        cls, name: str, rate: int, burst: int | None = None, *, soft: bool = False
    ) -> Limit:
        return cls._rate(name, rate, 86400, burst, soft)

    @classmethod
    def _rate(cls, name: str, rate: int, period: int, burst: int | None, soft: bool) -> Limit:
        capacity = rate if burst is None else burst
        if burst is not None and isinstance(burst, int) and isinstance(rate, int) and burst < rate:
            raise ValidationError(
                f"limit {name!r}: burst ({burst}) must be at least the rate ({rate})"
            )
        return cls(name, capacity, rate, period, soft=soft)

    @property
    def capacity_milli(self) -> int:
        return self.capacity * 1000

    # A quota is stored as a bucket that a whole capacity refills in 1 ms of its window
    # clock, and that clock stands still inside a window (bucket.py): so these two are
    # the quota's encoding, never a refill a user configured.
    @property
    def refill_amount_milli(self) -> int:
        if self.window is not None:
            return 2 * self.capacity_milli
        return self.refill_amount * 1000

    @property
    def refill_period_ms(self) -> int:
        return 1 if self.window is not None else self.refill_period_seconds * 1000

    def describe(self) -> str:
        """Human form, e.g. `100/min`, `100000/min burst 150000` or
        `1000 per window, resets at '0 0 1 * *' UTC`."""
        if self.soft:
            return f"{replace(self, soft=False).describe()} (soft)"
        if self.window is not None:
            return f"{self.capacity} per window, {self.window.describe()}"
        text = _rate_text(self.capacity, self.refill_amount, self.refill_period_seconds)
        for item in self.schedule:
            numbers = (item.capacity, item.refill_amount, item.refill_period_seconds)
            text += f"; {_rate_text(*numbers)} {item.describe()}"
        return text


def _numbers(limit: Limit) -> tuple[int, int, int]:
    return limit.capacity, limit.refill_amount, limit.refill_period_seconds


def active(limit: Limit, now_ms: int) -> Limit:
    """The limit in force at `now_ms` (itself when not scheduled). It carries `since_ms`,
    the instant it took over, at which a bucket under the previous numbers is rebased
    (flows/write/shares.py). Instants are whole minutes: one answer per minute, cached."""
    if not limit.schedule:
        return limit
    numbers, since = pick(limit.schedule, _numbers(limit), now_ms // 60_000)
    return Limit(limit.name, *numbers, since_ms=since)


def in_force(limits: tuple[Limit, ...], now_ms: int) -> tuple[Limit, ...]:
    """`limits` with each scheduled one replaced by the limit in force at `now_ms`."""
    if not any(limit.schedule for limit in limits):
        return limits
    return tuple(active(limit, now_ms) for limit in limits)


def next_change(limit: Limit, now_ms: int) -> tuple[int, Limit] | None:
    """(when, the limit from then) of the next instant that changes the limit in force;
    None without a schedule (or when its instants change nothing for a long while)."""
    if not limit.schedule:
        return None
    current = _numbers(active(limit, now_ms))
    at = now_ms
    for _ in range(LOOKAHEAD):
        at = next_instant_of(limit.schedule, at)
        then = active(limit, at)
        if _numbers(then) != current:
            return at, then
    return None


def _rate_text(capacity: int, refill_amount: int, refill_period_seconds: int) -> str:
    unit = {1: "sec", 60: "min", 3600: "hour", 86400: "day"}.get(refill_period_seconds)
    rate = f"{refill_amount}/{unit}" if unit else f"{refill_amount}/{refill_period_seconds}s"
    return rate if capacity == refill_amount else f"{rate} burst {capacity}"


def validate_limits(limits: object) -> tuple[Limit, ...]:
    """A non-empty list of limits with distinct names."""
    if isinstance(limits, Limit) or not isinstance(limits, (list, tuple)):
        raise ValidationError("limits must be a list of Limit objects")
    if not limits:
        raise ValidationError("limits must not be empty; use delete_limits() to remove them")
    seen: set[str] = set()
    for limit in limits:
        if not isinstance(limit, Limit):
            raise ValidationError(f"expected a Limit, got {limit!r}")
        if limit.name in seen:
            raise ValidationError(f"limit {limit.name!r} appears twice")
        seen.add(limit.name)
    return tuple(limits)
