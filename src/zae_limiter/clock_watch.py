"""How far this client's clock is from DynamoDB's, read from answers it gets anyway.

Every DynamoDB answer carries an HTTP `Date` header: the server's time in whole seconds
(HTTP dates drop the fraction). An answer dated `D` was formed at a server instant in
`[D, D + 1 s)`, and that instant lies between the moment we sent the request (`s`) and
the moment the answer arrived (`r`), both on our clock. So the offset (our clock minus
DynamoDB's) lies in

    (s - D - 1000 ms,  r - D]

and every answer narrows the interval kept so far (the latest lower bound and earliest
upper bound win). An answer sent just before the server's second ticks and one received
just after it pin the offset to within their round trips; until a tick has been seen the
interval is a second and a round trip wide. An answer that contradicts the interval (our
clock was stepped, by NTP or by hand) starts a new one from that answer.

Cost on the hot path: two clock reads and a string comparison per answer; the header
is parsed only when its text changes (once per second at most).

Pure: no I/O, and the watch reads no clock; the caller passes the send and receive
times. `wall_clock_ms` is this client's clock, the one a repository passes to its flows
by default (repository.py) and the one the watch compares with DynamoDB's.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any

#: The library logs one warning when its clock is surely this far (ms) from DynamoDB's:
#: beyond NTP's few ms by far, and at which the skew cost (`offset x rate` tokens, see
#: docs/buckets.md "Clock skew") is a second's worth of every limit's rate.
WARN_AFTER_MS = 1000
#: The width (ms) of an interval before any tick of the server's second was seen.
DATE_RESOLUTION_MS = 1000

logger = logging.getLogger("zae_limiter")


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


def parse_http_date(text: str) -> int | None:
    """An HTTP `Date` header ('Sat, 28 Nov 2026 02:14:59 GMT') in epoch ms; None if not one."""
    try:
        return int(parsedate_to_datetime(text).timestamp()) * 1000
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


def response_date(response: Mapping[str, Any]) -> str | None:
    """The `Date` header of a botocore-shaped response (both request paths give one)."""
    try:
        date = response["ResponseMetadata"]["HTTPHeaders"]["date"]
    except (KeyError, TypeError):  # a stand-in client's answer may carry no metadata
        return None
    return date if isinstance(date, str) else None


@dataclass(frozen=True, slots=True)
class ClockStats:
    """This client's clock against DynamoDB's: the offset (ours minus theirs, ms;
    positive: ours is ahead) lies in `[low_ms, high_ms]`. Both None before any answer
    with a `Date` header."""

    #: Answers whose `Date` header was read (under threads, a few may go uncounted).
    answers: int = 0
    low_ms: int | None = None
    high_ms: int | None = None
    #: Distinct `Date` values seen: 2 or more means a tick was seen.
    dates: int = 0
    #: The latest `Date` seen, in epoch ms (whole seconds).
    date_ms: int | None = None
    #: Times an answer contradicted the interval and a new one began.
    resets: int = 0
    #: Whether the warning was logged (once per client).
    warned: bool = False

    @property
    def offset_ms(self) -> float | None:
        """The interval's middle: the best single estimate."""
        if self.low_ms is None or self.high_ms is None:
            return None
        return (self.low_ms + self.high_ms) / 2

    @property
    def error_ms(self) -> float | None:
        """Half the interval's width: the offset is within this of `offset_ms`."""
        if self.low_ms is None or self.high_ms is None:
            return None
        return (self.high_ms - self.low_ms) / 2

    @property
    def at_least_ms(self) -> int | None:
        """The smallest size the offset can have (0 when the interval holds 0)."""
        if self.low_ms is None or self.high_ms is None:
            return None
        if self.low_ms <= 0 <= self.high_ms:
            return 0
        return min(abs(self.low_ms), abs(self.high_ms))

    @property
    def at_most_ms(self) -> int | None:
        """The largest size the offset can have: what a skew bound must assume."""
        if self.low_ms is None or self.high_ms is None:
            return None
        return max(abs(self.low_ms), abs(self.high_ms))


class ClockWatch:
    """Keeps the offset interval from the answers it is shown. Thread-safe: the
    interval changes under a lock; an answer that does not narrow it takes none."""

    def __init__(self, warn_after_ms: int | None = WARN_AFTER_MS) -> None:
        self.warn_after_ms = warn_after_ms
        #: The last header text and its value in ms, as one tuple (read without a lock).
        self._last: tuple[str, int] = ("", 0)
        self._low: int | None = None
        self._high: int | None = None
        self._answers = 0
        self._dates = 0
        self._resets = 0
        self._warned = False
        self._lock = threading.Lock()

    def heard(self, sent_ms: int, received_ms: int, response: Mapping[str, Any]) -> None:
        """Take in one answer (botocore's response dict, or an error's `.response`)."""
        try:  # response_date, inline: this runs on every answer
            date = response["ResponseMetadata"]["HTTPHeaders"]["date"]
        except (KeyError, TypeError):
            return
        if not isinstance(date, str):
            return
        last = self._last
        if date == last[0]:
            date_ms = last[1]
        else:
            parsed = parse_http_date(date)
            if parsed is None:
                return
            date_ms = parsed
            self._last = (date, parsed)
            self._dates += 1
        self._answers += 1
        low = sent_ms - date_ms - DATE_RESOLUTION_MS
        high = received_ms - date_ms
        kept_low, kept_high = self._low, self._high
        if kept_low is not None and kept_high is not None and low <= kept_low and high >= kept_high:
            return  # the common case once settled: nothing new, no lock
        with self._lock:
            self._narrow(low, high)
            if self._should_warn():
                self._warn()

    def _narrow(self, low: int, high: int) -> None:
        if self._low is None or self._high is None:
            self._low, self._high = low, high
            return
        new_low, new_high = max(self._low, low), min(self._high, high)
        if new_low > new_high:  # our clock (or theirs) was stepped: start again from here
            self._resets += 1
            new_low, new_high = low, high
        self._low, self._high = new_low, new_high

    def _should_warn(self) -> bool:
        if self._warned or self.warn_after_ms is None:
            return False
        at_least = self.stats().at_least_ms
        return at_least is not None and at_least > self.warn_after_ms

    def _warn(self) -> None:
        self._warned = True
        stats = self.stats()
        direction = "ahead of" if (stats.low_ms or 0) > 0 else "behind"
        logger.warning(
            "zae-limiter: this host's clock is %d to %d ms %s DynamoDB's; a client off by "
            "d ms admits up to d x rate tokens more than its limits allow (docs/buckets.md, "
            "Clock skew): synchronise the clock (NTP). `zae-limiter doctor` measures it.",
            stats.at_least_ms,
            stats.at_most_ms,
            direction,
        )

    def stats(self) -> ClockStats:
        return ClockStats(
            answers=self._answers,
            low_ms=self._low,
            high_ms=self._high,
            dates=self._dates,
            date_ms=self._last[1] if self._last[0] else None,
            resets=self._resets,
            warned=self._warned,
        )
