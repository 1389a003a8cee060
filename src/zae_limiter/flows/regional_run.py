"""Regional shares: the flows (requests yielded, results received; no I/O here).

`take_share` is the hot path: one UpdateItem on this region's own share item, planned
from the image this client last saw, or no request at all when that image says the share
is short. `keep_pass` is one pass of a share keeper: one Query of every region's item in
the local replica, and at most one write to this region's own item (plus a demand ADD
when no take carried this client's counted demand).
"""

from __future__ import annotations

import random
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from zae_limiter import keys
from zae_limiter.flows import Call, Flow, Result, one, pause
from zae_limiter.flows import regional as core
from zae_limiter.keys import regions as rk
from zae_limiter.limits import Limit

#: Conditional writes a take or a keeper's pass tries before giving up for now.
MAX_TRIES = 6
#: A reserve is sized to last this long at the client's own recent rate, is spent for at
#: most RESERVE_LIFE_MS after it was taken (what is left is lost, never returned: it was
#: counted as held, and rolls into the full-at time as spent), and never holds more than
#: a quarter of the share.
RESERVE_TARGET_MS = 100
RESERVE_LIFE_MS = 200
#: A take that finds another of its process on the way waits for it (and its reserve)
#: at most this long, looking every TAKING_POLL_MS.
TAKING_WAIT_MS = 1_000
TAKING_POLL_MS = 5
#: Under this many tokens a reserve is not worth taking: the take is exact.
MIN_RESERVE_MILLI = 2_000


@dataclass(frozen=True, slots=True)
class Target:
    """One global limit of one entity and resource, seen from one region."""

    table: str
    namespace: str
    entity_id: str
    resource: str
    limit: Limit
    regions: tuple[str, ...]
    region: str

    @property
    def key(self) -> keys.Item:
        return rk.share_key(
            self.namespace, self.entity_id, self.resource, self.limit.name, self.region
        )


