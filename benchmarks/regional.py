"""One global limit across regions, on the local multi-region engine (docs/global.md).

`run_scenario` offers load in every region following a demand schedule, through one of
three set-ups, and records every acquire (region, the take's clock, admitted, latency):
- `shares`: one global limit in regional shares, stored as the entity's limits and
  taken by `SyncRateLimiter.acquire` (a keeper per region, started by the acquires);
- `independent`: each region enforces the whole limit on its own (a key per region);
- `home`: one home region's table, every region's clients writing to it.
`analyse` checks the admissions against one ideal bucket of the whole limit (exact
fractions, over every window) and against min(offered, limit) outside the shifts.
Shared by `python -m benchmarks regions` and tests/engine/test_regional_shares.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository
from zae_limiter.flows import regional as core
from zae_limiter.keys import regions as rk

ENTITY, RESOURCE = "tenant-1", "api"


@dataclass(frozen=True)
class Scenario:
    regions: tuple[str, ...]
    limit_per_second: int
    seconds: float
    #: (at second, demand share per region): the offer is split this way from then on.
    schedule: tuple[tuple[float, tuple[float, ...]], ...]
    offered_factor: float = 1.5
    #: (region, from second, to second) cut off by a partition.
    partition: tuple[str, float, float] | None = None
    threads_per_region: int = 8
    lag_ms: int = 1000

    def shares_at(self, t: float) -> tuple[float, ...]:
        current = self.schedule[0][1]
        for at, shares in self.schedule:
            if t >= at:
                current = shares
        return current

    @property
    def limit(self) -> Limit:
        return Limit.per_second("rps", self.limit_per_second)


@dataclass
class Record:
    region: str
    at_ms: int
    admitted: bool
    latency_ms: float


@dataclass
class Run:
    scenario: Scenario
    mode: str
    started_ms: int
    records: list[Record] = field(default_factory=list)
    #: (second, region) -> parts, sampled each second from each region's own item.
    shares: dict[tuple[int, str], int] = field(default_factory=dict)
    #: (second, region) -> (parts ever given, parts ever taken in), from the same reads:
    #: what the region released and absorbed, and (summed) the parts in flight.
    moved: dict[tuple[int, str], tuple[int, int]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    #: Refusals of the shares' takes by why (flows/regional_run.Memory.refused), and the
    #: transfers the keepers wrote.
    refused: dict[str, int] = field(default_factory=dict)
    transfers: int = 0
    keeper_failures: int = 0
    keeper_error: str = ""
    #: DynamoDB requests the load threads made (the acquires' own) and the others (the
    #: share keepers', the sampler's reads are not counted: another client).
    requests: dict[str, int] = field(default_factory=lambda: {"acquires": 0, "keepers": 0})


class _Calls:
    """Counts a repository's requests by whether a load thread made them."""

    def __init__(self, run: Run) -> None:
        self.run = run
        self.local = threading.local()
        self.lock = threading.Lock()

    def wrap(self, repo: SyncRepository) -> None:
        record = repo.meter.record

        def counted(*args: Any, **kwargs: Any) -> Any:
            which = "acquires" if getattr(self.local, "load", False) else "keepers"
            with self.lock:
                self.run.requests[which] += 1
            return record(*args, **kwargs)

        repo.meter.record = counted  # type: ignore[method-assign]


class _Clock:
    """The repository's clock, remembering (per thread) the first reading after `arm()`:
    the `now` a take was planned with, which the ideal bucket must be fed."""

    def __init__(self) -> None:
        self.local = threading.local()

    def arm(self) -> None:
        self.local.seen = None

    def __call__(self) -> int:
        now = time.time_ns() // 1_000_000
        if getattr(self.local, "seen", 0) is None:
            self.local.seen = now
        return now

    def seen(self) -> int:
        value = getattr(self.local, "seen", None)
        return int(value) if value is not None else time.time_ns() // 1_000_000


def _open(url: str, region: str, table: str, clock: _Clock) -> SyncRepository:
    return SyncRepository.open(
        name=table, endpoint_url=url, region=region, clock=clock, create_table=True
    )


def _acquirer(mode: str, repo: SyncRepository, scenario: Scenario, region: str) -> Any:
    limit = scenario.limit
    limiter = SyncRateLimiter(repository=repo)
    if mode == "shares":
        # The global limit is stored like any other (set_limits, in `declare`): acquire
        # resolves it and takes from this region's share; the keeper starts by itself.
        def take_share() -> None:
            with limiter.acquire(ENTITY, RESOURCE, {"rps": 1}):
                pass

        return take_share
    entity = f"{ENTITY}-{region}" if mode == "independent" else ENTITY

    def take() -> None:
        with limiter.acquire(entity, RESOURCE, {"rps": 1}, limits=[limit]):
            pass

    return take


