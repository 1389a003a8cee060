"""Global limits declared like any other (docs/global.md, "Declaring a global limit"):
what a repository remembers of them (`SharesBook`, in `RepoState.shares`), the acquire's
take of every global limit it names (`take_global`), and the keeper that acquires start.

No I/O here: the flows yield their requests (flows/regional_run.py has the share's own).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from zae_limiter import keys
from zae_limiter.errors import RateLimitExceeded, ValidationError
from zae_limiter.flows import Flow
from zae_limiter.flows import regional as core
from zae_limiter.flows.batch import batch_get
from zae_limiter.flows.regional_change import change_share
from zae_limiter.flows.regional_run import Memory, Target, keep_tick, take_share
from zae_limiter.flows.write.levels import Level
from zae_limiter.limits import Limit
from zae_limiter.models import LimitStatus

if TYPE_CHECKING:
    from zae_limiter.flows.context import RepoState

log = logging.getLogger("zae_limiter")

#: A keeper started by acquires stops after this long without one (its share stays put).
IDLE_STOP_MS = 30_000


@dataclass(slots=True)
class SharesBook:
    """A repository's global limits (`RepoState.shares`): its region, and what it knows of
    each (entity, resource, limit) an acquire took from; `kept` are those whose keeper
    runs (started by the face after the acquire: a flow starts nothing)."""

    region: str | None
    memories: dict[tuple[str, str, str], Memory] = field(default_factory=dict)
    targets: dict[tuple[str, str, str], Target] = field(default_factory=dict)
    kept: set[tuple[str, str, str]] = field(default_factory=set)
    #: Targets taken from whose keeper is not running (the face starts them).
    waiting: set[tuple[str, str, str]] = field(default_factory=set)
    #: (entity, resource) whose limits are all global: no bucket item to read with them.
    only_global: set[tuple[str, str]] = field(default_factory=set)
    #: Set by the repository's close: its keepers stop.
    stop: list[bool] = field(default_factory=lambda: [False])

    #: The keepers' tasks (async faces), cancelled and awaited by `aclose`.
    tasks: list[Any] = field(default_factory=list)

    def close(self) -> None:
        """Stop the keepers (a sync face's threads end at their next pass)."""
        self.stop[0] = True

    async def aclose(self) -> None:
        self.stop[0] = True
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:
            with contextlib.suppress(BaseException):
                await task
        self.tasks.clear()

    def target(self, table: str, ns: str, entity_id: str, resource: str, limit: Limit) -> Target:
        name = (entity_id, resource, limit.name)
        found = self.targets.get(name)
        if found is None or found.limit != limit:
            if self.region is None:
                raise ValidationError(
                    f"limit {limit.name!r} is global, but this client's region is unknown: "
                    "open the repository with region= (the replica region it writes to)"
                )
            regions = core.validate_regions(limit.regions, self.region)
            found = Target(table, ns, entity_id, resource, limit, regions, self.region)
            self.targets[name] = found
        if name not in self.kept:
            self.waiting.add(name)
        return found

    def memory(self, target: Target) -> Memory:
        name = (target.entity_id, target.resource, target.limit.name)
        found = self.memories.get(name)
        if found is None:
            found = self.memories[name] = Memory()
        return found

    def unkept(self) -> list[tuple[Target, Memory]]:
        """Targets taken from whose keeper is not running; marked as running."""
        out = []
        while self.waiting:
            name = self.waiting.pop()
            if name not in self.kept and name in self.memories:
                self.kept.add(name)
                out.append((self.targets[name], self.memories[name]))
        return out


#: A global limit to take from in an acquire: (entity, resource, limit, millitokens).
Wanted = tuple[str, str, Limit, int]


def take_global(
    book: SharesBook, table: str, ns: str, wanted: Sequence[Wanted], now_ms: int
) -> Flow[RateLimitExceeded | None]:
    """Take every wanted global limit from this region's share: None when all admitted,
    else the rejection to raise, once what the earlier ones took is given back."""
    done: list[Wanted] = []
    for entity_id, resource, limit, milli in wanted:
        target = book.target(table, ns, entity_id, resource, limit)
        memory = book.memory(target)
        taken = yield from take_share(target, memory, milli, now_ms)
        if not taken.admitted:
            yield from change_global(book, table, ns, [(w, -w[3]) for w in done], now_ms)
            image = memory.image
            status = LimitStatus(
                entity_id=entity_id, resource=resource, limit_name=limit.name,
                capacity=image.capacity_milli // 1000 if image is not None else 0,
                available=taken.tokens_milli // 1000, requested=milli // 1000,
                retry_after_seconds=taken.retry_after_ms / 1000,
            )  # fmt: skip
            return RateLimitExceeded([status], taken.retry_after_ms / 1000)
        done.append((entity_id, resource, limit, milli))
    return None


def change_global(
    book: SharesBook, table: str, ns: str, changes: Sequence[tuple[Wanted, int]], now_ms: int
) -> Flow[None]:
    """Apply a lease's changes to the shares it took from (millitokens: > 0 taken, < 0
    given back), exactly (flows/regional_change.py). One that cannot be written is
    logged, as a regional limit's adjustment is: given back, under-admission only."""
    for (entity_id, resource, limit, _taken), delta in changes:
        if not delta:
            continue
        target = book.target(table, ns, entity_id, resource, limit)
        try:
            done = yield from change_share(target, book.memory(target), delta, now_ms)
        except Exception as error:  # an outage: as a regional adjustment's, logged
            log.warning("could not change the share of %s by %d: %s", limit.name, delta, error)
            continue
        if not done:
            log.warning("could not change the share of %s by %d (contended)", limit.name, delta)


def lease_changes(
    shared: Sequence[Wanted], pending_milli: Mapping[str, int], failed: bool
) -> list[tuple[Wanted, int]]:
    """The changes a lease's end makes to the shares its acquire took from: all of it
    back when it failed, else its adjustments of each global limit."""
    if failed:
        return [(w, -w[3]) for w in shared]
    return [(w, pending_milli[w[2].name]) for w in shared if pending_milli.get(w[2].name)]


def end_lease(
    state: RepoState, regional: Flow[None], changes: Sequence[tuple[Wanted, int]], now_ms: int
) -> Flow[None]:
    """A lease's end: its regional flow (give-back or adjustments), then its shares'."""
    yield from regional
    if changes and state.shares is not None:
        yield from change_global(state.shares, state.table, state.namespace, changes, now_ms)


def keep_while_used(target: Target, memory: Memory, now_ms: int, book: SharesBook) -> Flow[int]:
    """A keeper started by acquires: runs until the repository closes or no acquire took
    from the target for IDLE_STOP_MS (then the next acquire starts it again)."""
    passes, failures, now = 0, 0, now_ms
    while not book.stop[0]:
        last = memory.arrivals[-1] if memory.arrivals else now_ms
        if now - last > IDLE_STOP_MS:
            break
        failures, now = yield from keep_tick(target, memory, now, failures)
        passes += 1
    book.kept.discard((target.entity_id, target.resource, target.limit.name))
    return passes


__all__ = [
    "IDLE_STOP_MS",
    "SharesBook",
    "Wanted",
    "change_global",
    "end_lease",
    "keep_while_used",
    "learn_entity",
    "lease_changes",
    "split_global",
    "take_global",
]


def split_global(
    state: RepoState, levels: Sequence[Level], entity_id: str
) -> tuple[list[Level], list[Wanted]]:
    """The levels without their global limits, and the global limits to take from their
    regions' shares: the entity's and its cascade parents' alike."""
    if not any(limit.is_global for lv in levels for limit in lv.limits):
        return list(levels), []
    kept: list[Level] = []
    wanted: list[Wanted] = []
    for lv in levels:
        regional = tuple(limit for limit in lv.limits if not limit.is_global)
        wanted += [
            (lv.entity_id, lv.resource, limit, lv.consume_milli[limit.name])
            for limit in lv.limits
            if limit.is_global and lv.consume_milli.get(limit.name)
        ]
        names = {limit.name for limit in regional}
        consume = {n: v for n, v in lv.consume_milli.items() if n in names}
        if regional and any(consume.values()):
            kept.append(replace(lv, limits=regional, consume_milli=consume))
        elif not regional and state.shares is not None:
            state.shares.only_global.add((lv.entity_id, lv.resource))  # no bucket to prefetch
    return kept, wanted


def learn_entity(state: RepoState, entity_id: str) -> Flow[bool]:
    """Whether the entity may cascade, from its record, when no bucket write of it will
    say (its limits are all global): one read, the first time (False: an implicit entity,
    or one already known)."""
    if entity_id in state.entities:
        return False
    key = keys.entity_key(state.namespace, entity_id)
    found = yield from batch_get(state, [key])
    item = found.get(keys.key_id(key))
    if item is None:
        state.entities.learn(entity_id, False, None)  # implicit: never cascades
        return False
    entity = keys.decode_entity(item)
    state.entities.learn(
        entity_id, entity.cascade, entity.parent_id, dict(entity.cascade_for),
        bypass=entity.bypass,
    )  # fmt: skip
    return entity.parent_id is not None
