"""Quota windows: when a limit that resets (instead of refilling) starts afresh.

Pure: no clock is read here, every function takes `now_ms`.

A calendar window runs from one instant of a cron schedule (evaluated in a time zone)
to the next: the same instants for every entity, every shard and every client. The cron
expression has the 5 classic fields and is evaluated by `croniter`; a local time that a
DST change skips or repeats is resolved as croniter does (documented in docs/quotas.md).

A session window is opened by the first admitted use and lasts `reset_after_ms`; where
it starts is stored in the bucket item (see bucket.py), so this module only validates it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter  # type: ignore[import-untyped]

from zae_limiter.errors import ValidationError

_MINUTE_MS = 60_000
#: The shortest session: a window must be longer than the 1 ms in which a quota's stored
#: encoding (bucket.py) refills a whole capacity.
MIN_SESSION_MS = 1_000
MAX_SESSION_MS = 366 * 86_400_000


@dataclass(frozen=True, slots=True)
class Window:
    """How a quota resets: `cron` + `tz` (calendar) or `session_ms` (session)."""

    cron: str | None = None
    tz: str = "UTC"
    session_ms: int | None = None

    def bounds(self, now_ms: int) -> tuple[int, int]:
        """(start, end) in ms of the calendar window holding `now_ms` (start <= now < end)."""
        if self.cron is None:
            raise ValueError("a session window's bounds depend on the stored session start")
        return calendar_bounds(self.cron, self.tz, now_ms // _MINUTE_MS)

    def describe(self) -> str:
        if self.cron is not None:
            return f"resets at '{self.cron}' {self.tz}"
        return f"resets {timedelta(milliseconds=self.session_ms or 0)} after first use"

    def spec(self) -> str:
        """The stored form: `cron:{expr}@{tz}` or `after:{ms}` (see keys/entities.py)."""
        if self.cron is not None:
            return f"cron:{self.cron}@{self.tz}"
        return f"after:{self.session_ms}"


@lru_cache(maxsize=256)
def window_of(spec: str) -> Window:
    """`parse_spec`, cached: bucket items are decoded on every acquire."""
    return parse_spec(spec)


def parse_spec(spec: str) -> Window:
    """The inverse of `Window.spec`."""
    kind, _, rest = spec.partition(":")
    if kind == "after":
        return session_window(int(rest))
    cron, _, tz = rest.rpartition("@")
    return calendar_window(cron, tz)


def calendar_window(cron: object, tz: object) -> Window:
    if not isinstance(cron, str) or len(cron.split()) != 5 or not croniter.is_valid(cron):
        raise ValidationError(
            f"invalid reset schedule {cron!r}: use a 5-field cron expression "
            "(minute hour day-of-month month day-of-week), e.g. '0 0 1 * *' for monthly"
        )
    if not isinstance(tz, str):
        raise ValidationError(f"invalid time zone {tz!r}: use an IANA name such as 'UTC'")
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValidationError(f"unknown time zone {tz!r}: use an IANA name") from exc
    window = Window(cron=" ".join(cron.split()), tz=tz)
    start, end = window.bounds(0)
    if end <= start:  # pragma: no cover - croniter never answers this way
        raise ValidationError(f"reset schedule {cron!r} has no next instant")
    return window


def session_window(reset_after_ms: object) -> Window:
    if isinstance(reset_after_ms, bool) or not isinstance(reset_after_ms, int):
        raise ValidationError(f"reset_after must be a duration, got {reset_after_ms!r}")
    if not MIN_SESSION_MS <= reset_after_ms <= MAX_SESSION_MS:
        raise ValidationError(
            f"reset_after must be between 1 second and 366 days, got {reset_after_ms} ms"
        )
    if reset_after_ms % 1000:
        raise ValidationError("reset_after must be a whole number of seconds")
    return Window(session_ms=reset_after_ms)


def calendar_end(windows: Iterable[Window | None], now_ms: int) -> int | None:
    """The earliest end, after `now_ms`, of the calendar windows among `windows` (None:
    none). A session's end is in its bucket item, not known from the limit alone."""
    ends = [w.bounds(now_ms)[1] for w in windows if w is not None and w.cron is not None]
    return min(ends, default=None)


@lru_cache(maxsize=512)
def calendar_bounds(cron: str, tz: str, minute: int) -> tuple[int, int]:
    """(start, end) in ms of the window holding the minute `minute` (since the epoch).

    Schedule instants fall on whole minutes, so every ms of a minute shares one window:
    the cache key is the minute, and a hot limit asks croniter once a minute."""
    zone = ZoneInfo(tz)
    # croniter's get_prev is strict: from the next minute it finds the last instant at
    # or before this one.
    after = datetime.fromtimestamp((minute + 1) * 60, tz=UTC).astimezone(zone)
    start = croniter(cron, after).get_prev(datetime)
    end = croniter(cron, start).get_next(datetime)
    return _ms(start), _ms(end)


def _ms(moment: datetime) -> int:
    return int(moment.timestamp()) * 1000
