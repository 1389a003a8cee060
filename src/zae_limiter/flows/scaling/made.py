"""A count is raised only once every shard below it is made, and none it makes room for is.

A shard a doubling made room for is not an item until its first acquire makes it: until
then its share sits in its donor's split snapshot (`sf`, shard 0's when the donor was
never made either; flows/write/shares.py). A count raise takes a new snapshot, so a raise
of a count with a shard still unmade below it would overwrite the snapshot that shard's
share sits in: made later, it would copy the donor's full-at time as of the second raise,
give-backs and refill the donor received in between included, and every shard made from
it after as well (tokens created; the fault simulator's seed 10367). Once every shard
below `n` is made, each snapshot stands for the one shard the raise that took it made
room for, and is copied before the donor's count can rise again.

The shards a raise from `n` makes room for (`n` .. 2`n` - 1) must be unmade too. A merge
to `n` leaves the shards it drained as items recording `n` (at most their id), so that a
client with a stale count is turned away there and learns the new one; once their freeze
is over they refill like any bucket. Raised over, such a shard is counted as it stands: a
whole refilled share, while shard 0 keeps only half of what it held (tokens created; issue
35, found by the simulator's `shards` focus). So the aggregator's raise deletes each
first, fenced on its count and full-at times as read: its share went to its receiver at
the merge, and what the delete removes is exactly the image judged drained (a write that
landed since fails the delete, and the raise waits for a later try). The raise then
makes room for absent shards, each made from its donor's snapshot like any other. A
deletion counts no usage (the aggregator sums `tc` deltas of new images) and a drained
shard holds no reserves (a merge waits for them to go). Clients may not delete (least
privilege: infra/policy.py), and only the aggregator merges: a client that finds a
drained shard where its raise would make room does not raise, and leaves the raise to
the aggregator, which raises on the same evidence.

A made shard below `n` stays made while shard 0 says `n` (a merge changes the count, a
deletion removes shard 0 last, and a raise deletes only shards at or above its count),
and nothing makes a shard at or above `n` while shard 0 says `n` (split.py refuses), so a
read first and a raise conditioned on the count are enough. Doublings are rare and
judged on a hot partition, whose traffic spread over `n` shards makes them all within a
few acquires. The read costs a consistent read of each of the 2`n` - 1 keys.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from zae_limiter import keys
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, Result, one, together

#: The most keys one BatchGetItem reads.
MAX_BATCH = 100


def all_made(
    table: str, ns: str, entity_id: str, resource: str, count: int, delete: bool = False
) -> Flow[bool]:
    """Whether a raise from `count` to twice that may go now: shards 1 .. `count` - 1 are
    all made, and no shard a merge drained stands at `count` .. 2`count` - 1 (one
    consistent read of them). With `delete` (the aggregator's raise) each drained one is
    deleted first, one delete each (False when one moved meanwhile)."""
    read = yield from _read(table, ns, entity_id, resource, range(1, count * 2))
    if read is None:
        return False  # not known now: the next try reads again
    return (yield from _ready(table, ns, entity_id, resource, count, read, delete))


def with_shard0(table: str, ns: str, entity_id: str, resource: str, count: int) -> Flow[Any]:
    """(shard 0's item, None when absent or not read; whether the raise may go, as
    `all_made` says): one consistent read of shards 0 .. 2`count` - 1, for a client that
    reads shard 0 before doubling it (`doubling.double`), instead of a GetItem and
    `all_made`."""
    read = yield from _read(table, ns, entity_id, resource, range(count * 2))
    if read is None:
        return None, False
    zero = read.pop(0, None)
    if zero is None:
        return None, False
    return zero, (yield from _ready(table, ns, entity_id, resource, count, read, False))


def _read(
    table: str, ns: str, entity_id: str, resource: str, ids: Sequence[int]
) -> Flow[dict[int, Any] | None]:
    """The items of shards `ids` by shard id (absent ones left out), in one round trip of
    as many BatchGetItems as it takes; None when part was not read.

    A throttled read is a check that did not pass, not an error: a client checks after a
    good write (flows/write/take.py `after_write`), and an error there would fail an
    acquire whose tokens were taken (the simulator's seed 3733, once the check read at one
    shard too: tokens lost)."""
    calls = [
        Call("batch_get_item", keys.shards_read(table, ns, entity_id, resource, part))
        for part in (ids[i : i + MAX_BATCH] for i in range(0, len(ids), MAX_BATCH))
    ]
    try:
        results = yield from _at_once(calls)
    except RateLimiterUnavailable:
        return None
    found: dict[int, Any] = {}
    for result in results:
        if result.response.get("UnprocessedKeys"):
            return None
        for item in result.response.get("Responses", {}).get(table, []):
            found[keys.parse_bucket_pk(keys.pk_of(item))[3]] = item
    return found


def _ready(
    table: str,
    ns: str,
    entity_id: str,
    resource: str,
    count: int,
    read: Mapping[int, Any],
    delete: bool,
) -> Flow[bool]:
    if any(i not in read for i in range(1, count)):
        return False
    # A shard at or above the count that records a count above its id was made by a raise
    # this reader missed (the raise from `count` then fails on shard 0's count): not ours.
    drained = [
        item
        for i, item in sorted(read.items())
        if i >= count and keys.get_n(item, keys.A_SHARD_COUNT, 1) <= i
    ]
    if not drained:
        return True
    if not delete:
        return False  # clients may not delete (least privilege): the aggregator raises
    deletes = [Call("delete_item", keys.delete_drained(table, item)) for item in drained]
    try:
        results = yield from _at_once(deletes)
    except RateLimiterUnavailable as error:
        if error.denied:
            raise  # a role without DeleteItem: the aggregator says so (aggregator/apply.py)
        return False  # throttled, or its answer lost: a later try reads again
    return all(result.ok for result in results)


def _at_once(calls: Sequence[Call]) -> Flow[tuple[Result, ...]]:
    """The calls in one round trip; a single one as itself, as every other lone call is."""
    if len(calls) == 1:
        return ((yield from one(calls[0])),)
    return (yield from together(*calls))
