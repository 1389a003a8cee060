"""DynamoDB's errors, raised as botocore raises them, so callers' handlers run unchanged."""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

#: What botocore puts in every response; fixed, since a simulation has no real requests.
RESPONSE_METADATA: dict[str, Any] = {
    "RequestId": "SIM",
    "HTTPStatusCode": 200,
    "HTTPHeaders": {},
    "RetryAttempts": 0,
}

CONDITION_FAILED_MESSAGE = "The conditional request failed"


_CODES = (
    "ConditionalCheckFailedException",
    "TransactionCanceledException",
    "ValidationException",
    "ResourceNotFoundException",
    "ResourceInUseException",
    "IdempotentParameterMismatchException",
    "UnknownOperationException",
    # Never raised by the engine itself; here so that a simulator injecting these faults
    # (`client_error(op, code, message, status, ThrottlingReasons=...)`) raises the same
    # classes a botocore client would.
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "TransactionConflictException",
)
#: One ClientError subclass per code, as botocore makes them: `except ClientError` and
#: `except client.exceptions.X` both catch what the engine raises.
ERROR_CLASSES: dict[str, type[ClientError]] = {
    code: type(code, (ClientError,), {}) for code in _CODES
}


def client_error(
    operation: str, code: str, message: str, status: int = 400, **extra: Any
) -> ClientError:
    """A ClientError with the fields botocore's JSON parser puts at the top level."""
    response: dict[str, Any] = {
        "Error": {"Message": message, "Code": code},
        **extra,
        "ResponseMetadata": {**RESPONSE_METADATA, "HTTPStatusCode": status},
    }
    kind = ERROR_CLASSES.get(code, ClientError)
    return kind(response, _operation_name(operation))  # type: ignore[arg-type]


def _operation_name(op: str) -> str:
    # botocore names operations in the API's spelling: put_item -> PutItem.
    return "".join(part.capitalize() for part in op.split("_"))


class EngineError(Exception):
    """An error found while evaluating; `Engine.call` turns it into a ClientError."""

    code = "ValidationException"

    def __init__(self, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.message = message
        self.extra = extra

    def to_client_error(self, operation: str) -> ClientError:
        return client_error(operation, self.code, self.message, **self.extra)


class Validation(EngineError):
    code = "ValidationException"


class NotFound(EngineError):
    code = "ResourceNotFoundException"


class InUse(EngineError):
    code = "ResourceInUseException"


class ConditionFailed(EngineError):
    code = "ConditionalCheckFailedException"

    def __init__(self, old: dict[str, Any] | None = None) -> None:
        extra = {} if old is None else {"Item": old}
        super().__init__(CONDITION_FAILED_MESSAGE, **extra)


class TransactionCanceled(EngineError):
    code = "TransactionCanceledException"

    def __init__(self, reasons: list[dict[str, Any]]) -> None:
        codes = ", ".join(str(r["Code"]) for r in reasons)
        message = (
            f"Transaction cancelled, please refer cancellation reasons for specific "
            f"reasons [{codes}]"
        )
        # botocore puts the modelled `Message` member at the top level too.
        super().__init__(message, Message=message, CancellationReasons=reasons)


class IdempotentMismatch(EngineError):
    code = "IdempotentParameterMismatchException"


def table_not_found(table: str) -> NotFound:
    # DynamoDB Local's words (AWS says "Requested resource not found"); same code.
    return NotFound("Cannot do operations on a non-existent table")


def invalid(message: str) -> Validation:
    """The common prefix DynamoDB puts on parameter errors."""
    return Validation(f"One or more parameter values were invalid: {message}")
