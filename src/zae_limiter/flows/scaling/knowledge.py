"""What one client knows of an entity's shards: how many there are, the write-rate
windows it saw on them, and its own doubling tries. `ShardKnowledge` is the only writer
of that state; the flows that learn it (flows/write/memory.py, evidence, doubling,
split, any_shard) call its methods.
"""

from __future__ import annotations

from dataclasses import dataclass

from zae_limiter.keys import WINDOW_MS

#: A client whose view of a window is older than this cannot know whether someone else
#: restarted it since; it restarts the window only once it is this old.
STALE_WINDOW_MS = 4 * WINDOW_MS

#: (resource, shard id): where on an entity a window or an image belongs.
Where = tuple[str, int]


@dataclass(frozen=True, slots=True)
class WindowSeen:
    """A shard's write-rate window as an ALL_NEW showed it: `writes` since `start_ms`."""

    start_ms: int
    writes: int
    seen_ms: int
    partition_wcu: int
    #: The shard count the item recorded: evidence from before a doubling is stale.
    shard_count: int = 1
    #: The window before this one (it ended at `start_ms`): start (-1: none) and writes.
    prev_start_ms: int = -1
    prev_writes: int = 0
    #: When shard 0 last doubled, as its item showed it (-1: not shard 0, or never).
    doubled_ms: int = -1


class ShardKnowledge:
    """One entity's shards as this client knows them, per resource (and shard)."""

    __slots__ = ("counts", "evidence_reads", "seen", "sessions", "starts", "tried", "wanted")

    def __init__(self) -> None:
        #: The shard count of each resource (1 when not known).
        self.counts: dict[str, int] = {}
        #: Write-rate window start (ms) last seen per (resource, shard).
        self.starts: dict[Where, int] = {}
        #: The last window this client saw after a write of its own, or a read: the
        #: evidence it has when a later write there is throttled.
        self.seen: dict[Where, WindowSeen] = {}
        #: When this client last read a shard's window after a throttle (ms).
        self.evidence_reads: dict[Where, int] = {}
        #: When this client last tried to double a resource's shards (ms).
        self.tried: dict[str, int] = {}
        #: A doubling that was throttled: (count it starts from, evidence since), to ride
        #: on this client's next write to shard 0.
        self.wanted: dict[str, tuple[int, int]] = {}
        #: The start (ms) of the session shard 0 last showed open, per (resource, session
        #: quota): the session every shard of the bucket joins (flows/scaling/sessions.py).
        self.sessions: dict[tuple[str, str], int] = {}

    def written(self, where: Where, count: int, window_start: int) -> None:
        """What a write's ALL_NEW at `where` showed: the shard count it records and its
        window's start."""
        resource, shard = where
        # Shard 0 is the truth; another shard may only raise the count, unless it lies
        # beyond its own count (merged away), which proves the count went down.
        if shard == 0 or count > self.counts.get(resource, 1) or shard >= count:
            self.counts[resource] = count
        self.starts[where] = window_start

    def told(self, resource: str, count: int) -> None:
        """Shard 0 said the count: it is the truth from here on."""
        self.counts[resource] = count

    def hinted(self, resource: str, count: int) -> None:
        """A count from an item read before any write: kept only when none is known."""
        self.counts.setdefault(resource, count)

    def saw(self, where: Where, seen: WindowSeen) -> None:
        """The window at `where` as a write of this client's left it, or as a read whose
        item the client already learned from showed it."""
        self.seen[where] = seen

    def read(self, where: Where, seen: WindowSeen) -> None:
        """The window a read of `where` showed: it may teach a higher count too (a client
        whose writes are all throttled sees no ALL_NEW)."""
        self.seen[where] = seen
        self.starts[where] = seen.start_ms
        resource = where[0]
        self.counts[resource] = max(self.counts.get(resource, 1), seen.shard_count)

    def may_read(self, where: Where, now_ms: int, every_ms: int) -> bool:
        """Whether a read of the window at `where` is due (at most one per `every_ms`);
        a read that is due is counted as made."""
        last = self.evidence_reads.get(where)
        if last is not None and now_ms - last < every_ms:
            return False
        self.evidence_reads[where] = now_ms
        return True

    def needs_reset(self, where: Where, now_ms: int) -> bool:
        """Restart the window only when it is known to be old.

        A restart drops the count. A client that never saw the window, or saw it long
        ago, does not know whether another client restarted it since: with many clients
        that each write a shard now and then, blind restarts would keep every window too
        short to measure anything.
        """
        start = self.starts.get(where)
        if start is None or now_ms - start < WINDOW_MS:
            return False
        seen = self.seen.get(where)
        fresh = seen is not None and now_ms - seen.seen_ms < WINDOW_MS
        return fresh or now_ms - start >= STALE_WINDOW_MS

    def session_open(self, resource: str, name: str, start_ms: int) -> None:
        """Shard 0 showed the session of quota `name` open since `start_ms`."""
        self.sessions[(resource, name)] = start_ms

    def try_doubling(self, resource: str, at_ms: int) -> None:
        """This client tries (or counts as having tried) to double `resource` at `at_ms`."""
        self.tried[resource] = at_ms

    def want_doubling(self, resource: str, count: int, since_ms: int) -> None:
        self.wanted[resource] = (count, since_ms)

    def drop_wanted(self, resource: str) -> None:
        self.wanted.pop(resource, None)
