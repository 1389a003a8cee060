"""A reset that loses to an acquire plans again from the item DynamoDB returns with the
cancelled transaction (ALL_OLD), on DynamoDB Local: no read between the two attempts."""

from __future__ import annotations

from typing import Any

import pytest

from tests._servers import EngineEndpoint, unique_name
from zae_limiter import Limit, SyncRateLimiter, SyncRepository
from zae_limiter.flows.offpath import controls

pytestmark = pytest.mark.engine

LIMIT = Limit.custom("rpm", 100, 1, 366 * 86400 - 1)


def test_a_lost_reset_plans_again_from_all_old(
    dynamodb_local: EngineEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique_name()
    mine = SyncRepository.open(name=name, endpoint_url=dynamodb_local.url, create_table=True,
                               reserve=False, principal="ops")  # fmt: skip
    theirs = SyncRepository.open(name=name, endpoint_url=dynamodb_local.url, reserve=False)
    ops, other = SyncRateLimiter(mine), SyncRateLimiter(theirs)
    with ops.acquire("k", "api", {"rpm": 40}, limits=[LIMIT]):
        pass
    read_items, again = controls.read_items, controls._again
    seen: list[Any] = []

    def read_then_take(*args: Any) -> Any:
        items = yield from read_items(*args)
        with other.acquire("k", "api", {"rpm": 25}, limits=[LIMIT]):
            pass
        return items

    def watched(state: Any, items: Any, result: Any) -> Any:
        seen.append(result.response.get("CancellationReasons"))
        fresh = yield from again(state, items, result)
        return fresh

    monkeypatch.setattr(controls, "read_items", read_then_take)
    monkeypatch.setattr(controls, "_again", watched)
    calls: list[str] = []
    mine.client.meta.events.register(
        "before-call.dynamodb", lambda model, **_: calls.append(model.name)
    )
    assert ops.reset_bucket("k", "api") == 1
    [reasons] = seen
    assert reasons[0]["Code"] == "ConditionalCheckFailed" and reasons[0]["Item"]
    assert calls.count("TransactWriteItems") == 2
    assert "GetItem" not in calls  # planned from ALL_OLD, not read again
    assert ops.get_audit_events("k")[-1].before == {"tokens": {"rpm": 35}}
    assert ops.available("k", "api", limits=[LIMIT]) == {"rpm": 100}
    mine.close()
    theirs.close()
