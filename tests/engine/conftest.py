"""Fixtures of the engine tier: real endpoints over HTTP, one per engine per session.

- `moto_server`: moto's server on a free loopback port; always available.
- `dynamodb_local`: AWS DynamoDB Local; skipped when Java 17 or the jar is missing.
- `engine_endpoint`: parametrised over both ("moto", "dynamodb-local").
- `engine_env`: the endpoint's AWS_* variables set for one test (monkeypatched).
- `user_client`: a boto3 client of the user's own on DynamoDB Local (botocore's retries).

Each yields a `tests._servers.EngineEndpoint` (`.engine`, `.url`, `.env`, `.client()`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from tests._servers import (
    DYNAMODB_LOCAL_SKIP,
    EngineEndpoint,
    dynamodb_local_missing,
    start_dynamodb_local,
    start_moto,
)

_FIXTURE_FOR_ENGINE = {"moto": "moto_server", "dynamodb-local": "dynamodb_local"}


@pytest.fixture(scope="session")
def moto_server() -> Iterator[EngineEndpoint]:
    endpoint, stop = start_moto()
    try:
        yield endpoint
    finally:
        stop()


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[EngineEndpoint]:
    missing = dynamodb_local_missing()
    if missing is not None:
        pytest.skip(f"{DYNAMODB_LOCAL_SKIP} ({missing})")
    # Installed but failing to start is an error, not a skip: that is a real bug to see.
    endpoint, stop = start_dynamodb_local()
    try:
        yield endpoint
    finally:
        stop()


@pytest.fixture(scope="session", params=list(_FIXTURE_FOR_ENGINE))
def engine_endpoint(request: pytest.FixtureRequest) -> EngineEndpoint:
    endpoint: EngineEndpoint = request.getfixturevalue(_FIXTURE_FOR_ENGINE[request.param])
    return endpoint


@pytest.fixture
def engine_env(
    engine_endpoint: EngineEndpoint, monkeypatch: pytest.MonkeyPatch
) -> EngineEndpoint:
    """Points default-configured boto3/aiobotocore clients (and the CLI) at the engine."""
    # A profile or session token from the developer's shell would override the fakes.
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    for name, value in engine_endpoint.env.items():
        monkeypatch.setenv(name, value)
    return engine_endpoint


@pytest.fixture
def user_client(dynamodb_local: EngineEndpoint) -> Iterator[Any]:
    """A boto3 client of the user's own: botocore's default config, retries included."""
    client = boto3.client("dynamodb", **{**dynamodb_local.client_kwargs(), "config": None})
    yield client
    client.close()
