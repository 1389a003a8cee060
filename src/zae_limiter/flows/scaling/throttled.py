"""What an acquire does when its write is throttled: another shard, or a short wait.

A throttle is a refusal: the write was not applied, so trying again is safe. It is not
a reason to fail the caller while capacity may exist elsewhere: another shard of the
entity sits on another partition, and a partition's refusals clear within the second.
So a throttled acquire write tries a shard it has not tried yet (at most
`MAX_SHARD_TRIES` shards without waiting), and after that waits a backoff with full
jitter (see flows/reserves/pacing.py), never shorter than the bucket's gate (below), then tries
again, at most `MAX_THROTTLED_WAITS` times, the waits adding up to `THROTTLED_WAIT_MS`.
Only then does `RateLimiterUnavailable` reach the caller. The waits are counted in
simulated time (the flow's own sum), never read from a clock: the driver's deadline
still cuts a run that takes too long in wall-clock time.

A throttle also closes the bucket's gate in this client for a backoff: its other
acquires on the bucket hold back until then (within their own budget) instead of adding
writes to a partition that is refusing them. Throttles that come while the gate is
closed (acquires in flight together) do not make it grow, and it never stays closed
longer than GATE_CAP_MS. For REFUSED_RECENTLY_MS after a throttle, the client's writes to
the bucket ask for a reserve whatever its rate, and past their budget its waiting
acquires write for one, one at a time (`claim_lead`): at a cold start, the few writes a
refusing partition lets through must serve the whole client.

After a wait, the client's reserve of the bucket is looked at again: with several threads
on one client, another acquire may have taken one meanwhile, and the tokens are then
already out of the bucket, with no write at all.

The jittered, growing waits keep a throttled fleet from retrying in step: each acquire
sends a handful of writes at most, spread over its wait budget.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from zae_limiter.errors import SHED, RateLimiterUnavailable
from zae_limiter.flows import Flow, pause
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.reserves.pacing import backoff_ms
from zae_limiter.flows.write.levels import Level, Rejected, Taken

#: Shards tried for one level without waiting (the first and two others).
MAX_SHARD_TRIES = 3
#: The most one acquire waits, in all, for throttled writes (ms), and how many waits.
THROTTLED_WAIT_MS = 600
MAX_THROTTLED_WAITS = 4
#: Then, with reserves on, it waits up to this much more (ms) without writing, looking at
#: the client's reserve of the bucket about every RESERVE_POLL_MS.
RESERVE_WAIT_MS = 600
RESERVE_POLL_MS = 50
#: The longest a client's gate on a bucket stays closed after a throttle (ms): a
#: partition's refusals clear within its second.
GATE_CAP_MS = 1000
#: For this long after a throttle on a bucket (ms), the client's writes to it ask for a
#: reserve whatever its rate.
REFUSED_RECENTLY_MS = 5000
#: How long one waiting acquire's claim to write for the client's reserve lasts (ms).
LEAD_MS = 250
#: A client without reserves whose gate on a bucket counts this many throttles in a row
#: (a write through unwinds one) is refused over and over: its acquires retry once at
#: most, and not at all when refused while the gate was closed (`Tries.refused_again`).
SATURATED_ROW = 3

#: From this many shards on, a client without reserves refused lately leaves shard 0 out
#: of its takes' shard choice (`spares_shard0`).
SPARE_SHARD0_FROM = 4

#: One write for a reserve, at a time given: the level taken (or rejected), or None when
#: it was throttled (or found no such shard).
Lead = Callable[[int], Flow["Taken | Rejected | None"]]


@dataclass(slots=True)
class Tries:
    """One level's tries: the shards tried, throttles seen, time waited (ms)."""

    tried: list[int]
    #: The repository's jitter (`RepoState.jitter`): the waits replay from its seed.
    rng: random.Random
    throttles: int = 0
    waits: int = 0
    waited_ms: int = 0
    doubled: bool = False
    #: The driver's clock when the last wait ended (0: not told).
    woke_ms: int = 0
    #: Shards whose partition refused a write of this acquire by name (ThrottlingReasons).
    refused: set[int] = field(default_factory=set)
    #: The waits this acquire may still reach (`refused_again` lowers it).
    max_waits: int = MAX_THROTTLED_WAITS
    #: When the gate this acquire's own last throttle closed opens (0: none closed).
    own_gate: int = 0

    def now(self, start_ms: int) -> int:
        """The time of the next try: the waits past the start, or the clock after the last
        one when the driver said (it counts the time the tries themselves took, which a
        throttled acquire on a loaded partition can make seconds: a try planned at the
        time the acquire began would find the bucket's full-at time far ahead of it, and
        refuse tokens that are there)."""
        return max(start_ms + self.waited_ms, self.woke_ms)

    def woke(self, at_ms: int | None) -> None:
        if at_ms is not None:
            self.woke_ms = max(self.woke_ms, at_ms)

    def untried(self, count: int) -> list[int]:
        if len(self.tried) >= MAX_SHARD_TRIES:
            return []
        return [s for s in range(count) if s not in self.tried]

    def past_gate(self, gate: int) -> int:
        """A wait that ends somewhere past the gate (up to twice it): the client's other
        acquires held back by the same gate do not all go at its end."""
        return gate + self.rng.randint(0, gate)

    def refused_again(self, row: int, by_another: bool) -> None:
        """Caps the retries of a client without reserves that its partitions refuse over
        and over: its gate's row (throttles in a row, a write through unwinds one) at
        SATURATED_ROW, or a refusal while another of its acquires had closed the gate
        (`by_another`). Then one more try after a wait, and none when both hold. The
        partitions give a few writes a second to whichever writes come first, and the
        client's fresh acquires alone keep them busy: a third or fourth try of the same
        acquire adds a refused write, never an admission (measured: `reserve=False` at
        8x a partition, 2.3-2.8 requests per admitted acquire under the fixed window
        without reasons)."""
        saturated = row >= SATURATED_ROW
        if not (saturated or by_another):
            return
        more = 0 if saturated and by_another else 1
        self.max_waits = min(self.max_waits, self.waits + more)

    def hold_back(self, gate: int) -> int:
        """A wait before the first write, while the bucket's gate is closed (0: none)."""
        wait = min(self.past_gate(gate), THROTTLED_WAIT_MS - self.waited_ms)
        if wait <= 0:
            return 0
        self.waits += 1
        self.waited_ms += wait
        return wait

    def wait_ms(self, gate: int = 0) -> int | None:
        """How long to wait before trying again (at least past the bucket's `gate`, with
        jitter); None: the budget is spent."""
        left = THROTTLED_WAIT_MS - self.waited_ms
        if left <= 0 or self.waits >= self.max_waits:
            return None
        # The last wait takes what is left: the acquire gives up only at its budget's end.
        last = self.waits == MAX_THROTTLED_WAITS - 1
        own = backoff_ms(self.throttles, self.rng)
        if gate:
            own = max(own, self.past_gate(gate))
        wait = left if last else max(1, min(left, own))
        self.waits += 1
        self.waited_ms += wait
        return wait


