"""Finding the entity, the resource and the amounts to consume in an HTTP request.

Each is given as a fixed value or as a callable of a `RequestView` (plain or async);
the helpers here build the usual ones (`bearer()`, `header()`, `query()`,
`path_param()`, `json_field()`). An extractor that cannot find what it needs raises
`Refused`, which the middleware and the dependency answer with its status and a JSON body.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any, TypeVar, Union

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]

T = TypeVar("T")
#: A value, or how to find it in a request.
Extractor = Union[T, Callable[["RequestView"], "T | Awaitable[T]"]]  # noqa: UP007

DEFAULT_MAX_BODY = 1 << 20


class Refused(Exception):
    """The request cannot be rate limited as it is (no key, no model ...)."""

    def __init__(
        self, status: int, error: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.headers = dict(headers or {})

    def body(self) -> dict[str, Any]:
        return {"error": self.error, "message": self.message}


class ClientGone(Exception):
    """The client disconnected before its request body arrived."""


class RequestView:
    """What an extractor may look at. The body is read at most once and then replayed to
    the application through `receive`, so extractors and handlers both see it."""

    def __init__(self, scope: Scope, receive: Receive, max_body: int = DEFAULT_MAX_BODY) -> None:
        self.scope = scope
        self._receive = receive
        self._max_body = max_body
        self._body: bytes | None = None
        self._replayed = False
        self._json: Any = None
        self._headers: dict[str, str] | None = None

    @property
    def method(self) -> str:
        return str(self.scope.get("method", ""))

    @property
    def path(self) -> str:
        return str(self.scope.get("path", ""))

    @property
    def headers(self) -> dict[str, str]:
        """Lower-cased names; the last value wins for a repeated header."""
        if self._headers is None:
            self._headers = {
                k.decode("latin-1").lower(): v.decode("latin-1")
                for k, v in self.scope.get("headers", [])
            }
        return self._headers

    @property
    def query(self) -> dict[str, str]:
        from urllib.parse import parse_qsl

        raw = self.scope.get("query_string", b"").decode("latin-1")
        return dict(parse_qsl(raw, keep_blank_values=True))

    @property
    def path_params(self) -> dict[str, Any]:
        """Filled by the router: seen by the dependency, not by a middleware outside it."""
        return dict(self.scope.get("path_params", {}))

    async def body(self) -> bytes:
        if self._body is None:
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await self._receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone()
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self._max_body:
                    raise Refused(
                        413, "request_too_large",
                        f"the request body is over {self._max_body} bytes, the most this "
                        "rate limiter reads to find the resource; send a smaller body",
                    )  # fmt: skip
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            self._body = b"".join(chunks)
        return self._body

    async def drain(self) -> None:
        """Read the body if nobody did, before answering without the application: a server
        that closes a connection with unread data may reset it and lose the answer."""
        if self._body is None:
            with contextlib.suppress(Refused, ClientGone):
                await self.body()

    async def json(self) -> Any:
        if self._json is None:
            try:
                self._json = json.loads(await self.body() or b"null")
            except ValueError as bad:
                raise Refused(400, "invalid_json", f"the request body is not JSON: {bad}") from bad
        return self._json

    async def receive(self) -> Message:
        """The application's `receive`: the buffered body first, if one was read."""
        if self._body is not None and not self._replayed:
            self._replayed = True
            return {"type": "http.request", "body": self._body, "more_body": False}
        return await self._receive()


async def resolve(extractor: Extractor[T], view: RequestView) -> T:
    if not callable(extractor):
        return extractor
    found = extractor(view)
    if inspect.isawaitable(found):
        found = await found
    return found


def _present(value: str | None, what: str) -> str:
    if value is None or not value.strip():
        raise Refused(401, "unauthorized", f"{what} is missing or empty")
    return value.strip()


def bearer() -> Callable[[RequestView], str]:
    """The token of `Authorization: Bearer <token>`; missing or empty gives 401."""

    def find(view: RequestView) -> str:
        raw = view.headers.get("authorization", "")
        scheme, _, token = raw.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Refused(
                401, "unauthorized",
                "send your API key as `Authorization: Bearer <key>`: it is missing or empty",
                {"WWW-Authenticate": "Bearer"},
            )  # fmt: skip
        return token.strip()

    return find


def header(name: str) -> Callable[[RequestView], str]:
    """A request header's value (e.g. `X-API-Key`); missing or empty gives 401."""
    lowered = name.lower()
    return lambda view: _present(view.headers.get(lowered), f"header {name!r}")


def query(name: str) -> Callable[[RequestView], str]:
    """A query parameter's value; missing or empty gives 401."""
    return lambda view: _present(view.query.get(name), f"query parameter {name!r}")


def path_param(name: str) -> Callable[[RequestView], str]:
    """A path parameter of the matched route (for the FastAPI dependency)."""

    def find(view: RequestView) -> str:
        value = view.path_params.get(name)
        return _present(None if value is None else str(value), f"path parameter {name!r}")

    return find


def json_field(name: str, default: str | None = None) -> Callable[[RequestView], Awaitable[str]]:
    """A string field of a JSON body (e.g. the `model` of a chat completion); 400 without."""

    async def find(view: RequestView) -> str:
        body = await view.json()
        value = body.get(name, default) if isinstance(body, dict) else default
        if not isinstance(value, str) or not value:
            raise Refused(400, "invalid_request", f"the JSON body needs a string field {name!r}")
        return value

    return find
