"""Record DynamoDB requests, replay them elsewhere, compare what came back.

`RecordingClient` wraps a boto3 client (or an EngineClient) and keeps every call with its
outcome, one call at a time (so the order recorded is the order the server saw, even
when the library runs a round's calls on threads). `replay` sends recorded requests, in
order, to any `call(op, params)`: the engine's, or a boto3 client's through
`boto3_call`. `normalise` removes what legitimately differs between two DynamoDBs
(request ids, consumed capacity, creation times, ARNs and stream labels, the order of
Scan and BatchGetItem results), so two outcomes can be compared with `==`.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from botocore.exceptions import ClientError

from zae_limiter.sim.engine.values import canonical_number

Call = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One request and what came back: a response, or an error's parsed body."""

    op: str
    params: dict[str, Any]
    response: dict[str, Any] | None = None
    error: dict[str, Any] | None = None

    @property
    def code(self) -> str | None:
        return None if self.error is None else str(self.error["Error"]["Code"])


def attempt(call: Call, op: str, params: dict[str, Any]) -> Outcome:
    """Make one call; a ClientError becomes the outcome's `error` (its response dict)."""
    try:
        response = call(op, copy.deepcopy(params))
    except ClientError as error:
        return Outcome(op, params, error=dict(error.response))
    return Outcome(op, params, response=response)


def replay(requests: Iterable[Outcome | tuple[str, dict[str, Any]]], call: Call) -> list[Outcome]:
    """Send each request (an Outcome recorded before, or (op, params)) in order."""
    outcomes = []
    for request in requests:
        op, params = (request.op, request.params) if isinstance(request, Outcome) else request
        outcomes.append(attempt(call, op, params))
    return outcomes


def renamed(
    requests: Iterable[Outcome | tuple[str, dict[str, Any]]], names: dict[str, str]
) -> list[tuple[str, dict[str, Any]]]:
    """The same requests on other tables (`names`: old -> new), e.g. a simulator's
    schedule replayed on a DynamoDB Local that other tests share."""
    out = []
    for request in requests:
        op, params = (request.op, request.params) if isinstance(request, Outcome) else request
        out.append((op, _renamed(copy.deepcopy(params), names)))
    return out


