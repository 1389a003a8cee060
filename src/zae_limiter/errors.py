"""One exception tree for the library.

`map_client_error` is the only place where a DynamoDB error code becomes ours; it works
on the error's code and message so that this module never imports botocore. The driver
(drivers.py) raises the errors no DynamoDB answer carries: a deadline that passed, a call
the capacity budget refused, an endpoint that could not be reached.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from zae_limiter.limit_status import LimitStatus


class ZaeLimiterError(Exception):
    """Base of every error the library raises on purpose."""


class ValidationError(ZaeLimiterError, ValueError):
    """The caller passed something that cannot be right; nothing was written."""


class EntityNotFoundError(ZaeLimiterError, LookupError):
    def __init__(self, entity_id: str) -> None:
        super().__init__(
            f"entity {entity_id!r} does not exist; create it first with create_entity()"
        )
        self.entity_id = entity_id


class EntityExistsError(ZaeLimiterError):
    def __init__(self, entity_id: str) -> None:
        super().__init__(f"entity {entity_id!r} already exists")
        self.entity_id = entity_id


class TableNotFoundError(ZaeLimiterError):
    def __init__(self, table_name: str, region: str | None = None) -> None:
        where = f" in region {region}" if region else ""
        super().__init__(
            f"table {table_name!r} not found{where}; deploy it with "
            f"`zae-limiter deploy --name {table_name}` (or open with create_table=True "
            "on a local engine)"
        )
        self.table_name = table_name
        self.stack_name = table_name


class SchemaVersionError(ZaeLimiterError):
    """The table's schema and this client do not fit together."""


