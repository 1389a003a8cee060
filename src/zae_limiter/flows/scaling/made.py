"""A count is raised only once every shard below it is made.

A shard a doubling made room for is not an item until its first acquire makes it: until
then its share sits in its donor's split snapshot (`sf`, shard 0's when the donor was
never made either; flows/write/shares.py). A count raise takes a new snapshot, so a raise
of a count with a shard still unmade below it would overwrite the snapshot that shard's
share sits in: made later, it would copy the donor's full-at time as of the second raise,
give-backs and refill the donor received in between included, and every shard made from
it after as well (tokens created; the fault simulator's seed 10367). Once every shard
below `n` is made, each snapshot stands for the one shard the raise that took it made
room for, and is copied before the donor's count can rise again.

A made shard stays made while shard 0 says `n` (a merge changes the count, a deletion
removes shard 0 last, and a shard a merge drained keeps its item), so a read first and a
raise conditioned on the count are enough. Doublings are rare and judged on a hot
partition, whose traffic spread over `n` shards makes them all within a few acquires.
"""

from __future__ import annotations

from typing import Any

from zae_limiter import keys
from zae_limiter.flows import Call, Flow, one

#: The most keys one BatchGetItem reads.
MAX_BATCH = 100


def all_made(table: str, ns: str, entity_id: str, resource: str, count: int) -> Flow[bool]:
    """Whether shards 1 .. `count` - 1 of the bucket are all made (one consistent
    BatchGetItem of their keys; none for a count of 1)."""
    if count < 2:
        return True
    params = keys.shards_below(table, ns, entity_id, resource, count)
    result = yield from one(Call("batch_get_item", params))
    if result.response.get("UnprocessedKeys"):
        return False  # not known now: the next try reads again
    found = result.response.get("Responses", {}).get(table, [])
    return len(found) == count - 1


def with_shard0(table: str, ns: str, entity_id: str, resource: str, count: int) -> Flow[Any]:
    """(shard 0's item, None when absent or not read; whether shards 1 .. `count` - 1 are
    all made): one consistent BatchGetItem of the whole items for a client that reads
    shard 0 before doubling it (`doubling.double`), instead of a GetItem and `all_made`."""
    ids = range(min(count, MAX_BATCH))
    params = keys.shards_read(table, ns, entity_id, resource, ids)
    result = yield from one(Call("batch_get_item", params))
    found = result.response.get("Responses", {}).get(table, [])
    zero_key = keys.key_id(keys.bucket_key(ns, entity_id, resource, 0))
    zero = next((item for item in found if keys.key_id(item) == zero_key), None)
    if result.response.get("UnprocessedKeys"):
        return zero, False  # not known now: the next try reads again
    return zero, count <= MAX_BATCH and len(found) == count
