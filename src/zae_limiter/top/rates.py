"""Stream records -> what `zae-limiter top` shows. Pure: no I/O, time passed in.

Each bucket write on the stream carries the old and the new image of one shard. The
consumption of a limit is the growth of its `tc` counter between them (the aggregator's
own `tc_deltas`), so a reserve taken counts when it is taken and a reserve returned
unused gives back what it did not spend. Rates are counted by the time a record was
read, which trails the write by about one poll.

Tokens left and tokens held in reserves come from the latest image of each shard seen,
decoded and refilled to now by the library's own functions (`keys.decode_bucket`,
`flows.offpath.shards.shard_info`): a shard not written since `top` started is not known yet.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from zae_limiter import keys
from zae_limiter.aggregator.records import MalformedRecord, parse
from zae_limiter.flows import regional as core
from zae_limiter.flows.offpath.shards import limit_of, shard_info
from zae_limiter.flows.write.shares import read_shares, tokens_now
from zae_limiter.keys import regions as rk

SHORT_MS = 10_000
LONG_MS = 60_000
SORTS = ("rate", "pct", "shards")


@dataclass(frozen=True, slots=True)
class Filters:
    namespace: str | None = None
    resource: str | None = None
    entity_prefix: str | None = None

    def keep(self, ns: str, entity_id: str, resource: str) -> bool:
        if self.namespace is not None and ns != self.namespace:
            return False
        if self.resource is not None and resource != self.resource:
            return False
        return self.entity_prefix is None or entity_id.startswith(self.entity_prefix)


@dataclass(frozen=True, slots=True)
class ShareRow:
    """One region's share of a global limit, as its share item last showed it."""

    region: str
    percent: float
    capacity: int
    tokens_left: int

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "percent": round(self.percent, 1),
                "capacity": self.capacity, "tokens_left": self.tokens_left}  # fmt: skip


@dataclass(frozen=True, slots=True)
class LimitRow:
    """One limit of one bucket: its consumption rates (tokens per second) and state."""

    name: str
    rate_10s: float
    rate_60s: float
    #: The limit's refill rate (tokens per second) over all shards; 100% is that rate.
    refill_per_second: float
    capacity: int
    tokens_left: int
    reserved: int
    #: Takes in the last 60 s that left the limit below zero: a soft limit's would-be
    #: rejections (or a lease's adjustment past the limit).
    over_60s: int = 0
    #: A global limit's regional shares (docs/global.md); empty for a regional limit.
    shares: tuple[ShareRow, ...] = ()

    @property
    def pct_10s(self) -> float:
        return 100.0 * self.rate_10s / self.refill_per_second if self.refill_per_second else 0.0

    @property
    def pct_60s(self) -> float:
        return 100.0 * self.rate_60s / self.refill_per_second if self.refill_per_second else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "limit": self.name,
            "rate_10s": round(self.rate_10s, 3),
            "rate_60s": round(self.rate_60s, 3),
            "pct_10s": round(self.pct_10s, 1),
            "pct_60s": round(self.pct_60s, 1),
            "refill_per_second": round(self.refill_per_second, 3),
            "capacity": self.capacity,
            "tokens_left": self.tokens_left,
            "reserved": self.reserved,
            "over_60s": self.over_60s,
            **({"shares": [x.to_dict() for x in self.shares]} if self.shares else {}),
        }


@dataclass(frozen=True, slots=True)
class BucketRow:
    """One (namespace, entity, resource): its limits, its shard count, shards seen."""

    namespace: str
    entity_id: str
    resource: str
    shard_count: int
    shards_seen: int
    limits: tuple[LimitRow, ...]

    def key(self, sort: str) -> float:
        if sort == "shards":
            return float(self.shard_count)
        if sort == "pct":
            return max((x.pct_10s for x in self.limits), default=0.0)
        return max((x.rate_10s for x in self.limits), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "namespace": self.namespace,
            "entity_id": self.entity_id,
            "resource": self.resource,
            "shard_count": self.shard_count,
            "shards_seen": self.shards_seen,
            "limits": [x.to_dict() for x in self.limits],
        }


@dataclass(slots=True)
class _Bucket:
    #: The latest image of each shard seen.
    shards: dict[int, Mapping[str, Any]] = field(default_factory=dict)
    #: limit -> (read at ms, millitokens consumed), oldest first.
    consumed: dict[str, deque[tuple[int, int]]] = field(default_factory=dict)
    #: limit -> (read at ms, 1) of each take that left it below zero, oldest first.
    over: dict[str, deque[tuple[int, int]]] = field(default_factory=dict)
    #: A global limit's share items: limit -> region -> the latest image seen.
    shares: dict[str, dict[str, Mapping[str, Any]]] = field(default_factory=dict)


def _keep_share(bucket: _Bucket, region: str, image: Mapping[str, Any] | None) -> None:
    if image is None:
        return
    name = rk.parse_share_pk(str(image[keys.PK]["S"]))[3]
    bucket.shares.setdefault(name, {})[region] = image


def went_past(image: Mapping[str, Any], deltas: Mapping[str, int], at_ms: int) -> list[str]:
    """The limits a take left below zero: those it consumed (`deltas` > 0) that the new
    image shows in debt at `at_ms`. A hard limit's take is bounded, so this is a soft
    limit going past its limit, which would have rejected the take; read about a poll
    after the write, a take that refill covered by then is not counted."""
    taken = [name for name, milli in deltas.items() if milli > 0]
    if not taken:
        return []
    shard = keys.decode_bucket(image)
    past = []
    for name in taken:
        stored = shard.user_limits.get(name)
        if stored is not None and tokens_now(shard, limit_of(name, stored), at_ms) < 0:
            past.append(name)
    return past


