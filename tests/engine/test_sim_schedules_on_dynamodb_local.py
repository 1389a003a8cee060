"""The simulator's schedules on DynamoDB Local: the same seed run on the in-memory engine
and on AWS's own engine gets the same answer to every request, so what the simulator
finds (and what it passes) holds on DynamoDB too (docs/simulator.md).

Each seed is a whole schedule: several clients, faults, reserves, cascade, a doubling.
The requests are recorded as each engine answers them and compared one by one (numbers
canonical, metadata and consumed capacity aside); the schedules' choices, and so every
request, follow from the answers, so equal answers mean one schedule run twice.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from tests._servers import EngineEndpoint, unique_name
from zae_limiter.sim.backends import client_backend, engine_backend
from zae_limiter.sim.engine.replay import Outcome, differences
from zae_limiter.sim.run import Backend, run_schedule

pytestmark = pytest.mark.engine

TABLE_OPS = ("create_table", "describe_table")
#: Seeds with every fault kind, a busy world with reserves, cascade and a doubling.
SEEDS = (3, 11, 29)


def _recorded(factory: Callable[[], Backend], log: list[Outcome]) -> Callable[[], Backend]:
    def make() -> Backend:
        backend = factory()

        def call(op: str, params: dict[str, Any]) -> Any:
            try:
                response = backend.call(op, params)
            except ClientError as error:
                log.append(Outcome(op, params, error=dict(error.response)))
                raise
            log.append(Outcome(op, params, response=response))
            return response

        return Backend(call, backend.peek)

    return make


@pytest.mark.parametrize("seed", SEEDS)
def test_a_schedule_gets_the_same_answers_on_dynamodb_local(
    dynamodb_local: EngineEndpoint, seed: int
) -> None:
    logging.getLogger("zae_limiter").setLevel(logging.CRITICAL)
    client = boto3.client("dynamodb", **dynamodb_local.client_kwargs())
    table = unique_name("sim")
    on_local: list[Outcome] = []
    on_engine: list[Outcome] = []
    local = run_schedule(seed, _recorded(client_backend(client, table), on_local), table=table)
    same_name = functools.partial(engine_backend, table)
    engine = run_schedule(seed, _recorded(same_name, on_engine), table=table)
    assert local.drawn == engine.drawn
    assert [o.op for o in on_local] == [o.op for o in on_engine]
    # Every answer but the table's own description (its name, ARNs, creation time).
    data = [i for i, o in enumerate(on_engine) if o.op not in TABLE_OPS]
    found = differences([on_engine[i] for i in data], [on_local[i] for i in data])
    assert found == [], "\n".join(found[:3])
    assert not local.failed and not engine.failed
