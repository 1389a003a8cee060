"""Modelled capacity: DynamoDB's billing rules applied to each call, for engines that do
not report real consumed capacity (moto reports made-up numbers).

The rules are those DynamoDB Local reports with `ReturnConsumedCapacity=INDEXES`:
- a write costs 1 WCU per KB of item on the table, plus 1 WCU per global secondary index
  whose key the write sets (a new bucket sets GSI2, GSI3 and GSI4: 4 WCU in all); an
  update that changes no index key costs 1 WCU; a failed conditional write costs 1 WCU
  (the capacity meter counts it);
- a read costs 0.5 RCU per 4 KB of each item returned (1 RCU when strongly consistent);
  a key that is not found costs nothing.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from zae_limiter.capacity import METERED_OPS, WRITE_OPS
from zae_limiter.table import INDEXES

KB = 1024
READ_UNIT = 4 * KB


def item_size(item: Mapping[str, Any]) -> int:
    """About the bytes DynamoDB bills for an item: names plus values."""
    return sum(len(name) + len(json.dumps(value)) for name, value in item.items())


def write_units(op: str, params: Mapping[str, Any]) -> float:
    item = params.get("Item") or {}
    units = float(max(1, math.ceil(item_size(item) / KB)))
    if op == "put_item":
        return units + sum(1 for index in INDEXES if index.partition_key in item)
    names = " ".join(
        [
            str(params.get("UpdateExpression", "")),
            *params.get("ExpressionAttributeNames", {}).values(),
        ]
    )
    return units + sum(1 for index in INDEXES if index.partition_key in names)


def read_units(items: list[Mapping[str, Any]], consistent: bool) -> float:
    per_unit = 1.0 if consistent else 0.5
    return sum(per_unit * math.ceil(item_size(i) / READ_UNIT) for i in items)


def returned_items(op: str, response: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    if op == "get_item":
        return [response["Item"]] if response.get("Item") else []
    if op == "batch_get_item":
        return [i for items in response.get("Responses", {}).values() for i in items]
    return list(response.get("Items") or [])


def modelled_units(op: str, params: Mapping[str, Any], response: Mapping[str, Any]) -> float:
    if op in WRITE_OPS:
        return write_units(op, params)
    consistent = bool(params.get("ConsistentRead"))
    return read_units(returned_items(op, response), consistent)


class ModelledClient:
    """Wraps a boto3 DynamoDB client; metered calls report modelled capacity."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if name not in METERED_OPS:
            return attr
        return self._metered(name, attr)

    @staticmethod
    def _metered(op: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def metered(**params: Any) -> Any:
            response = call(**params)
            response["ConsumedCapacity"] = {"CapacityUnits": modelled_units(op, params, response)}
            return response

        return metered
