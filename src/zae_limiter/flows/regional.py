"""Regional shares of a global limit: the pure decisions (docs/global.md).

A global limit (capacity C, rate Q) is split into `keys.PARTS` parts. Region r holds
`pt_r` parts and enforces a bucket of C x pt_r / PARTS and Q x pt_r / PARTS on its own
share item. Parts move by transfers made of two monotonic counters:

- the giver lowers `pt` and raises `g_{receiver}` by the same amount, in one write to its
  own item, which also brings its bucket down to the new capacity (never up);
- the receiver raises `pt` by what it sees released to it (`g_{receiver}` in the giver's
  item, as replicated) less what it has already taken in (`k_{giver}` in its own item),
  and raises `k_{giver}` to it, in one write to its own item.

So `pt_r = initial_r - sum(g_r) + sum(k_r)` and every `k_{giver}` a receiver writes is at
most the giver's `g` at some earlier instant: the sum of parts over the regions' own
items is never above PARTS, whatever the lag, the order of replication or a partition.
A raise of capacity brings no tokens (the bucket refills into it at its new rate), and a
lowering clamps the tokens: the tokens of all buckets never exceed C and their refill
rates never exceed Q at any instant, which bounds admissions over any window by one
bucket of (C, Q).

No clock is read here; nothing here performs I/O.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.errors import ValidationError
from zae_limiter.keys import regions as rk
from zae_limiter.limits import Limit

A = rk.ShareAttr

PARTS = rk.PARTS
#: Every region keeps at least this many parts (1%): a share's rate never reaches 0,
#: and a region whose demand comes back is served at once, if slowly.
MIN_PARTS = PARTS // 100
#: Parts moved by less than this (5%) are not worth a write: at 2%, noise in the demand
#: measured moved parts back and forth, each move idle in flight for a lag.
HYSTERESIS = PARTS // 20
#: A region is owed at most its demand and this much more (targets()).
DEMAND_MARGIN = 0.25
#: Demand is the offered rate over this window (ms).
DEMAND_WINDOW_MS = 2_000
#: A region whose item has not changed for this long (as this replica shows it) gets
#: nothing: parts released to a region that cannot see them sit idle in flight.
SILENT_AFTER_MS = 5_000
#: A take that finds its item frozen waits this long (a transfer takes two writes).
FROZEN_WAIT_MS = 20
#: A freeze older than this is a keeper that died between its two writes: any keeper of
#: the region thaws it (its second write, with nothing moved).
THAW_AFTER_MS = 2_000
#: A region gives nothing away for this long after it took parts in, nor after one of its
#: acquires was refused for want of tokens (ms): parts that just arrived, or a share that
#: is all used, are not excess, whatever a noisy demand says. Without it, a bursty load
#: sent parts back and forth (absorbed and released again in the same pass), each move
#: idle in flight for a lag, and the shares held summed to 40% of the whole for seconds.
RELEASE_HOLD_MS = 2_000
#: A share keeper's pass, and its jitter (ms).
TICK_MS = 250
TICK_JITTER_MS = 100


def validate_regions(regions: Sequence[str], region: str) -> tuple[str, ...]:
    listed = tuple(regions)
    if len(listed) < 2 or len(set(listed)) != len(listed):
        raise ValidationError(
            f"a global limit needs two or more distinct regions, got {list(listed)!r}; "
            "pass every replica region, in the same order in every client"
        )
    if region not in listed:
        raise ValidationError(
            f"this client's region {region!r} is not one of the limit's regions "
            f"{list(listed)!r}; pass region= or open the repository in one of them"
        )
    return listed


def validate_global(limit: Limit) -> Limit:
    if limit.is_quota:
        raise ValidationError(
            f"limit {limit.name!r}: a quota cannot be a global limit yet; use a refilling limit"
        )
    return limit


def initial_parts(regions: Sequence[str], region: str) -> int:
    """What a region holds before any transfer: an equal split (the remainder unused)."""
    return PARTS // len(regions)


def share_config(limit: Limit, parts: int) -> tuple[int, int, int]:
    """(capacity, refill amount, refill period) of a share of `parts`: rounded down."""
    return (
        limit.capacity_milli * parts // PARTS,
        max(1, limit.refill_amount_milli * parts // PARTS),
        limit.refill_period_ms,
    )


@dataclass(frozen=True, slots=True)
class ShareImage:
    """One region's share item, as some replica showed it."""

    region: str
    parts: int
    version: int
    capacity_milli: int
    rate_milli: int
    period_ms: int
    whole: tuple[int, int, int]
    full_at: int | None = None
    consumed_milli: int = 0
    demand_milli: int = 0
    given: Mapping[str, int] = field(default_factory=dict)
    taken: Mapping[str, int] = field(default_factory=dict)
    held_epoch: int | None = None
    held: int = 0
    held_before: int = 0
    #: When a keeper froze the item for a transfer (None: not frozen).
    frozen_at: int | None = None

    @property
    def held_total(self) -> int:
        """Millitokens taken into this region's reserves and not yet rolled into `fa`:
        out of the bucket, whether spent, still held, or lost."""
        return self.held + self.held_before

    def state(self) -> LimitState:
        return LimitState(
            capacity_milli=self.capacity_milli,
            refill_amount_milli=self.rate_milli,
            refill_period_ms=self.period_ms,
            full_at=self.full_at,
        )

    def tokens(self, now_ms: int) -> int:
        """Millitokens in the bucket (its room is the share less the held counts)."""
        return self.state().tokens(now_ms, 1, self.held_total)

    def held_seen(self, milli: int, now_ms: int) -> rk.Held:
        return rk.Held(
            self.held_epoch, self.held, self.held_before, milli, now_ms // rk.HELD_EPOCH_MS
        )


