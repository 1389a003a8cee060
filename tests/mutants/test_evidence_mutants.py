"""Mutants of the evidence a hot entity doubles on (flows/scaling/evidence.py, flows/write/take.py);
each must be caught by its test in tests/unit/test_flows_evidence.py (the last one, in
tests/unit/test_flows_doubling.py):

- lost races never counted (a write counts only itself in the window);
- a young window judged alone (the window before a restart ignored);
- a throttle judged on the current window only, never with the one before it;
- a throttled client that reads the shard's window but not its shard count;
- an evidence read that is not kept as the shard's image (the next write reads again);
- one hot shard of a multi-shard entity enough to double it;
- many shards doubled on two windows, however quiet the average shard;
- the average counting each window's first write (a write too many in every window);
- a client refused over and over held back by windows a fleet not yet spread keeps quiet;
- a window that began before shard 0's last doubling taken as evidence, and a doubling
  turned down for that alone that waits a whole window before the next try;
- a throttle's reasons ignored (tests/unit/test_throttling_reasons.py): a partition's
  refusal no proof, a table's refusal no bar to a doubling; a refusal taken as proof on
  an entity of many shards.
"""

from __future__ import annotations

from typing import Any

from tests.mutants import must_fail, mutant, mutant_wrapping
from tests.unit import test_flows_doubling as doubling_tests
from tests.unit import test_flows_evidence as evidence_tests
from tests.unit import test_throttling_reasons as reasons_tests
from zae_limiter.flows.scaling import any_shard, doubling, evidence
from zae_limiter.flows.write import take as take_module


def _only_itself(original: Any) -> Any:
    def planned(*args: Any, **kwargs: Any) -> Any:
        if len(args) > 7:
            args = (*args[:7], 0)
        kwargs.pop("failed_writes", None)
        return original(*args, **kwargs)

    return planned


def test_the_count_test_catches_lost_races_left_uncounted() -> None:
    evidence_tests.test_the_write_that_lands_counts_the_races_its_take_lost()
    # flows/write/take.py calls plan_write through the name it imported: that is the one to break
    with mutant_wrapping(take_module, "plan_write", _only_itself):
        must_fail(evidence_tests.test_the_write_that_lands_counts_the_races_its_take_lost)


def test_the_window_test_catches_a_young_window_judged_alone() -> None:
    evidence_tests.test_a_young_window_is_judged_with_the_one_before_it()

    def alone(seen: Any, _longest: bool = False) -> Any:
        span = seen.seen_ms - seen.start_ms
        return (seen.start_ms, seen.writes, span) if span >= evidence.MIN_EVIDENCE_MS else None

    with mutant(evidence, "measured", alone):
        must_fail(evidence_tests.test_a_young_window_is_judged_with_the_one_before_it)


def test_the_stretch_test_catches_a_throttle_judged_on_one_window() -> None:
    body = evidence_tests.test_a_throttle_on_a_partition_of_few_writes_is_judged_on_both_windows
    body()

    def current_only(original: Any) -> Any:
        return lambda seen, _longest=False: original(seen)

    with mutant_wrapping(evidence, "measured", current_only):
        must_fail(body)


def test_the_read_test_catches_a_read_that_does_not_teach_the_count() -> None:
    evidence_tests.test_the_read_teaches_the_shard_count()

    def forgetful(original: Any) -> Any:
        def learn(state: Any, level: Any, item: Any, now_ms: int) -> Any:
            # the count the read learns from is the one the client knew
            known = state.shard_count(level.entity_id, level.resource)
            return original(state, level, {**item, "shard_count": {"N": str(known)}}, now_ms)

        return learn

    with mutant_wrapping(evidence, "learn", forgetful):
        must_fail(evidence_tests.test_the_read_teaches_the_shard_count)


def test_the_entity_test_catches_one_hot_shard_doubling_an_entity() -> None:
    evidence_tests.test_on_an_entity_of_several_shards_one_hot_shard_is_not_enough()
    # the throttled shard's own evidence decides, as before the rule (the test module's
    # name is the one its body calls)
    with mutant(evidence_tests, "entity_evidence", evidence.read_evidence):
        must_fail(evidence_tests.test_on_an_entity_of_several_shards_one_hot_shard_is_not_enough)


