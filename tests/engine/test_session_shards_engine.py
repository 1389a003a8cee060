"""The sharded session quota's tests (tests/integration/test_session_shards.py) on
DynamoDB Local: one session shared by every shard, and a split that conserves the
session's allowance to the last token, against the engine moto stands in for."""

from __future__ import annotations

import pytest

from tests._servers import EngineEndpoint
from tests.conftest import Tables
from tests.integration.test_session_shards import (  # noqa: F401  (collected here)
    sharded,
    test_a_split_session_quota_admits_exactly_its_allowance,
    test_every_shard_shares_the_session_the_first_take_opened,
)

pytestmark = pytest.mark.engine


@pytest.fixture
def tables(dynamodb_local: EngineEndpoint) -> Tables:
    return Tables(dynamodb_local.url)
