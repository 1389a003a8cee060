"""Reading many items at once: BatchGetItem in chunks of 100, unprocessed keys retried."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from zae_limiter import keys
from zae_limiter.flows import Call, Flow, one, pause
from zae_limiter.flows.backoff import backoff_ms
from zae_limiter.flows.context import RepoState


def batch_get(state: RepoState, wanted: Sequence[keys.Item]) -> Flow[dict[tuple[str, str], Any]]:
    """Items by `keys.key_id` (PK, SK); absent keys are absent from the result.
    Eventually consistent."""
    found: dict[tuple[str, str], Any] = {}
    unique = list({keys.key_id(k): k for k in wanted}.values())
    for start in range(0, len(unique), 100):
        request: dict[str, Any] = {state.table: {"Keys": unique[start : start + 100]}}
        attempt = 0
        while request:
            result = yield from one(Call("batch_get_item", {"RequestItems": request}))
            for item in result.response.get("Responses", {}).get(state.table, []):
                found[keys.key_id(item)] = item
            request = result.response.get("UnprocessedKeys") or {}
            if request:
                attempt += 1
                yield from pause(backoff_ms(attempt, None, 50, 1000))
    return found
