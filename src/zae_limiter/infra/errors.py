"""Errors of deploying and inspecting the stack; each prints as one useful line."""

from __future__ import annotations

from zae_limiter.errors import ZaeLimiterError


class InfraError(ZaeLimiterError):
    """An AWS call made while deploying or inspecting failed."""


class StackError(InfraError):
    """A stack operation failed; `reason` names the failing resource where known."""

    def __init__(self, stack_name: str, reason: str) -> None:
        super().__init__(f"stack {stack_name!r}: {reason}")
        self.stack_name = stack_name
        self.reason = reason


class StackNotFoundError(StackError):
    def __init__(self, stack_name: str) -> None:
        super().__init__(
            stack_name,
            f"does not exist; deploy it with `zae-limiter deploy --name {stack_name}`",
        )
