"""The partition emulator's pure parts: which partitions a request writes, and the window."""

from __future__ import annotations

import threading

import pytest

from zae_limiter.testing.emulator import Count, PartitionWindow, operation, written_partitions
from zae_limiter.testing.partitions import PARTITION, TABLE


def s(value: str) -> dict[str, str]:
    return {"S": value}


class TestWrittenPartitions:
    def test_operation_strips_the_target_prefix(self) -> None:
        assert operation("DynamoDB_20120810.UpdateItem") == "UpdateItem"
        assert operation(None) == ""

    @pytest.mark.parametrize("op", ["UpdateItem", "DeleteItem"])
    def test_key_of_single_item_writes(self, op: str) -> None:
        body = {"TableName": "t", "Key": {"PK": s("a"), "SK": s("#STATE")}}
        assert written_partitions(op, body) == ["a"]

    def test_put_uses_the_item(self) -> None:
        assert written_partitions("PutItem", {"Item": {"PK": s("p"), "x": {"N": "1"}}}) == ["p"]

    def test_transaction_counts_every_item_including_condition_checks(self) -> None:
        body = {
            "TransactItems": [
                {"Update": {"Key": {"PK": s("a")}}},
                {"Put": {"Item": {"PK": s("b")}}},
                {"Delete": {"Key": {"PK": s("a")}}},
                {"ConditionCheck": {"Key": {"PK": s("c")}}},
            ]
        }
        assert written_partitions("TransactWriteItems", body) == ["a", "b", "a", "c"]

    def test_batch_write_counts_puts_and_deletes_across_tables(self) -> None:
        body = {
            "RequestItems": {
                "t1": [{"PutRequest": {"Item": {"PK": s("a")}}}],
                "t2": [{"DeleteRequest": {"Key": {"PK": s("b")}}}],
            }
        }
        assert sorted(written_partitions("BatchWriteItem", body)) == ["a", "b"]

    @pytest.mark.parametrize("op", ["GetItem", "Query", "BatchGetItem", "DescribeTable", ""])
    def test_reads_write_nothing(self, op: str) -> None:
        assert written_partitions(op, {"Key": {"PK": s("a")}}) == []

    def test_other_key_attribute_and_number_keys(self) -> None:
        assert written_partitions("PutItem", {"Item": {"id": {"N": "7"}}}, "id") == ["7"]
        assert written_partitions("PutItem", {"Item": {"id": {"N": "7"}}}) == []


