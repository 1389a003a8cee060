"""Several regions in one schedule: one engine per region, and a replicator between them.

A world with `regions` runs each client against its own region's engine; the replicator
copies every change to the other regions as a DynamoDB global table does in its default
mode: asynchronously, after a lag, last writer wins per item. It decides with the same
pure rules as the local global table (`local/replicator.py`: versions, echoes of its own
writes, a client write it overwrote put back, FIFO links that hold changes while an end is
partitioned), so the simulator checks what `zae-limiter local up --regions` runs.

The replicator's work is a step of the schedule like any other (`World._replicate`),
and a partition of a region is a fault kind (`partition`): a region cut off keeps
serving its own clients and neither sends nor receives changes until it heals.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zae_limiter.local.replicator import Change, Links, ReplicaBook


class Replication:
    """The replicator of one table across `engines` (region -> in-memory engine)."""

    def __init__(self, engines: Mapping[str, Any], table: str, lag_ms: int) -> None:
        self.engines = dict(engines)
        self.table = table
        self.lag_ms = lag_ms
        self.book = ReplicaBook()
        self.links = Links(tuple(engines))
        self.partitioned: set[str] = set()
        #: Per region, how many of its stream records were read.
        self._read = dict.fromkeys(engines, 0)
        self.applied = 0

    def poll(self, now_ms: int) -> None:
        """Read every region's new stream records; queue the clients' writes."""
        for region, engine in self.engines.items():
            records = engine.records(self.table)[self._read[region] :]
            self._read[region] += len(records)
            for record in records:
                body = record["dynamodb"]
                item = (self.table, repr(sorted(body["Keys"].items())))
                image = None if record["eventName"] == "REMOVE" else body.get("NewImage")
                version = self.book.observe(region, item, record["simTimeMs"], image)
                if version is not None:
                    self.links.send(Change(item, body["Keys"], version, image), now_ms)

    def deliver(self, now_ms: int, lag_ms: int | None = None) -> int:
        """Apply every change due at `now_ms`; how many were written."""
        self.poll(now_ms)
        lag = self.lag_ms if lag_ms is None else lag_ms
        written = 0
        for destination, change in self.links.due(now_ms, lag, self.partitioned):
            if not self.book.offer(destination, change):
                continue  # the replica holds a newer write: this one loses
            engine = self.engines[destination]
            replaced = engine.get(self.table, dict(change.keys))
            engine.apply_image(self.table, dict(change.keys), _plain(change.image))
            restore = self.book.applied(destination, change, replaced)
            if restore is not False:
                engine.apply_image(self.table, dict(change.keys), _plain(restore))
            written += 1
        self.applied += written
        return written

    def backlog(self) -> int:
        return sum(len(queue) for queue in self.links.queues.values())

    def differing(self) -> list[str]:
        """Keys of items not alike in every region (after `settle`: none, or replication
        lost or invented a write)."""
        tables = [_items(engine, self.table) for engine in self.engines.values()]
        keys = set().union(*tables)
        return sorted(k for k in keys if any(t.get(k) != tables[0].get(k) for t in tables))

    def settle(self, now_ms: int) -> None:
        """Heal every partition and deliver until nothing is in flight (the end of a run)."""
        self.partitioned.clear()
        while True:
            self.poll(now_ms)
            if not self.backlog():
                return
            self.deliver(now_ms, lag_ms=0)


def _items(engine: Any, table: str) -> dict[str, Any]:
    return {repr(sorted((k, v) for k, v in item.items() if k in ("PK", "SK"))): item
            for item in engine.items(table)}  # fmt: skip


def _plain(image: Any) -> Any:
    return None if image is None else dict(image)