def note_throttle(state: RepoState, level: Level, now_ms: int) -> None:
    """A write to the bucket was throttled: this client's writes to it hold back for a
    backoff that grows with the throttles in a row (full jitter, see flows/reserves/pacing.py).

    Only a throttle met while the gate was open makes it grow. Several acquires of one
    client throttled at the same moment (threads, tasks) are one refusal of the partition,
    not several in a row: counting each would close the gate for seconds after the first
    busy second, and the client's next acquires would spend their whole budget before
    their first write."""
    meta = state.entities.get(level.entity_id)
    if meta is None:
        return
    meta.gate.note_refusal(level.resource, now_ms)
    until, row = meta.gate.state(level.resource)
    if now_ms < until:
        return
    # Never 0: a gate that closes for no time would let throttles that come together
    # each count as a new refusal (full jitter draws 0 now and then).
    wait = max(1, min(GATE_CAP_MS, backoff_ms(row + 1, state.jitter)))
    meta.gate.close(level.resource, now_ms + wait, row + 1)


def note_success(state: RepoState, level: Level) -> None:
    """A write to the bucket went through: the gate opens. Without reserves the throttles
    in a row count one less, not none: under a refusing partition a write gets through
    now and then, and forgetting the row on each would keep the gate at its shortest
    while every acquire of the client writes, many refused writes for each one through.
    The row unwinds as writes keep passing. (With reserves, the write through took a
    reserve that serves the client's next acquires without a write: the row goes.)"""
    meta = state.entities.get(level.entity_id)
    if meta is None or not meta.gate.closed:
        return
    _until, row = meta.gate.state(level.resource)
    if row <= 1 or state.reserves is not None:
        meta.gate.open(level.resource)
    else:
        meta.gate.close(level.resource, 0, row - 1)


def crowded(state: RepoState, level: Level, now_ms: int) -> bool:
    """Whether a client without reserves has its gate on the bucket closed: another of
    its acquires was refused just before, so the entity's partitions are full, not one
    of them, and another shard tried at once would refuse too. (A client with reserves
    tries one: a write through there takes a reserve for its waiting acquires.)"""
    return state.reserves is None and gate_ms(state, level, now_ms) > 0