def decode(item: Mapping[str, object]) -> ShareImage:
    def num(attr: str) -> int:
        return keys.get_n(item, attr)

    return ShareImage(
        region=rk.share_region(item),
        parts=num(A.PARTS_HELD),
        version=num(A.VERSION),
        capacity_milli=num(A.CAPACITY),
        rate_milli=num(A.RATE),
        period_ms=num(A.PERIOD),
        whole=(
            num(A.WHOLE_CAPACITY),
            num(A.WHOLE_RATE),
            num(A.WHOLE_PERIOD),
        ),
        full_at=(keys.get_n(item, A.FULL_AT) if A.FULL_AT in item else None),
        consumed_milli=num(A.CONSUMED),
        demand_milli=num(A.DEMAND),
        given=rk.share_counters(item, A.GIVEN_PREFIX),
        taken=rk.share_counters(item, A.TAKEN_PREFIX),
        held_epoch=(keys.get_n(item, A.HELD_EPOCH) if A.HELD_EPOCH in item else None),
        held=num(A.HELD),
        held_before=num(A.HELD_BEFORE),
        frozen_at=num(A.FROZEN) if A.FROZEN in item else None,
    )


def whole_of(limit: Limit) -> tuple[int, int, int]:
    return (limit.capacity_milli, limit.refill_amount_milli, limit.refill_period_ms)


def check_whole(image: ShareImage, limit: Limit) -> None:
    if image.whole != whole_of(limit):
        raise ValidationError(
            f"global limit {limit.name!r} is {limit.describe()} here, but its share items "
            "were created for another capacity or rate: changing a global limit's numbers "
            "is not supported yet; use a new limit name"
        )


def new_fields(limit: Limit, regions: Sequence[str], region: str) -> dict[str, int]:
    """A region's share item as first written: its initial parts, a full bucket."""
    parts = initial_parts(regions, region)
    cp, ra, rp = share_config(limit, parts)
    wc, wr, wp = whole_of(limit)
    return {
        A.PARTS_HELD: parts, A.VERSION: 1, A.CAPACITY: cp, A.RATE: ra,
        A.PERIOD: rp, A.WHOLE_CAPACITY: wc, A.WHOLE_RATE: wr,
        A.WHOLE_PERIOD: wp, A.CONSUMED: 0, A.DEMAND: 0,
    }  # fmt: skip


def image_of_fields(fields: Mapping[str, int], region: str) -> ShareImage:
    item = {attr: keys.n(value) for attr, value in fields.items()}
    item["SK"] = keys.s(f"{A.REGION_SK_PREFIX}{region}")
    return decode(item)


# ---------------------------------------------------------------- taking


@dataclass(frozen=True, slots=True)
class TakePlan:
    """A take's write: the amount added to (ADD form) or the value set for (SET) `fa`,
    and the condition's (threshold, upper bound; None for the SET form)."""

    full_at: int
    window: tuple[int, int | None]
    held: rk.Held | None = None


@dataclass(frozen=True, slots=True)
class Short:
    """Not enough tokens: when they will be there (-1: never, more than the share), and
    the held counts a write now would roll into the full-at time (`roll_only`)."""

    tokens_milli: int
    retry_after_ms: int
    rolls_milli: int = 0


