"""Token reserves: a hot bucket's tokens, moved out ahead of demand and spent in memory.

A client that acquires often on one (entity, resource) bucket takes more than it needs
with the acquire's own conditional write: the surplus is recorded on the bucket item as
held in reserves (`b_{limit}_rs{epoch}`) and kept here, in a `Reserve`. The following
acquires are served from it with no request. What is not spent goes back with one ADD
when the reserve has been idle for `idle_ms`, reaches `max_age_ms`, or the client closes.

Why this is exact: tokens leave the bucket before they are spent (the acquire's own
conditional write takes them), and held counts count against the bucket's capacity as
it refills; a reserve is granted only while as much again stays behind; a held count
belongs to its epoch (`RESERVE_EPOCH_MS`), readers ignore counts older than the previous
epoch, and a reserve is never spent past `max_age_ms` (shorter than an epoch), so a
crashed client's tokens are lost (counted as spent), never created (docs/reserves.md).
Pure bookkeeping behind one lock (sync faces share a book across threads).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from zae_limiter.flows.held import Reserve
from zae_limiter.flows.reserves.demand import (
    DEMAND_FORGET_MS,
    DEMAND_KEYS_MAX,
    DEMAND_TAU_MS,
    DEMAND_TAU_S,
    Demand,
)
from zae_limiter.flows.reserves.pacing import Pacer, spread_age_ms
from zae_limiter.flows.reserves.settings import RETURN_MARGIN_MS, ReserveSettings
from zae_limiter.flows.reserves.stretch import Stretch
from zae_limiter.keys import Flush
from zae_limiter.limits import Limit
from zae_limiter.quota import calendar_end

#: How long past `max_age_ms` (at most `idle_ms`) an aged reserve waits on the book for
#: the client's next acquire, whose write returns it (`ReserveBook.renew`) instead of a
#: write of its own: a busy bucket then pays one write per reserve, not two.
RENEW_GRACE_MS = 1000

Key = tuple[str, str]
#: Where callers have always found them.
__all__ = ["RETURN_MARGIN_MS", "Reserve", "ReserveBook", "ReserveSettings", "ReserveStats"]


@dataclass(slots=True)
class ReserveStats:
    """What reserves did in this client."""

    hits: int = 0
    takes: int = 0
    returns: int = 0
    returned_tokens: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    held: dict[str, int] = field(default_factory=dict)
    #: Of `returns`, those an acquire's own write carried (aged reserves, renewed).
    renewed: int = 0


class ReserveBook:
    """Every reserve and demand estimate of one client."""

    def __init__(
        self, settings: ReserveSettings | None = None, rng: random.Random | None = None
    ) -> None:
        self.settings = settings or ReserveSettings()
        #: Backoff and write budgets of the returns (see flows/reserves/pacing.py).
        self.pacer = Pacer(self.settings.writes_per_second, rng)
        #: Write-rate targets cut by throttled reserve writes (see flows/reserves/stretch.py).
        self.stretch = Stretch()
        # A reserve hit (flows/reserves/hit.py) records and spends under it too, with the
        # steps of `_record`, `_covers` and `spend` written out there.
        self._lock = threading.RLock()
        self._reserves: dict[Key, Reserve] = {}
        self._demand: dict[Key, Demand] = {}
        #: Reserves taken off the book that still have to be written back.
        self._outgoing: list[tuple[Key, Reserve]] = []
        self.stats = ReserveStats()

    @property
    def busy(self) -> bool:
        """Whether any reserve is held or waits to be written back (no lock: a hint)."""
        return bool(self._reserves or self._outgoing)

    # ------------------------------------------------------------ demand
    def record(self, key: Key, amounts: Mapping[str, int], now_ms: int, count: int = 1) -> None:
        """An acquire (count 1) or an adjustment (count 0) of `amounts` millitokens."""
        with self._lock:
            self._record(key, amounts, now_ms, count)

    def _record(self, key: Key, amounts: Mapping[str, int], now_ms: int, count: int) -> None:
        demand = self._demand.get(key)
        if demand is None:
            if len(self._demand) >= DEMAND_KEYS_MAX:
                self._forget_quiet(now_ms)
            demand = self._demand[key] = Demand(now_ms, born_ms=now_ms)
        demand.decay(now_ms)
        demand.count += count
        for name, milli in amounts.items():
            demand.amounts[name] = max(0.0, demand.amounts.get(name, 0.0) + milli)

    def rate(self, key: Key, now_ms: int) -> float:
        """Acquires per second on the bucket in this client, as the book estimates it."""
        with self._lock:
            demand = self._demand.get(key)
            if demand is None:
                return 0.0
            demand.decay(now_ms)
            return demand.count * 1000 / DEMAND_TAU_MS

    def want(
        self,
        key: Key,
        limits: Iterable[Limit],
        consume: Mapping[str, int],
        shard_count: int,
        now_ms: int,
        throttled: bool = False,
    ) -> dict[str, int]:
        """Millitokens to take on top of `consume`, per limit ({} when the bucket is not hot).

        Enough for the client's own rate over the target period, at least two more acquires
        like this one, at most `max_share` of a shard's capacity, less what is still held.
        A bucket whose writes are `throttled` counts as hot whatever the client's rate.
        """
        settings = self.settings
        with self._lock:
            demand = self._demand.get(key)
            if demand is None:
                return {}
            demand.decay(now_ms)
            if not throttled and demand.count * 1000 / DEMAND_TAU_MS < settings.hot_rate:
                return {}
            held = self._reserves.get(key)
            period_ms = self.stretch.period_ms(key, settings.period_ms)
            wanted: dict[str, int] = {}
            for limit in limits:
                total = demand.amounts.get(limit.name, 0.0)
                # Young or not, a client's rate is read as the decayed sum over the time
                # constant (conservative: a reserve holds tokens from other clients), but
                # a throttled one sizes for the rate it shows so far (see `per_second`).
                rate = demand.per_second(total, now_ms) if throttled else total / DEMAND_TAU_S
                target = max(int(rate * period_ms / 1000), 2 * consume.get(limit.name, 0))
                cap = int(settings.max_share * limit.capacity_milli / max(1, shard_count))
                left = held.left.get(limit.name, 0) if held is not None else 0
                # Whole tokens (see bucket_write.grant).
                amount = max(0, min(target, cap) - left) // 1000 * 1000
                if amount:
                    wanted[limit.name] = amount
            return wanted

    # ------------------------------------------------------------ spending
    def spend(
        self, key: Key, limits: tuple[Limit, ...], consume: Mapping[str, int], now_ms: int
    ) -> int | None:
        """Take `consume` from the reserve; the shard it came from, or None (not covered).

        A reserve taken under other limits (a stored limit changed) is taken off the book
        to be returned, and never spent again; one past its age is never spent again
        either, and goes back with this acquire's write (`renew`) or the keeper's.
        """
        with self._lock:
            held = self._reserves.get(key)
            if held is None:
                return None
            if held.limits != limits:
                self._retire(key)
                return None
            if not self._covers(held, consume, now_ms):
                return None  # never spent past its age: the acquire's write renews it
            left = held.left
            for name, milli in consume.items():
                if milli:
                    left[name] -= milli
            held.used_ms = now_ms
            self.stats.hits += 1
            return held.shard_id

    def _covers(self, held: Reserve, consume: Mapping[str, int], now_ms: int) -> bool:
        """Whether `held` may serve `consume` now: young enough, in its quota window, with
        enough left (and no limit in debt). flows/reserves/hit.py asks the same, inline."""
        if now_ms - held.born_ms >= self.settings.max_age_ms:
            return False
        if held.window_end_ms is not None and held.crossed(now_ms):
            return False
        left = held.left
        for name, milli in consume.items():
            if milli and left.get(name, 0) < milli:
                return False
        return min(left.values(), default=0) >= 0

    def apply_change(
        self, key: Key, shard_id: int, delta: Mapping[str, int], now_ms: int
    ) -> dict[str, int]:
        """Apply what it can of a consumption change (negative gives back) to the reserve
        of that shard; return the rest, which the caller writes.

        Per limit: what the change takes more is settled when the reserve covers all of
        it; a give-back settles up to what the reserve spent of its held counts, and the
        rest is written. Past that, the reserve would hold tokens no held count says are
        out (a refused acquire's take): the bucket refills past them. Writing the whole
        give-back instead would credit the bucket's full-at time before the spent tokens
        it stands for are charged there, and a bucket at its top drops the excess
        (simulator seed 12166: a token lost with no fault). A reserve past `max_age_ms`
        is never spent again, so what the change takes more goes to the table; its
        give-backs still settle, for the same reason (seed 5914: written whole while the
        aged reserve's spending waited for its renewal, 3 tokens lost).
        """
        with self._lock:
            held = self._reserves.get(key)
            if held is None or held.shard_id != shard_id:
                return dict(delta)
            if held.crossed(now_ms):
                return dict(delta)  # a reset since: the change goes to the table's new window
            aged = now_ms - held.born_ms >= self.settings.max_age_ms
            rest: dict[str, int] = {}
            covered = held.taken_total()
            for name, milli in delta.items():
                part = 0 if aged and milli > 0 else _settleable(
                    milli, held.left.get(name, 0), covered.get(name, 0)
                )
                if part:
                    held.left[name] = held.left.get(name, 0) - part
                    held.used_ms = now_ms
                if milli != part:
                    rest[name] = milli - part
            return rest

    def flush(self, key: Key, shard_count: int, now_ms: int = 0) -> tuple[int, Flush] | None:
        """What the bucket's reserve spent since its last write, taken off its held counts
        (oldest epoch first), to be reported by the next write to its shard.

        If that write's outcome is unknown the flush is not put back: a held count then
        stays too high until its epoch ends (stricter, never looser).
        """
        with self._lock:
            held = self._reserves.get(key)
            if held is None or held.shard_id >= shard_count:
                return None
            spent: dict[str, int] = {}
            released: dict[int, dict[str, int]] = {}
            for name, taken in held.taken_total().items():
                due = taken - held.left.get(name, 0)
                if due <= 0:
                    continue
                spent[name] = due
                for epoch in sorted(held.taken):
                    part = min(due, held.taken[epoch].get(name, 0))
                    if part:
                        held.taken[epoch][name] -= part
                        released.setdefault(epoch, {})[name] = part
                        due -= part
            if not spent:
                return None
            return held.shard_id, Flush(spent, released, held.shard_id, uncharged=held.gone(now_ms))

    def renew(
        self, key: Key, limits: tuple[Limit, ...], shard_count: int, now_ms: int
    ) -> Flush | None:
        """A reserve of the bucket that is due back, taken off the book to go back with the
        write the acquire makes anyway (a flush that releases every count it raised): the
        held reserve once it is aged, else one waiting to be written back (retired, or
        refused by a throttle and backing off). None when there is none. If that write is
        not applied, `unflush` puts the return back on the keeper's list."""
        if key not in self._reserves and not self._outgoing:
            return None  # the common case of a bucket without reserves: no lock taken
        with self._lock:
            held = self._reserves.get(key)
            aged = held is not None and (
                now_ms - held.born_ms >= self.settings.max_age_ms or held.crossed(now_ms)
            )
            if held is not None and aged and held.fits(limits, shard_count):
                del self._reserves[key]
                return _renewal(held, now_ms)
            for i, (waiting_key, waiting) in enumerate(self._outgoing):
                if waiting_key == key and waiting.fits(limits, shard_count):
                    del self._outgoing[i]
                    return _renewal(waiting, now_ms)
            return None

    def unflush(self, key: Key, flush: Flush, now_ms: int, limits: tuple[Limit, ...] = ()) -> None:
        """A flush whose write was not applied: its amounts are held counts again.

        If the reserve has gone meanwhile (returned by the keeper), they are written back
        on their own, as a reserve with nothing left: its return reports the spending and
        lowers the held counts.
        """
        with self._lock:
            held = self._reserves.get(key)
            # A renewal's reserve is a whole of its own (its unspent tokens are `back`):
            # it is never merged into the reserve the book holds now.
            if held is None or held.shard_id != flush.shard_id or flush.back is not None:
                released = {e: dict(amounts) for e, amounts in flush.released.items()}
                # Its return must charge what was spent to the full-at times, which
                # needs the limits: without them the spent tokens would come back. A
                # renewal's unspent tokens are still its own to give back.
                left = dict(flush.back or {})
                orphan = Reserve(flush.shard_id, limits, left, released, now_ms, now_ms)
                self._outgoing.append((key, orphan))
                return
            for epoch, amounts in flush.released.items():
                counted = held.taken.setdefault(epoch, {})
                for name, milli in amounts.items():
                    counted[name] = counted.get(name, 0) + milli

    # ------------------------------------------------------------ taking and returning
    def install(
        self,
        key: Key,
        shard_id: int,
        limits: tuple[Limit, ...],
        granted: Mapping[str, int],
        epoch: int,
        now_ms: int,
        session_end_ms: int | None = None,
    ) -> None:
        """Add tokens a write just moved out of the bucket (recorded in `epoch`'s count);
        `session_end_ms`: when the session its session quotas are in ends (None: none)."""
        if not any(granted.values()):
            return
        with self._lock:
            self.stats.takes += 1
            held = self._reserves.get(key)
            if held is not None and (
                held.shard_id != shard_id or held.limits != limits or held.crossed(now_ms)
            ):
                # A reserve of an ended window is never topped up with the new one's
                # tokens: its spending is not charged again (`gone`), theirs must be.
                self._retire(key)
                held = None
            if held is None:
                # Born a little earlier than now: returns taken together fall due apart.
                born = now_ms - spread_age_ms(self.settings.max_age_ms, self.pacer.rng)
                ends = [calendar_end((limit.window for limit in limits), now_ms), session_end_ms]
                held = self._reserves[key] = Reserve(
                    shard_id,
                    limits,
                    {},
                    {},
                    born,
                    now_ms,
                    min((end for end in ends if end is not None), default=None),
                    session_end_ms,
                )
            counted = held.taken.setdefault(epoch, {})
            for name, milli in granted.items():
                held.left[name] = held.left.get(name, 0) + milli
                counted[name] = counted.get(name, 0) + milli
            held.used_ms = now_ms

    def due(self, now_ms: int) -> list[tuple[Key, Reserve]]:
        """Take off the book every reserve idle or old enough to go back, and any retired."""
        with self._lock:
            for key, held in list(self._reserves.items()):
                if now_ms >= self._due_at(held):
                    self._retire(key)
            out, self._outgoing = self.pacer.release(self._outgoing, now_ms)
            return out

    def drain(self) -> list[tuple[Key, Reserve]]:
        """Take every reserve off the book (closing)."""
        with self._lock:
            for key in list(self._reserves):
                self._retire(key)
            out, self._outgoing = self._outgoing, []
            return out

    def next_due_ms(self, now_ms: int | None = None) -> int | None:
        """When the next reserve becomes due (None: none held, nothing outgoing); with
        `now_ms`, returns waiting for their backoff or budget count from when they may go."""
        with self._lock:
            times = [self._due_at(h) for h in self._reserves.values()]
            if self._outgoing:
                times.append(0 if now_ms is None else self.pacer.due_at(self._outgoing, now_ms))
            return min(times, default=None)

    def _due_at(self, held: Reserve) -> int:
        """When the keeper returns a reserve: idle, or aged and not renewed meanwhile."""
        settings = self.settings
        grace = min(RENEW_GRACE_MS, settings.idle_ms)
        due = min(held.used_ms + settings.idle_ms, held.born_ms + settings.max_age_ms + grace)
        # At a calendar quota's reset its held count keeps room from the new window:
        # back with the holder's next write, or the keeper's soon after the reset.
        if held.window_end_ms is not None:
            due = min(due, held.window_end_ms + grace)
        return due

    def returned(self, back: Mapping[str, int], renewed: bool = False) -> None:
        with self._lock:
            self.stats.returns += 1
            self.stats.renewed += renewed
            for name, milli in back.items():
                total = self.stats.returned_tokens.get(name, 0) + milli
                self.stats.returned_tokens[name] = total

    def lost(self, count: int = 1) -> None:
        with self._lock:
            self.stats.lost += count

    def retry_later(self, items: Iterable[tuple[Key, Reserve]], now_ms: int | None = None) -> None:
        """Returns that DynamoDB refused (throttled, so not applied): try them again after
        a backoff (see flows/reserves/pacing.py)."""
        with self._lock:
            items = list(items)
            if now_ms is not None:
                for key, _held in items:
                    self.pacer.throttled(key, now_ms)
            self._outgoing.extend(items)

    def snapshot(self) -> ReserveStats:
        with self._lock:
            held: dict[str, int] = {}
            for reserve in self._reserves.values():
                for name, milli in reserve.left.items():
                    held[name] = held.get(name, 0) + milli // 1000
            s = self.stats
            return ReserveStats(
                s.hits, s.takes, s.returns, dict(s.returned_tokens), s.lost, held, s.renewed
            )

    def unreturnable(self, now_ms: int) -> list[Key]:
        """Buckets of reserves (held or outgoing) whose tokens left can no longer go back."""
        with self._lock:
            held = [*self._reserves.items(), *self._outgoing]
            return [key for key, r in held if not r.returnable(now_ms) and any(r.left.values())]

    def holding(self, key: Key) -> Reserve | None:
        """The reserve held for a bucket (for inspection and tests)."""
        with self._lock:
            return self._reserves.get(key)

    def _forget_quiet(self, now_ms: int) -> None:
        """Drop the demand of buckets quiet for a while (a gateway sees many keys)."""
        quiet = [
            key
            for key, demand in self._demand.items()
            if now_ms - demand.at_ms > DEMAND_FORGET_MS and key not in self._reserves
        ]
        for key in quiet:
            del self._demand[key]

    def _retire(self, key: Key) -> None:
        held = self._reserves.pop(key, None)
        if held is not None:
            self._outgoing.append((key, held))


def _renewal(held: Reserve, now_ms: int) -> Flush:
    """The flush that gives `held` back whole with another write to its shard."""
    spent, back = held.settlement(now_ms)
    released = {epoch: dict(amounts) for epoch, amounts in held.taken.items()}
    return Flush(spent, released, held.shard_id, back=back, uncharged=held.gone(now_ms))


def _settleable(milli: int, left: int, covered: int) -> int:
    """The part of a change to one limit that a reserve holding `left` of the `covered`
    its held counts took can settle: a take it covers whole, a give-back up to what it
    spent."""
    if milli > 0:
        return milli if left >= milli else 0
    return -min(-milli, max(0, covered - left))