class Tally:
    """What the stream showed since `started_ms`: consumption per limit, latest images."""

    def __init__(self, started_ms: int) -> None:
        self.started_ms = started_ms
        self.buckets: dict[tuple[str, str, str], _Bucket] = {}
        self.records = 0
        self.skipped = 0

    def add(self, records: Iterable[Mapping[str, Any]], read_ms: int) -> None:
        """Records read at `read_ms`, in stream order."""
        for record in records:
            self.records += 1
            try:
                change = parse(record)
            except MalformedRecord:
                self.skipped += 1
                continue
            if change is None:
                continue
            bucket = self.buckets.setdefault(change.group, _Bucket())
            if change.region is not None:
                _keep_share(bucket, change.region, change.new)
            elif change.new is None:
                bucket.shards.pop(change.shard_id, None)  # the shard was removed (merged)
            else:
                bucket.shards[change.shard_id] = change.new
            for name, milli in change.deltas.items():
                bucket.consumed.setdefault(name, deque()).append((read_ms, milli))
            if change.region is None and change.new is not None and change.consumed:
                for name in went_past(change.new, change.deltas, read_ms):
                    bucket.over.setdefault(name, deque()).append((read_ms, 1))
        self._forget(read_ms)

    def _forget(self, now_ms: int) -> None:
        horizon = now_ms - LONG_MS
        for bucket in self.buckets.values():
            for samples in (*bucket.consumed.values(), *bucket.over.values()):
                while samples and samples[0][0] <= horizon:
                    samples.popleft()

    def rate(self, samples: Iterable[tuple[int, int]], window_ms: int, now_ms: int) -> float:
        """Tokens per second over the last `window_ms` (or since the start, if shorter)."""
        covered = min(window_ms, now_ms - self.started_ms)
        if covered <= 0:
            return 0.0
        milli = sum(m for at, m in samples if now_ms - window_ms < at <= now_ms)
        return milli / covered  # millitokens per ms == tokens per second

    def _limits(self, bucket: _Bucket, now_ms: int) -> tuple[LimitRow, ...]:
        states = [keys.decode_bucket(image) for image in bucket.shards.values()]
        infos = [shard_info(b, now_ms, 0.0, counted) for b, counted in
                 zip(states, read_shares(states), strict=True)]  # fmt: skip
        stored = {name: s for b in states for name, s in b.user_limits.items()}
        rows = []
        for name in sorted(set(stored) | set(bucket.consumed)):
            if name in bucket.shares:
                rows.append(self._global(name, bucket, now_ms))
                continue
            samples = bucket.consumed.get(name, ())
            config = stored.get(name)
            refill = (config.refill_amount_milli / config.refill_period_ms) if config else 0.0
            rows.append(
                LimitRow(
                    name=name,
                    rate_10s=self.rate(samples, SHORT_MS, now_ms),
                    rate_60s=self.rate(samples, LONG_MS, now_ms),
                    refill_per_second=refill,
                    capacity=config.capacity_milli // 1000 if config else 0,
                    tokens_left=sum(i.tokens.get(name, 0) for i in infos),
                    reserved=sum(i.reserved.get(name, 0) for i in infos),
                    over_60s=len(bucket.over.get(name, ())),
                )
            )
        return tuple(rows)

    def _global(self, name: str, bucket: _Bucket, now_ms: int) -> LimitRow:
        """A global limit's row: the whole limit, and a row per region's share."""
        images = {r: core.decode(i) for r, i in sorted(bucket.shares[name].items())}
        shares = tuple(
            ShareRow(r, 100 * i.parts / core.PARTS, i.capacity_milli // 1000,
                     i.tokens(now_ms) // 1000)
            for r, i in images.items()
        )  # fmt: skip
        whole_cp, whole_ra, whole_rp = next(iter(images.values())).whole
        samples = bucket.consumed.get(name, ())
        return LimitRow(
            name=name, rate_10s=self.rate(samples, SHORT_MS, now_ms),
            rate_60s=self.rate(samples, LONG_MS, now_ms),
            refill_per_second=whole_ra / whole_rp if whole_rp else 0.0,
            capacity=whole_cp // 1000, tokens_left=sum(x.tokens_left for x in shares),
            reserved=sum(i.held_total for i in images.values()) // 1000, shares=shares,
        )  # fmt: skip

    def snapshot(
        self, now_ms: int, filters: Filters = Filters(), sort: str = "rate", top: int | None = None
    ) -> list[BucketRow]:
        """The buckets seen, busiest first by `sort` (rate, pct or shards)."""
        if sort not in SORTS:
            raise ValueError(f"sort must be one of {', '.join(SORTS)}, not {sort!r}")
        self._forget(now_ms)
        rows = []
        for (ns, entity_id, resource), bucket in self.buckets.items():
            if not filters.keep(ns, entity_id, resource):
                continue
            counts = [keys.decode_bucket(i).shard_count for i in bucket.shards.values()]
            rows.append(
                BucketRow(ns, entity_id, resource, max(counts, default=1), len(bucket.shards),
                          self._limits(bucket, now_ms))
            )  # fmt: skip
        rows.sort(key=lambda r: (-r.key(sort), r.namespace, r.entity_id, r.resource))
        return rows if top is None else rows[:top]
