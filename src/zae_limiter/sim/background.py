"""What runs beside the clients in a schedule: the aggregator on the table's stream, and
an operator who deletes an entity.

Both run as threads of their own process (`SimClient`s with no workload), so their
requests are delivered one at a time with the faults every request may meet, and a
crash or a pause can strike them like any client.

- The aggregator (`aggregator.processor.process` + `aggregator.apply.execute`, the code
  the Lambda runs) takes a batch from the start of the stream records it has not yet
  processed, plans its usage snapshots, doublings, count propagation and merges, and
  writes them. A batch whose writes failed is delivered again from its first failed
  record, as Lambda does. Merges wait `MERGE_QUIET_MS` of quiet, not the deployed ten
  minutes, so that schedules of a minute or two halve entities they doubled.
- The operator deletes a leaf entity (`Operations.delete_entity`): its record, configs
  and bucket shards go, while clients keep acquiring (and may hold reserves of it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from zae_limiter.aggregator.apply import execute
from zae_limiter.aggregator.plan import AggregatorConfig
from zae_limiter.aggregator.processor import process
from zae_limiter.flows.context import RepoState
from zae_limiter.operations import Operations
from zae_limiter.sim.client import Program, Run
from zae_limiter.sim.spec import ClientSpec

#: How long every shard of an entity must stay quiet before the aggregator merges them.
MERGE_QUIET_MS = 5_000

AGGREGATOR = ClientSpec("aggregator", False, False, False, 0, 1000, 1, (), False)
OPERATOR = ClientSpec("operator", False, False, False, 0, 1000, 1, (), False)


class Admin:
    """What `Operations` needs of a repository: a state, a principal, a clock."""

    def __init__(self, state: RepoState, clock: Callable[[], int]) -> None:
        self.state = state
        self.principal = "sim"
        self.audit_retention_days: int | None = None
        self._clock = clock

    def now_ms(self) -> int:
        return self._clock()

    def get_reserve_stats(self) -> Any:
        return None


def aggregator_config(table: str) -> AggregatorConfig:
    return AggregatorConfig(table=table, merge_quiet_ms=MERGE_QUIET_MS)


class Stream:
    """The aggregator's place in the table's stream: records up to `done` are processed."""

    def __init__(self, records: Callable[[], Sequence[Any]]) -> None:
        self.records = records
        self.done = 0

    def pending(self) -> list[Any]:
        return list(self.records()[self.done :])

    def processed(self, batch: Sequence[Any], failed: Sequence[str]) -> None:
        """After a batch: the next one starts at its first failed record, or after it."""
        if not failed:
            self.done += len(batch)
            return
        first = min(failed)
        for i, record in enumerate(batch):
            if record["dynamodb"]["SequenceNumber"] >= first:
                self.done += i
                return
        self.done += len(batch)


def aggregator_program(
    stream: Stream, batch: Sequence[Any], config: AggregatorConfig, now_ms: int
) -> Program:
    """One Lambda invocation on `batch`."""
    plan = process(batch, config, now_ms)
    sequence = [r["dynamodb"]["SequenceNumber"] for r in batch]
    try:
        failed = yield Run(execute(plan, config, now_ms), cleanup=True, what="aggregator")
    except Exception:  # the invocation failed as a whole: the batch comes again
        failed = sequence[:1]
    stream.processed(batch, failed or [])


def delete_program(ops: Operations, entity: str, on_done: Callable[[bool], None]) -> Program:
    """`zae-limiter entity delete`: the operator's call, refused or failed as it may be."""
    try:
        yield Run(ops.delete_entity(entity), cleanup=True, what=f"delete {entity}")
    except Exception:
        on_done(False)
        return
    on_done(True)
