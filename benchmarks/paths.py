"""The acquire paths, one scenario each, measured with the capacity meter.

Every scenario sets its bucket up with a limiter of its own (its own namespace, so
nothing is shared between scenarios), then measures exactly one `with limiter.acquire()`
block (or one lease) inside `repo.meter.measure()`. Time is a manual clock: refill only
happens when a scenario advances it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository, keys
from zae_limiter.capacity import Measurement
from zae_limiter.flows import Call, one

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


class _PickShard(random.Random):
    """Stands in for the state's generator in the acquire flow: the first pick is `first`."""

    def __init__(self, first: int) -> None:
        super().__init__(0)
        self.first = first

    def randrange(self, start: int, *_: Any, **__: Any) -> int:
        return self.first % start

    def choice(self, seq: Any) -> Any:
        return seq[0]


@contextlib.contextmanager
def first_shard(limiter: SyncRateLimiter, shard: int) -> Iterator[None]:
    state = limiter.repository.state
    saved = state.rng
    state.rng = _PickShard(shard)
    try:
        yield
    finally:
        state.rng = saved


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
    with first_shard(limiter, 0):
        take(limiter, "key-1", rpm=1)  # ALL_NEW tells the client there are two shards
    with first_shard(limiter, 1):
        take(limiter, "key-1", rpm=1)  # creates shard 1 from half of shard 0
    with first_shard(limiter, 0):
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


# ---------------------------------------------------------------- what one acquire walks
#: Warm-up acquires before a walk is traced: the bucket exists, the client remembers it,
#: and (reserves on) it holds a reserve that the traced acquire is served from.
WALK_WARMUP = 50
WALK_LIMIT = Limit.per_second("rps", 1_000_000)  # never binds: every acquire succeeds
#: Acquires per CPU round (per request: each is a request to moto in this process), and
#: rounds (the median is reported).
WALK_ACQUIRES = {False: 300, True: 20_000}
WALK_ROUNDS = 5


@dataclass(frozen=True, slots=True)
class Walk:
    """The package code one steady acquire passes through (`sys.setprofile`)."""

    path: str
    functions: int  # distinct package functions
    calls: int  # package function calls
    files: int  # distinct package files
    depth: int  # deepest package call chain
    requests: int  # DynamoDB calls the traced acquire made
    cpu_us: float  # CPU per acquire, median round, requests included
    names: tuple[str, ...] = ()  # "file:function", in first-call order


def _package_file(filename: str) -> str | None:
    marker = f"{os.sep}zae_limiter{os.sep}"
    at = filename.rfind(marker)
    return None if at < 0 else filename[at + len(marker) :]


def _trace(one: Callable[[], None]) -> tuple[list[str], int, set[str], int]:
    seen: dict[str, None] = {}
    files: set[str] = set()
    calls, depth, deepest = [0], [0], [0]

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event not in ("call", "return"):
            return
        name = _package_file(frame.f_code.co_filename)
        if name is None:
            return
        if event == "return":
            depth[0] -= 1
            return
        depth[0] += 1
        deepest[0] = max(deepest[0], depth[0])
        calls[0] += 1
        files.add(name)
        seen.setdefault(f"{name}:{frame.f_code.co_qualname}", None)

    sys.setprofile(profile)
    try:
        one()
    finally:
        sys.setprofile(None)
    return list(seen), calls[0], files, deepest[0]


def walk(reserve: bool, timed_rounds: int = WALK_ROUNDS) -> Walk:
    """Trace one steady acquire on in-process moto: reserves off (one UpdateItem), or on
    (served from the reserve the warm-up took), then time `timed_rounds` rounds of them
    (none: CPU 0)."""
    repo = SyncRepository.open(name=f"walk-{int(reserve)}", create_table=True, reserve=reserve)
    try:
        limiter = SyncRateLimiter(repo)

        def one() -> None:
            with limiter.acquire("walker", "walk", {WALK_LIMIT.name: 1}, limits=[WALK_LIMIT]):
                pass

        for _ in range(WALK_WARMUP):
            one()
        with repo.meter.measure() as m:
            names, calls, files, depth = _trace(one)
        rounds = []
        for _ in range(timed_rounds):
            start = time.process_time()
            for _ in range(WALK_ACQUIRES[reserve]):
                one()
            rounds.append((time.process_time() - start) / WALK_ACQUIRES[reserve] * 1e6)
        label = "reserve hit" if reserve else "per request (reserve=False)"
        cpu = statistics.median(rounds) if rounds else 0.0
        return Walk(label, len(names), calls, len(files), depth, len(m.calls), cpu, tuple(names))
    finally:
        repo.close()


def walks(timed_rounds: int = WALK_ROUNDS) -> list[Walk]:
    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):  # fmt: skip
        os.environ.setdefault(name, value)
    from moto import mock_aws

    with mock_aws():
        return [walk(False, timed_rounds), walk(True, timed_rounds)]


def walks_markdown(found: list[Walk]) -> str:
    lines = [
        "| acquire | package functions | calls | files | depth | requests | CPU us (moto) |",
        "|---|---|---|---|---|---|---|",
    ]
    for w in found:
        lines.append(
            f"| {w.path} | {w.functions} | {w.calls} | {w.files} | {w.depth} | {w.requests} "
            f"| {w.cpu_us:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.paths",
        description="What one steady acquire walks through: package functions, calls and "
        "files (sys.setprofile, in-process moto), per request and served from a reserve.",
    )
    parser.add_argument("--names", action="store_true", help="list the functions, in order")
    args = parser.parse_args(argv)
    found = walks()
    print(walks_markdown(found))
    if args.names:
        for w in found:
            print(f"{w.path}:")
            print("\n".join(f"  {n}" for n in w.names))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
