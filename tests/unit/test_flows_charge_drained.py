"""A lease's end charged to a shard a merge drained since its take (fault simulator seed
4098): the charge's first write, planned from the take's image (2 shards), fails its
condition, and ALL_OLD shows the shard retired (its count, 1, at or below its id) and
refilled. Its share went to shard 0 with the merge, so the charge goes there; charged to
the drained item it would take from tokens the merge had already moved."""

from __future__ import annotations

from typing import Any

from tests.unit._flowkit import LIMITS, T0, drive, failed, item, make_state, ok
from zae_limiter.flows.write.charge import charge_all
from zae_limiter.flows.write.levels import Taken


def _shards(log: list[Any]) -> list[str]:
    """The shard each write went to, in order (the first writes go out together)."""
    calls = [c for entry in log for c in (entry if isinstance(entry, tuple) else (entry,))]
    return [c.params["Key"]["PK"]["S"].rpartition("#")[2] for c in calls]


def test_a_charge_on_a_shard_a_merge_drained_goes_to_its_receiver() -> None:
    state = make_state()
    before = item(T0 - 60_000, {"rpm": 4000, "tpm": 400_000}, shard_count=2)
    taken = Taken("e1", "gpt", 1, {"rpm": 1000}, LIMITS, after=before, at_ms=T0 - 60_000)
    drained = item(T0 - 1_000, {"rpm": 9000, "tpm": 900_000})  # count 1, refilled
    _done, log = drive(charge_all(state, [(taken, {"rpm": 4000})], T0), [[failed(drained)], ok()])
    assert _shards(log) == ["1", "0"], "charged to the receiver, not the drained item"


def test_a_charge_on_a_live_shard_stays_there() -> None:
    state = make_state()
    before = item(T0 - 60_000, {"rpm": 4000, "tpm": 400_000}, shard_count=2)
    taken = Taken("e1", "gpt", 1, {"rpm": 1000}, LIMITS, after=before, at_ms=T0 - 60_000)
    moved = item(T0 - 1_000, {"rpm": 3000, "tpm": 300_000}, shard_count=2)
    _done, log = drive(charge_all(state, [(taken, {"rpm": 4000})], T0), [[failed(moved)], ok()])
    assert _shards(log) == ["1", "1"]
