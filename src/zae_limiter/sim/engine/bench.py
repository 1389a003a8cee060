"""How many operations a second the engine serves: `python -m zae_limiter.sim.engine.bench`.

Two measures, both on one core with nothing but the engine timed:
- `take`: the library's hot request, a bucket UpdateItem with three limits (a long
  condition over ~20 names and ~26 values), built by `keys.takes.take_write`;
- `mix`: the requests the library sends while it runs (entities, limits, acquires with
  cascade, reserves, reads), recorded once and replayed on fresh engines.
Times are CPU seconds of this process (`time.process_time`), so other work on a shared
machine does not lower the figures. Exits non-zero when any request fails unexpectedly.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from botocore.exceptions import ClientError

from zae_limiter import keys
from zae_limiter import table as table_def
from zae_limiter.keys.takes import ADD, LimitWrite, take_write
from zae_limiter.sim.engine.engine import Engine
from zae_limiter.sim.engine.replay import Outcome, RecordingClient

TABLE = "bench"
NOW_MS = 1_800_000_000_000
LIMITS = ("rpm", "tpm", "rpd")


def _bucket(shard: int) -> tuple[dict[str, Any], dict[str, Any]]:
    key = keys.bucket_key("ns", f"e{shard}", "gpt", 0)
    item: dict[str, Any] = {**key, keys.A_SHARD_COUNT: {"N": "1"}}
    for name in LIMITS:
        fields = {"fa": NOW_MS * 1000 + 10**9, "cp": 10**9, "ra": 1000, "rp": 60_000, "tc": 0}
        for field, value in fields.items():
            item[keys.limit_attr(name, field)] = {"N": str(value)}
    return key, item


def take_request(key: dict[str, Any], now_ms: int) -> dict[str, Any]:
    writes = [
        LimitWrite(
            name,
            ADD,
            now_ms * 1000,
            amount=1000,
            bound=NOW_MS * 1000 + 10**12,
            consumed=1000,
            held=((5, 10**9),),
            config=(10**9, 1000, 60_000),
        )
        for name in LIMITS
    ]
    return take_write(TABLE, key, writes, shard_count=1, now_ms=now_ms)


def bench_take(count: int) -> float:
    engine = Engine(clock=lambda: NOW_MS)
    engine.call("create_table", table_def.create_table_params(TABLE))
    keys_ = []
    for shard in range(64):
        key, item = _bucket(shard)
        engine.call("put_item", {"TableName": TABLE, "Item": item})
        keys_.append(key)
    # A few hundred distinct requests, cycled: thousands kept alive would time the
    # garbage collector walking them rather than the engine.
    requests = [
        {**take_request(keys_[i % 64], NOW_MS + i), "ReturnConsumedCapacity": "INDEXES"}
        for i in range(256)
    ]
    call = engine.call
    start = time.process_time()
    for i in range(count):
        call("update_item", requests[i & 255])
    return count / (time.process_time() - start)


def record_mix() -> list[Outcome]:
    """The library's requests over a short schedule, recorded on an engine."""
    from zae_limiter import Limit, RateLimitExceeded, SyncRateLimiter, SyncRepository
    from zae_limiter.sim.engine.client import EngineClient

    clock = [NOW_MS]
    recorder = RecordingClient(EngineClient(Engine(clock=lambda: clock[0])))
    repos = [
        SyncRepository.open(
            name=TABLE,
            create_table=True,
            client=recorder,
            lean=False,
            clock=lambda: clock[0],
            reserve=reserve,
        )
        for reserve in (False, False, True)
    ]
    limiters = [SyncRateLimiter(r) for r in repos]
    limiters[0].create_entity("org")
    for i in range(8):
        limiters[0].create_entity(f"k{i}", parent_id="org", cascade=True)
        limiters[0].set_limits(
            f"k{i}", [Limit.per_minute("rpm", 600), Limit.per_minute("tpm", 60_000)], resource="gpt"
        )
    limiters[0].set_limits("org", [Limit.per_minute("rpm", 3000)], resource="gpt")
    for i in range(600):
        lim = limiters[i % 3]
        try:
            with lim.acquire(f"k{i % 8}", "gpt", {"rpm": 1, "tpm": 50}) as lease:
                lease.adjust(tpm=10)
        except RateLimitExceeded:
            pass
        if i % 50 == 0:
            lim.available(f"k{i % 8}", "gpt")
            lim.get_shards(f"k{i % 8}", "gpt")
        clock[0] += 7
    for repo in repos:
        repo.close()
    return recorder.outcomes


def bench_mix(outcomes: list[Outcome], rounds: int) -> tuple[float, int]:
    total = 0
    elapsed = 0.0
    for _ in range(rounds):
        engine = Engine(clock=lambda: NOW_MS)
        start = time.process_time()
        for recorded in outcomes:
            try:
                engine.call(recorded.op, recorded.params)
                code = None
            except ClientError as error:
                code = error.response["Error"]["Code"]
            if code != recorded.code:
                raise SystemExit(f"{recorded.op}: expected {recorded.code}, got {code}")
        elapsed += time.process_time() - start
        total += len(outcomes)
    return total / elapsed, len(outcomes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000, help="take requests timed")
    parser.add_argument("--rounds", type=int, default=3, help="replays of the recorded mix")
    args = parser.parse_args(argv)
    take = bench_take(args.count)
    print(f"take (bucket UpdateItem, 3 limits): {take:,.0f} ops/s")
    mix, size = bench_mix(record_mix(), args.rounds)
    print(f"mix (the library's own requests, {size} per round): {mix:,.0f} ops/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
