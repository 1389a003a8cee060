"""GlobalShares / SyncGlobalShares: one limit across the regions of a global table.

    shares = GlobalShares(repo, ("us-east-1", "eu-west-1", "ap-southeast-1"))
    keeper = asyncio.create_task(shares.keep("tenant-1", "api", limit))   # one per process
    await shares.acquire("tenant-1", "api", limit)     # RateLimitExceeded when short

The region is the repository client's region unless `region=` says otherwise. The hot
path is one write to this region's own share item, or none when this client already
knows the share is short; the keeper moves parts between regions (docs/global.md).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from zae_limiter import keys
from zae_limiter.errors import RateLimitExceeded, ValidationError
from zae_limiter.flows import Flow
from zae_limiter.flows import regional as core
from zae_limiter.flows.regional_limits import SharesBook, keep_while_used
from zae_limiter.flows.regional_run import (
    Memory,
    Pass,
    Taken,
    Target,
    keep,
    keep_pass,
    read_all,
    read_items,
    take_share,
)
from zae_limiter.limits import Limit
from zae_limiter.models import LimitStatus

if TYPE_CHECKING:
    from zae_limiter.repository import Repository, SyncRepository

log = logging.getLogger("zae_limiter")


@dataclass(frozen=True, slots=True)
class RegionShare:
    """One region's share as this replica shows it (`entity shares show`)."""

    region: str
    parts: int
    capacity: float
    rate_per_second: float
    tokens: float
    demand_milli: int
    given: dict[str, int]
    taken: dict[str, int]
    #: Parts released to this region that its item (here) has not taken in yet.
    in_flight: int

    @property
    def percent(self) -> float:
        return 100.0 * self.parts / core.PARTS


def describe_shares(
    images: dict[str, core.ShareImage], regions: Sequence[str], now_ms: int
) -> list[RegionShare]:
    out = []
    for region in regions:
        image = images.get(region)
        if image is None:
            continue
        out.append(
            RegionShare(
                region=region,
                parts=image.parts,
                capacity=image.capacity_milli / 1000,
                rate_per_second=image.rate_milli * 1000 / image.period_ms / 1000,
                tokens=image.tokens(now_ms) / 1000,
                demand_milli=image.demand_milli,
                given=dict(image.given),
                taken=dict(image.taken),
                in_flight=core.in_flight(images, region),
            )
        )
    return out


def shares_flow(
    repo: Any, entity_id: str, resource: str, limit_name: str
) -> Flow[list[RegionShare]]:
    """Every region's share of a global limit as `repo`'s replica shows it, without the
    limit's definition or the region list (`entity shares show`): what the items say."""
    keys.validate_id("entity_id", entity_id)
    keys.validate_resource(resource)
    images = yield from read_items(repo.table_name, repo.namespace, entity_id, resource, limit_name)
    return describe_shares(images, sorted(images), repo.now_ms())


def client_region(repo: Any) -> str | None:
    """The region the repository's client talks to (None: not configured)."""
    found = repo.where[0] or getattr(getattr(repo.client, "meta", None), "region_name", None)
    return str(found) if found else None


def prepare_shares(repo: Any) -> None:
    """Before an acquire: where global limits' shares are remembered (cheap when done)."""
    if repo.state.shares is None:
        repo.state.shares = SharesBook(client_region(repo))


def tend_shares(repo: Any) -> None:
    """After an acquire: a keeper runs for every global limit it took from (a thread on a
    sync repository, a task on an async one's loop); it stops when unused or closed."""
    book: SharesBook | None = repo.state.shares
    if book is None or not book.waiting:
        return
    for target, memory in book.unkept():
        flow = keep_while_used(target, memory, repo.now_ms(), book)
        if inspect.iscoroutinefunction(repo.run):
            task = asyncio.get_running_loop().create_task(repo.run(flow))
            book.tasks.append(task)
            task.add_done_callback(book.tasks.remove)
        else:
            threading.Thread(target=_run_keeper, args=(repo, flow), daemon=True).start()


def _run_keeper(repo: Any, flow: Flow[int]) -> None:
    # The keeper's passes catch their own errors; what is left (the repository closed
    # under it at exit) ends the thread without a traceback on the user's console.
    try:
        repo.run(flow)
    except Exception as error:
        log.debug("share keeper ended: %s", error)


def _region_of(repo: Any, region: str | None) -> str:
    if region is not None:
        return region
    found = client_region(repo)
    if not found:
        raise ValidationError(
            "the client's region is unknown: pass region= to GlobalShares (the replica "
            "region this client writes to)"
        )
    return str(found)