def declare(repos: Mapping[str, SyncRepository], scenario: Scenario) -> None:
    """Store the global limit as the entity's limits, in every region's replica (the same
    item everywhere: replication of one write would do, after the lag)."""
    limit = scenario.limit.across(*scenario.regions)
    for repo in repos.values():
        SyncRateLimiter(repository=repo).set_limits(ENTITY, [limit], RESOURCE)


def _load(
    run: Run,
    region: str,
    index: int,
    take: Callable[[], Any],
    clock: _Clock,
    stop: float,
    calls: _Calls,
) -> None:
    """Open-loop arrivals for one thread: the region's share of the offer, split over
    the region's threads; a thread that falls behind sends at once."""
    calls.local.load = True
    scenario = run.scenario
    i = scenario.regions.index(region)
    k = scenario.threads_per_region
    t0 = run.started_ms / 1000
    next_at = t0 + index / max(1, scenario.limit_per_second)
    while (now := time.time()) < stop:
        share = scenario.shares_at(now - t0)[i]
        rate = scenario.limit_per_second * scenario.offered_factor * share / k
        if rate <= 0:
            time.sleep(0.05)
            next_at = time.time()
            continue
        if now < next_at:
            time.sleep(next_at - now)
        next_at += 1 / rate
        clock.arm()
        sent = time.perf_counter()
        try:
            take()
            admitted = True
        except RateLimitExceeded:
            admitted = False
        except Exception as error:  # an engine hiccup: recorded, the run goes on
            run.errors.append(f"{region}: {type(error).__name__}: {error}")
            continue
        latency = (time.perf_counter() - sent) * 1000
        run.records.append(Record(region, clock.seen(), admitted, latency))


def _sample(run: Run, repos: Mapping[str, SyncRepository], stop: float) -> None:
    """Each second: each region's parts, from its own item in its own replica."""
    scenario = run.scenario
    while time.time() < stop:
        second = int(time.time() - run.started_ms / 1000)
        for region, repo in repos.items():
            key = rk.share_key(repo.namespace, ENTITY, RESOURCE, "rps", region)
            item = repo.client.get_item(TableName=repo.table_name, Key=key, ConsistentRead=True)
            if "Item" in item:
                image = core.decode(item["Item"])
                run.shares[(second, region)] = image.parts
                run.moved[(second, region)] = (sum(image.given.values()), sum(image.taken.values()))
        time.sleep(max(0.0, run.started_ms / 1000 + second + 1 - time.time()))
    del scenario


