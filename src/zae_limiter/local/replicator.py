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
  book remembers each write it made (and the image it wrote) and takes the next record
  of that item with that image as it; a record that changes nothing is no write.
- **A client write the replicator overwrote** (`ReplicaBook.applied`): the item a write
  replaced tells whether a client wrote it since the stream was last read; that newer
  write is put back.
- **When a change may travel** (`Links`): one FIFO queue per (source, destination)
  pair; a change leaves after the lag, never while either end is partitioned, and a
  healed partition lets the backlog through in order.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

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


Image = Mapping[str, Any] | None


@dataclass
class ReplicaBook:
    """What each region's copy of each item is, as far as the replicator knows.

    `known`: the version of the newest write to the item there. `images`: the item as
    the last stream record read from there left it (None: no item). `pending`: writes
    the replicator made there whose stream records have not come back yet.
    """

    known: dict[tuple[str, ItemKey], Version] = field(default_factory=dict)
    images: dict[tuple[str, ItemKey], Image] = field(default_factory=dict)
    pending: dict[tuple[str, ItemKey], deque[tuple[Version, Image]]] = field(default_factory=dict)

    def observe(
        self, region: str, item: ItemKey, stream_time_ms: int, image: Image
    ) -> Version | None:
        """A record from `region`'s stream, with the item's new image: the version of a
        client's write to replicate, or None when there is nothing to replicate."""
        slot = (region, item)
        ours = self.pending.get(slot)
        if ours and ours[0][1] == image:
            # Records of one item come in write order, and a write of ours that changed
            # the item always leaves one: this is it.
            version = ours.popleft()[0]
            if not ours:
                del self.pending[slot]
            # A client write seen before it (see `applied`) may be newer: keep that.
            self.known[slot] = max(version, self.known.get(slot, version))
            self.images[slot] = image
            return None
        if slot in self.images and image == self.images[slot]:
            # A record of a write that changed nothing. DynamoDB writes none; moto does
            # (and two for an UpdateItem that creates an item): not a new write.
            return None
        version = local_version(region, stream_time_ms, self.known.get(slot))
        self.known[slot] = version
        self.images[slot] = image
        return version

    def offer(self, region: str, change: Change) -> bool:
        """True when `change` is to be written to `region` (then tell `applied`)."""
        return decide(self.known.get((region, change.item)), change.version)

    def believed(self, region: str, item: ItemKey) -> Image:
        """The item in `region` once every write seen or made there has landed."""
        ours = self.pending.get((region, item))
        return ours[-1][1] if ours else self.images.get((region, item))

    def applied(self, region: str, change: Change, replaced: Image) -> Image | Literal[False]:
        """Book `change`, written to `region` where it replaced `replaced` (the old item
        the write returned). Returns an image to write back (None: delete), or False.

        A write that changed nothing leaves no stream record: none is awaited. When
        `replaced` is not what the book believed, a client wrote the item after the
        replicator last read this region's stream, and the change overwrote that write.
        The client's write is the newer (it was made later, in its region): it is to be
        written back, and its own record, when read, replicates it as usual.
        """
        slot = (region, change.item)
        believed = self.believed(region, change.item)
        self.known[slot] = change.version
        if replaced == change.image:
            return False
        self.pending.setdefault(slot, deque()).append((change.version, change.image))
        if replaced == believed:
            return False
        self.pending[slot].append((change.version, replaced))
        return replaced


def newest_of_each_item(changes: list[Change]) -> list[Change]:
    """Of changes due together on one link, the last of each item, in the order sent.

    Last writer wins per item: delivering an item's earlier changes just before its
    newest one ends in the same state, so they are skipped (AWS does not promise a
    replica sees every intermediate write either). Without this, a busy item (a share
    item takes a write per reserve) kept the replicator seconds behind on every link.
    """
    last = {change.item: i for i, change in enumerate(changes)}
    return [change for i, change in enumerate(changes) if last[change.item] == i]


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
            ready: list[Change] = []
            while queue and queue[0][0] + lag_ms <= now_ms:
                ready.append(queue.popleft()[1])
            delivered += [(destination, c) for c in newest_of_each_item(ready)]
        return delivered

    def backlog(self) -> dict[str, int]:
        """Changes waiting per link, as 'source->destination': count (for `local status`)."""
        return {f"{s}->{d}": len(q) for (s, d), q in self.queues.items() if q}
