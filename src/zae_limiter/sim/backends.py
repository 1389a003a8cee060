"""What a schedule runs against: the in-memory engine (the search), or a real endpoint
through boto3 (DynamoDB Local: the same schedule, to compare answers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from zae_limiter import keys
from zae_limiter.sim.run import TABLE, Backend


def engine_backend(table: str = TABLE) -> Backend:
    """A fresh in-memory engine (its schedule's table named `table`)."""
    from zae_limiter.sim.engine import Engine

    engine = Engine(clock=lambda: 0)

    def peek(pk: str) -> Any:
        return engine.get(table, {keys.PK: {"S": pk}, keys.SK: {"S": keys.SK_STATE}})

    return Backend(engine.call, peek)


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
