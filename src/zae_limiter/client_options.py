"""The options of a repository's DynamoDB client: its timeouts, its region and endpoint.

With a `timeout` (what repositories use) a call gets one attempt: the library, not the
SDK, decides about retries.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import urlsplit

#: Seconds an acquire may take before it fails with RateLimiterUnavailable (see resilience.md).
DEFAULT_TIMEOUT = 1.0
#: The default against a local engine on loopback (moto, DynamoDB Local): on a busy laptop or
#: CI machine they stall far longer than DynamoDB does, and nothing there needs protecting.
LOCAL_TIMEOUT = 10.0


def resolve_timeout(timeout: float | None, endpoint_url: str | None) -> float:
    """The acquire bound: as given, else 1 s against AWS and 10 s against a local engine."""
    if timeout is not None:
        return timeout
    return LOCAL_TIMEOUT if is_local_endpoint(endpoint_url) else DEFAULT_TIMEOUT


def is_local_endpoint(endpoint_url: str | None) -> bool:
    """Whether the endpoint (as given, else AWS_ENDPOINT_URL) is on loopback: a local engine."""
    endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or ""
    host = urlsplit(endpoint).hostname or ""
    return host == "localhost" or host == "::1" or host.startswith("127.")


CONNECT_SHARE = 0.3
READ_SHARE = 0.5


def _timeouts(timeout: float | None) -> dict[str, Any]:
    if timeout is None:  # background work (aggregator, poller): patient, SDK retries
        return {
            "connect_timeout": 2,
            "read_timeout": 5,
            "retries": {"max_attempts": 2, "mode": "standard"},
        }
    if timeout <= 0:
        raise ValueError("timeout must be a positive number of seconds")
    return {
        "connect_timeout": CONNECT_SHARE * timeout,
        "read_timeout": READ_SHARE * timeout,
        "retries": {"total_max_attempts": 1, "mode": "standard"},
    }


def client_kwargs(
    region: str | None, endpoint_url: str | None, timeout: float | None = None
) -> dict[str, Any]:
    """Arguments for a DynamoDB client; local endpoints need a region and no account routing.

    With a `timeout` (what repositories use) a call gets one attempt (the library, not the
    SDK, decides about retries), and connect and read timeouts of 30% and 50% of it.
    """
    from botocore.config import Config

    endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL") or None
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    # Parameters are built by keys/ and covered by tests: botocore's validation of every
    # request would only spend client CPU on the hot path.
    options: dict[str, Any] = {
        **_timeouts(timeout),
        "max_pool_connections": 32,
        "parameter_validation": False,
    }
    if endpoint:
        options["account_id_endpoint_mode"] = "disabled"
        region = region or "us-east-1"
    kwargs: dict[str, Any] = {"config": Config(**options)}
    if region:
        kwargs["region_name"] = region
    if endpoint:
        kwargs["endpoint_url"] = endpoint
    return kwargs
