"""Aggregator processor throughput, in stream records per second on one core.

    .venv/bin/python -m tests.bench.bench_processor [--records 50000] [--entities 200]
    .venv/bin/python tests/bench/bench_processor.py

A benchmark, not a test: it prints numbers and asserts nothing. The batch mimics a busy
table: MODIFY records of speculative acquires spread over entities, resources and
shards, with cascade parents, some rollbacks and moto-style double INSERTs.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from zae_limiter import keys
from zae_limiter.aggregator.plan import AggregatorConfig
from zae_limiter.aggregator.processor import process

T0 = 1_795_000_000_000


def bucket(
    entity: str, resource: str, shard: int, count: int, rpm: int, tpm: int
) -> dict[str, Any]:
    return {
        **keys.bucket_key("bench", entity, resource, shard),
        keys.A_ENTITY_ID: keys.s(entity), keys.A_RESOURCE: keys.s(resource),
        keys.A_SHARD_ID: keys.n(shard), keys.A_SHARD_COUNT: keys.n(count),
        keys.A_REFILL: keys.n(T0), keys.A_CASCADE: {"BOOL": False},
        "b_rpm_tk": keys.n(1_000_000 - rpm), "b_rpm_cp": keys.n(1_000_000),
        "b_rpm_ra": keys.n(1_000_000), "b_rpm_rp": keys.n(60_000), "b_rpm_tc": keys.n(rpm),
        "b_tpm_tk": keys.n(10**9 - tpm), "b_tpm_cp": keys.n(10**9),
        "b_tpm_ra": keys.n(10**9), "b_tpm_rp": keys.n(60_000), "b_tpm_tc": keys.n(tpm),
        "b_wcu_cp": keys.n(1000), "ws": keys.n(T0), "wn": keys.n(rpm // 1000),
    }  # fmt: skip


def make_batch(records: int, entities: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    totals: dict[tuple[str, str, int], tuple[int, int]] = {}
    out = []
    for i in range(records):
        entity = f"e{rng.randrange(entities)}"
        resource = rng.choice(("gpt-4", "claude", "embed"))
        shard = rng.randrange(4) if entity.endswith("7") else 0
        count = 4 if entity.endswith("7") else 1
        rpm, tpm = totals.get((entity, resource, shard), (0, 0))
        step = -1000 if rng.random() < 0.02 else 1000
        new = (rpm + step, tpm + step * rng.randrange(1, 500))
        totals[(entity, resource, shard)] = new
        body = {
            "Keys": keys.bucket_key("bench", entity, resource, shard),
            "NewImage": bucket(entity, resource, shard, count, *new),
            "OldImage": bucket(entity, resource, shard, count, rpm, tpm),
            "SequenceNumber": str(10**20 + i),
            "ApproximateCreationDateTime": (T0 + i) / 1000,
        }
        out.append({"eventID": str(i), "eventName": "MODIFY", "dynamodb": body})
    return out


def main(argv: list[str] | None = None) -> float:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--entities", type=int, default=200)
    parser.add_argument("--batch", type=int, default=1000, help="records per Lambda batch")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    records = make_batch(args.records, args.entities)
    config = AggregatorConfig(table="bench")
    best = 0.0
    writes = 0
    for _ in range(args.repeat):
        started = time.perf_counter()
        writes = 0
        for start in range(0, len(records), args.batch):
            plan = process(records[start : start + args.batch], config, T0 + 60_000)
            writes += len(plan.writes)
        best = max(best, len(records) / (time.perf_counter() - started))
    print(
        f"processor: {best:,.0f} records/s on one core "
        f"({len(records):,} records in batches of {args.batch}, {writes:,} writes planned)"
    )
    return best


if __name__ == "__main__":
    main()