class RateLimiterUnavailable(ZaeLimiterError):
    """DynamoDB could not be reached or refused the call (throttling, timeouts, 5xx).

    `reasons`: the `reason` of each ThrottlingReason DynamoDB gave with a throttle
    (`TableWriteKeyRangeThroughputExceeded`, ...; empty when it gave none)."""

    def __init__(
        self, message: str, *, code: str | None = None, reasons: Sequence[str] = ()
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reasons = tuple(reasons)

    @property
    def throttled(self) -> bool:
        """DynamoDB refused the write for capacity (a partition or the table is hot), or
        the client, refused again and again just before, did not send it (`SHED`): either
        way, back off and try again shortly."""
        return self.code in THROTTLE_CODES or self.code == SHED

    @property
    def denied(self) -> bool:
        """The caller's IAM policy does not allow the call: waiting will not help, a grant
        will (a stack deployed before the grant existed, or a permissions boundary)."""
        return self.code in DENIED_CODES

    @property
    def partition_throttled(self) -> bool | None:
        """Whose limit refused the call, when DynamoDB said: True for a partition's own
        (a key range past its throughput), False for the table's or the account's (more
        partitions would not help), None when it gave no reason (older endpoints,
        emulators): the caller has to judge from what it measured."""
        if not self.throttled or not self.reasons:
            return None
        return any(reason.endswith(KEY_RANGE_REASON) for reason in self.reasons)


class RateLimitExceeded(ZaeLimiterError):
    """The request would take more than one or more limits allow."""

    def __init__(self, violations: Sequence[LimitStatus], retry_after_seconds: float) -> None:
        self.violations = tuple(violations)
        self.retry_after_seconds = retry_after_seconds
        names = ", ".join(f"{v.entity_id}/{v.resource}/{v.limit_name}" for v in self.violations)
        super().__init__(f"rate limit exceeded ({names}); retry after {retry_after_seconds:.3f}s")

    @property
    def retry_after_header(self) -> str:
        """Value for an HTTP `Retry-After` header: whole seconds, rounded up, at least 1."""
        return str(max(1, math.ceil(self.retry_after_seconds)))

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready body for an HTTP 429 response."""
        return {
            "error": "rate_limit_exceeded",
            "message": str(self),
            "retry_after_seconds": self.retry_after_seconds,
            "limits": [
                {
                    "entity_id": v.entity_id,
                    "resource": v.resource,
                    "limit": v.limit_name,
                    "kind": v.kind,
                    "capacity": v.capacity,
                    "available": v.available,
                    "requested": v.requested,
                    "retry_after_seconds": v.retry_after_seconds,
                    "resets_at_ms": v.resets_at_ms,
                }
                for v in self.violations
            ],
        }


# DynamoDB's error codes, named once: every module that matches a code uses these.
CONDITION_FAILED = "ConditionalCheckFailedException"
#: A cancelled transaction's reason for an item whose condition failed.
CONDITION_FAILED_REASON = "ConditionalCheckFailed"
TRANSACTION_CANCELLED = "TransactionCanceledException"
TRANSACTION_CONFLICT = "TransactionConflictException"
NOT_FOUND = "ResourceNotFoundException"
INVALID_REQUEST = "ValidationException"
PROVISIONED_THROUGHPUT_EXCEEDED = "ProvisionedThroughputExceededException"
THROTTLING = "ThrottlingException"
REQUEST_LIMIT_EXCEEDED = "RequestLimitExceeded"
#: DynamoDB's answer to a call the caller's IAM policy does not allow.
ACCESS_DENIED = "AccessDeniedException"
#: How a denial comes back: DynamoDB's code, and a bare HTTP 403 (an endpoint or proxy that
#: answers a denial without DynamoDB's error body, as moto's IAM check does).
DENIED_CODES = frozenset({ACCESS_DENIED, "AccessDenied", "403"})

# The library's own codes on a `RateLimiterUnavailable` (its `code`), for calls never sent.
#: The client's capacity budget (`capacity=`) refused the call.
CAPACITY_EXHAUSTED = "CapacityExhausted"
#: The call's deadline passed before DynamoDB answered (or before the call was sent).
CALL_TIMEOUT = "Timeout"
#: An audited change kept losing to concurrent changes of the same item.
CONCURRENT_CHANGE = "ConcurrentChange"
#: A shard the entity's count does not have (a probe, or a stale count after a merge).
SHARD_NOT_FOUND = "ShardNotFound"
#: Every conditional write of a take lost its race: none of them was applied.
CONTENDED = "Contended"
#: A client without reserves whose writes to the bucket DynamoDB refused again and again
#: just now failed the acquire without sending it (flows/scaling/throttled.py `sheds`).
#: Its own code, not DynamoDB's throttle code, since nothing was sent; `throttled` is
#: True all the same (the caller's answer is the same: back off).
SHED = "Shed"

#: The limit type of a ThrottlingReason that names one partition (a hot key range); the
#: others (ProvisionedThroughputExceeded, AccountLimitExceeded,
#: MaxOnDemandThroughputExceeded) are the table's or the account's.
KEY_RANGE_REASON = "KeyRangeThroughputExceeded"
#: The reason DynamoDB gives for a write refused by one partition of a table.
TABLE_WRITE_KEY_RANGE = "TableWrite" + KEY_RANGE_REASON
#: The reason it gives for a write refused by a provisioned table's capacity.
TABLE_WRITE_PROVISIONED = "TableWriteProvisionedThroughputExceeded"

THROTTLE_CODES = frozenset({PROVISIONED_THROUGHPUT_EXCEEDED, THROTTLING, REQUEST_LIMIT_EXCEEDED})

_UNAVAILABLE_CODES = THROTTLE_CODES | {
    "InternalServerError",
    "ServiceUnavailable",
    "InternalFailure",
    TRANSACTION_CONFLICT,
}


def map_client_error(
    code: str, message: str, *, table_name: str | None = None, reasons: Sequence[str] = ()
) -> ZaeLimiterError:
    """Translate a DynamoDB error code into the library's error (`reasons`: a throttle's
    ThrottlingReasons, see `throttling_reasons`)."""
    if code == NOT_FOUND and table_name is not None:
        return TableNotFoundError(table_name)
    if code in _UNAVAILABLE_CODES or code.startswith("5"):
        return RateLimiterUnavailable(
            f"DynamoDB unavailable ({code}): {message}", code=code, reasons=reasons
        )
    if code == INVALID_REQUEST:
        return ValidationError(f"DynamoDB rejected the request: {message}")
    return RateLimiterUnavailable(f"DynamoDB error ({code}): {message}", code=code)


def throttling_reasons(response: Any) -> tuple[str, ...]:
    """The `reason` of each ThrottlingReason in an error response (botocore's shape, the
    member spelled either way DynamoDB's model spells it); () when there are none."""
    if not isinstance(response, dict):
        return ()
    found = response.get("ThrottlingReasons") or response.get("throttlingReasons") or ()
    if not isinstance(found, list):
        return ()
    return tuple(
        str(item["reason"]) for item in found if isinstance(item, dict) and item.get("reason")
    )
