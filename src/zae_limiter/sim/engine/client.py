"""A boto3-shaped client over an Engine: `client.update_item(**params)` and the like.

Not a botocore client on purpose: the library then keeps its lean HTTP path off and
sends every call through here. `client.exceptions` carries the error classes by code,
as botocore's does, for code that catches them by name.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from botocore.exceptions import ClientError as BotoClientError

from zae_limiter.sim.engine.engine import _HANDLERS, Engine
from zae_limiter.sim.engine.errors import ERROR_CLASSES


class _Exceptions:
    """Error classes by code (`client.exceptions.ConditionalCheckFailedException`)."""

    ClientError = BotoClientError

    def __getattr__(self, code: str) -> type[BotoClientError]:
        found = ERROR_CLASSES.get(code)
        if found is None:
            raise AttributeError(code)
        return found

    def from_code(self, code: str) -> type[BotoClientError]:
        return ERROR_CLASSES.get(code, BotoClientError)


class EngineClient:
    """Calls become `engine.call(op, params)`; params are passed as given (keyword
    arguments already make a new top-level dict, and the engine copies what it keeps)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.exceptions = _Exceptions()

    def __getattr__(self, op: str) -> Callable[..., dict[str, Any]]:
        if op not in _HANDLERS:
            raise AttributeError(op)
        call = self.engine.call

        def method(**params: Any) -> dict[str, Any]:
            return call(op, params)

        method.__name__ = op
        setattr(self, op, method)  # found directly next time, without __getattr__
        return method

    def close(self) -> None:
        """Nothing to close; present because repositories close their clients."""


class AsyncEngineClient:
    """The same over coroutines, for the async faces (`Repository.open(client=...)`):
    each call runs at once, with no await inside, so a call is atomic as on the sync
    client."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.exceptions = _Exceptions()

    def __getattr__(self, op: str) -> Callable[..., Awaitable[dict[str, Any]]]:
        if op not in _HANDLERS:
            raise AttributeError(op)
        call = self.engine.call

        async def method(**params: Any) -> dict[str, Any]:
            return call(op, params)

        method.__name__ = op
        setattr(self, op, method)
        return method

    async def close(self) -> None:
        """Nothing to close."""
