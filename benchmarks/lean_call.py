"""Client CPU of one lean `UpdateItem`, alone (no limiter around it), sync and async.

`python -m benchmarks.lean_call [moto|dynamodb-local] [calls]` starts the engine,
then prints CPU ms per call (user + system, `os.times`) for three rounds of each face.
What `wire/` costs without the library's flows and driver: compare builds with it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from typing import Any

import boto3

from benchmarks.engines import DYNAMODB_LOCAL, MOTO, create_table, running
from zae_limiter import Limit, SyncRateLimiter, SyncRepository, keys
from zae_limiter.flows.write.levels import stored_config
from zae_limiter.wire import lean_client

LIMIT = Limit.per_second("rps", 1_000_000)  # never binds: every call succeeds
ENTITY, RESOURCE = "lean-call", "bench"


def _params(url: str, table: str) -> dict[str, Any]:
    """The hot path's own UpdateItem (a speculative take of one unit), on a bucket that
    one acquire created first."""
    with SyncRepository.open(name=table, endpoint_url=url, reserve=False) as repo:
        with SyncRateLimiter(repo).acquire(ENTITY, RESOURCE, {LIMIT.name: 1}, limits=[LIMIT]):
            pass
        key = keys.bucket_key(repo.state.namespace, ENTITY, RESOURCE, 0)
    cfg = stored_config(LIMIT)
    # The bucket is short of full as of half a second before the acquire: the same ADD
    # take then succeeds call after call (a full second of capacity is a million calls).
    now_ms = int(time.time() * 1000) - 500
    now_ra = now_ms * cfg.refill_amount_milli
    take = keys.LimitWrite(
        LIMIT.name,
        keys.ADD,
        now_ra,
        amount=1000 * cfg.unit(),
        bound=now_ra + (cfg.room() - 1000) * cfg.unit(),
        consumed=1000,
        held=((now_ms // keys.RESERVE_EPOCH_MS, 0), (now_ms // keys.RESERVE_EPOCH_MS - 1, 0)),
        config=(cfg.capacity_milli, cfg.refill_amount_milli, cfg.refill_period_ms),
    )
    params = keys.take_write(table, key, [take], shard_count=1, now_ms=now_ms)
    return {**params, "ReturnConsumedCapacity": "INDEXES"}


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def sync_rounds(url: str, params: dict[str, Any], calls: int) -> list[float]:
    make: Any = boto3.session.Session().client
    lean = lean_client(make("dynamodb", endpoint_url=url), asynchronous=False)
    for _ in range(100):
        lean.update_item(**params)
    rounds = []
    for _ in range(3):
        start = _cpu()
        for _ in range(calls):
            lean.update_item(**params)
        rounds.append(1000 * (_cpu() - start) / calls)
    lean.close()
    return rounds


async def async_rounds(url: str, params: dict[str, Any], calls: int) -> list[float]:
    from aiobotocore.session import get_session

    async with get_session().create_client("dynamodb", endpoint_url=url) as client:
        lean = lean_client(client, asynchronous=True)
        for _ in range(100):
            await lean.update_item(**params)
        rounds = []
        for _ in range(3):
            start = _cpu()
            for _ in range(calls):
                await lean.update_item(**params)
            rounds.append(1000 * (_cpu() - start) / calls)
        lean.close()
    return rounds


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.lean_call",
        description="Client CPU of one lean UpdateItem, alone, sync and async.",
    )
    parser.add_argument("engine", nargs="?", default=DYNAMODB_LOCAL, choices=(MOTO, DYNAMODB_LOCAL))
    parser.add_argument("calls", nargs="?", default=2000, type=int, help="calls per round")
    args = parser.parse_args(argv)
    engine, calls = args.engine, args.calls
    if calls < 1:
        parser.error("calls must be at least 1")
    with running(engine) as server:
        url = server.endpoint_url
        params = _params(url, create_table(url))
        sync = sync_rounds(url, params, calls)
        asyn = asyncio.run(async_rounds(url, params, calls))
    for face, rounds in (("sync", sync), ("async", asyn)):
        shown = " ".join(f"{r:.3f}" for r in rounds)
        print(f"{engine} {face}: CPU ms per lean UpdateItem, 3 rounds of {calls}: {shown}")


if __name__ == "__main__":
    main(sys.argv[1:])