def refused_lately(state: RepoState, level: Level, now_ms: int) -> bool:
    """Whether one of this client's writes to the bucket was throttled in the last
    REFUSED_RECENTLY_MS: its next write asks for a reserve (with_reserve), whatever its
    rate. At a cold start a client's write that gets through a refusing partition may be
    its only one for a second: spent on one acquire's tokens, it leaves the client's
    other acquires to fail."""
    meta = state.entities.get(level.entity_id)
    refused = None if meta is None else meta.gate.refused.get(level.resource)
    return refused is not None and now_ms - refused < REFUSED_RECENTLY_MS


def spares_shard0(state: RepoState, level: Level, count: int, now_ms: int) -> bool:
    """Whether a client without reserves leaves shard 0 out when it picks a shard to take
    from: one of its writes to the bucket was refused lately (`refused_lately`), and the
    entity has SPARE_SHARD0_FROM shards or more. Growing the count writes shard 0 (the
    doubling, and a check on it in every new shard's transaction: flows/scaling/split.py),
    and on a bucket whose partitions refuse writes, shard 0's is as full of takes as the
    others': measured at 8x a partition (`reserve=False`, fixed window without reasons),
    116-171 transactions to make 31 shards, 72-80% of them refused, and 16 shards at
    seconds 10-13. Below 4 shards shard 0 keeps its takes: its window is the evidence that
    proves a count of 2 too low (from 4 on, the second shard a throttled client reads for
    evidence is not shard 0 either: flows/scaling/evidence.py). A drained shard's retry
    may still pick it (its tokens are the entity's), and with reserves a client's writes
    are few."""
    return (
        state.reserves is None
        and count >= SPARE_SHARD0_FROM
        and refused_lately(state, level, now_ms)
    )


def rides_doubling(state: RepoState, level: Level) -> bool:
    """Whether this client wishes for a doubling from the count it knows (its doubling
    write was throttled: `doubling.double`). The wish rides on its next take to shard 0
    (flows/write/take.py), so that take goes to shard 0 whatever shard it would pick, and
    is neither shed nor held back by the gate (`any_shard.take_any_shard`): it is the
    write that relieves the partitions. A doubling write is sent after a throttle, when
    a full partition's capacity is spent; a wish that waited for a take that happened to
    pick shard 0 and to pass the gate rode a second or more later (measured at 8x a
    partition, `reserve=False`, fixed window without reasons: 0.5-3.5 s from the first
    doubling try to the raise, 4-13 refused doubling writes, from 1 and from 2 shards)."""
    meta = state.entities.get(level.entity_id)
    if meta is None or not meta.shards.wanted:
        return False
    wanted = meta.shards.wanted.get(level.resource)
    return wanted is not None and wanted[0] == state.shard_count(level.entity_id, level.resource)


def any_shard(state: RepoState, level: Level, shards: list[int], now_ms: int) -> int:
    """One of `shards` at random: shard 0 only when it is not spared (`spares_shard0`) or
    the only one."""
    count = state.shard_count(level.entity_id, level.resource)
    if len(shards) > 1 and 0 in shards and spares_shard0(state, level, count, now_ms):
        shards = [s for s in shards if s]
    return state.rng.choice(shards)


def sheds(state: RepoState, level: Level, now_ms: int) -> bool:
    """Whether a client without reserves fails a fresh acquire on the bucket without a
    write: its gate is closed (another of its acquires was refused just now) and its row
    of refusals is at SATURATED_ROW (its partitions refuse it over and over). Such an
    acquire would wait for the gate and write once (`Tries.refused_again` allows it no
    retry), into partitions that give their few writes a second to whichever come first:
    the client's other acquires keep them busy. Measured at 8x a partition
    (`reserve=False`, fixed window without reasons): throttled takes 382 and 418 in two
    runs without it, 208 with it; requests per admitted acquire 2.15 and 2.19, then 1.77."""
    return (
        state.reserves is None
        and refusal_row(state, level) >= SATURATED_ROW
        and gate_ms(state, level, now_ms) > 0
    )


def shed(level: Level) -> RateLimiterUnavailable:
    """The error of an acquire `sheds` fails: `RateLimiterUnavailable` with the code SHED
    (`throttled` True). Not DynamoDB's throttle code: no request was sent, so nothing
    was refused (the capacity meter and `AdaptiveRate` count none), and a caller or a
    dashboard can tell the client holding back from the table refusing."""
    return RateLimiterUnavailable(
        f"{level.entity_id}/{level.resource}: this client's writes to the bucket were refused "
        "again and again just now, so this acquire was not sent; try again shortly",
        code=SHED,
    )


