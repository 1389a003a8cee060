"""What a batch tells the aggregator to do to bucket shards. Pure planning.

Per (entity, resource) seen in the batch:

- write pressure: the highest `keys.write_rate` of any image in the batch (each bucket
  write carries its partition's writes in the current window), as a share of the
  partition's write limit (`b_wcu_cp`, 1000/s by default);
- doubling: when an image's window proves its partition past `shard_up` (80%) by the
  clients' own rule (`flows.scaling.evidence.partition_bound`: at least a second of writes, two
  Poisson deviations past the threshold, so a low write limit's lucky burst is not a
  trend) and below `max_shard_count`, `shard_count` is doubled on shard 0 with a
  conditional write (`shard_count = :old`, spaced by `sd`);
- propagation: when shard 0's count rose in the batch, or a shard shows a lower count
  than shard 0, existing shards get the new count (never lowered by this write);
- quiet marks and merging: while every image stays under `shard_down` (20%), shard 0
  carries `qs` (quiet since); once both `qs` and the last count change (`sd`) are older
  than `merge_quiet_ms`, a merge is nominated (see `merge.py`). One busy image clears
  `qs`, so the period restarts.

There is no proactive refill: a bucket stores when it will be full, and time alone
refills it (bucket.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zae_limiter import keys
from zae_limiter.aggregator.plan import AggregatorConfig, MergeCandidate, Write
from zae_limiter.aggregator.records import Change
from zae_limiter.flows import Call
from zae_limiter.flows.context import DEFAULT_PARTITION_WCU
from zae_limiter.flows.scaling.evidence import (
    EVIDENCE_SIGMAS,
    evidence_since,
    partition_bound,
    window_seen,
)

Group = tuple[str, str, str]


def plan_shards(
    changes: Sequence[Change], config: AggregatorConfig, now_ms: int
) -> tuple[list[Write], list[MergeCandidate]]:
    by_group: dict[Group, dict[int, list[Change]]] = {}
    for change in changes:
        by_group.setdefault(change.group, {}).setdefault(change.shard_id, []).append(change)
    writes: list[Write] = []
    merges: list[MergeCandidate] = []
    for group, shards in by_group.items():
        for seen in shards.values():
            seen.sort(key=lambda c: c.seq)
        more, merge = plan_group(group, shards, config, now_ms)
        writes.extend(more)
        if merge is not None:
            merges.append(merge)
    return writes, merges


def pressure(shards: Mapping[int, Sequence[Change]], now_ms: int) -> float:
    """The highest write rate any image of the group showed, as a share of its limit."""
    worst = 0.0
    for seen in shards.values():
        for change in seen:
            if change.new is None:
                continue
            at = change.time_ms if change.time_ms is not None else now_ms
            rate = keys.write_rate(change.new, at) / keys.partition_wcu(change.new)
            worst = max(worst, rate)
    return worst


def proven_hot(shards: Mapping[int, Sequence[Change]], threshold: float, now_ms: int) -> bool:
    """Whether any image's write-rate window proves its partition past `threshold` of its
    write limit, as a client judges it after a write (the same evidence, the same rule)."""
    for seen in shards.values():
        for change in seen:
            new = change.new
            if new is None:
                continue
            at = change.time_ms if change.time_ms is not None else now_ms
            window = window_seen(new, at, DEFAULT_PARTITION_WCU)
            if partition_bound(window, threshold, EVIDENCE_SIGMAS):
                return True
    return False


def plan_group(
    group: Group, shards: Mapping[int, Sequence[Change]], config: AggregatorConfig, now_ms: int
) -> tuple[list[Write], MergeCandidate | None]:
    latest = {i: seen[-1] for i, seen in shards.items() if seen[-1].new is not None}
    if not latest:
        return [], None
    shard0 = latest.get(0)
    count = _count(shard0) if shard0 is not None else max(_count(c) for c in latest.values())
    load = pressure(shards, now_ms)
    writes: list[Write] = []
    merge: MergeCandidate | None = None
    if count < config.max_shard_count and proven_hot(shards, config.shard_up, now_ms):
        since = min(
            evidence_since(window_seen(c.new or {}, now_ms, DEFAULT_PARTITION_WCU))
            for c in latest.values()
        )
        names = _limit_names(latest)
        writes.append(_double(group, count, config, now_ms, since, _last_seq(latest), names))
    elif shard0 is not None:
        writes.extend(_propagate(group, shards, latest, count, config, now_ms))
        quiet, merge = _quiet(group, shard0, count, load, config, now_ms)
        writes.extend(quiet)
    return writes, merge


def _count(change: Change) -> int:
    assert change.new is not None
    return max(1, keys.get_n(change.new, keys.A_SHARD_COUNT, 1))


def _limit_names(latest: Mapping[int, Change]) -> list[str]:
    """The limits the shards' images hold: each count raise snapshots their full-at values."""
    names = {name for c in latest.values() for name in keys.decode_bucket(c.new or {}).limits}
    return sorted(names)