@dataclass(slots=True)
class Memory:
    """What this client knows of one target: its region's item as last seen, the time
    before which it is known short, demand counted and not written yet, and the others'
    items as the keeper last read them."""

    image: core.ShareImage | None = None
    short_until_ms: int = 0
    retry_after_ms: int = 0
    pending_milli: int = 0
    demand: core.Demand = field(default_factory=core.Demand)
    others: dict[str, core.ShareImage] = field(default_factory=dict)
    transfers: int = 0
    #: Keeper passes that failed (throttled, unreachable), and the last error.
    failures: int = 0
    last_error: str = ""
    rng: random.Random = field(default_factory=random.Random)
    #: Live reserves, oldest first: (millitokens left, spendable until).
    reserves: deque[tuple[int, int]] = field(default_factory=deque)
    arrivals: deque[int] = field(default_factory=lambda: deque(maxlen=4096))
    reserve: bool = True
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: Acquires refused, by why: `short` (the share lacked the tokens), `known` (an
    #: earlier refusal's retry-after still runs: no request), `contended` (every try's
    #: condition failed). What `python -m benchmarks regions` reports.
    refused: dict[str, int] = field(default_factory=dict)

    #: Takes of this process on their way (a hint: threads wait for them, briefly).
    taking: int = 0
    #: Millitokens this client's reserves lost (aged before they were spent).
    lost_milli: int = 0
    #: When this process's keeper last took parts in, and when one of its acquires was
    #: last refused for want of tokens (core.may_release: neither gives parts away).
    absorbed_at_ms: int | None = None
    short_at_ms: int | None = None

    def on_the_way(self, change: int) -> None:
        # `+=` on an attribute is not atomic across threads: a lost update would leave
        # every later acquire waiting for a take that is not there.
        with self.lock:
            self.taking += change

    def refuse(self, why: str) -> None:
        self.refused[why] = self.refused.get(why, 0) + 1

    def rate_milli_per_s(self, now_ms: int) -> int:
        """Millitokens a second this client asked for over the last second."""
        while self.arrivals and self.arrivals[0] <= now_ms - 1000:
            self.arrivals.popleft()
        return len(self.arrivals) * 1000

    @property
    def reserve_milli(self) -> int:
        """Millitokens held in this client's live reserves."""
        return sum(milli for milli, _until in self.reserves)

    def spend(self, amount_milli: int, now_ms: int) -> bool:
        """Spend from the oldest live reserve first; aged ones are lost, never returned."""
        # Threads of one process share a memory: a token is spent once.
        with self.lock:
            while self.reserves and (
                now_ms >= self.reserves[0][1] or self.reserves[0][0] < amount_milli
            ):
                self.lost_milli += self.reserves.popleft()[0]
            if not self.reserves:
                return False
            milli, until = self.reserves[0]
            self.reserves[0] = (milli - amount_milli, until)
            return True

    def hold(self, milli: int, now_ms: int) -> None:
        """Add a reserve just taken, with its own end: every token is spent within
        RESERVE_LIFE_MS of its take (before its held count can roll into the full-at
        time). Threads of one process take concurrently: each reserve is kept beside
        the others (one replacing another would lose it: under-admission)."""
        if milli > 0:
            with self.lock:
                self.reserves.append((milli, now_ms + RESERVE_LIFE_MS))


@dataclass(frozen=True, slots=True)
class Taken:
    """What a take of a share did: admitted or not (and when to retry), the tokens the
    share had after it, and the requests it made (0: a reserve hit or a known shortage)."""

    admitted: bool
    retry_after_ms: int = 0
    tokens_milli: int = 0
    requests: int = 0


def _decoded(result: Result) -> core.ShareImage | None:
    item = result.attributes if result.ok else result.old
    return core.decode(item) if item else None


def ensure_item(target: Target, memory: Memory) -> Flow[core.ShareImage]:
    """This region's item: read it, and create it when no client of the region has."""
    found = yield from one(Call("get_item", keys.get_consistent(target.table, target.key)))
    if found.item:
        image = core.decode(found.item)
    else:
        fields = core.new_fields(target.limit, target.regions, target.region)
        put = rk.create_put(target.table, target.key, fields, target.region)
        created = yield from one(Call("put_item", put))
        image = (
            core.image_of_fields(fields, target.region)
            if created.ok
            else core.decode(created.old or {})
        )
    core.check_whole(image, target.limit)
    memory.image = image
    return image


def reserve_size(memory: Memory, image: core.ShareImage, amount_milli: int, now_ms: int) -> int:
    """Extra millitokens to take into a reserve (whole tokens; 0: take exactly)."""
    if not memory.reserve:
        return 0
    wanted = memory.rate_milli_per_s(now_ms) * RESERVE_TARGET_MS // 1000 - amount_milli
    extra = min(wanted, image.capacity_milli // 4) // 1000 * 1000
    return extra if extra >= MIN_RESERVE_MILLI else 0


def take_share(target: Target, memory: Memory, amount_milli: int, now_ms: int) -> Flow[Taken]:
    """Take `amount_milli` from this region's share: from this client's reserve, else one
    write (taking a reserve with it when this client is busy), or none when known short."""
    memory.pending_milli += amount_milli
    memory.arrivals.append(now_ms)
    if memory.spend(amount_milli, now_ms):
        return Taken(True, 0, memory.reserve_milli)
    waited = 0
    while memory.taking and waited < TAKING_WAIT_MS and now_ms >= memory.short_until_ms:
        # Another thread's take is on its way: it brings a reserve when this process is
        # busy. Writing beside it would only fail its condition (held counts) or ours.
        woke = yield from pause(TAKING_POLL_MS)
        now_ms = woke if woke is not None else now_ms + TAKING_POLL_MS
        waited += TAKING_POLL_MS
        if memory.spend(amount_milli, now_ms):
            return Taken(True, 0, memory.reserve_milli)
    if now_ms < memory.short_until_ms:
        memory.short_at_ms = now_ms
        memory.refuse("known")
        return Taken(False, memory.short_until_ms - now_ms)
    memory.on_the_way(1)
    try:
        return (yield from _write_take(target, memory, amount_milli, now_ms))
    finally:
        memory.on_the_way(-1)


def _write_take(target: Target, memory: Memory, amount_milli: int, now_ms: int) -> Flow[Taken]:
    requests = 0
    image = memory.image
    for _ in range(MAX_TRIES):
        if image is None or image.frozen_at is not None:
            if image is not None:
                # A transfer's two writes are under way: the share is about to change, not
                # short. Waiting for it costs a read; rejecting would under-admit.
                woke = yield from pause(core.FROZEN_WAIT_MS)
                now_ms = woke if woke is not None else now_ms + core.FROZEN_WAIT_MS
            image = yield from ensure_item(target, memory)
            requests += 1
            if image.frozen_at is not None:
                continue
        extra, plan = _planned(memory, image, amount_milli, now_ms)
        if isinstance(plan, core.Short):
            if plan.rolls_milli > 0:
                requests += yield from _roll(target, memory, image, now_ms)
            wait = plan.retry_after_ms if plan.retry_after_ms >= 0 else 60_000
            memory.short_until_ms = now_ms + max(1, wait)
            memory.short_at_ms = now_ms
            memory.refuse("short")
            return Taken(False, max(1, wait), plan.tokens_milli, requests)
        offered, memory.pending_milli = memory.pending_milli, 0
        call = rk.share_take_write(
            target.table, target.key, image.version, amount_milli, plan.full_at,
            plan.window, offered, plan.held,
        )  # fmt: skip
        # A lost answer loses the counted demand with it: an ADD is never re-sent.
        result = yield from one(Call("update_item", call))
        requests += 1
        if not result.ok:
            memory.pending_milli += offered
        image = _decoded(result)
        memory.image = image
        if result.ok and image is not None:
            memory.hold(extra, now_ms)
            return Taken(True, 0, image.tokens(now_ms), requests)
    memory.refuse("contended")
    return Taken(False, 1, 0, requests)


def _planned(
    memory: Memory, image: core.ShareImage, amount_milli: int, now_ms: int
) -> tuple[int, core.TakePlan | core.Short]:
    """(reserve, plan): the reserve this client's rate asks for; else what the share has
    beyond the amount (a busy region drains its share: a reserve of what is there saves
    a write per token, and its tokens still leave the bucket before they are spent);
    else an exact take."""
    extra = reserve_size(memory, image, amount_milli, now_ms)
    plan = core.plan_take(image, amount_milli, now_ms, extra)
    if extra and isinstance(plan, core.Short):
        extra = min(extra, plan.tokens_milli - amount_milli) // 1000 * 1000
        if extra < MIN_RESERVE_MILLI:
            extra = 0
        plan = core.plan_take(image, amount_milli, now_ms, extra)
    return extra, plan


def _roll(target: Target, memory: Memory, image: core.ShareImage, now_ms: int) -> Flow[int]:
    """Roll old held counts into the full-at time (one write, taking nothing); a failed
    condition means another client wrote since, which rolled them or will. Either way
    the item it answers (ALL_NEW, or ALL_OLD) is what the next take plans from: planned
    again on the image before the roll, every take found the room still full of the
    rolled counts, wrote no take (so learnt nothing new) and refused: measured, a region
    holding 5% of the whole admitted nothing for 17 s, until its keeper next moved parts."""
    plan = core.plan_roll(image, now_ms)
    call = rk.share_take_write(
        target.table, target.key, image.version, 0, plan.full_at, plan.window, 0, plan.held
    )
    result = yield from one(Call("update_item", call))
    memory.image = _decoded(result) or memory.image
    return 1


def read_all(target: Target) -> Flow[dict[str, core.ShareImage]]:
    """Every region's share item in the local replica (what has reached it)."""
    return (
        yield from read_items(
            target.table, target.namespace, target.entity_id, target.resource, target.limit.name
        )
    )


def read_items(
    table: str, namespace: str, entity_id: str, resource: str, limit_name: str
) -> Flow[dict[str, core.ShareImage]]:
    query = rk.all_regions_query(table, namespace, entity_id, resource, limit_name)
    result = yield from one(Call("query", query))
    return {image.region: image for image in map(core.decode, result.items)}


@dataclass(frozen=True, slots=True)
class Pass:
    """What one keeper pass saw and did."""

    images: dict[str, core.ShareImage]
    wanted: dict[str, int]
    transfer: core.Transfer | None
    requests: int


def keep_pass(target: Target, memory: Memory, now_ms: int) -> Flow[Pass]:
    """Read every region's item; absorb what was released to this region and release its
    excess over what demand says it should hold, in one transfer on its own item."""
    # A refusal while this pass reads and freezes (slow on a loaded engine) cancels its
    # release: it was decided on demand from before the refusal.
    refused_before = memory.short_at_ms
    images = yield from read_all(target)
    requests = 1
    own = images.get(target.region)
    if own is None:
        own = yield from ensure_item(target, memory)
        images[target.region] = own
        requests += 1
    for image in images.values():
        memory.demand.observe(image, now_ms)
    memory.others = images
    demand = {r: memory.demand.rate(r, now_ms) for r in target.regions}
    limit = target.limit
    rate = limit.refill_amount_milli * 1000 / limit.refill_period_ms
    wanted = core.targets(target.regions, demand, rate)
    reachable = memory.demand.reachable(target.regions, now_ms)
    done, written = yield from _transfer(
        target, memory, (own, images), (wanted, reachable), now_ms, refused_before
    )
    requests += written
    requests += yield from _flush_demand(target, memory)
    return Pass(images, wanted, done, requests)


def _transfer(
    target: Target,
    memory: Memory,
    seen: tuple[core.ShareImage, dict[str, core.ShareImage]],
    goal: tuple[dict[str, int], frozenset[str]],
    now_ms: int,
    refused_before: int | None,
) -> Flow[tuple[core.Transfer | None, int]]:
    """Freeze this region's item (`seen`: its own image and every region's), then write
    the transfer planned from the frozen image (exact: no take lands on a frozen item)
    towards `goal` (targets, reachable regions); or thaw a freeze whose keeper died."""
    (own, images), (wanted, reachable) = seen, goal
    requests = 0
    releasing = core.may_release(memory.absorbed_at_ms, memory.short_at_ms, now_ms)
    releasing = releasing and not_refused_since(memory, refused_before)
    if own.frozen_at is not None:
        if now_ms - own.frozen_at < core.THAW_AFTER_MS:
            return None, 0  # another keeper of the region is writing its transfer
        frozen = own
    else:
        if core.plan_transfer(own, images, wanted, reachable, releasing=releasing) is None:
            return None, 0
        freeze = rk.freeze_write(target.table, target.key, own.version, now_ms)
        result = yield from one(Call("update_item", freeze))
        requests += 1
        if not result.ok:
            return None, requests  # another keeper of the region moved first
        frozen = core.decode(result.attributes)
    images = {**images, target.region: frozen}
    releasing = releasing and not_refused_since(memory, refused_before)
    planned = core.plan_transfer(frozen, images, wanted, reachable, releasing=releasing)
    transfer = planned or core.Transfer(frozen.parts, frozen.given, frozen.taken, 0, {})
    # The bucket is re-expressed at the time the frozen image came back, not the pass's
    # start: the Query and the freeze can take a second on a loaded engine, and a line
    # re-expressed at an earlier time turns that second's refill at the old rate into
    # debt (a lowering) or credit (a raise) at the new one. Frozen, it takes no take.
    woke = yield from pause(0)
    fields = core.reshare_fields(frozen, transfer, target.limit, max(now_ms, woke or now_ms))
    call = rk.reshare_write(target.table, target.key, frozen.version, fields)
    result = yield from one(Call("update_item", call))
    requests += 1
    fresh = _decoded(result)
    if fresh is not None:
        memory.image, memory.short_until_ms = fresh, 0
    if not result.ok or not (transfer.absorbed or transfer.released):
        return None, requests
    if transfer.absorbed:
        memory.absorbed_at_ms = now_ms
    memory.transfers += 1
    return transfer, requests


def not_refused_since(memory: Memory, refused_before: int | None) -> bool:
    """No acquire of this process was refused for want of tokens since the pass began
    (when the last refusal was `refused_before`)."""
    return memory.short_at_ms == refused_before


def _flush_demand(target: Target, memory: Memory) -> Flow[int]:
    """Demand counted by rejected acquires that no take has written yet."""
    offered, memory.pending_milli = memory.pending_milli, 0
    if offered <= 0:
        return 0
    yield from one(Call("update_item", rk.demand_write(target.table, target.key, offered)))
    return 1


def keep(
    target: Target, memory: Memory, now_ms: int, stop: Sequence[bool], ticks: int | None = None
) -> Flow[int]:
    """A share keeper: passes every TICK_MS (jittered) until `stop[0]` or `ticks` passes;
    a pass that fails waits longer (doubling, jittered). The number of passes made."""
    passes, failures, now = 0, 0, now_ms
    while not stop[0] and (ticks is None or passes < ticks):
        failures, now = yield from keep_tick(target, memory, now, failures)
        passes += 1
    return passes


def keep_tick(target: Target, memory: Memory, now_ms: int, failures: int) -> Flow[tuple[int, int]]:
    """One pass and the pause after it: (failures in a row, the time it woke). A pass that
    fails waits longer (doubling, jittered) and keeps the share held."""
    try:
        yield from keep_pass(target, memory, now_ms)
        failures = 0
    except Exception as error:  # a throttle or an outage: back off, keep the share held
        failures += 1
        memory.failures += 1
        memory.last_error = f"{type(error).__name__}: {error}"
    wait = core.next_tick_ms(memory.rng) * (2 ** min(failures, 5))
    woke = yield from pause(wait)
    return failures, (woke if woke is not None else now_ms + wait)


__all__ = [
    "MAX_TRIES",
    "Memory",
    "Pass",
    "Taken",
    "Target",
    "ensure_item",
    "keep",
    "keep_pass",
    "keep_tick",
    "not_refused_since",
    "read_all",
    "read_items",
    "take_share",
]