def gate_until(state: RepoState, level: Level) -> int:
    """When the client's gate on the bucket opens (0: never closed)."""
    meta = state.entities.get(level.entity_id)
    if meta is None:
        return 0
    return meta.gate.state(level.resource)[0]


def refusal_row(state: RepoState, level: Level) -> int:
    """The client's throttles in a row on the bucket (`note_throttle`, `note_success`)."""
    meta = state.entities.get(level.entity_id)
    if meta is None:
        return 0
    return meta.gate.state(level.resource)[1]


def gate_ms(state: RepoState, level: Level, now_ms: int) -> int:
    """How long an acquire should hold back before writing to the bucket (0: go)."""
    meta = state.entities.get(level.entity_id)
    if meta is None or not meta.gate.closed:
        return 0
    until, _row = meta.gate.state(level.resource)
    return max(0, until - now_ms)


def note_reserve_write(state: RepoState, level: Level, throttled: bool, now_ms: int) -> None:
    """A write to the bucket went through or was throttled: the bucket's reserve
    write-rate target steps up (after a reserve write) or is halved (flows/reserves/stretch.py).

    Any throttled acquire write halves it, not only one that asked for a reserve: the
    partition refuses this client's writes, and fewer, larger ones are the relief."""
    book = state.reserves
    if book is None:
        return
    key = (level.entity_id, level.resource)
    if throttled:
        book.stretch.throttled(key, now_ms)
    elif level.hold_milli:
        book.stretch.succeeded(key)


def with_reserve(state: RepoState, level: Level, now_ms: int) -> Level:
    """The level to try again after a throttle: asking for a reserve, whatever this
    client's rate on the bucket (a throttle says the bucket is hot enough). At a cold
    start, when no client holds a reserve yet, every acquire writes; the first write of
    each client that gets through then takes a reserve, and its other acquires (held
    back by the bucket's gate meanwhile) are served from it."""
    book = state.reserves
    if book is None or level.hold_milli:
        return level
    key = (level.entity_id, level.resource)
    want = book.want(
        key, level.limits, level.consume_milli, level.shard_count, now_ms, throttled=True
    )
    return replace(level, hold_milli=want) if want else level


def claim_lead(state: RepoState, level: Level, now_ms: int) -> bool:
    """Whether this waiting acquire may write for a reserve now (and so claims it): the
    bucket's gate is open and no other acquire of this client holds the claim. A claim
    ends by itself after LEAD_MS, so a write cut by its deadline never keeps it."""
    meta = state.entities.get(level.entity_id)
    if meta is None or gate_ms(state, level, now_ms):
        return False
    return meta.gate.claim_lead(level.resource, now_ms, LEAD_MS)


def wait_for_reserve(
    state: RepoState,
    level: Level,
    tries: Tries,
    start_ms: int,
    lead: Lead | None = None,
) -> Flow[Taken | Rejected | None]:
    """After its writes' budget: the level served from a reserve that this client takes
    meanwhile, or None after RESERVE_WAIT_MS (no reserves: at once).

    At a cold start on a throttling partition, a client's acquires all write until one
    gets through and takes a reserve for the others; those whose writes were refused
    until their budget ran out would fail a moment before it comes. While they wait, one
    of them at a time (`claim_lead`) writes for the reserve with `lead`, and only when the
    bucket's gate is open: a client whose acquires all wait still asks, and asks once,
    not once per acquire. The others send nothing. The driver's deadline still binds: it
    cuts every sleep, so past it the wait ends at once."""
    if state.reserves is None:
        return None
    waited = 0
    while waited < RESERVE_WAIT_MS:
        step = min(RESERVE_WAIT_MS - waited, tries.rng.randint(1, 2 * RESERVE_POLL_MS))
        woke = yield from pause(step)
        waited += step
        tries.waited_ms += step
        tries.woke(woke)
        now_ms = tries.now(start_ms)
        served = from_reserve(state, level, now_ms)
        if served is not None:
            return served
        if lead is not None and claim_lead(state, level, now_ms):
            outcome = yield from lead(now_ms)
            if outcome is not None:
                return outcome
    return None


def from_reserve(state: RepoState, level: Level, now_ms: int) -> Taken | None:
    """The level served from the client's reserve of its bucket, if it now covers it."""
    book = state.reserves
    if book is None:
        return None
    key = (level.entity_id, level.resource)
    shard = book.spend(key, level.limits, level.consume_milli, now_ms)
    if shard is None:
        return None
    return Taken(
        level.entity_id,
        level.resource,
        shard,
        level.consume_milli,
        level.limits,
        from_reserve=True,
    )
