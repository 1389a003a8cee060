"""Recording, replaying and comparing requests (the conformance tests' tools)."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from zae_limiter import table as table_def
from zae_limiter.sim.engine import Engine, EngineClient
from zae_limiter.sim.engine.replay import (
    Outcome,
    RecordingClient,
    differences,
    normalise,
    renamed,
    replay,
)

KEY = {"PK": {"S": "a"}, "SK": {"S": "b"}}


def test_a_recording_keeps_requests_and_outcomes_and_replays_alike() -> None:
    recorder = RecordingClient(EngineClient(Engine(clock=lambda: 0)))
    recorder.create_table(**table_def.create_table_params("t"))
    params: dict[str, Any] = {"TableName": "t", "Item": {**KEY, "v": {"N": "1"}}}
    recorder.put_item(**params)
    params["Item"]["v"]["N"] = "2"  # the caller's later change is not in the recording
    with pytest.raises(ClientError):
        recorder.put_item(TableName="t", Item=KEY, ConditionExpression="attribute_not_exists(PK)")
    recorded = recorder.outcomes
    assert [o.op for o in recorded] == ["create_table", "put_item", "put_item"]
    assert recorded[1].params["Item"]["v"] == {"N": "1"}
    assert recorded[2].code == "ConditionalCheckFailedException"
    again = replay(recorded, Engine(clock=lambda: 5_000).call)
    assert differences(recorded, again) == []


def test_normalise_drops_what_legitimately_differs() -> None:
    one = Outcome(
        "scan",
        {},
        response={
            "Items": [{"a": {"N": "2.00"}}, {"a": {"N": "1"}}],
            "ResponseMetadata": {"RequestId": "x"},
            "ConsumedCapacity": {"CapacityUnits": 1},
        },
    )
    two = Outcome("scan", {}, response={"Items": [{"a": {"N": "1"}}, {"a": {"N": "2"}}]})
    assert normalise(one) == normalise(two)
    three = Outcome("scan", {}, response={"Items": [{"a": {"N": "3"}}]})
    assert differences([one], [three])


def test_renamed_moves_every_table_reference() -> None:
    requests = [
        ("put_item", {"TableName": "t", "Item": KEY}),
        ("batch_get_item", {"RequestItems": {"t": {"Keys": [KEY]}}}),
        ("transact_write_items", {"TransactItems": [{"Put": {"TableName": "t", "Item": KEY}}]}),
    ]
    moved = renamed(requests, {"t": "u"})
    assert moved[0][1]["TableName"] == "u"
    assert list(moved[1][1]["RequestItems"]) == ["u"]
    assert moved[2][1]["TransactItems"][0]["Put"]["TableName"] == "u"
    assert requests[0][1]["TableName"] == "t"


def test_the_same_requests_give_the_same_everything() -> None:
    """Determinism: a recorded run replayed on two fresh engines answers byte for byte
    alike, with the same stream (sequence numbers and times included)."""
    from tests.sim.library_schedule import Clock, run_schedule

    clock = Clock()
    recorder = RecordingClient(EngineClient(Engine(clock=clock)))
    run_schedule(recorder, clock, with_doubling=False)
    runs = []
    for _ in range(2):
        engine = Engine(clock=lambda: 1_800_000_000_000)
        outcomes = replay(recorder.outcomes, engine.call)
        runs.append((outcomes, engine.records("sim-conformance"), engine.items("sim-conformance")))
    assert runs[0] == runs[1]
    assert differences(recorder.outcomes, runs[0][0]) == []
