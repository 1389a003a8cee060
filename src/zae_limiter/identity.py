"""Who makes a change: the principal recorded in audit events.

STS `GetCallerIdentity` is asked once per client, and only when it first changes
configuration (the acquire path never asks). It needs no IAM permission, but a local
engine may not serve STS (DynamoDB Local does not): then the principal is derived from the
credentials' access key id, and a change is never refused because STS is unreachable.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any
from urllib.parse import urlsplit

log = logging.getLogger("zae_limiter")

#: What a principal is called when neither STS nor the credentials can tell.
UNKNOWN = "unknown"
#: STS is a small call; a local engine that does not serve it should not hold a change up.
_STS_TIMEOUT = 2.0


def _is_local(endpoint_url: str | None) -> bool:
    host = urlsplit(endpoint_url or "").hostname or ""
    return host == "localhost" or host == "::1" or host.startswith("127.")


def sts_kwargs(region: str | None, endpoint_url: str | None) -> dict[str, Any]:
    """An STS client on the local engine's endpoint when there is one, else AWS's."""
    from botocore.config import Config

    config = Config(
        connect_timeout=_STS_TIMEOUT,
        read_timeout=_STS_TIMEOUT,
        retries={"total_max_attempts": 1, "mode": "standard"},
    )
    kwargs: dict[str, Any] = {"config": config, "region_name": region or "us-east-1"}
    if _is_local(endpoint_url):
        kwargs["endpoint_url"] = endpoint_url
    return kwargs


def from_credentials(credentials: Any) -> str:
    access_key = getattr(credentials, "access_key", None)
    return f"access-key:{access_key}" if access_key else UNKNOWN


def _arn(response: Any) -> str | None:
    arn = response.get("Arn") if isinstance(response, dict) else None
    return str(arn) if arn else None


def _async_session() -> Any:
    from aiobotocore.session import get_session

    return get_session()


def _sync_session() -> Any:
    import boto3

    return boto3.session.Session()


def _async_sts(session: Any, region: str | None, endpoint_url: str | None) -> Any:
    return session.create_client("sts", **sts_kwargs(region, endpoint_url))


def _sync_sts(session: Any, region: str | None, endpoint_url: str | None) -> Any:
    return contextlib.closing(session.client("sts", **sts_kwargs(region, endpoint_url)))


async def _async_credentials(session: Any) -> Any:
    credentials = await session.get_credentials()
    return None if credentials is None else await credentials.get_frozen_credentials()


def _sync_credentials(session: Any) -> Any:
    return session.get_credentials()


# unasync: source
async def async_principal(region: str | None, endpoint_url: str | None) -> str:
    """The caller's ARN from STS, or `access-key:{id}` when STS cannot be asked."""
    session = _async_session()
    try:
        async with _async_sts(session, region, endpoint_url) as sts:
            arn = _arn(await sts.get_caller_identity())
    except Exception as error:  # any failure: fall back, never block the change
        log.info("STS GetCallerIdentity failed (%s); using the access key id", error)
        arn = None
    return arn or from_credentials(await _async_credentials(session))


# unasync: generated from the source above by tools/unasync.py; do not edit
def sync_principal(region: str | None, endpoint_url: str | None) -> str:
    """The caller's ARN from STS, or `access-key:{id}` when STS cannot be asked."""
    session = _sync_session()
    try:
        with _sync_sts(session, region, endpoint_url) as sts:
            arn = _arn(sts.get_caller_identity())
    except Exception as error:  # any failure: fall back, never block the change
        log.info("STS GetCallerIdentity failed (%s); using the access key id", error)
        arn = None
    return arn or from_credentials(_sync_credentials(session))


# unasync: end
