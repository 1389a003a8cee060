"""Perform a plan: the flow the Lambda handler and the local poller both run.

Returns the sequence numbers of the records whose effect could not be written (and of
malformed records); the caller reports them so that only they, and what follows them in
the stream, are delivered again. A failed condition is an expected outcome, not a
failure: another writer refilled, doubled or merged first, or (for a usage snapshot)
part of the batch was already counted, in which case the rest is written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from zae_limiter import keys
from zae_limiter.aggregator.merge import merge
from zae_limiter.aggregator.plan import AggregatorConfig, MergeCandidate, StreamPlan, Write
from zae_limiter.errors import RateLimiterUnavailable, ZaeLimiterError
from zae_limiter.flows import Call, Flow, lockstep, one
from zae_limiter.flows.scaling import made

log = logging.getLogger("zae_limiter.aggregator")

#: Writes in flight together (one round trip on the driver's small thread pool).
CONCURRENCY = 16
#: A usage snapshot write retried after learning which records were already counted.
MAX_FENCE_ATTEMPTS = 4
#: A raise over a shard a merge drained deletes it first (flows/scaling/made.py); a role
#: without the grant waits for it, and the records are delivered again until then.
DELETE_DENIED = (
    "%s waits: the aggregator's role may not delete the shards a merge drained (%s); "
    "redeploy the stack (`zae-limiter deploy`) to grant dynamodb:DeleteItem, or allow it "
    "in the permissions boundary. The count stays as it is until then: no tokens created"
)


def _usage(write: Write, table: str) -> Flow[list[str]]:
    usage = write.usage
    assert usage is not None
    call = write.call
    for _ in range(MAX_FENCE_ATTEMPTS):
        try:
            result = yield from one(call)
        except ZaeLimiterError as error:
            log.warning("usage write failed: %s", error)
            return list(usage.sequence_numbers)
        if result.ok:
            return []
        remaining = usage.without(keys.usage_fences(result.old or {}))
        if remaining is None:
            return []  # every record of this batch was counted before
        if remaining == usage:
            break  # the fence refused records it has not seen: not ours to fix
        usage = remaining
        call = Call("update_item", usage.params(table))
    return list(usage.sequence_numbers)


def _other(write: Write) -> Flow[list[str]]:
    try:
        yield from one(write.call)
    except ZaeLimiterError as error:
        log.warning("%s write failed: %s", write.kind, error)
        return list(write.sequence_numbers)
    return []


def _raise(write: Write, table: str) -> Flow[list[str]]:
    """A count raise, sent once every shard below the count is made; until then it is
    not due (the records are not delivered again: a later batch proves the heat anew)."""
    assert write.raises is not None
    ns, entity_id, resource, count = write.raises
    try:
        if not (yield from made.all_made(table, ns, entity_id, resource, count, delete=True)):
            return []
    except ZaeLimiterError as error:
        denied = isinstance(error, RateLimiterUnavailable) and error.denied
        log.warning(DELETE_DENIED if denied else "%s read failed: %s", write.kind, error)
        return list(write.sequence_numbers)
    return (yield from _other(write))


def _merge(config: AggregatorConfig, cand: MergeCandidate, now_ms: int) -> Flow[list[str]]:
    try:
        yield from merge(config, cand, now_ms)
    except ZaeLimiterError as error:
        log.warning("merge read failed: %s", error)
    return []  # a merge is an optimisation: never worth re-delivering records for


def execute(plan: StreamPlan, config: AggregatorConfig, now_ms: int) -> Flow[list[str]]:
    """Run every write of `plan`; the sequence numbers to report as failed, in order."""
    flows: list[Flow[list[str]]] = [
        _usage(w, config.table)
        if w.usage is not None
        else _raise(w, config.table)
        if w.raises is not None
        else _other(w)
        for w in plan.writes
    ]
    flows += [_merge(config, m, now_ms) for m in plan.merges]
    failed: set[str] = set(plan.failed)
    for start in range(0, len(flows), CONCURRENCY):
        outcomes = yield from lockstep(flows[start : start + CONCURRENCY])
        failed.update(seq for out in outcomes for seq in out or ())
    return sorted_sequence_numbers(failed)


def sorted_sequence_numbers(seqs: Iterable[str]) -> list[str]:
    return sorted(set(seqs), key=int)
