"""The local replicator's decisions (zae_limiter.local.replicator): no engine, no clock."""

from __future__ import annotations

from zae_limiter.local.replicator import (
    Change,
    Links,
    ReplicaBook,
    Version,
    decide,
    local_version,
)

ITEM = ("t", '{"PK": {"S": "a"}}')


def change(version: Version, image: dict[str, object] | None = None) -> Change:
    return Change(ITEM, {"PK": {"S": "a"}}, version, image)


def test_last_writer_wins_then_counter_then_region_name() -> None:
    assert decide(None, Version(1, 0, "a"))
    assert decide(Version(1, 0, "b"), Version(2, 0, "a"))
    assert not decide(Version(2, 0, "a"), Version(1, 0, "b"))
    assert decide(Version(2, 0, "a"), Version(2, 1, "a"))
    # Same time and counter in two regions: the region name breaks the tie, everywhere.
    assert decide(Version(2, 0, "a"), Version(2, 0, "b"))
    assert not decide(Version(2, 0, "b"), Version(2, 0, "a"))
    # The same write again is not applied twice.
    assert not decide(Version(2, 0, "a"), Version(2, 0, "a"))


def test_a_write_after_another_wins_even_when_the_clock_cannot_tell() -> None:
    first = Version(60_000, 0, "b")
    later = local_version("a", 60_000, first)
    assert later == Version(60_000, 1, "a") and decide(first, later)
    assert local_version("a", 61_000, first) == Version(61_000, 0, "a")
    # A stream clock that went backwards (rounding) still yields a later version.
    assert decide(first, local_version("a", 59_000, first))


A: dict[str, object] = {"v": "a"}
B: dict[str, object] = {"v": "b"}


def test_concurrent_writes_converge_to_one_winner_in_every_region() -> None:
    book = ReplicaBook()
    va = book.observe("a", ITEM, 1000, A)
    vb = book.observe("b", ITEM, 1000, B)
    assert va is not None and vb is not None
    # Each region is offered the other's write; only one of the two is applied anywhere.
    assert book.offer("a", change(vb, B))  # "b" > "a" at equal time
    assert not book.offer("b", change(va, A))
    assert book.applied("a", change(vb, B), replaced=A) is False
    assert book.known[("a", ITEM)] == book.known[("b", ITEM)] == vb


def test_a_replicated_write_coming_back_is_not_replicated_again() -> None:
    book = ReplicaBook()
    va = book.observe("a", ITEM, 1000, A)
    assert va is not None and book.offer("b", change(va, A))
    assert book.applied("b", change(va, A), replaced=None) is False
    assert book.observe("b", ITEM, 1000, A) is None  # our write, seen on b's stream
    assert book.known[("b", ITEM)] == va and not book.pending
    # The next record for the item in b is a client's write again, and it is newer.
    assert book.observe("b", ITEM, 1000, B) == Version(1000, 1, "b")


def test_a_record_that_changes_nothing_is_no_write() -> None:
    book = ReplicaBook()
    assert book.observe("a", ITEM, 1000, A) is not None
    # moto records a put of the same item again; DynamoDB records nothing.
    assert book.observe("a", ITEM, 2000, A) is None
    assert book.known[("a", ITEM)] == Version(1000, 0, "a")


def test_a_write_that_changes_nothing_awaits_no_record() -> None:
    book = ReplicaBook()
    assert book.observe("b", ITEM, 1000, A) is not None
    va = Version(2000, 0, "a")
    assert book.offer("b", change(va, A))
    assert book.applied("b", change(va, A), replaced=A) is False
    assert not book.pending
    assert book.observe("b", ITEM, 3000, B) == Version(3000, 0, "b")  # a client's write


def test_a_client_write_the_replicator_overwrote_is_written_back_and_wins() -> None:
    book = ReplicaBook()
    assert book.observe("b", ITEM, 1000, None) is not None  # b's copy: no item
    remote = Version(1500, 0, "a")
    assert book.offer("b", change(remote, A))
    # Before the write, a client of b wrote B (the replicator had not read it yet).
    restore = book.applied("b", change(remote, A), replaced=B)
    assert restore == B
    # b's stream: the client's B, our A, our B written back.
    vb = book.observe("b", ITEM, 1600, B)
    assert vb is not None and vb > remote  # replicated, and it wins everywhere
    assert book.observe("b", ITEM, 1600, A) is None
    assert book.observe("b", ITEM, 1600, B) is None
    assert book.known[("b", ITEM)] == vb and book.images[("b", ITEM)] == B
    assert not book.pending


def test_links_wait_the_lag_and_keep_order() -> None:
    links = Links(("a", "b", "c"))
    first, second = change(Version(1, 0, "a"), {"v": 1}), change(Version(2, 0, "a"), {"v": 2})
    links.send(first, now_ms=0)
    links.send(second, now_ms=10)
    assert links.due(now_ms=99, lag_ms=100) == []
    assert links.due(now_ms=100, lag_ms=100) == [("b", first), ("c", first)]
    assert links.due(now_ms=110, lag_ms=100) == [("b", second), ("c", second)]
    assert links.due(now_ms=10_000, lag_ms=100) == []


def test_changes_due_together_deliver_each_items_newest_in_order() -> None:
    links = Links(("a", "b"))
    other = ("t", '{"PK": "other"}')
    writes = [
        change(Version(1, 0, "a"), {"v": 1}),
        Change(other, {}, Version(2, 0, "a"), {"v": 2}),
        change(Version(3, 0, "a"), {"v": 3}),
    ]
    for i, c in enumerate(writes):
        links.send(c, now_ms=i)
    assert links.due(now_ms=1, lag_ms=0) == [("b", writes[0]), ("b", writes[1])]
    assert links.due(now_ms=5, lag_ms=0) == [("b", writes[2])]  # not due with the first
    links.send(writes[0], 10)
    links.send(writes[2], 11)
    assert links.due(now_ms=20, lag_ms=0) == [("b", writes[2])]


def test_a_partition_stops_both_directions_and_the_backlog_flows_when_healed() -> None:
    links = Links(("a", "b", "c"))
    out_of_b = change(Version(1, 0, "b"))
    into_b = [change(Version(t, 0, "a"), {"v": t}) for t in (1, 2, 3)]
    links.send(out_of_b, 0)
    for c in into_b:
        links.send(c, 0)
    during = links.due(now_ms=1000, lag_ms=0, partitioned=["b"])
    assert all(dest != "b" and c.source != "b" for dest, c in during)
    assert [c for dest, c in during if dest == "c"] == into_b[-1:]  # the newest of the item
    assert links.backlog() == {"b->a": 1, "b->c": 1, "a->b": 3}
    healed = links.due(now_ms=1000, lag_ms=0)
    # The backlog of one item: its newest write alone (last writer wins per item).
    assert [c for dest, c in healed if dest == "b"] == into_b[-1:]
    assert {(dest, c.source) for dest, c in healed if c is out_of_b} == {("a", "b"), ("c", "b")}
    assert links.backlog() == {}
