"""The exception tree and the one place botocore error codes are translated (errors.py)."""

from __future__ import annotations

import json

import pytest

from zae_limiter.errors import (
    EntityExistsError,
    EntityNotFoundError,
    RateLimiterUnavailable,
    RateLimitExceeded,
    SchemaVersionError,
    TableNotFoundError,
    ValidationError,
    ZaeLimiterError,
    map_client_error,
)
from zae_limiter.models import LimitStatus


def _status(name: str, available: int, requested: int, retry: float) -> LimitStatus:
    return LimitStatus("user-1", "gpt-4", name, 100, available, requested, retry)


def test_rate_limit_exceeded_carries_violations() -> None:
    rpm = _status("rpm", 0, 1, 0.6)
    tpm = _status("tpm", 40, 500, 2.25)
    error = RateLimitExceeded([rpm, tpm], 2.25)
    assert isinstance(error, ZaeLimiterError)
    assert error.violations == (rpm, tpm)
    assert error.retry_after_seconds == 2.25
    assert "user-1/gpt-4/rpm" in str(error) and "user-1/gpt-4/tpm" in str(error)
    assert "2.250" in str(error)


def test_as_dict_is_json_ready() -> None:
    error = RateLimitExceeded([_status("rpm", 3, 5, 1.5)], 1.5)
    body = error.as_dict()
    assert json.loads(json.dumps(body)) == body
    assert body["error"] == "rate_limit_exceeded"
    assert body["message"] == str(error)
    assert body["retry_after_seconds"] == 1.5
    assert body["limits"] == [
        {
            "entity_id": "user-1",
            "resource": "gpt-4",
            "limit": "rpm",
            "kind": "rate",
            "capacity": 100,
            "available": 3,
            "requested": 5,
            "retry_after_seconds": 1.5,
            "resets_at_ms": None,
        }
    ]


@pytest.mark.parametrize(
    ("seconds", "header"),
    [
        (0.0, "1"),
        (0.001, "1"),
        (0.999, "1"),
        (1.0, "1"),
        (1.001, "2"),
        (2.5, "3"),
        (59.0, "59"),
        (59.0001, "60"),
    ],
)
def test_retry_after_header_rounds_up_with_minimum_one(seconds: float, header: str) -> None:
    assert RateLimitExceeded([], seconds).retry_after_header == header


def test_limit_status_exceeded() -> None:
    assert _status("rpm", 0, 1, 0).exceeded
    assert not _status("rpm", 1, 1, 0).exceeded


@pytest.mark.parametrize(
    "code",
    [
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "InternalServerError",
        "ServiceUnavailable",
        "TransactionConflictException",
        "500",
        "503",
    ],
)
def test_unavailable_codes(code: str) -> None:
    error = map_client_error(code, "slow down", table_name="t")
    assert type(error) is RateLimiterUnavailable
    assert error.code == code
    assert code in str(error) and "slow down" in str(error)


def test_resource_not_found_with_table_says_how_to_deploy() -> None:
    error = map_client_error("ResourceNotFoundException", "no table", table_name="rate-limits")
    assert isinstance(error, TableNotFoundError)
    assert error.table_name == "rate-limits"
    assert error.stack_name == "rate-limits"
    assert "zae-limiter deploy --name rate-limits" in str(error)


def test_resource_not_found_without_table_is_not_a_table_error() -> None:
    error = map_client_error("ResourceNotFoundException", "gone")
    assert not isinstance(error, TableNotFoundError)
    assert isinstance(error, ZaeLimiterError)


def test_validation_exception_becomes_validation_error() -> None:
    error = map_client_error("ValidationException", "bad expression")
    assert isinstance(error, ValidationError)
    assert isinstance(error, ValueError)
    assert "bad expression" in str(error)


def test_unknown_code_is_unavailable_with_code() -> None:
    error = map_client_error("SomethingNew", "what")
    assert isinstance(error, RateLimiterUnavailable)
    assert error.code == "SomethingNew"


def test_table_not_found_region() -> None:
    assert "in region eu-west-1" in str(TableNotFoundError("t", "eu-west-1"))
    assert "region" not in str(TableNotFoundError("t"))


def test_entity_errors_carry_the_id() -> None:
    missing = EntityNotFoundError("e1")
    assert missing.entity_id == "e1" and isinstance(missing, LookupError)
    assert "create_entity" in str(missing)
    assert EntityExistsError("e2").entity_id == "e2"


@pytest.mark.parametrize(
    "cls",
    [ValidationError, SchemaVersionError, RateLimiterUnavailable, TableNotFoundError],
)
def test_tree(cls: type[Exception]) -> None:
    assert issubclass(cls, ZaeLimiterError)
