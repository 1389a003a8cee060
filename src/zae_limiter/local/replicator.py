"""The local global table's replication decisions: pure, no I/O, time is an input.

`zae-limiter local up --regions a,b,c` runs one engine per region and a replicator
process (`local/replication.py`) that reads every region's table streams and copies each
change to the other regions. What it decides lives here:

- **Which write wins** (`decide`): last writer wins per item, as DynamoDB global tables
  (2019.11.21) resolve conflicts. A write's `Version` is (time, counter, region): the time
  from its stream record, a counter that orders writes that follow each other in one
  region within the same time (DynamoDB Local rounds stream times down to the minute),
  and the region name to break a tie between regions. Every region applies the same
  rule, so every region ends with the same winner, and the loser is lost, as on AWS.
- **Which stream records are new writes** (`ReplicaBook.observe`): a replicated write
  shows up on the receiving region's stream too and must not be replicated again. The
  book remembers each write it applied and takes the next record for that item as it.
- **When a change may travel** (`Links`): one FIFO queue per (source, destination)
  pair; a change leaves after the lag, never while either end is partitioned, and a
  healed partition lets the backlog through in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: Which item: (table, canonical JSON of the item's key attributes).
ItemKey = tuple[str, str]


@dataclass(frozen=True, slots=True, order=True)
class Version:
    """The order of writes to one item: later time, then counter, then region, wins."""

    time_ms: int
    counter: int
    region: str


@dataclass(frozen=True, slots=True)
class Change:
    """One write to copy: the item's new image, or None for a delete."""

    item: ItemKey
    keys: Mapping[str, Any]
    version: Version
    image: Mapping[str, Any] | None

    @property
    def source(self) -> str:
        return self.version.region


def decide(known: Version | None, incoming: Version) -> bool:
    """True: apply `incoming` to a replica whose copy of the item is at `known`.

    Equal versions are the same write (seen again): skipped, so a redelivery is a no-op.
    """
    return known is None or incoming > known


def local_version(region: str, stream_time_ms: int, previous: Version | None) -> Version:
    """The version of a write a client made in `region`, after `previous` there.

    A write that follows another in the same replica must win over it everywhere, even
    when the stream's clock cannot tell them apart (same second, or same minute on
    DynamoDB Local): it then keeps the earlier time and counts one up.
    """
    if previous is None or stream_time_ms > previous.time_ms:
        return Version(stream_time_ms, 0, region)
    return Version(previous.time_ms, previous.counter + 1, region)


@dataclass
class ReplicaBook:
    """What each region's copy of each item is at, as far as the replicator knows."""

    known: dict[tuple[str, ItemKey], Version] = field(default_factory=dict)
    #: Writes applied to a region and not yet seen coming back on its stream.
    pending: dict[tuple[str, ItemKey], deque[Version]] = field(default_factory=dict)

    def observe(self, region: str, item: ItemKey, stream_time_ms: int) -> Version | None:
        """A record from `region`'s stream: the version of a client's write to replicate,
        or None when it is one of the replicator's own writes coming back."""
        slot = (region, item)
        ours = self.pending.get(slot)
        if ours:
            # Stream records of one item come in write order: the next record after a
            # write we made is that write.
            self.known[slot] = ours.popleft()
            if not ours:
                del self.pending[slot]
            return None
        version = local_version(region, stream_time_ms, self.known.get(slot))
        self.known[slot] = version
        return version

    def offer(self, region: str, change: Change) -> bool:
        """True when `change` is to be written to `region` (and is then booked there)."""
        slot = (region, change.item)
        if not decide(self.known.get(slot), change.version):
            return False
        self.known[slot] = change.version
        self.pending.setdefault(slot, deque()).append(change.version)
        return True

    def forget(self, region: str, change: Change) -> None:
        """A write `offer` booked did not happen (the request failed): unbook it."""
        slot = (region, change.item)
        ours = self.pending.get(slot)
        if ours and ours[-1] == change.version:
            ours.pop()
            if not ours:
                del self.pending[slot]


@dataclass
class Links:
    """The replication links between regions: FIFO per (source, destination)."""

    regions: tuple[str, ...]
    queues: dict[tuple[str, str], deque[tuple[int, Change]]] = field(default_factory=dict)

    def send(self, change: Change, now_ms: int) -> None:
        """Queue `change` (read from its source's stream at `now_ms`) to every other region."""
        for destination in self.regions:
            if destination != change.source:
                self.queues.setdefault((change.source, destination), deque()).append(
                    (now_ms, change)
                )

    def due(
        self, now_ms: int, lag_ms: int, partitioned: Iterable[str] = ()
    ) -> list[tuple[str, Change]]:
        """(destination, change) pairs to deliver now, each link's in the order sent.

        A change waits `lag_ms` after it was read; a link with a partitioned end delivers
        nothing, and its queue keeps growing until the partition heals.
        """
        cut = set(partitioned)
        delivered: list[tuple[str, Change]] = []
        for (source, destination), queue in self.queues.items():
            if source in cut or destination in cut:
                continue
            while queue and queue[0][0] + lag_ms <= now_ms:
                delivered.append((destination, queue.popleft()[1]))
        return delivered

    def backlog(self) -> dict[str, int]:
        """Changes waiting per link, as 'source->destination': count (for `local status`)."""
        return {f"{s}->{d}": len(q) for (s, d), q in self.queues.items() if q}
