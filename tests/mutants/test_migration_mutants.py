"""Mutants of the migration to schema 3 (migrations/v0003_full_at_buckets.py): each
schema-2 bucket item becomes the full-at time of the tokens it held.

- converted as full: the item's `tk` ignored (its write still conditioned on the `tk` it
  read, so the conversion goes through), and the tokens an old client had spent come back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import boto3
import pytest
from moto import mock_aws

from tests.integration import test_migration_v0003 as conversion_tests
from tests.integration import test_migrations as migration_tests
from tests.mutants import must_fail, mutant_wrapping
from zae_limiter import keys
from zae_limiter.migrations import v0003_full_at_buckets as v0003


def _converted_full(original: Callable[..., int]) -> Callable[..., int]:
    def broken(state: Any, _tk: int, _rf: int, now_ms: int, count: int, held: int) -> int:
        return original(state, state.room(count, held), now_ms, now_ms, count, held)

    return broken


def converted_full() -> AbstractContextManager[Any]:
    return mutant_wrapping(v0003, "legacy_tokens", _converted_full)


@pytest.fixture
def ddb() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("dynamodb", region_name="us-east-1")


def test_the_admission_test_catches_a_conversion_as_full(ddb: Any, table_name: str) -> None:
    with converted_full():
        must_fail(migration_tests.test_a_migrated_schema_2_bucket_admits_only_what_it_held,
                  ddb, table_name)  # fmt: skip


def test_the_conversion_test_catches_a_conversion_as_full(ddb: Any, table_name: str) -> None:
    body = conversion_tests.test_run_converts_every_legacy_item_to_the_tokens_it_held
    with converted_full():
        must_fail(body, ddb, table_name)


def _raise_on_schema_2(original: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """A count raise without its refusal of a schema-2 shard 0 (seed 2917's fix reverted)."""

    def broken(*args: Any, **kwargs: Any) -> dict[str, Any]:
        params = original(*args, **kwargs)
        guard = " AND attribute_not_exists(#refilled)"
        condition = params["ConditionExpression"].replace(guard, "")
        names = {k: v for k, v in params["ExpressionAttributeNames"].items() if k != "#refilled"}
        return {**params, "ConditionExpression": condition, "ExpressionAttributeNames": names}

    return broken


def raise_on_schema_2() -> AbstractContextManager[Any]:
    return mutant_wrapping(keys, "double_shards", _raise_on_schema_2)


def test_the_count_raise_test_catches_a_raise_on_a_schema_2_item(
    ddb: Any, table_name: str
) -> None:
    body = migration_tests.test_a_count_raise_on_a_schema_2_bucket_creates_no_tokens
    with raise_on_schema_2():
        must_fail(body, ddb, table_name)
