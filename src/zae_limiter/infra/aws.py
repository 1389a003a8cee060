"""boto3 clients for one target (region, endpoint), and the translation of their errors.

Local endpoints (moto server, DynamoDB Local) take any credentials but must not be sent
account-id endpoint routing, which botocore >= 1.44 would otherwise attempt.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from zae_limiter.errors import ValidationError, ZaeLimiterError, map_client_error
from zae_limiter.infra.errors import InfraError

LOCAL_REGION = "us-east-1"


class Aws:
    """Creates and caches the clients a deploy needs, all pointed at one target."""

    def __init__(self, region: str | None = None, endpoint_url: str | None = None) -> None:
        self.endpoint_url = endpoint_url
        session = boto3.session.Session(region_name=region)
        resolved = session.region_name or (LOCAL_REGION if endpoint_url else None)
        if resolved is None:
            raise ValidationError(
                "no AWS region: pass --region or set AWS_REGION / AWS_DEFAULT_REGION"
            )
        self.region: str = resolved
        self._session = session
        self._clients: dict[str, Any] = {}

    def credentials(self) -> Any:
        """botocore's credentials for this target (None: no source in the chain had any)."""
        return self._session.get_credentials()

    def client(self, service: str) -> Any:
        if service not in self._clients:
            config = Config(retries={"mode": "standard", "max_attempts": 5})
            if self.endpoint_url:
                config = config.merge(Config(account_id_endpoint_mode="disabled"))
            self._clients[service] = self._session.client(
                service,  # type: ignore[call-overload]
                region_name=self.region,
                endpoint_url=self.endpoint_url,
                config=config,
            )
        return self._clients[service]


def error_code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


def error_message(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Message", error))


@contextlib.contextmanager
def translated(action: str, *, table_name: str | None = None) -> Iterator[None]:
    """Turn botocore's exceptions into ours, naming what we were doing."""
    try:
        yield
    except ZaeLimiterError:
        raise
    except ClientError as error:
        code, message = error_code(error), error_message(error)
        if table_name is not None and error.operation_name in _DYNAMODB_OPERATIONS:
            raise map_client_error(code, message, table_name=table_name) from error
        raise InfraError(f"{action} failed: {code}: {message}") from error
    except NoCredentialsError as error:
        raise InfraError(
            f"{action} failed: no AWS credentials (set AWS_PROFILE or AWS_ACCESS_KEY_ID)"
        ) from error
    except NoRegionError as error:
        raise ValidationError("no AWS region: pass --region or set AWS_REGION") from error
    except BotoCoreError as error:
        raise InfraError(f"{action} failed: {error}") from error


_DYNAMODB_OPERATIONS = frozenset(
    {"CreateTable", "DescribeTable", "DeleteTable", "PutItem", "GetItem", "UpdateTimeToLive"}
)
