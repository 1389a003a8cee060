"""Local engines for the benchmarks: start one, point this process at it, stop it."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from zae_limiter.local import DYNAMODB_LOCAL, MOTO, LocalEngine, find_jar, find_java, local_env
from zae_limiter.local.errors import EngineNotInstalledError
from zae_limiter.local.process import LOCAL_CREDENTIALS, LOCAL_REGION


def dynamodb_local_missing() -> str | None:
    """Why DynamoDB Local cannot run here, or None when it can."""
    try:
        find_java()
        find_jar()
    except EngineNotInstalledError as missing:
        return str(missing)
    return None


@contextmanager
def local_environment(endpoint_url: str, endpoint_variable: bool = True) -> Iterator[None]:
    """AWS_* variables for `endpoint_url` while the block runs; restored afterwards (only
    the names it sets or clears: the rest of the environment is never touched).
    `endpoint_variable=False` leaves AWS_ENDPOINT_URL unset, for clients given their own."""
    wanted: dict[str, str | None] = {**local_env(endpoint_url)}
    if not endpoint_variable:
        wanted["AWS_ENDPOINT_URL"] = None
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        wanted[name] = None
    saved = {name: os.environ.get(name) for name in wanted}
    _set(wanted)
    try:
        yield
    finally:
        _set(saved)


def _set(values: dict[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextmanager
def running(engine: str) -> Iterator[LocalEngine]:
    """Start `engine` ("moto" or "dynamodb-local") with the environment pointing at it."""
    with LocalEngine.start(engine) as started, local_environment(started.endpoint_url):
        yield started


def table_name(prefix: str = "zael-bench") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def create_table(endpoint_url: str, prefix: str = "zael-bench", name: str | None = None) -> str:
    """Create the library's table (`name`, else a fresh one) with a patient client;
    returns its name.

    A JVM that is still warming up (DynamoDB Local on a busy machine) can take longer
    than the library's 5 s read timeout to answer the first CreateTable.
    """
    import boto3
    from botocore.config import Config

    from zae_limiter.table import create_table_params

    name = name or table_name(prefix)
    access_key, secret_key = LOCAL_CREDENTIALS
    client = boto3.session.Session().client(
        "dynamodb",
        endpoint_url=endpoint_url,
        region_name=LOCAL_REGION,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        config=Config(read_timeout=120, account_id_endpoint_mode="disabled"),
    )
    client.create_table(**create_table_params(name))
    client.get_waiter("table_exists").wait(
        TableName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120}
    )
    return name


__all__ = [
    "DYNAMODB_LOCAL",
    "MOTO",
    "create_table",
    "dynamodb_local_missing",
    "local_environment",
    "running",
    "table_name",
]
