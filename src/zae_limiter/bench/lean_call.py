"""Client CPU of one lean `UpdateItem`, alone (no limiter around it), sync and async.

`python -m zae_limiter.bench.lean_call [moto|dynamodb-local] [calls]` starts the engine,
then prints CPU ms per call (user + system, `os.times`) for three rounds of each face.
What `wire/` costs without the library's flows and driver: compare builds with it.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import boto3

from zae_limiter.bench.engines import create_table, running
from zae_limiter.wire import lean_client


def _params(table: str) -> dict[str, Any]:
    return {
        "TableName": table,
        "Key": {"PK": {"S": "bench#lean"}, "SK": {"S": "#B"}},
        "UpdateExpression": "ADD #t :one SET #u = :now",
        "ExpressionAttributeNames": {"#t": "tk", "#u": "up"},
        "ExpressionAttributeValues": {":one": {"N": "1"}, ":now": {"N": "123"}},
        "ReturnValues": "ALL_NEW",
        "ReturnConsumedCapacity": "INDEXES",
    }


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def sync_rounds(url: str, table: str, calls: int) -> list[float]:
    make: Any = boto3.session.Session().client
    lean = lean_client(make("dynamodb", endpoint_url=url), asynchronous=False)
    params = _params(table)
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


async def async_rounds(url: str, table: str, calls: int) -> list[float]:
    from aiobotocore.session import get_session

    params = _params(table)
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
    engine = argv[0] if argv else "dynamodb-local"
    calls = int(argv[1]) if len(argv) > 1 else 2000
    with running(engine) as server:
        table = create_table(server.endpoint_url)
        sync = sync_rounds(server.endpoint_url, table, calls)
        asyn = asyncio.run(async_rounds(server.endpoint_url, table, calls))
    for face, rounds in (("sync", sync), ("async", asyn)):
        shown = " ".join(f"{r:.3f}" for r in rounds)
        print(f"{engine} {face}: CPU ms per lean UpdateItem, 3 rounds of {calls}: {shown}")


if __name__ == "__main__":
    main(sys.argv[1:])
