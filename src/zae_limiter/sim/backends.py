"""What a schedule runs against: the in-memory engine (the search), or a real endpoint
through boto3 (DynamoDB Local: the same schedule, to compare answers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zae_limiter import keys
from zae_limiter.sim.regions import Replication
from zae_limiter.sim.run import TABLE, Backend


def engine_backend(table: str = TABLE, regions: tuple[str, ...] = (), lag_ms: int = 0) -> Backend:
    """A fresh in-memory engine (its schedule's table named `table`); with `regions`, one
    per region, replicated after `lag_ms` (the world may draw its own lag), the first
    region's serving the setup, the checker's reads and the aggregator."""
    from zae_limiter.sim.engine import Engine

    now = [0]
    engines = {region: Engine(clock=lambda: now[0], region=region) for region in regions}
    engine = engines[regions[0]] if regions else Engine(clock=lambda: now[0])

    def tell_time(ms: int) -> None:
        now[0] = ms

    backend = Backend(engine.call, _peek(engine, table), lambda: engine.records(table), tell_time)
    if regions:
        backend.engines = {region: e.call for region, e in engines.items()}
        backend.peeks = {region: _peek(e, table) for region, e in engines.items()}
        backend.replication = Replication(engines, table, lag_ms)
    return backend


def _peek(engine: Any, table: str) -> Callable[[str], Any]:
    def peek(pk: str) -> Any:
        return engine.get(table, {keys.PK: {"S": pk}, keys.SK: {"S": keys.SK_STATE}})

    return peek


def regions_backend(regions: tuple[str, ...], table: str = TABLE) -> Callable[[], Backend]:
    """A factory of `engine_backend`s with these regions."""
    return lambda: engine_backend(table, regions)


def client_backend(client: Any, table: str = TABLE) -> Callable[[], Backend]:
    """A factory of backends on a boto3 DynamoDB client (a real endpoint): each schedule
    gets a fresh table first (the schedules create theirs)."""

    def factory() -> Backend:
        try:
            client.delete_table(TableName=table)
            client.get_waiter("table_not_exists").wait(TableName=table)
        except client.exceptions.ResourceNotFoundException:
            pass

        def call(op: str, params: dict[str, Any]) -> Any:
            return getattr(client, op)(**params)

        def peek(pk: str) -> Any:
            # Not through `call`: the checker's own reads are not part of the schedule.
            key = {keys.PK: {"S": pk}, keys.SK: {"S": keys.SK_STATE}}
            return client.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")

        return Backend(call, peek)

    return factory