def plan_take(
    image: ShareImage, amount_milli: int, now_ms: int, extra_milli: int = 0
) -> TakePlan | Short:
    """A take of `amount_milli`, and `extra_milli` into a reserve, from `image`: the room
    is the share's capacity less the held counts, and the write's condition says they have
    not grown since. The full-at time moves by the amount and by the held counts the take
    rolls out of the item (spent reserves, charged now); the reserve itself is held."""
    if image.frozen_at is not None:  # a transfer is being written: wait for it
        return Short(0, FROZEN_WAIT_MS)
    state, held = image.state(), image.held_total
    need = amount_milli + extra_milli
    tokens = state.tokens(now_ms, 1, held)
    roll = image.held_seen(extra_milli, now_ms)
    if tokens < need:
        wait = state.ms_until(need, now_ms, 1, held)
        if held > 0:  # the counts roll into the full-at time, which then refills
            next_epoch = (now_ms // rk.HELD_EPOCH_MS + 1) * rk.HELD_EPOCH_MS - now_ms
            wait = next_epoch if wait < 0 else min(wait, next_epoch)
        return Short(tokens, wait, roll.dropped)
    charge = amount_milli + roll.dropped
    threshold = state.threshold(now_ms)
    if state.is_full(now_ms):
        return TakePlan(state.charged(charge, now_ms), (threshold, None), roll)
    upper = threshold + (state.room(1, held) - need) * state.unit()
    return TakePlan(charge * state.unit(), (threshold, upper), roll)


def plan_roll(image: ShareImage, now_ms: int) -> TakePlan:
    """A write that takes nothing and only rolls old held counts into the full-at time: a
    share whose room the counts fill can refill again (no token bound: it admits none)."""
    state = image.state()
    roll = image.held_seen(0, now_ms)
    threshold = state.threshold(now_ms)
    if state.is_full(now_ms):
        return TakePlan(state.charged(roll.dropped, now_ms), (threshold, None), roll)
    # No token bound: an upper bound no full-at time reaches (DynamoDB holds 38 digits).
    return TakePlan(roll.dropped * state.unit(), (threshold, threshold + 10**30), roll)


# ---------------------------------------------------------------- transfers


def targets(
    regions: Sequence[str], demand: Mapping[str, float], rate_milli_per_s: float | None = None
) -> dict[str, int]:
    """Parts each region should hold: at least MIN_PARTS, the rest in proportion to
    demand (an equal split when nobody asks). With the whole limit's rate, no region is
    owed more than its demand asks (plus DEMAND_MARGIN): while the offer is under the
    limit nobody is short and nothing moves (moving on the noise of demand left parts
    idle in flight, a lag each time)."""
    total = sum(max(0.0, demand.get(r, 0.0)) for r in regions)
    if total <= 0:
        return {r: PARTS // len(regions) for r in regions}
    spare = PARTS - MIN_PARTS * len(regions)
    out = {r: MIN_PARTS + int(spare * max(0.0, demand.get(r, 0.0)) / total) for r in regions}
    if rate_milli_per_s:
        for r in regions:
            asked = max(0.0, demand.get(r, 0.0)) * (1 + DEMAND_MARGIN) / rate_milli_per_s
            out[r] = min(out[r], max(MIN_PARTS, int(PARTS * asked)))
    return out


@dataclass(frozen=True, slots=True)
class Transfer:
    """The keeper's write to its own item: parts after it, and the raised counters."""

    parts: int
    given: Mapping[str, int]
    taken: Mapping[str, int]
    absorbed: int
    released: Mapping[str, int]


def absorb(own: ShareImage, images: Mapping[str, ShareImage]) -> tuple[int, dict[str, int]]:
    """Parts released to this region that it has not taken in yet, and its counters once
    it has: only what a giver's own item shows as given, never more."""
    taken = dict(own.taken)
    gained = 0
    for region, image in images.items():
        if region == own.region:
            continue
        released = image.given.get(own.region, 0)
        if released > taken.get(region, 0):
            gained += released - taken.get(region, 0)
            taken[region] = released
    return gained, taken


def in_flight(images: Mapping[str, ShareImage], receiver: str) -> int:
    """Parts given to `receiver` that its item (as seen here) has not taken in yet."""
    seen = images.get(receiver)
    total = 0
    for region, image in images.items():
        if region != receiver:
            acked = seen.taken.get(region, 0) if seen is not None else 0
            total += max(0, image.given.get(receiver, 0) - acked)
    return total


def release(
    own: ShareImage,
    parts: int,
    images: Mapping[str, ShareImage],
    wanted: Mapping[str, int],
    reachable: frozenset[str],
) -> dict[str, int]:
    """Parts to give now, per receiver: this region's excess over its target, to the
    reachable regions short of theirs (counting what is already on its way to them)."""
    excess = parts - wanted[own.region]
    if excess < HYSTERESIS:
        return {}
    needs: dict[str, int] = {}
    for region in wanted:
        if region == own.region or region not in reachable:
            continue
        image = images.get(region)
        holds = image.parts if image is not None else 0
        need = wanted[region] - holds - in_flight(images, region)
        if need > 0:
            needs[region] = need
    total = sum(needs.values())
    give = min(excess, total)
    if give < HYSTERESIS:
        return {}
    return {r: give * need // total for r, need in needs.items() if give * need // total > 0}


def may_release(absorbed_at_ms: int | None, short_at_ms: int | None, now_ms: int) -> bool:
    """Whether a keeper may give parts away now: not within RELEASE_HOLD_MS of taking
    parts in or of a refusal for want of tokens (None: never)."""
    recent = [t for t in (absorbed_at_ms, short_at_ms) if t is not None]
    return all(now_ms - t >= RELEASE_HOLD_MS for t in recent)


def plan_transfer(
    own: ShareImage,
    images: Mapping[str, ShareImage],
    wanted: Mapping[str, int],
    reachable: frozenset[str],
    *,
    releasing: bool = True,
) -> Transfer | None:
    """Absorb what was released to this region, then give away its excess (unless
    `releasing` is False, or this pass absorbs: parts just taken in are not given on
    in the same write): None when neither moves a part."""
    gained, taken = absorb(own, images)
    parts = own.parts + gained
    out = release(own, parts, images, wanted, reachable) if releasing and not gained else {}
    if not gained and not out:
        return None
    given = dict(own.given)
    for region, amount in out.items():
        given[region] = given.get(region, 0) + amount
    return Transfer(parts - sum(out.values()), given, taken, gained, out)


def reshare_fields(
    own: ShareImage, transfer: Transfer, limit: Limit, now_ms: int
) -> dict[str, int]:
    """The item's fields after `transfer`: the share's config from its parts, and `fa`
    re-expressed so the bucket holds what it held, clamped to the new capacity less what
    reserves may still hold. A raise brings no token; after a lowering, the bucket and
    the region's reserves together hold no more than the new capacity."""
    cp, ra, rp = share_config(limit, transfer.parts)
    held = own.held_total
    after = LimitState(capacity_milli=cp, refill_amount_milli=ra, refill_period_ms=rp)
    tokens = min(own.tokens(now_ms), cp - held)
    fields = {
        A.PARTS_HELD: transfer.parts, A.VERSION: own.version + 1, A.CAPACITY: cp,
        A.RATE: ra, A.PERIOD: rp, A.FULL_AT: after.with_tokens(tokens, now_ms, 1, held),
    }  # fmt: skip
    fields.update({rk.given_attr(r): v for r, v in transfer.given.items()})
    fields.update({rk.taken_attr(r): v for r, v in transfer.taken.items()})
    return fields


# ---------------------------------------------------------------- what a client remembers


@dataclass(slots=True)
class Demand:
    """Offered rate per region, from the `dm` counters this replica showed over time."""

    seen: dict[str, deque[tuple[int, int]]] = field(default_factory=dict)
    changed_at: dict[str, int] = field(default_factory=dict)
    last: dict[str, ShareImage] = field(default_factory=dict)

    def observe(self, image: ShareImage, now_ms: int) -> None:
        history = self.seen.setdefault(image.region, deque(maxlen=64))
        if self.last.get(image.region) != image:
            if now_ms - self.changed_at.get(image.region, now_ms) >= SILENT_AFTER_MS:
                # Back from a silence (a partition healed, replication caught up): its
                # counter carries the whole silence's demand, which is not a rate over
                # the window. Measure afresh from here.
                history.clear()
            self.changed_at[image.region] = now_ms
        history.append((now_ms, image.demand_milli))
        while len(history) > 2 and history[1][0] <= now_ms - DEMAND_WINDOW_MS:
            history.popleft()
        self.last[image.region] = image

    def rate(self, region: str, now_ms: int) -> float:
        """Millitokens a second offered in `region` over the last window."""
        history = self.seen.get(region)
        if not history or len(history) < 2:
            return 0.0
        (t0, d0), (t1, d1) = history[0], history[-1]
        return 0.0 if t1 <= t0 else (d1 - d0) * 1000 / (t1 - t0)

    def reachable(self, regions: Sequence[str], now_ms: int) -> frozenset[str]:
        return frozenset(
            r
            for r in regions
            if now_ms - self.changed_at.get(r, -SILENT_AFTER_MS) < SILENT_AFTER_MS
        )


def next_tick_ms(rng: random.Random) -> int:
    return TICK_MS + rng.randint(-TICK_JITTER_MS, TICK_JITTER_MS)


__all__ = [
    "DEMAND_MARGIN",
    "DEMAND_WINDOW_MS",
    "FROZEN_WAIT_MS",
    "HYSTERESIS",
    "MIN_PARTS",
    "PARTS",
    "RELEASE_HOLD_MS",
    "THAW_AFTER_MS",
    "Demand",
    "ShareImage",
    "Short",
    "TakePlan",
    "Transfer",
    "absorb",
    "check_whole",
    "decode",
    "image_of_fields",
    "in_flight",
    "initial_parts",
    "may_release",
    "new_fields",
    "next_tick_ms",
    "plan_roll",
    "plan_take",
    "plan_transfer",
    "release",
    "replace",
    "reshare_fields",
    "share_config",
    "targets",
    "validate_global",
    "validate_regions",
]
