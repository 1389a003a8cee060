"""The real capacity of every acquire path on DynamoDB Local, indexes included.

Every call carries `ReturnConsumedCapacity=INDEXES`; DynamoDB Local reports the table's
and each index's units. A bucket item sits only in KEYS_ONLY indexes (GSI2/3/4) and no
hot-path write changes an index key, so an update costs 1.0 WCU with no index units;
creating a bucket writes its three index entries once (4.0 WCU in all).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from benchmarks import paths
from tests._servers import EngineEndpoint, unique_name
from zae_limiter.capacity import Measurement
from zae_limiter.table import create_table_params

pytestmark = pytest.mark.engine


class Recording:
    """A boto3 client that keeps every ConsumedCapacity DynamoDB reported."""

    def __init__(self, client: Any, seen: list[tuple[str, dict[str, Any]]]) -> None:
        self._client = client
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr) or name.startswith("_") or name == "get_waiter":
            return attr

        def call(**params: Any) -> Any:
            response = attr(**params)
            consumed = response.get("ConsumedCapacity")
            for entry in consumed if isinstance(consumed, list) else [consumed] if consumed else []:
                self._seen.append((name, entry))
            return response

        return call


@pytest.fixture(scope="module")
def bench(dynamodb_local: EngineEndpoint) -> Iterator[tuple[paths.Bench, list[Any]]]:
    client = dynamodb_local.client()
    table = unique_name("capacity")
    client.create_table(**create_table_params(table))
    client.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 1})
    seen: list[tuple[str, dict[str, Any]]] = []
    made = paths.Bench(
        table,
        dynamodb_local.url,
        lambda: Recording(boto3.client("dynamodb", **dynamodb_local.client_kwargs()), seen),
    )
    yield made, seen
    made.close()
    client.delete_table(TableName=table)


def measure(bench: tuple[paths.Bench, list[Any]], scenario: str) -> tuple[Measurement, list[Any]]:
    made, seen = bench
    seen.clear()
    m = paths.run_scenario(made, scenario)
    return m, seen[-len(m.calls) :] if m.calls else []


# scenario: (round trips, RCU, WCU incl. indexes)
REAL = {
    "speculative_success": (1, 0.0, 1.0),
    "speculative_cascade": (1, 0.0, 2.0),
    "rejection_known_locally": (0, 0.0, 0.0),
    "rejection_failed_condition": (1, 0.0, 1.0),
    "refill_helps": (1, 0.0, 1.0),
    "read_then_write": (2, 1.0, 1.0),
    "first_acquire": (2, 1.0, 4.0),
    "adjust_one_entity": (2, 0.0, 2.0),
    "rollback_cascade": (2, 0.0, 4.0),
    "shard_retry": (2, 0.0, 2.0),
}


@pytest.mark.parametrize("scenario", list(REAL))
def test_path_capacity(bench: tuple[paths.Bench, list[Any]], scenario: str) -> None:
    m, _ = measure(bench, scenario)
    assert (m.round_trips, m.rcu, m.wcu) == REAL[scenario], m.ops


def test_hot_path_updates_write_no_index(bench: tuple[paths.Bench, list[Any]]) -> None:
    m, reported = measure(bench, "speculative_cascade")
    assert m.ops == ["update_item", "update_item"]
    for _op, entry in reported:
        assert entry["CapacityUnits"] == 1.0
        assert entry["Table"]["CapacityUnits"] == 1.0
        assert not any(i["CapacityUnits"] for i in entry.get("GlobalSecondaryIndexes", {}).values())


def test_creating_a_bucket_writes_its_three_keys_only_indexes_once(
    bench: tuple[paths.Bench, list[Any]],
) -> None:
    _, reported = measure(bench, "first_acquire")
    put = [entry for op, entry in reported if op == "put_item"]
    assert len(put) == 1
    indexes = {name: i["CapacityUnits"] for name, i in put[0]["GlobalSecondaryIndexes"].items()}
    assert indexes == {"GSI2": 1.0, "GSI3": 1.0, "GSI4": 1.0}
    assert put[0]["Table"]["CapacityUnits"] == 1.0


def test_a_failed_condition_is_counted_as_one_write(bench: tuple[paths.Bench, list[Any]]) -> None:
    m, _ = measure(bench, "rejection_failed_condition")
    assert [(c.op, c.ok, c.wcu) for c in m.calls] == [("update_item", False, 1.0)]