def test_the_average_test_catches_many_shards_doubling_on_two_windows() -> None:
    body = doubling_tests.test_many_shards_double_only_when_they_are_busy_on_average
    body(10)
    with mutant(doubling, "busy_on_average", lambda *_a: True):
        must_fail(body, 10)


def test_the_reason_tests_catch_a_throttles_reasons_ignored() -> None:
    said_partition = reasons_tests.test_a_throttle_that_names_the_partition_doubles_without_a_window
    said_table = (
        reasons_tests.test_a_throttle_that_names_the_table_never_doubles_even_on_a_hot_window
    )
    said_partition()
    said_table()

    def deaf(original: Any) -> Any:
        # as before reasons: every throttle judged from the windows alone
        return lambda state, level, now_ms, _partition=None: original(state, level, now_ms)

    # flows/scaling/any_shard.py calls entity_evidence through the name it imported
    with mutant_wrapping(any_shard, "entity_evidence", deaf):
        must_fail(said_partition)
        must_fail(said_table)


def test_the_reason_tests_catch_a_refusal_taken_as_proof_on_many_shards() -> None:
    tests = reasons_tests
    body = tests.test_on_an_entity_of_several_shards_a_refusal_is_no_proof_the_windows_decide
    body()
    with mutant(evidence, "REFUSAL_PROVES_BELOW", 1 << 30):
        must_fail(body)


def test_the_reason_tests_catch_refusals_on_two_shards_taken_for_no_proof() -> None:
    body = reasons_tests.test_refusals_named_on_two_shards_of_one_acquire_prove_the_count_too_low
    body(2)
    # flows/any_shard.py calls it through the name it imported
    with mutant(any_shard, "refusals_prove", lambda *_a: False):
        must_fail(body, 2)


def test_the_image_test_catches_an_evidence_read_that_is_not_kept() -> None:
    body = evidence_tests.test_an_evidence_read_is_the_image_the_next_write_plans_from
    body()

    def counts_only(original: Any) -> Any:
        def learn(state: Any, level: Any, item: Any, now_ms: int) -> Any:
            meta = original(state, level, item, now_ms)
            meta.images.items.pop((level.resource, level.shard_id), None)  # the count, no image
            return meta

        return learn

    with mutant_wrapping(evidence, "learn", counts_only):
        must_fail(body)


def _first_write_counted(meta: Any, resource: str, count: int, now_ms: int) -> bool:
    """`busy_on_average` as it was: each window's rate counts the write that restarted it."""
    rates = []
    for (name, _shard), seen in meta.shards.seen.items():
        stretch = evidence.measured(seen)
        if name != resource or seen.shard_count != count or stretch is None:
            continue
        rates.append(max(0, stretch[1] - 1) * 1000 / stretch[2] / seen.partition_wcu)
    return len(rates) >= 2 and sum(rates) / len(rates) >= doubling.AVERAGE_SHARE


def test_the_average_test_catches_a_windows_first_write_counted() -> None:
    body = doubling_tests.test_a_windows_first_write_is_not_counted_in_the_average
    body()
    with mutant(doubling, "busy_on_average", _first_write_counted):
        must_fail(body)


def test_the_refusal_row_test_catches_a_saturated_client_held_back_by_its_windows() -> None:
    body = doubling_tests.test_a_client_refused_over_and_over_doubles_on_windows_that_average_low
    row = doubling.SATURATED_ROW
    body(row)
    with mutant(doubling, "refused_over_and_over", lambda *_a: False):
        must_fail(body, row)


def test_the_floor_test_catches_evidence_older_than_the_last_doubling_used() -> None:
    body = doubling_tests.test_a_window_that_began_before_shard_zeros_last_doubling_is_no_evidence
    body()
    with mutant(evidence, "last_doubling", lambda *_a: -1):
        must_fail(body)


def test_the_retry_test_catches_a_stale_turn_down_that_waits_a_whole_window() -> None:
    body = (
        doubling_tests.test_evidence_turned_down_as_older_than_the_doubling_may_be_tried_again_soon
    )
    body()
    with mutant(doubling, "_turned_down", lambda *_a: None):
        must_fail(body)