def _renamed(params: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    if isinstance(params.get("TableName"), str):
        params["TableName"] = names.get(params["TableName"], params["TableName"])
    if isinstance(params.get("RequestItems"), dict):
        params["RequestItems"] = {
            names.get(t, t): body for t, body in params["RequestItems"].items()
        }
    for part in params.get("TransactItems") or []:
        for body in part.values():
            _renamed(body, names)
    return params


def boto3_call(client: Any) -> Call:
    """`call(op, params)` over a boto3 (or engine) client."""
    return lambda op, params: getattr(client, op)(**params)


class RecordingClient:
    """A client that records every call (op, params, outcome) and re-raises errors."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.outcomes: list[Outcome] = []
        self._lock = threading.Lock()

    def __getattr__(self, op: str) -> Callable[..., dict[str, Any]]:
        target = getattr(self.client, op)
        if not callable(target) or op.startswith("_") or op in ("exceptions", "meta"):
            return target  # type: ignore[no-any-return]

        def method(**params: Any) -> dict[str, Any]:
            with self._lock:
                kept = copy.deepcopy(params)
                try:
                    response: dict[str, Any] = target(**params)
                except ClientError as error:
                    body = dict(copy.deepcopy(error.response))
                    self.outcomes.append(Outcome(op, kept, error=body))
                    raise
                self.outcomes.append(Outcome(op, kept, response=copy.deepcopy(response)))
                return response

        return method

    @property
    def exceptions(self) -> Any:
        return self.client.exceptions


# ---------------------------------------------------------------- comparison
_TABLE_NOISE = (
    "CreationDateTime",
    "TableArn",
    "TableId",
    "LatestStreamArn",
    "LatestStreamLabel",
    "TableSizeBytes",
    "ItemCount",
    "ProvisionedThroughput",
    "BillingModeSummary",
    "TableClassSummary",
    "DeletionProtectionEnabled",
    "WarmThroughput",
    "OnDemandThroughput",
    "TableThroughputModeSummary",
    "SSEDescription",
    "StreamSpecification",
)
_INDEX_NOISE = (
    "IndexArn",
    "IndexSizeBytes",
    "ItemCount",
    "ProvisionedThroughput",
    "WarmThroughput",
    "OnDemandThroughput",
    "Backfilling",
)


def canonical_numbers(data: Any) -> Any:
    """`data` with every number in DynamoDB's canonical form and every set sorted.
    DynamoDB Local keeps the scale of an arithmetic result ("1.5" + "0.50" is "2.00") and
    of a value SET from a placeholder ("-1.0"); DynamoDB keeps numbers normalised, as the
    engine does. A set's members come in no defined order on AWS."""
    if isinstance(data, list):
        return [canonical_numbers(x) for x in data]
    if not isinstance(data, dict):
        return data
    if len(data) == 1 and isinstance(data.get("N"), str):
        return {"N": canonical_number(data["N"])}
    if len(data) == 1 and isinstance(data.get("NS"), list):
        return {"NS": sorted((canonical_number(x) for x in data["NS"]), key=Decimal)}
    if len(data) == 1 and isinstance(data.get("SS") or data.get("BS"), list):
        kind = "SS" if "SS" in data else "BS"
        return {kind: sorted(data[kind])}  # a set's members come in no particular order
    return {k: canonical_numbers(val) for k, val in data.items()}


def normalise(outcome: Outcome) -> dict[str, Any]:
    """What must be equal between two DynamoDBs for the same request."""
    return canonical_numbers(_normalise(outcome))  # type: ignore[no-any-return]


def _normalise(outcome: Outcome) -> dict[str, Any]:
    if outcome.error is not None:
        body = {
            k: val
            for k, val in outcome.error.items()
            if k not in ("ResponseMetadata", "message", "ConsumedCapacity")
        }
        error = outcome.error["Error"]
        body["Error"] = {"Code": error["Code"], "Message": error.get("Message")}
        return {"op": outcome.op, "error": body}
    assert outcome.response is not None
    body = {
        k: val
        for k, val in outcome.response.items()
        if k not in ("ResponseMetadata", "ConsumedCapacity")
    }
    for name in ("Table", "TableDescription"):
        if name in body:
            body[name] = _table(body[name])
    if outcome.op == "scan" and "Items" in body:
        body["Items"] = sorted(body["Items"], key=_item_order)
    if outcome.op == "batch_get_item":
        body["Responses"] = {
            t: sorted(items, key=_item_order) for t, items in body.get("Responses", {}).items()
        }
    return {"op": outcome.op, "response": body}


def _table(desc: dict[str, Any]) -> dict[str, Any]:
    out = {k: val for k, val in desc.items() if k not in _TABLE_NOISE}
    out["AttributeDefinitions"] = sorted(
        out.get("AttributeDefinitions", []), key=lambda a: a["AttributeName"]
    )
    if "GlobalSecondaryIndexes" in out:
        out["GlobalSecondaryIndexes"] = sorted(
            (
                {k: val for k, val in i.items() if k not in _INDEX_NOISE}
                for i in out["GlobalSecondaryIndexes"]
            ),
            key=lambda i: i["IndexName"],
        )
    return out


def _item_order(item: dict[str, Any]) -> str:
    return repr(sorted(item.items()))


def differences(expected: list[Outcome], actual: list[Outcome]) -> list[str]:
    """Human-readable differences between two runs of the same requests."""
    out = []
    for i, (a, b) in enumerate(zip(expected, actual, strict=True)):
        left, right = normalise(a), normalise(b)
        if left != right:
            out.append(f"#{i} {a.op} {a.params}\n  expected {left}\n  actual   {right}")
    return out
