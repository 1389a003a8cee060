"""One level's events in time order, replayed into its ideal bucket incrementally.

Events reach the checker out of order (an acquire is known when it returns, after
writes of other clients applied later than its own), but most arrive last. A `Ledger`
keeps the ideal bucket's state after every event, so an event that arrives last costs one
step, and one that arrives earlier replays only the events after it: replaying every
level from its start at every event was a quarter of the simulator's time.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from fractions import Fraction

from zae_limiter.limits import Limit
from zae_limiter.sim.ideal import IdealBucket

TAKE, CHARGE, GIVE, RESET, CONFIG = "take", "charge", "give", "reset", "config"
#: Tokens left the table (a write applied): a session quota's session may open here.
OPEN = "open"


@dataclass(frozen=True, slots=True)
class Event:
    """One change to a level, as the ideal bucket takes it: `take` (an admission),
    `charge` (usage after the fact), `give` (tokens back), `reset` (deleted: full, under
    the numbers in `config`) or `config` (the numbers the level's bucket items store
    changed: `config` is the capacity and rate the ideal bucket follows from then,
    `amount` 1 when the bucket item was created with them, full, else 0), or `open` (a
    write took tokens from a session quota, planned when its client's clock read
    `clock_ms`: it opens a session if none is live by that clock)."""

    at_ms: int
    seq: int
    kind: str
    amount: Fraction
    planned_ms: int
    config: tuple[Fraction, Fraction] | None = None
    clock_ms: int = 0

    @property
    def order(self) -> tuple[int, int, int]:
        # A write that changes the stored numbers and takes does both at once: the
        # numbers first (its tokens are computed under the numbers it writes); one that
        # opens a session and takes likewise opens it first.
        return (self.at_ms, self.seq, 0 if self.kind in (CONFIG, OPEN) else 1)


@dataclass(frozen=True, slots=True)
class Mark:
    """The replay's state after an event: the ideal bucket; the allowance for writes
    applied after they were planned (`late`); the most any take left the bucket in debt,
    less the late allowance then (`worst`) and not (`ahead`); the largest rate it had."""

    ideal: IdealBucket
    late: Fraction
    worst: Fraction | None
    ahead: Fraction
    fastest: Fraction


class Ledger:
    """A level's events, and the replay's state after each."""

    def __init__(self, limit: Limit, start_ms: int, skew_ms: int) -> None:
        self.limit = limit
        self.skew_ms = skew_ms
        ideal = IdealBucket.full(limit, start_ms)
        self.start = Mark(ideal, Fraction(0), None, Fraction(0), ideal.per_ms)
        self.events: list[Event] = []
        self._orders: list[tuple[int, int, int]] = []
        self.marks: list[Mark] = []

    def add(self, event: Event) -> Mark:
        """File `event` in time order and replay from it; the state after the last."""
        i = bisect_right(self._orders, event.order)
        self.events.insert(i, event)
        self._orders.insert(i, event.order)
        del self.marks[i:]
        mark = self.marks[-1] if self.marks else self.start
        for later in self.events[i:]:
            mark = self._step(mark, later)
            self.marks.append(mark)
        return mark

    @property
    def last(self) -> Mark:
        return self.marks[-1] if self.marks else self.start

    def _step(self, mark: Mark, event: Event) -> Mark:
        ideal = copy(mark.ideal)
        late = mark.late + self._late(ideal, event)
        worst, ahead, fastest = mark.worst, mark.ahead, mark.fastest
        if event.kind == TAKE:
            ideal.shortfall(event.amount, event.at_ms)
            ahead = max(ahead, -ideal.tokens)
            worst = -ideal.tokens - late if worst is None else max(worst, -ideal.tokens - late)
        elif event.kind == CHARGE:
            ideal.charge(event.amount, event.at_ms)
        elif event.kind == OPEN:
            ideal.open(event.clock_ms, event.at_ms)
        elif event.kind == RESET:
            ideal.restart(event.at_ms)
            if event.config is not None:
                ideal.capacity, ideal.per_ms = event.config
                fastest = max(fastest, ideal.per_ms)
            ideal.tokens = ideal.capacity
        elif event.kind == CONFIG:
            assert event.config is not None
            ideal.refill(event.at_ms)
            ideal.capacity, ideal.per_ms = event.config
            ideal.tokens = ideal.capacity if event.amount else min(ideal.tokens, ideal.capacity)
            fastest = max(fastest, ideal.per_ms)
        else:
            ideal.give_back(event.amount, event.at_ms)
        return Mark(ideal, late, worst, ahead, fastest)

    def _late(self, ideal: IdealBucket, event: Event) -> Fraction:
        """What the event may take ahead of the ideal bucket for its timing."""
        if event.kind in (GIVE, CONFIG, OPEN):
            return Fraction(0)
        if ideal.session_ms is not None:
            return self._session_late(ideal, event)
        if _near_reset(self.limit, event.at_ms, 2 * self.skew_ms):
            # A quota's boundary is seen `d` ms off by a clock `d` ms off: what lands
            # within 2 x skew of a reset may be the other window's (docs/quotas.md,
            # "Clock skew"); further from it, every clock agrees on the window.
            return event.amount
        if event.at_ms <= event.planned_ms:
            return Fraction(0)
        if self.limit.window is not None:
            # Charged to the window it was planned in, by its client's clock (up to skew
            # behind true time: seed 5740); the ideal bucket dates it after.
            planned = event.planned_ms - self.skew_ms
            crossed = self.limit.window.bounds(event.at_ms)[0] > planned
            return event.amount if crossed else Fraction(0)
        # The refill it saw early, as a clock `g` ms behind.
        return min(event.amount, (event.at_ms - event.planned_ms) * ideal.per_ms)

    def _session_late(self, ideal: IdealBucket, event: Event) -> Fraction:
        """A session quota: a take belongs to the session live when it applies (a write
        planned in an earlier session is refused once a later one opened: it reads as
        not begun by its planning clock), so lateness costs nothing. A take served from
        a reserve within 2 x skew of a session's opening may be the previous session's,
        whose end a clock `d` ms behind sees `d` ms late (docs/quotas.md, "Session
        windows")."""
        near = ideal.ends_ms is not None and event.at_ms - ideal.opened_ms < 2 * self.skew_ms
        return event.amount if near and event.kind == TAKE else Fraction(0)


def copy(ideal: IdealBucket) -> IdealBucket:
    """A copy to move on (`dataclasses.replace` costs several times as much)."""
    return IdealBucket(ideal.capacity, ideal.per_ms, ideal.tokens, ideal.at_ms, ideal.window,
                       ideal.ends_ms, ideal.opened_ms)  # fmt: skip


def _near_reset(limit: Limit, at_ms: int, margin_ms: int) -> bool:
    """Whether a quota's reset lies within `margin_ms` of `at_ms` (never for a refilling
    limit, or with no skew)."""
    if limit.window is None or limit.window.cron is None or not margin_ms:
        return False
    start, end = limit.window.bounds(at_ms)
    return at_ms - start < margin_ms or end - at_ms <= margin_ms
