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


def test_concurrent_writes_converge_to_one_winner_in_every_region() -> None:
    book = ReplicaBook()
    va = book.observe("a", ITEM, 1000)
    vb = book.observe("b", ITEM, 1000)
    assert va is not None and vb is not None
    # Each region is offered the other's write; only one of the two is applied anywhere.
    applied_in_a = book.offer("a", change(vb))
    applied_in_b = book.offer("b", change(va))
    assert (applied_in_a, applied_in_b) == (True, False)  # "b" > "a" at equal time
    assert book.known[("a", ITEM)] == book.known[("b", ITEM)] == vb


def test_a_replicated_write_coming_back_is_not_replicated_again() -> None:
    book = ReplicaBook()
    va = book.observe("a", ITEM, 1000)
    assert va is not None and book.offer("b", change(va))
    assert book.observe("b", ITEM, 1000) is None  # our write, seen on b's stream
    assert book.known[("b", ITEM)] == va
    # The next record for the item in b is a client's write again, and it is newer.
    vb = book.observe("b", ITEM, 1000)
    assert vb == Version(1000, 1, "b")


def test_a_write_not_made_is_forgotten() -> None:
    book = ReplicaBook()
    va = book.observe("a", ITEM, 1000)
    assert va is not None and book.offer("b", change(va))
    book.forget("b", change(va))
    assert book.observe("b", ITEM, 2000) == Version(2000, 0, "b")


def test_links_wait_the_lag_and_keep_order() -> None:
    links = Links(("a", "b", "c"))
    first, second = change(Version(1, 0, "a"), {"v": 1}), change(Version(2, 0, "a"), {"v": 2})
    links.send(first, now_ms=0)
    links.send(second, now_ms=10)
    assert links.due(now_ms=99, lag_ms=100) == []
    assert links.due(now_ms=100, lag_ms=100) == [("b", first), ("c", first)]
    assert links.due(now_ms=110, lag_ms=100) == [("b", second), ("c", second)]
    assert links.due(now_ms=10_000, lag_ms=100) == []


def test_a_partition_stops_both_directions_and_the_backlog_flows_when_healed() -> None:
    links = Links(("a", "b", "c"))
    out_of_b = change(Version(1, 0, "b"))
    into_b = [change(Version(t, 0, "a"), {"v": t}) for t in (1, 2, 3)]
    links.send(out_of_b, 0)
    for c in into_b:
        links.send(c, 0)
    during = links.due(now_ms=1000, lag_ms=0, partitioned=["b"])
    assert all(dest != "b" and c.source != "b" for dest, c in during)
    assert [c for dest, c in during if dest == "c"] == into_b
    assert links.backlog() == {"b->a": 1, "b->c": 1, "a->b": 3}
    healed = links.due(now_ms=1000, lag_ms=0)
    assert [c for dest, c in healed if dest == "b"] == into_b  # in the order written
    assert {(dest, c.source) for dest, c in healed if c is out_of_b} == {("a", "b"), ("c", "b")}
    assert links.backlog() == {}