class _Shares:
    """What both faces share: targets and their memories, and the flows they run."""

    def __init__(self, repo: Any, regions: Sequence[str], region: str | None) -> None:
        self.repo = repo
        self.region = _region_of(repo, region)
        self.regions = core.validate_regions(regions, self.region)
        self.memories: dict[tuple[str, str, str], Memory] = {}
        #: Set to stop the keepers this object runs.
        self.stop = [False]

    def target(self, entity_id: str, resource: str, limit: Limit) -> Target:
        keys.validate_id("entity_id", entity_id)
        keys.validate_resource(resource)
        core.validate_global(limit)
        return Target(
            self.repo.table_name, self.repo.namespace, entity_id, resource, limit,
            self.regions, self.region,
        )  # fmt: skip

    def memory(self, target: Target) -> Memory:
        key = (target.entity_id, target.resource, target.limit.name)
        found = self.memories.get(key)
        if found is None:
            found = self.memories[key] = Memory()
        return found

    def take_flow(self, entity_id: str, resource: str, limit: Limit, consume: int) -> Flow[Taken]:
        if isinstance(consume, bool) or not isinstance(consume, int) or consume <= 0:
            raise ValidationError(f"consume must be a positive whole number, got {consume!r}")
        target = self.target(entity_id, resource, limit)
        return take_share(target, self.memory(target), consume * 1000, self.repo.now_ms())

    def settle(self, target: Target, taken: Taken, consume: int) -> Taken:
        if taken.admitted:
            return taken
        image = self.memory(target).image
        status = LimitStatus(
            entity_id=target.entity_id, resource=target.resource, limit_name=target.limit.name,
            capacity=image.capacity_milli // 1000 if image is not None else 0,
            available=taken.tokens_milli // 1000, requested=consume,
            retry_after_seconds=taken.retry_after_ms / 1000,
        )  # fmt: skip
        raise RateLimitExceeded([status], taken.retry_after_ms / 1000)

    def shares_flow(self, entity_id: str, resource: str, limit: Limit) -> Flow[list[RegionShare]]:
        target = self.target(entity_id, resource, limit)
        images = yield from read_all(target)
        return describe_shares(images, self.regions, self.repo.now_ms())


# unasync: source
class GlobalShares(_Shares):
    """A global limit's regional shares, on a `Repository`."""

    repo: Repository

    def __init__(
        self, repo: Repository, regions: Sequence[str], *, region: str | None = None
    ) -> None:
        super().__init__(repo, regions, region)

    async def acquire(self, entity_id: str, resource: str, limit: Limit, consume: int = 1) -> Taken:
        """Take `consume` from this region's share of `limit`; RateLimitExceeded if short."""
        taken = await self.repo.run(self.take_flow(entity_id, resource, limit, consume))
        return self.settle(self.target(entity_id, resource, limit), taken, consume)

    async def keep(
        self, entity_id: str, resource: str, limit: Limit, ticks: int | None = None
    ) -> int:
        """Run this process's share keeper for `limit` until `close()` (or `ticks` passes)."""
        target = self.target(entity_id, resource, limit)
        flow = keep(target, self.memory(target), self.repo.now_ms(), self.stop, ticks)
        passes: int = await self.repo.run(flow)
        return passes

    async def keep_once(self, entity_id: str, resource: str, limit: Limit) -> Pass:
        """One keeper pass (read every region's item, transfer if due)."""
        target = self.target(entity_id, resource, limit)
        return await self.repo.run(keep_pass(target, self.memory(target), self.repo.now_ms()))

    async def shares(self, entity_id: str, resource: str, limit: Limit) -> list[RegionShare]:
        """Every region's share, demand and transfers as this region's replica shows them."""
        return await self.repo.run(self.shares_flow(entity_id, resource, limit))

    def close(self) -> None:
        self.stop[0] = True


# unasync: generated from the source above by tools/unasync.py; do not edit
class SyncGlobalShares(_Shares):
    """A global limit's regional shares, on a `SyncRepository`."""

    repo: SyncRepository

    def __init__(
        self, repo: SyncRepository, regions: Sequence[str], *, region: str | None = None
    ) -> None:
        super().__init__(repo, regions, region)

    def acquire(self, entity_id: str, resource: str, limit: Limit, consume: int = 1) -> Taken:
        """Take `consume` from this region's share of `limit`; RateLimitExceeded if short."""
        taken = self.repo.run(self.take_flow(entity_id, resource, limit, consume))
        return self.settle(self.target(entity_id, resource, limit), taken, consume)

    def keep(
        self, entity_id: str, resource: str, limit: Limit, ticks: int | None = None
    ) -> int:
        """Run this process's share keeper for `limit` until `close()` (or `ticks` passes)."""
        target = self.target(entity_id, resource, limit)
        flow = keep(target, self.memory(target), self.repo.now_ms(), self.stop, ticks)
        passes: int = self.repo.run(flow)
        return passes

    def keep_once(self, entity_id: str, resource: str, limit: Limit) -> Pass:
        """One keeper pass (read every region's item, transfer if due)."""
        target = self.target(entity_id, resource, limit)
        return self.repo.run(keep_pass(target, self.memory(target), self.repo.now_ms()))

    def shares(self, entity_id: str, resource: str, limit: Limit) -> list[RegionShare]:
        """Every region's share, demand and transfers as this region's replica shows them."""
        return self.repo.run(self.shares_flow(entity_id, resource, limit))

    def close(self) -> None:
        self.stop[0] = True


# unasync: end
