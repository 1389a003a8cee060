"""Errors of the embedded engine: each one says, in one line, what to do about it."""

from __future__ import annotations

from zae_limiter.errors import ZaeLimiterError


class LocalEngineError(ZaeLimiterError):
    """The local engine could not be started, found or stopped."""


class EngineNotInstalledError(LocalEngineError):
    """What the engine needs (Java, the DynamoDB Local jar, moto) is not on this machine."""


class EngineStartError(LocalEngineError):
    """The engine process started but never answered, or exited early."""


class InstanceNotRunningError(LocalEngineError):
    """No running engine is recorded under this instance name."""

    def __init__(self, instance: str) -> None:
        super().__init__(
            f"no local engine {instance!r} is running; start one with "
            f"`zae-limiter local up --instance {instance}`"
        )
        self.instance = instance
