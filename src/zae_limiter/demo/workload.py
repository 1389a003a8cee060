"""The live part of the demo: gateway threads, hot-tenant threads, and their counters.

Every thread opens its own `SyncRepository` (as separate gateway processes would); the
hot tenant's clients open theirs with `partition_wcu=HOT_PARTITION_WCU`, so the buckets
they create carry that write limit and the client doubles `shard_count` once a
partition takes more than 80% of it.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field, replace

from zae_limiter.demo import scenario
from zae_limiter.errors import RateLimiterUnavailable, RateLimitExceeded
from zae_limiter.flows.context import DEFAULT_PARTITION_WCU
from zae_limiter.limiter import SyncRateLimiter
from zae_limiter.models import ShardInfo
from zae_limiter.repository import SyncRepository
from zae_limiter.testing.load import reserve_kwargs

OpenLimiter = Callable[[int | None], SyncRateLimiter]

#: (entity, threads, pause between calls in seconds) for each kind of caller.
GATEWAY_CALLERS = ((scenario.TIGHT_KEY, 1, 0.05), (scenario.OPEN_KEY, 1, 0.05))
HOT_THREADS = 3
HOT_PAUSE = 0.02


@dataclass(slots=True)
class Counts:
    admitted: int = 0
    rejected: int = 0
    errors: int = 0
    max_retry_after: float = 0.0


@dataclass(slots=True)
class Stats:
    """Counters shared by the worker threads; read by the view a few times a second."""

    started: float = field(default_factory=time.monotonic)
    per_entity: dict[str, Counts] = field(default_factory=dict)
    shard_count: int = 1
    shards: list[ShardInfo] = field(default_factory=list)
    doublings: list[tuple[float, int]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def counts(self, entity_id: str) -> Counts:
        with self._lock:
            return self.per_entity.setdefault(entity_id, Counts())

    def admit(self, entity_id: str) -> None:
        counts = self.counts(entity_id)
        with self._lock:
            counts.admitted += 1

    def reject(self, entity_id: str, retry_after: float) -> None:
        counts = self.counts(entity_id)
        with self._lock:
            counts.rejected += 1
            counts.max_retry_after = max(counts.max_retry_after, retry_after)

    def error(self, entity_id: str) -> None:
        counts = self.counts(entity_id)
        with self._lock:
            counts.errors += 1

    def see_shards(self, shards: list[ShardInfo]) -> None:
        if not shards:
            return
        count = shards[0].shard_count  # shard 0 holds the authoritative count
        with self._lock:
            self.shards = shards
            if count > self.shard_count:
                self.doublings.append((time.monotonic() - self.started, count))
                self.shard_count = count

    def snapshot(self) -> dict[str, Counts]:
        with self._lock:
            return {k: replace(v) for k, v in self.per_entity.items()}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    @property
    def totals(self) -> Counts:
        total = Counts()
        for counts in self.snapshot().values():
            total.admitted += counts.admitted
            total.rejected += counts.rejected
            total.errors += counts.errors
            total.max_retry_after = max(total.max_retry_after, counts.max_retry_after)
        return total


def caller(
    limiter: SyncRateLimiter, entity_id: str, pause: float, stats: Stats, stop: threading.Event
) -> None:
    """Call the model through the limiter until told to stop; back off when refused."""
    rng = random.Random(entity_id)
    while not stop.is_set():
        try:
            scenario.llm_call(limiter, entity_id, rng)
        except RateLimitExceeded as refused:
            stats.reject(entity_id, refused.retry_after_seconds)
            stop.wait(min(0.25, refused.retry_after_seconds))
            continue
        except RateLimiterUnavailable:
            stats.error(entity_id)
            stop.wait(0.1)
            continue
        stats.admit(entity_id)
        if pause:
            stop.wait(pause)


def watch_shards(limiter: SyncRateLimiter, stats: Stats, stop: threading.Event) -> None:
    """Read the hot entity's shards twice a second (GSI3 keys + BatchGetItem)."""
    while not stop.is_set():
        with suppress(RateLimiterUnavailable):
            stats.see_shards(limiter.get_shards(scenario.HOT, scenario.RESOURCE))
        stop.wait(0.5)


def open_limiter(endpoint_url: str, name: str) -> OpenLimiter:
    """A factory of limiters on the table; `partition_wcu=None` keeps the library default."""

    def opened(partition_wcu: int | None) -> SyncRateLimiter:
        wcu = DEFAULT_PARTITION_WCU if partition_wcu is None else partition_wcu
        # The hot tenant's step shows sharding: token reserves would make its writes few.
        extra = reserve_kwargs(False) if partition_wcu is not None else {}
        repo = SyncRepository.open(name=name, endpoint_url=endpoint_url, partition_wcu=wcu, **extra)
        return SyncRateLimiter(repo)

    return opened


@contextmanager
def opened(opener: OpenLimiter, partition_wcu: int | None = None) -> Iterator[SyncRateLimiter]:
    limiter = opener(partition_wcu)
    try:
        yield limiter
    finally:
        limiter.repository.close()


@contextmanager
def running(opener: OpenLimiter, stats: Stats) -> Iterator[threading.Event]:
    """Start every thread, hot tenant first; on exit (also Ctrl-C) stop and wait for them."""
    stop = threading.Event()
    plan: list[tuple[int | None, Callable[[SyncRateLimiter], None]]] = [
        (scenario.HOT_PARTITION_WCU, _calls(scenario.HOT, HOT_PAUSE, stats, stop))
        for _ in range(HOT_THREADS)
    ]
    for entity_id, threads, pause in GATEWAY_CALLERS:
        plan += [(None, _calls(entity_id, pause, stats, stop))] * threads
    plan.append((None, lambda lim: watch_shards(lim, stats, stop)))
    started: list[tuple[SyncRateLimiter, threading.Thread]] = []
    try:
        for number, (partition_wcu, job) in enumerate(plan):
            limiter = opener(partition_wcu)
            worker = threading.Thread(
                target=job, args=(limiter,), daemon=True, name=f"demo-{number}"
            )
            worker.start()
            started.append((limiter, worker))
        yield stop
    finally:
        stop.set()
        for limiter, worker in started:
            worker.join(timeout=5)
            limiter.repository.close()


def _calls(
    entity_id: str, pause: float, stats: Stats, stop: threading.Event
) -> Callable[[SyncRateLimiter], None]:
    return lambda lim: caller(lim, entity_id, pause, stats, stop)
