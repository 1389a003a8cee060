"""The checker: every admission against an ideal token bucket, per level and limit.

Each acquire that returns is fed to the ideal bucket of every level it took from (the
entity, and its parent with cascade), dated when its tokens left DynamoDB: the true time
the write that took them was applied, or for an acquire served from a token reserve the
moment it was served. Adjustments and give-backs are dated when they were applied (or
settled in a reserve). A write that never applied (its answer lost, never sent) feeds
nothing: usage the library could not record is counted, not charged.

Allowances, the only ones, are about time:
- clocks: a client whose clock is `d` ms ahead sees `d x rate` more tokens (docs/buckets.md,
  "Clock skew"); with every clock within `skew` ms of true time, two clients are at most
  `2 x skew` apart, so a level may run `2 x skew x rate` ahead of its ideal bucket;
- a write applied `g` ms after it was planned (a pause between planning and sending, a
  request held in flight) is charged as of its planned time, like a clock `g` ms behind:
  it may take up to `min(n, g x rate)` of its `n` tokens from refill that had not happened
  yet (docs/guarantees.md, "Under faults"). Each such write adds its own to the level's
  allowance.
Crashes and lost answers only lose tokens (docs/reserves.md): they get no allowance.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from zae_limiter import keys
from zae_limiter.flows.write.levels import Taken
from zae_limiter.limits import Limit
from zae_limiter.sim.ideal import IdealBucket
from zae_limiter.sim.ledger import CHARGE, CONFIG, OPEN, RESET, Event, Ledger, copy

Level = tuple[str, str]  # (entity, limit name)


@dataclass(frozen=True, slots=True)
class Violation:
    """What went wrong, and where in the schedule."""

    kind: str
    detail: str
    step: int

    def __str__(self) -> str:
        return f"step {self.step}: {self.kind}: {self.detail}"


@dataclass
class Checker:
    """Judges admissions per level against an ideal bucket fed the same events in time
    order. An acquire is reported when it returns, after writes of other clients that
    were applied later than its own: each level's events are kept in time order and the
    ideal bucket replays them whenever one arrives."""

    limits: tuple[Limit, ...]
    namespace: str
    start_ms: int
    skew_ms: int
    ledgers: dict[Level, Ledger] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    admitted: dict[Level, int] = field(default_factory=dict)
    #: Largest amount any level ran ahead of its ideal bucket (tokens).
    most_ahead: Fraction = Fraction(0)
    #: Lease ends whose change a fault kept from the table (usage counted, not charged).
    unrecorded: int = 0
    step: int = 0
    _failed: set[Level] = field(default_factory=set)
    #: Tokens given back into reserves, per level (see `settled_back`).
    into_reserves: dict[Level, Fraction] = field(default_factory=dict)
    #: Allowance for debt the table cannot see (see `allow`), per level.
    sharded: dict[Level, Fraction] = field(default_factory=dict)
    #: Entities where a write charged expired held counts: tokens lost by design (a
    #: reserve its client did not give back in time), so `kept_all` does not judge them.
    lossy: set[str] = field(default_factory=set)
    #: Give-backs a bucket at its top may drop, per level (see `dropped_at_top`).
    at_top: dict[Level, Fraction] = field(default_factory=dict)
    #: Entities whose bucket items stored other numbers than the world's limits.
    changed: set[str] = field(default_factory=set)
    #: Entities a split of which may have left a quota's fraction of a token off shard
    #: 0: its move was refused or unanswered (docs/quotas.md: under one token;
    #: `Delivery._unmoved`), so `_whole_off_shard0` does not judge them.
    unmoved: set[str] = field(default_factory=set)
    #: Entities an operator deleted: a lease end's write to a bucket gone fails.
    deleted: set[str] = field(default_factory=set)

    def allow(self, entity: str, name: str, milli: int) -> None:
        """Debt the table cannot see where it admits (docs/guarantees.md, "Known
        limits"): an adjustment charged to one shard of a sharded entity, or reserves
        held on a shard when it splits, is not seen by the entity's other shards; an
        adjustment that puts a bucket into debt does not take back the tokens already
        in clients' reserves. Each adds what it can cost to the level's allowance."""
        if milli > 0:
            level = (entity, name)
            self.sharded[level] = self.sharded.get(level, Fraction(0)) + Fraction(milli, 1000)

    def _limit(self, name: str) -> Limit:
        return next(limit for limit in self.limits if limit.name == name)

    def _add(self, entity: str, limit: Limit, event: Event) -> None:
        level = (entity, limit.name)
        ledger = self.ledgers.get(level)
        if ledger is None:
            ledger = self.ledgers[level] = Ledger(limit, self.start_ms, self.skew_ms)
        mark = ledger.add(event)
        self.most_ahead = max(self.most_ahead, mark.ahead)
        self._judge(level, limit)

    def _event(self, at: tuple[int, int], kind: str, milli: int, planned_ms: int) -> Event:
        return Event(at[0], at[1], kind, Fraction(milli, 1000), planned_ms)

    def replay(self, level: Level) -> tuple[IdealBucket, Fraction, Fraction]:
        """The level's ideal bucket after its events; the most it ran ahead of it at an
        admission beyond its allowance then (<= 0: never), and its allowance."""
        ledger = self.ledgers.get(level)
        if ledger is None:
            ledger = self.ledgers[level] = Ledger(self._limit(level[1]), self.start_ms,
                                                  self.skew_ms)  # fmt: skip
        mark = ledger.last
        skew = 2 * self.skew_ms * mark.fastest + self.sharded.get(level, Fraction(0))
        worst = Fraction(-1) if mark.worst is None else mark.worst - skew
        return copy(mark.ideal), worst, skew + mark.late

    def _judge(self, level: Level, limit: Limit) -> None:
        _ideal, worst, allowed = self.replay(level)
        if worst > 0 and level not in self._failed:
            self._failed.add(level)
            self.fail(
                "over-admission",
                f"{level[0]}/{level[1]}: admitted {float(worst + allowed):.3f} tokens ahead of "
                f"the ideal bucket (allowance {float(allowed):.3f})",
            )

    def admit(self, taken: Taken, at: tuple[int, int], planned_ms: int) -> None:
        """An admission whose tokens left the table at `at` (true time, and the engine's
        count of requests applied by then: events of one ms keep their real order),
        planned at `planned_ms`."""
        for limit in taken.limits:
            milli = taken.consumed_milli.get(limit.name, 0)
            if milli:
                level = (taken.entity_id, limit.name)
                self.admitted[level] = self.admitted.get(level, 0) + milli
                self._add(taken.entity_id, limit, self._event(at, "take", milli, planned_ms))

    def opened(self, entity: str, name: str, clock_ms: int, at: tuple[int, int]) -> None:
        """A write applied at `at` took tokens from the session quota `name`, planned when
        its client's clock read `clock_ms`: the first such take after a session ended
        (by that clock) opens the next one, admitted or not (a take a cascade parent
        refused, one whose answer was lost), as it does in the table."""
        event = Event(at[0], at[1], OPEN, Fraction(0), at[0], clock_ms=clock_ms)
        self._add(entity, self._limit(name), event)

    def change(
        self, taken: Taken, delta: Mapping[str, int], at: tuple[int, int], planned_ms: int
    ) -> None:
        """A lease's adjustment (positive: usage charged) or give-back (negative)."""
        for limit in taken.limits:
            milli = delta.get(limit.name, 0)
            if milli > 0:
                event = self._event(at, "charge", milli, planned_ms)
            elif milli < 0:
                event = self._event(at, "give", -milli, planned_ms)
            else:
                continue
            self._add(taken.entity_id, limit, event)

    def reset(self, entity: str, at: tuple[int, int], held: Mapping[str, int]) -> None:
        """The entity's buckets were deleted at `at` (an operator deleted the entity): its
        usage is forgotten, and the ideal bucket starts full again under the world's
        limits, whatever numbers it followed before: with no bucket item, the table offers
        a full bucket of the limits it is read with (the world's, `sim/run.py`), and the
        write that makes the item again under other numbers is followed from there
        (`Delivery._configs`; seeds 4661, 12877, 13104 and 13701). Reserves that clients
        held of the deleted buckets (`held`, per limit) can still be spent for a while:
        each adds what it held to the level's allowance. A sharded entity adds nothing
        more: no client can make a shard of it once the deletion has looked
        (`flows.records.entities.delete_buckets`; seeds 3746 and 5427 before that
        fence). Its loss is not judged."""
        self.lossy.add(entity)
        self.deleted.add(entity)
        for limit in self.limits:
            self.allow(entity, limit.name, held.get(limit.name, 0))
            config = (Fraction(limit.capacity), IdealBucket.full(limit, at[0]).per_ms)
            self._add(entity, limit, Event(at[0], at[1], RESET, Fraction(0), at[0], config))

    def configured(
        self,
        entity: str,
        name: str,
        config: tuple[Fraction, Fraction],
        fresh: bool,
        at: tuple[int, int],
        held_milli: int,
    ) -> None:
        """From `at`, the level's bucket items store other numbers (an operator changed
        the limit, and a client rebased an item to what it read): its ideal bucket
        follows them (capacity and tokens per ms), keeping its tokens up to the new
        capacity, or full when the item was created with them. Tokens already out in
        reserves (`held_milli`) stay out of the clamp: each adds what it holds. The
        entity's loss is not judged (a lower capacity drops tokens by design)."""
        self.lossy.add(entity)
        self.changed.add(entity)
        self.allow(entity, name, held_milli)
        event = Event(at[0], at[1], CONFIG, Fraction(int(fresh)), at[0], config)
        self._add(entity, self._limit(name), event)

    def spent_before(self, entity: str, limit: Limit, milli: int) -> None:
        """Tokens a bucket item had spent when the schedule started (a schema-2 item
        left by an older client, sim/operator.py): the ideal bucket starts without them."""
        self._add(entity, limit, Event(self.start_ms, 0, CHARGE, Fraction(milli, 1000), 0))

    def settled_back(self, entity: str, name: str, milli: int) -> None:
        """Tokens given back into a client's reserve: fed to the ideal bucket then, they
        reach the table only with the reserve's return, by when the ideal bucket may
        have filled up and capped them. The final count allows for them."""
        level = (entity, name)
        self.into_reserves[level] = self.into_reserves.get(level, Fraction(0)) + Fraction(
            milli, 1000
        )

    def holds_at_most_ideal(self, entity: str, limit: Limit, tokens: int, at_ms: int) -> None:
        """No tokens created: what the table offers is never more than the ideal holds."""
        ideal, _worst, allowed = self.replay((entity, limit.name))
        allowed += self.into_reserves.get((entity, limit.name), Fraction(0))
        level = ideal.level(at_ms)
        if tokens > level + allowed:
            self.fail(
                "tokens created",
                f"{entity}/{limit.name}: the table offers {tokens}, the ideal bucket holds "
                f"{float(level):.3f} (allowance {float(allowed):.3f})",
            )

    def dropped_at_top(self, entity: str, name: str, milli: int) -> None:
        """A give-back written while its client's reserve of the bucket served what its
        next flush charges: a bucket at its top by the full-at time drops up to that
        much of it, tokens lost with no fault (docs/reserves.md, "Leases")."""
        level = (entity, name)
        self.at_top[level] = self.at_top.get(level, Fraction(0)) + Fraction(milli, 1000)

    def kept_all(self, entity: str, limit: Limit, kept_milli: int, at_ms: int) -> None:
        """No tokens lost, on a schedule without a fault that loses them by design: what
        the table holds plus what reserves still hold (`kept_milli`) is all the ideal
        bucket holds. Judged for limits that do not refill within a schedule (refill
        would hide a loss, and rounding in the limiter's favour is a loss there) and for
        session quotas (judged in the session live at the end), with half a token of
        slack for the year's refill of a schedule's minutes."""
        if entity in self.lossy:
            return
        ideal, _worst, _allowed = self.replay((entity, limit.name))
        level = ideal.level(at_ms) - self.at_top.get((entity, limit.name), Fraction(0))
        if Fraction(kept_milli, 1000) < level - Fraction(1, 2):
            self.fail(
                "tokens lost",
                f"{entity}/{limit.name}: the table and reserves keep {kept_milli / 1000:g}, "
                f"the ideal bucket holds {float(level):.3f} (no fault lost any)",
            )

    def kept_behind(self, entity: str, shard: int, name: str, granted: int, left: int) -> None:
        """A write that raised a reserve of `granted` millitokens left `left` in its shard
        (by its writer's clock, held counts out): a reserve is granted only while as much
        again stays behind (docs/reserves.md), so `left` is at least `granted`. The write's
        bound keeps it so whatever image it was planned from; a grant computed from a
        stale image and let through with less behind holds tokens other clients need."""
        if left < granted:
            self.fail(
                "reserve without as much again behind",
                f"{entity} shard {shard}/{name}: a reserve of {granted / 1000:g} left "
                f"{left / 1000:g} behind",
            )

    def not_recorded(self, taken: Taken, change: Mapping[str, int], excused: bool) -> None:
        """A lease's end that neither wrote its change nor settled it in a reserve. A
        fault on one of its requests excuses it (usage the library could not record is
        counted, never charged: tokens are lost or, for an adjustment up, the usage goes
        unbilled), and so does a deleted entity (its buckets are gone, and the write's
        condition fails); else the library dropped it."""
        if excused or taken.entity_id in self.deleted:
            self.unrecorded += 1
            return
        self.fail(
            "change not recorded",
            f"{taken.entity_id} shard {taken.shard_id}: a lease end's {dict(change)} was "
            "neither written nor settled in a reserve, and none of its requests met a fault",
        )

    def fail(self, kind: str, detail: str) -> None:
        self.violations.append(Violation(kind, detail, self.step))

    def bucket_pk(self, taken: Taken) -> str:
        key = keys.bucket_key(self.namespace, taken.entity_id, taken.resource, taken.shard_id)
        return str(key[keys.PK]["S"])
