"""The count raise's snapshot rule on DynamoDB Local (tests/integration/test_count_raise.py
on moto): AWS's own engine evaluates the condition that compares a snapshot with the
full-at time it replaces, and refuses the raise that would hand an unmade shard a
give-back."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from tests._servers import EngineEndpoint, unique_name
from tests.conftest import Clock
from tests.integration import test_count_raise as count_raise
from zae_limiter import SyncRateLimiter, SyncRepository

pytestmark = pytest.mark.engine


@pytest.fixture
def local(dynamodb_local: EngineEndpoint) -> Iterator[tuple[SyncRateLimiter, str, Clock]]:
    name, clock = unique_name(), Clock()
    # A boto3 client of our own: the test sends the raw writes through it too.
    client = boto3.client("dynamodb", endpoint_url=dynamodb_local.url, region_name="us-east-1")
    repo = SyncRepository.open(name=name, client=client, create_table=True, clock=clock,
                               lean=False)  # fmt: skip
    yield SyncRateLimiter(repo), name, clock
    repo.close()


def test_a_raise_never_hands_a_give_back_to_an_unmade_shard_on_dynamodb_local(
    local: tuple[SyncRateLimiter, str, Clock],
) -> None:
    count_raise.test_a_raise_never_hands_a_give_back_to_an_unmade_shard(*local)


def test_a_raise_after_takes_goes_through_on_dynamodb_local(
    local: tuple[SyncRateLimiter, str, Clock],
) -> None:
    count_raise.test_a_raise_after_takes_snapshots_what_the_donor_holds(*local)
