"""An operator's reset of a sharded quota (tests/integration/test_quota_reset.py) on
DynamoDB Local: a calendar quota whole for the rest of its window, a session quota with
no session open until the next take."""

from __future__ import annotations

import pytest

from tests._servers import EngineEndpoint
from tests.conftest import Tables
from tests.integration.test_quota_reset import (  # noqa: F401  (collected here)
    sharded,
    test_a_reset_calendar_quota_is_whole_until_its_window_ends,
    test_a_reset_session_quota_has_no_session_until_the_next_take,
)

pytestmark = pytest.mark.engine


@pytest.fixture
def tables(dynamodb_local: EngineEndpoint) -> Tables:
    return Tables(dynamodb_local.url)
