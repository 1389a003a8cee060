"""The `sessions` focus (sim/focus.py): a session quota kept busy across many of its
sessions, by clients on token reserves, on an entity that may be sharded while a session
is open.

Two things a session quota must get right only show when a session ends under load: a
reserve taken in a session and held at its end is never spent in the next one (the
client asks again, and the next session counts it), and a shard k >= 1 joins the session
shard 0 opened instead of opening its own (docs/quotas.md, "Session quotas"). In a world
drawn at random the quota is small, sessions are long against a schedule's few seconds,
and few entities are sharded, so neither happens often enough to be judged.

Here a quota world (`--quotas`; its calendar quotas become sessions too) gets a session
quota that lasts 5 or 20 seconds and two to four clients acquiring 40-80 times each on
one entity. One of two families is drawn per world:

- hot partitions: a quota of 10-40 at the brisk tempo (`spec.TEMPOS`), the clients'
  partitions taking one or two writes a second and throttles naming the partition, so
  that the entity doubles within its first session and its shards are taken in the
  sessions after;
- a holder: the first client takes reserves as a user tunes them for a hot bucket (up
  to half of it, sized for a longer period, idle longer), one token a call, beside
  busier clients, under a quota of 40-150 at the steady tempo (about what they ask in
  a session), so that a session is not spent long before its end and a reserve is
  still out when it ends, while the others open the next session and spend it.

Faults are those of one request or one process, rare (no request is held in flight in
the holder's worlds: a late write widens the checker's allowance by what it takes);
adjustments only give back (a charge with reserves out widens it too). General worlds
of this band keep their draw.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from zae_limiter.flows.reserves.settings import ReserveSettings
from zae_limiter.limits import Limit
from zae_limiter.sim.choices import Choices
from zae_limiter.sim.spec import (
    CRASH,
    LATE,
    LOST,
    PAUSE,
    THROTTLED,
    THROTTLED_BARE,
    UNSENT,
    ClientSpec,
    FaultRates,
    OpSpec,
    WorldSpec,
)

#: Session lengths (ms): several sessions within a schedule, and one a reserve outlives
#: only now and then (a reserve lives up to a minute, `ReserveSettings.max_age_ms`).
LENGTHS_MS = (5_000, 5_000, 20_000)
#: Faults kept, each at most `FAULT_RATE` per thousand: one request's or one process's.
#: A throttle that names the partition doubles the entity like a hot partition does.
KEPT = frozenset({LOST, UNSENT, THROTTLED, THROTTLED_BARE, LATE, CRASH, PAUSE})
HOLDER_KEPT = KEPT - {THROTTLED, LATE}
FAULT_RATE = 30


def sessions(spec: WorldSpec, c: Choices) -> WorldSpec:
    if not any(limit.window is not None for limit in spec.limits):
        return spec
    length = timedelta(milliseconds=c.pick(LENGTHS_MS))
    amount = c.between(10, 40)
    hot = c.chance(500)  # partitions that take a write or two a second: it shards
    if not hot:
        # A holder's session is about what its clients ask in one, so that it is not
        # spent long before its end: a reserve is then still out when it ends.
        amount = c.between(40, 150)
    quota = Limit.quota(spec.limits[0].name, amount, reset_after=length)
    limits = (quota, *spec.limits[1:])
    clients = tuple(_client(c, i, limits, hot) for i in range(c.between(2, 4)))
    kept = KEPT if hot else HOLDER_KEPT
    rates = {k: min(v, FAULT_RATE) for k, v in spec.faults.rates.items() if k in kept}
    if hot:
        rates[THROTTLED] = FAULT_RATE
    tempo = "brisk" if hot else "steady"
    return replace(spec, limits=limits, entities={"e1": None}, clients=clients,
                   faults=FaultRates(rates), skew_ms=0, tempo=tempo)  # fmt: skip


def _client(c: Choices, i: int, limits: tuple[Limit, ...], hot: bool) -> ClientSpec:
    reserve: bool | ReserveSettings = i == 0 or not c.chance(300)
    light = i == 0 and not hot  # the holder's calls take one token each: it holds longer
    if light:
        reserve = _holder(c)
    return ClientSpec(
        name=f"c{i}",
        reserve=reserve,
        speculative=not c.chance(150),
        retries=c.chance(200),
        offset_ms=0,
        partition_wcu=c.pick([1, 2]) if hot else 1000,
        threads=c.between(1, 2),
        ops=tuple(_op(c, limits, light) for _ in range(c.between(40, 80))),
        inline_limits=c.chance(300),
    )


def _holder(c: Choices) -> ReserveSettings:
    """A hot bucket's tuning (docs/reserves.md): reserves taken sooner, sized for a
    longer period, allowed a larger share of the bucket."""
    return ReserveSettings(
        writes_per_second=c.pick([1.0, 0.5, 2.0]),
        hot_rate=c.pick([2.0, 1.0, 4.0]),
        max_share=c.pick([0.5, 0.25]),
        idle_ms=c.pick([5_000, 2_000]),
    )


def _op(c: Choices, limits: tuple[Limit, ...], light: bool) -> OpSpec:
    first = limits[0].name
    consume = {first: 1 if light else c.between(1, 3)}
    if len(limits) > 1 and c.chance(500):
        consume[limits[1].name] = c.between(0, min(8, limits[1].capacity))
    adjust = {first: -c.between(1, consume[first])} if c.chance(100) else {}
    return OpSpec("e1", consume, adjust, rollback=c.chance(100))
