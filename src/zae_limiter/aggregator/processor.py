"""The aggregator's core, pure: a batch of stream records in, the writes to make out.

    plan = process(records, AggregatorConfig(table="zae-limiter"), now_ms)
    plan.writes      # [Write(kind, Call("update_item", params), sequence_numbers, usage)]
    plan.merges      # shard merges to attempt (each a flow: read, then one transaction)
    plan.failed      # sequence numbers of malformed bucket records (poison: retry -> DLQ)

`apply.execute(plan, config, now_ms)` is the flow that performs them; the Lambda handler
and the local poller both run it on the library's sync driver. No boto import here.

Usage: every bucket write's consumption (`tc` new - old, user limits only, `wcu` never),
and every share item's of a global limit (docs/global.md), is added to one snapshot per
(entity, resource, window); each snapshot gets one UpdateItem per batch, fenced per bucket
shard (or share item) on stream sequence numbers, so a batch delivered again (Lambda
retry, a poller restarted from the start of the stream) adds nothing twice.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterable, Mapping, Sequence

from zae_limiter import keys
from zae_limiter.aggregator.plan import (
    DEFAULT_WINDOWS,
    AggregatorConfig,
    MergeCandidate,
    StreamPlan,
    UsageWrite,
    Write,
)
from zae_limiter.aggregator.records import (
    WINDOWS,
    Change,
    MalformedRecord,
    Record,
    parse,
    sequence_number,
    window_starts,
)
from zae_limiter.aggregator.shards import plan_shards
from zae_limiter.flows import Call

log = logging.getLogger("zae_limiter.aggregator")


def parse_batch(records: Iterable[Record], plan: StreamPlan) -> list[Change]:
    """Bucket changes of a batch, in stream order; malformed ones go to `plan.failed`."""
    changes: list[Change] = []
    for record in records:
        try:
            change = parse(record)
        except MalformedRecord as error:
            seq = sequence_number(record) if isinstance(record, Mapping) else None
            if seq is None:
                log.error("dropping a stream record with no sequence number: %s", error)
                plan.skipped += 1
            else:
                log.error("malformed stream record %s: %s", seq, error)
                plan.failed.append(seq)
            continue
        if change is None:
            plan.skipped += 1
        else:
            changes.append(change)
    return changes


def usage_writes(changes: Sequence[Change], config: AggregatorConfig, now_ms: int) -> list[Write]:
    """One fenced UpdateItem per (entity, resource, window, window start) of the batch."""
    grouped: dict[tuple[str, str, str, str, str], list[Change]] = {}
    ends: dict[tuple[str, str, str, str, str], int] = {}
    windows = config.windows
    for change in changes:
        if not change.deltas:
            continue
        starts = window_starts(_time_ms(change, now_ms) // 3_600_000)
        for window in windows:
            start, end_s = starts[window]
            snap = (change.ns, change.entity_id, change.resource, window, start)
            parts = grouped.get(snap)
            if parts is None:
                grouped[snap] = parts = []
                ends[snap] = end_s
            parts.append(change)
    retention_s = config.retention_days * 86400
    writes = []
    for snap, parts in grouped.items():
        usage = UsageWrite(*snap, ends[snap] + retention_s, tuple(parts))
        call = Call("update_item", usage.params(config.table))
        writes.append(Write("usage", call, usage.sequence_numbers, usage))
    return writes


def _time_ms(change: Change, now_ms: int) -> int:
    if change.time_ms is not None:
        return change.time_ms
    if change.new is not None and keys.A_REFILL in change.new:
        return keys.get_n(change.new, keys.A_REFILL)
    return now_ms


def process(records: Iterable[Record], config: AggregatorConfig, now_ms: int) -> StreamPlan:
    """Everything one batch asks for: usage, refills, shard changes. Pure."""
    # A batch allocates many small containers and frees them together, with no cycles:
    # the cyclic collector would only re-walk the (large) event, several times.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _process(records, config, now_ms)
    finally:
        if collecting:
            gc.enable()


def _process(records: Iterable[Record], config: AggregatorConfig, now_ms: int) -> StreamPlan:
    plan = StreamPlan()
    changes = parse_batch(records, plan)
    plan.changes = len(changes)
    plan.writes.extend(usage_writes(changes, config, now_ms))
    # Share items of global limits count as usage; they have no shards to double or merge.
    writes, merges = plan_shards([c for c in changes if c.region is None], config, now_ms)
    plan.writes.extend(writes)
    plan.merges.extend(merges)
    return plan


__all__ = [
    "DEFAULT_WINDOWS",
    "WINDOWS",
    "AggregatorConfig",
    "Change",
    "MergeCandidate",
    "StreamPlan",
    "UsageWrite",
    "Write",
    "parse_batch",
    "process",
    "usage_writes",
]