def run_scenario(
    scenario: Scenario,
    mode: str,
    endpoints: Mapping[str, str],
    table: str,
    partition: Callable[[str, bool], None] | None = None,
    home: str | None = None,
) -> Run:
    clock = _Clock()
    repos: dict[str, SyncRepository] = {}
    opened: list[SyncRepository] = []
    workers: list[tuple[str, Callable[[], Any]]] = []
    for region in scenario.regions:
        where = home or region
        for i in range(scenario.threads_per_region):
            if i == 0 or mode != "shares":
                # Shares: one process per region (one repository, its threads share the
                # keeper and the reserve); the others: a client per thread, as before.
                repo = _open(endpoints[where], where, table, clock)
                opened.append(repo)
                repos.setdefault(region, repo)
            workers.append((region, _acquirer(mode, repo, scenario, region)))
    if mode == "shares":
        declare(repos, scenario)
    run = Run(scenario, mode, time.time_ns() // 1_000_000)
    calls = _Calls(run)
    for repo in opened:
        calls.wrap(repo)
    stop = run.started_ms / 1000 + scenario.seconds
    threads = [
        threading.Thread(
            target=_load, args=(run, r, i % scenario.threads_per_region, t, clock, stop, calls)
        )
        for i, (r, t) in enumerate(workers)
    ]
    if mode == "shares":
        threads.append(threading.Thread(target=_sample, args=(run, repos, stop)))
    if scenario.partition is not None and partition is not None:
        threads.append(threading.Thread(target=_partitioner, args=(run, partition)))
    for thread in threads:
        thread.start()
    time.sleep(max(0.0, stop - time.time()))
    for thread in threads:
        thread.join(timeout=30)
    for repo in repos.values():
        book = repo.state.shares
        for memory in book.memories.values() if book is not None else ():
            run.transfers += memory.transfers
            run.keeper_failures += memory.failures
            run.keeper_error = memory.last_error or run.keeper_error
            for why, count in memory.refused.items():
                run.refused[why] = run.refused.get(why, 0) + count
    for repo in opened:
        repo.close()
    return run


def _partitioner(run: Run, partition: Callable[[str, bool], None]) -> None:
    assert run.scenario.partition is not None
    region, start, end = run.scenario.partition
    t0 = run.started_ms / 1000
    time.sleep(max(0.0, t0 + start - time.time()))
    partition(region, True)
    time.sleep(max(0.0, t0 + end - time.time()))
    partition(region, False)


# ---------------------------------------------------------------- analysis


@dataclass
class Analysis:
    mode: str
    offered: int
    admitted: int
    #: Most tokens admitted past one ideal bucket of the whole limit, over any window.
    over_admitted: float
    #: Admitted / min(offered, limit) outside the excluded seconds after shifts.
    served: float
    worst_second: float
    p50_ms: float
    p99_ms: float
    per_second: list[dict[str, Any]]
    #: Seconds left out of `served` (5 s plus the lag from the start and each shift).
    excluded: list[int] = field(default_factory=list)
    #: Refusals of the shares' takes by why, and transfers written (Run's).
    refused: dict[str, int] = field(default_factory=dict)
    transfers: int = 0
    #: DynamoDB requests per acquire: the acquiring threads' own, and the keepers'.
    requests_per_acquire: float = 0.0
    keeper_requests_per_acquire: float = 0.0
    #: Lowest sum of the shares the regions held (sampled each second), outside the
    #: excluded seconds; 1.0 when nothing is split (not a shares run).
    lowest_share_sum: float = 1.0


def over_admission(scenario: Scenario, admitted_ms: Sequence[int], start_ms: int) -> float:
    """Tokens admitted past one ideal bucket of the whole limit (full at the start), fed
    every admission at its take's clock: what it would have refused. 0 means no window
    ever admitted past C + Q x T."""
    capacity = Fraction(scenario.limit.capacity)
    rate = Fraction(scenario.limit_per_second, 1000)
    tokens, at, past = capacity, start_ms, Fraction(0)
    for t in sorted(admitted_ms):
        tokens = min(capacity, tokens + (t - at) * rate)
        at = t
        if tokens >= 1:
            tokens -= 1
        else:
            past += 1  # the ideal bucket refuses it and keeps its tokens
    return float(past)


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def analyse(run: Run) -> Analysis:
    scenario = run.scenario
    start = run.started_ms
    seconds = int(scenario.seconds)
    excluded = set()
    # The start is a shift too: demand appears (80/10/10) on shares split equally.
    for at, _ in scenario.schedule:
        excluded |= set(range(int(at), int(at + 5 + scenario.lag_ms / 1000) + 1))
    rows, needed, got, worst = [], 0.0, 0, 1.0
    for second in range(seconds):
        in_second = [
            r for r in run.records if start + second * 1000 <= r.at_ms < start + (second + 1) * 1000
        ]
        offered = len(in_second)
        admitted = {r: 0 for r in scenario.regions}
        by_region = {r: 0 for r in scenario.regions}
        for record in in_second:
            by_region[record.region] += 1
            if record.admitted:
                admitted[record.region] += 1
        row: dict[str, Any] = {"second": second, "offered": offered, "admitted": admitted}
        row["offered_by_region"] = by_region
        row["shares"] = {r: run.shares.get((second, r), 0) / core.PARTS for r in scenario.regions}
        row.update(_moved(run, second))
        rows.append(row)
        if second not in excluded and second < seconds - 1:
            floor = min(offered, scenario.limit_per_second)
            needed += floor
            got += sum(admitted.values())
            if floor:
                worst = min(worst, sum(admitted.values()) / floor)
    latencies = [r.latency_ms for r in run.records]
    admitted_ms = [r.at_ms for r in run.records if r.admitted]
    acquires = max(1, len(run.records))
    sums = [
        row["share_sum"] for row in rows
        if row["second"] not in excluded and row["share_sum"] is not None
    ]  # fmt: skip
    return Analysis(
        mode=run.mode,
        offered=len(run.records),
        admitted=len(admitted_ms),
        over_admitted=over_admission(scenario, admitted_ms, start),
        served=got / needed if needed else 1.0,
        worst_second=worst,
        p50_ms=_percentile(latencies, 0.5),
        p99_ms=_percentile(latencies, 0.99),
        per_second=rows,
        excluded=sorted(excluded),
        refused=dict(run.refused),
        transfers=run.transfers,
        requests_per_acquire=run.requests["acquires"] / acquires,
        keeper_requests_per_acquire=run.requests["keepers"] / acquires,
        lowest_share_sum=min(sums) if sums else 1.0,
    )


def _moved(run: Run, second: int) -> dict[str, Any]:
    """The sum of the shares held, the parts in flight, and what each region released and
    absorbed in `second` (from the counters sampled at its end and the second before)."""
    regions = run.scenario.regions
    if not all((second, r) in run.shares for r in regions):
        return {"share_sum": None, "in_flight": None, "released": {}, "absorbed": {}}
    now = {r: run.moved[(second, r)] for r in regions}
    before = {r: run.moved.get((second - 1, r), (0, 0)) for r in regions}
    given, taken = sum(g for g, _ in now.values()), sum(k for _, k in now.values())
    return {
        "share_sum": sum(run.shares[(second, r)] for r in regions) / core.PARTS,
        "in_flight": (given - taken) / core.PARTS,
        "released": {r: (now[r][0] - before[r][0]) / core.PARTS for r in regions},
        "absorbed": {r: (now[r][1] - before[r][1]) / core.PARTS for r in regions},
    }
