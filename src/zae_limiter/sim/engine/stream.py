"""Stream records, in the shape Lambda hands them to the aggregator.

One record per change, in commit order, with an increasing `SequenceNumber` (fixed-width
decimal, so text and numeric order agree, as DynamoDB Local numbers them). A write that
changes nothing in an item writes no stream record (an UpdateItem that ADDs 0, a PutItem
of the identical item): DynamoDB's Streams guide says so, and DynamoDB Local's stream
does the same (tests/engine/test_sim_conformance.py compares the two streams).
`ApproximateCreationDateTime` is whole epoch seconds, as DynamoDB rounds it; the injected
clock's exact milliseconds are kept under the non-AWS key `simTimeMs`.
"""

from __future__ import annotations

from typing import Any

from zae_limiter.sim.engine.values import Value

StreamRecord = dict[str, Any]
Item = dict[str, Value]
#: One change as the engine keeps it: (sequence, clock ms, keys, old, new, size).
Change = tuple[int, int, Item, Item | None, Item | None, int]


def record(change: Change, view: str, stream_arn: str) -> StreamRecord:
    """The Lambda-shaped record of one change. Images share the stored value dicts
    (never changed in place by the engine), so readers must treat them as read-only."""
    sequence, now_ms, keys, old, new, size = change
    event = "INSERT" if old is None else "REMOVE" if new is None else "MODIFY"
    body: dict[str, Any] = {
        "ApproximateCreationDateTime": now_ms // 1000,
        "Keys": dict(keys),
        "SequenceNumber": f"{sequence:021d}",
        "SizeBytes": size,
        "StreamViewType": view,
    }
    if new is not None and view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES"):
        body["NewImage"] = dict(new)
    if old is not None and view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES"):
        body["OldImage"] = dict(old)
    return {
        "eventID": f"{sequence:021d}",
        "eventName": event,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "sim",
        "dynamodb": body,
        "eventSourceARN": stream_arn,
        "simTimeMs": now_ms,
    }
