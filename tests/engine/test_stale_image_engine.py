"""Issue 35's stale image (tests/sim/test_stale_image.py) on DynamoDB Local: the same
directed schedule, every request answered by AWS's own engine."""

from __future__ import annotations

import boto3
import pytest

from tests._servers import EngineEndpoint, unique_name
from tests.sim.sim_mutants import MUTANTS
from tests.sim.test_stale_image import stale_image
from zae_limiter.sim.backends import client_backend

pytestmark = pytest.mark.engine


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed", "fix-reverted"])
def test_the_stale_image_on_dynamodb_local(dynamodb_local: EngineEndpoint, fixed: bool) -> None:
    dynamo = boto3.client("dynamodb", **dynamodb_local.client_kwargs())
    table = unique_name("stale")
    backend = client_backend(dynamo, table)
    if fixed:
        s = stale_image(backend, table)
        assert s.admitted("rpm") <= 1000, s.checker.violations
        assert not s.checker.violations
        return
    with MUTANTS["stale-image-fix-reverted"]():
        s = stale_image(backend, table)
    assert s.admitted("rpm") > 1000
    assert any(v.kind == "over-admission" for v in s.checker.violations)