def _last_seq(latest: Mapping[int, Change]) -> tuple[str, ...]:
    return (max(latest.values(), key=lambda c: c.seq).sequence_number,)


def _double(
    group: Group,
    count: int,
    config: AggregatorConfig,
    now_ms: int,
    measured_since: int,
    seqs: tuple[str, ...],
    names: Sequence[str],
) -> Write:
    ns, entity_id, resource = group
    new_count = min(count * 2, config.max_shard_count)
    shard0 = keys.bucket_key(ns, entity_id, resource, 0)
    params = keys.double_shards(
        config.table, shard0, count, new_count, now_ms, measured_since, names
    )
    return Write("double", Call("update_item", params), seqs, raises=(*group, count))


def _propagate(
    group: Group,
    shards: Mapping[int, Sequence[Change]],
    latest: Mapping[int, Change],
    count: int,
    config: AggregatorConfig,
    now_ms: int,
) -> list[Write]:
    targets: set[int] = set()
    first = shards[0][0]
    if first.old is not None:
        before = max(1, keys.get_n(first.old, keys.A_SHARD_COUNT, 1))
        if before < count:
            targets.update(range(1, before))
    targets.update(i for i, c in latest.items() if 0 < i < count and _count(c) < count)
    ns, entity_id, resource = group
    seqs = (latest[0].sequence_number,)
    names = _limit_names(latest)
    return [
        Write(
            "propagate",
            Call(
                "update_item",
                keys.propagate_shard_count(
                    config.table,
                    keys.bucket_key(ns, entity_id, resource, i),
                    count,
                    names,
                    now_ms=now_ms,
                ),
            ),
            seqs,
        )
        for i in sorted(targets)
    ]


def _quiet(
    group: Group,
    shard0: Change,
    count: int,
    load: float,
    config: AggregatorConfig,
    now_ms: int,
) -> tuple[list[Write], MergeCandidate | None]:
    if count < 2 or config.merge_quiet_ms <= 0:
        return [], None
    assert shard0.new is not None
    ns, entity_id, resource = group
    key = keys.bucket_key(ns, entity_id, resource, 0)
    since = keys.get_n(shard0.new, keys.A_QUIET_SINCE, -1)
    seqs = (shard0.sequence_number,)
    if load >= config.shard_down:
        if since < 0:
            return [], None
        return [
            Write("quiet", Call("update_item", keys.clear_quiet(config.table, key)), seqs)
        ], None
    if since < 0:
        params = keys.mark_quiet(config.table, key, count, now_ms)
        return [Write("quiet", Call("update_item", params), seqs)], None
    changed = keys.get_n(shard0.new, keys.A_SHARD_DOUBLED, 0)
    if now_ms - since >= config.merge_quiet_ms and now_ms - changed >= config.merge_quiet_ms:
        return [], MergeCandidate(ns, entity_id, resource, count, shard0.sequence_number)
    return [], None
