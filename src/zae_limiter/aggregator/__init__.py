"""The aggregator: DynamoDB stream records in, usage snapshots and shard upkeep out.

`processor` is pure (records -> a plan of writes); `apply.execute` is the flow that
performs a plan; `handler.handler` is the Lambda entry point; `poller.StreamPoller` reads
a local engine's stream and runs the same code (`zae-limiter aggregator run`).
"""

from zae_limiter.aggregator.plan import (
    AggregatorConfig,
    MergeCandidate,
    StreamPlan,
    UsageWrite,
    Write,
)
from zae_limiter.aggregator.processor import process

__all__ = ["AggregatorConfig", "MergeCandidate", "StreamPlan", "UsageWrite", "Write", "process"]