class TestPartitionWindow:
    def test_admits_up_to_the_limit_per_partition_per_second(self) -> None:
        window = PartitionWindow(3)
        assert [window.admit(["a"], 100.1) for _ in range(4)] == [True, True, True, False]
        assert window.admit(["b"], 100.5)  # another partition is not affected
        assert window.admit(["a"], 101.0)  # a new second, a new window
        stats = window.stats()
        assert stats.by_partition == {"a": Count(4, 1), "b": Count(1, 0)}
        assert stats.by_second == {100: Count(4, 1), 101: Count(1, 0)}
        assert stats.second(100, "a") == Count(3, 1)
        assert (stats.forwarded_writes, stats.throttled_writes) == (5, 1)
        assert stats.throttled_requests == 1
        assert stats.throttled_for("a") == 1 and stats.throttled_for("b") == 0

    def test_multi_item_request_is_refused_whole_when_one_partition_is_full(self) -> None:
        window = PartitionWindow(2)
        assert window.admit(["a", "a"], 5.0)
        assert not window.admit(["a", "b"], 5.2)
        assert window.admit(["b", "b"], 5.3)  # the refused request consumed nothing on b
        assert window.stats().by_partition == {"a": Count(2, 1), "b": Count(2, 1)}

    def test_a_request_larger_than_the_limit_is_always_refused(self) -> None:
        window = PartitionWindow(2)
        assert not window.admit(["a"] * 3, 1.0)

    def test_a_late_request_counts_in_the_current_window(self) -> None:
        window = PartitionWindow(1)
        assert window.admit(["a"], 10.2)
        assert not window.admit(["a"], 9.9)  # clocks of threads may disagree by a hair
        assert window.stats().by_second == {10: Count(1, 1)}

    def test_reads_and_reset(self) -> None:
        window = PartitionWindow(1)
        window.count_read()
        window.admit(["a"], 1.0)
        assert window.stats().reads == 1
        window.reset()
        assert window.stats().forwarded_writes == 0
        assert window.admit(["a"], 1.0)

    def test_counts_are_exact_under_threads(self) -> None:
        window = PartitionWindow(500)
        admitted: list[bool] = []

        def hammer() -> None:
            for _ in range(200):
                admitted.append(window.admit(["hot"], 42.0))

        threads = [threading.Thread(target=hammer) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sum(admitted) == 500
        assert window.stats().by_partition["hot"] == Count(500, 300)

    def test_limit_must_be_positive(self) -> None:
        with pytest.raises(ValueError):
            PartitionWindow(0)


class TestSmoothWindow:
    def test_a_bucket_per_partition_refilled_continuously(self) -> None:
        window = PartitionWindow(4, shape="smooth")
        assert [window.admit(["a"], 10.0) for _ in range(5)] == [True] * 4 + [False]
        assert window.admit(["b"], 10.0)
        assert not window.admit(["a"], 10.2)  # 0.8 of a token back: not enough
        assert window.admit(["a"], 10.25)  # one token back after a quarter second
        assert not window.admit(["a"], 10.25)
        assert [window.admit(["a"], 20.0) for _ in range(5)] == [True] * 4 + [False]
        assert window.stats().by_partition["a"] == Count(9, 4)

    def test_a_refused_request_takes_nothing(self) -> None:
        window = PartitionWindow(2, shape="smooth")
        assert not window.admit(["a", "b", "b", "b"], 1.0)
        assert window.admit(["a", "a"], 1.0) and window.admit(["b", "b"], 1.0)

    def test_a_late_request_refills_nothing(self) -> None:
        window = PartitionWindow(1, shape="smooth")
        assert window.admit(["a"], 5.0)
        assert not window.admit(["a"], 4.0)
        assert window.admit(["a"], 6.0)

    def test_unknown_shape(self) -> None:
        with pytest.raises(ValueError):
            PartitionWindow(1, shape="sliding")


class TestTableLimit:
    def test_every_key_shares_the_table_limit(self) -> None:
        window = PartitionWindow(10, "smooth", table_writes_per_second=4)
        admitted = [window.admit([f"k{i}"], 100.0) for i in range(6)]
        assert admitted == [True] * 4 + [False] * 2  # each key far below its own 10/s
        stats = window.stats()
        assert stats.by_partition["k4"] == Count(0, 1)
        assert (stats.forwarded_writes, stats.throttled_writes) == (4, 2)

    def test_the_table_refills_continuously(self) -> None:
        window = PartitionWindow(10, "smooth", table_writes_per_second=4)
        assert all(window.admit(["a"], 100.0) for _ in range(4))
        assert not window.admit(["b"], 100.0)
        assert window.admit(["b"], 100.25)  # a quarter second brings one write back
        assert not window.admit(["b"], 100.25)

    def test_a_request_refused_by_its_partition_takes_nothing_from_the_table(self) -> None:
        window = PartitionWindow(1, "fixed", table_writes_per_second=2)
        assert window.admit(["a"], 5.0)
        assert not window.admit(["a"], 5.0)  # the partition is full, the table is not
        assert window.admit(["b"], 5.0)
        assert not window.admit(["c"], 5.0)  # now the table is

    @pytest.mark.parametrize("shape", ["fixed", "smooth"])
    def test_a_refusal_says_whose_limit_refused_it(self, shape: str) -> None:
        window = PartitionWindow(1, shape, table_writes_per_second=2)
        assert window.refusal(["a"], 5.0) is None
        assert window.refusal(["a"], 5.0) == PARTITION  # a is full, the table is not
        assert window.refusal(["b"], 5.0) is None
        assert window.refusal(["c"], 5.0) == TABLE  # c is empty, the table is full

    def test_a_multi_item_request_counts_every_item_against_the_table(self) -> None:
        window = PartitionWindow(10, "smooth", table_writes_per_second=3)
        assert not window.admit(["a", "b", "c", "d"], 1.0)
        assert window.admit(["a", "b", "c"], 1.0)

    def test_no_table_limit_by_default_and_reset_refills_it(self) -> None:
        window = PartitionWindow(2, "smooth")
        assert all(window.admit([f"k{i}"], 1.0) for i in range(50))
        limited = PartitionWindow(2, "smooth", table_writes_per_second=1)
        assert limited.admit(["a"], 1.0) and not limited.admit(["b"], 1.0)
        limited.reset()
        assert limited.admit(["b"], 1.0)

    def test_table_limit_must_be_positive(self) -> None:
        with pytest.raises(ValueError, match="table_writes_per_second"):
            PartitionWindow(5, table_writes_per_second=0)
