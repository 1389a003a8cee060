"""The acquire paths, one scenario each, measured with the capacity meter.

Every scenario sets its bucket up with a limiter of its own (its own namespace, so
nothing is shared between scenarios), then measures exactly one `with limiter.acquire()`
block (or one lease) inside `repo.meter.measure()`. Time is a manual clock: refill only
happens when a scenario advances it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository, keys
from zae_limiter.capacity import Measurement
from zae_limiter.flows import Call, one
from zae_limiter.flows.scaling import any_shard

RESOURCE = "gpt-4"
RPM = Limit.per_minute("rpm", 100)
TPM = Limit.per_minute("tpm", 10_000)
START_MS = 1_800_000_000_000


class ManualClock:
    """Milliseconds that move only when a scenario says so."""

    def __init__(self, start_ms: int = START_MS) -> None:
        self.now_ms = start_ms

    def __call__(self) -> int:
        return self.now_ms

    def advance(self, seconds: float) -> None:
        self.now_ms += int(seconds * 1000)


class Bench:
    """Opens limiters on one table; each scenario gets its own namespace."""

    def __init__(
        self, table: str, endpoint_url: str, client_factory: Callable[[], Any] | None = None
    ) -> None:
        self.table = table
        self.endpoint_url = endpoint_url
        self.clock = ManualClock()
        self._client_factory = client_factory
        self._opened: list[SyncRepository] = []
        self.runs = 0

    def limiter(self, namespace: str, *, speculative_writes: bool = True) -> SyncRateLimiter:
        """A fresh client (empty caches) on the table, in `namespace` of this run."""
        client = None if self._client_factory is None else self._client_factory()
        repo = SyncRepository.open(
            f"{namespace}-{self.runs}",
            name=self.table,
            endpoint_url=self.endpoint_url,
            clock=self.clock,
            client=client,
        )
        self._opened.append(repo)
        return SyncRateLimiter(repo, speculative_writes=speculative_writes)

    def close(self) -> None:
        for repo in self._opened:
            repo.close()
        self._opened.clear()


def measure(limiter: SyncRateLimiter) -> contextlib.AbstractContextManager[Measurement]:
    return limiter.repository.meter.measure()


def take(limiter: SyncRateLimiter, entity: str, **consume: int) -> None:
    with limiter.acquire(entity, RESOURCE, consume):
        pass


def try_take(limiter: SyncRateLimiter, entity: str, **consume: int) -> bool:
    try:
        take(limiter, entity, **consume)
    except RateLimitExceeded:
        return False
    return True


def _stored(bench: Bench, ns: str, **options: bool) -> SyncRateLimiter:
    limiter = bench.limiter(ns, **options)
    limiter.set_limits("key-1", [RPM, TPM], resource=RESOURCE)
    return limiter


def speculative_success(bench: Bench) -> Measurement:
    limiter = _stored(bench, "spec-success")
    take(limiter, "key-1", rpm=1)
    with measure(limiter) as m:
        take(limiter, "key-1", rpm=1, tpm=100)
    return m


def _cascade(bench: Bench, ns: str) -> SyncRateLimiter:
    limiter = bench.limiter(ns)
    limiter.create_entity("proj-1")
    limiter.create_entity("key-1", parent_id="proj-1", cascade=True)
    limiter.set_resource_defaults(RESOURCE, [RPM, TPM])
    take(limiter, "key-1", rpm=1)  # learns the cascade
    return limiter


def speculative_cascade(bench: Bench) -> Measurement:
    limiter = _cascade(bench, "spec-cascade")
    with measure(limiter) as m:
        take(limiter, "key-1", rpm=1, tpm=100)
    return m


def _drained(bench: Bench, ns: str) -> SyncRateLimiter:
    limiter = bench.limiter(ns)
    limiter.set_limits("key-1", [RPM], resource=RESOURCE)
    take(limiter, "key-1", rpm=100)
    return limiter


def _warm_then_drained(bench: Bench, ns: str) -> SyncRateLimiter:
    """A second client that knows the entity and its limits, but not that it is drained."""
    first = bench.limiter(ns)
    first.set_limits("key-1", [RPM], resource=RESOURCE)
    other = bench.limiter(ns)
    take(other, "key-1", rpm=1)
    take(first, "key-1", rpm=99)
    return other


def rejection_failed_condition(bench: Bench) -> Measurement:
    other = _warm_then_drained(bench, "reject-cond")
    with measure(other) as m:
        assert not try_take(other, "key-1", rpm=1)
    return m


def rejection_known_locally(bench: Bench) -> Measurement:
    other = _warm_then_drained(bench, "reject-local")
    assert not try_take(other, "key-1", rpm=1)  # learns the shortage from ALL_OLD
    with measure(other) as m:
        assert not try_take(other, "key-1", rpm=1)
    return m


def refill_helps(bench: Bench) -> Measurement:
    limiter = _drained(bench, "refill-helps")
    # 10 tokens refilled since the client last saw the bucket: its full-at image counts
    # them, so the one write it sends is right the first time.
    bench.clock.advance(6)
    with measure(limiter) as m:
        take(limiter, "key-1", rpm=1)
    bench.clock.advance(60)
    return m


def read_then_write(bench: Bench) -> Measurement:
    limiter = _stored(bench, "read-write", speculative_writes=False)
    take(limiter, "key-1", rpm=1)
    with measure(limiter) as m:
        take(limiter, "key-1", rpm=1)
    return m


def first_acquire(bench: Bench) -> Measurement:
    setup = bench.limiter("first-acquire")
    setup.create_entity("key-1")
    setup.set_limits("key-1", [RPM, TPM], resource=RESOURCE)
    limiter = bench.limiter("first-acquire")  # cold caches: nothing known
    with measure(limiter) as m:
        take(limiter, "key-1", rpm=1)
    return m


def adjust_one_entity(bench: Bench) -> Measurement:
    limiter = _stored(bench, "adjust")
    take(limiter, "key-1", rpm=1)
    with measure(limiter) as m, limiter.acquire("key-1", RESOURCE, {"rpm": 1, "tpm": 500}) as lease:
        lease.adjust(tpm=242)
    return m


class _Boom(Exception):
    pass


def rollback_cascade(bench: Bench) -> Measurement:
    limiter = _cascade(bench, "rollback")
    acquiring = limiter.acquire("key-1", RESOURCE, {"rpm": 1, "tpm": 500})
    with measure(limiter) as m, contextlib.suppress(_Boom), acquiring:
        raise _Boom
    return m


class _PickShard:
    """Stands in for `random` in the acquire flow: the first pick is `first`."""

    def __init__(self, first: int) -> None:
        self.first = first

    def randrange(self, stop: int) -> int:
        return self.first % stop

    def choice(self, seq: Any) -> Any:
        return seq[0]


@contextlib.contextmanager
def first_shard(shard: int) -> Iterator[None]:
    saved = getattr(any_shard, "random")  # noqa: B009 - not exported: swapped for a test
    setattr(any_shard, "random", _PickShard(shard))  # noqa: B010
    try:
        yield
    finally:
        setattr(any_shard, "random", saved)  # noqa: B010


def _set_shard_count(limiter: SyncRateLimiter, entity: str, count: int) -> None:
    """What a doubling writes on shard 0, as a plain update (setup, not measured)."""
    repo = limiter.repository
    key = keys.bucket_key(repo.namespace, entity, RESOURCE, 0)
    params = keys.propagate_shard_count(
        repo.table_name, key, count, now_ms=int(time.time() * 1000)
    )
    repo.run(one(Call("update_item", params)))


def _tokens(limiter: SyncRateLimiter, entity: str, shard: int) -> int:
    infos = limiter.get_shards(entity, RESOURCE)
    return next(i.tokens["rpm"] for i in infos if i.shard_id == shard)


def shard_retry(bench: Bench) -> Measurement:
    limiter = bench.limiter("shard-retry")
    limiter.set_limits("key-1", [RPM], resource=RESOURCE)
    take(limiter, "key-1", rpm=1)
    _set_shard_count(limiter, "key-1", 2)
    with first_shard(0):
        take(limiter, "key-1", rpm=1)  # ALL_NEW tells the client there are two shards
    with first_shard(1):
        take(limiter, "key-1", rpm=1)  # creates shard 1 from half of shard 0
    with first_shard(0):
        take(limiter, "key-1", rpm=_tokens(limiter, "key-1", 0))  # drains shard 0
        with measure(limiter) as m:
            take(limiter, "key-1", rpm=1)  # shard 0 refuses; shard 1 grants
    return m


Scenario = Callable[[Bench], Measurement]


def run_scenario(bench: Bench, key: str) -> Measurement:
    """Measure one path; every run has namespaces of its own, so runs can repeat."""
    bench.runs += 1
    return SCENARIOS[key](bench)


SCENARIOS: dict[str, Scenario] = {
    "speculative_success": speculative_success,
    "speculative_cascade": speculative_cascade,
    "rejection_known_locally": rejection_known_locally,
    "rejection_failed_condition": rejection_failed_condition,
    "refill_helps": refill_helps,
    "read_then_write": read_then_write,
    "first_acquire": first_acquire,
    "adjust_one_entity": adjust_one_entity,
    "rollback_cascade": rollback_cascade,
    "shard_retry": shard_retry,
}
