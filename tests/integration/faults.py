"""Fault injection with botocore's own event system, on the real clients (boto3 and
aiobotocore alike): `before-call` answers with an error response, `before-send` raises a
transport error or stalls. Nothing of the library is mocked."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from botocore.exceptions import ReadTimeoutError

from tests.conftest import Api
from zae_limiter import RateLimiter, SyncRateLimiter
from zae_limiter.keys import A_SHARD_DOUBLED

ERRORS = {
    "throughput": (400, "ProvisionedThroughputExceededException"),
    "throttling": (400, "ThrottlingException"),
    "server": (500, "InternalServerError"),
}
KINDS = [*ERRORS, "timeout"]
WRITES = ("PutItem", "UpdateItem", "DeleteItem")
#: Marks a request whose sending must fail (never reaches the engine).
FAULT_HEADER = "x-zael-injected-fault"


class _Http:
    def __init__(self, status: int) -> None:
        self.status_code = status
        self.headers: dict[str, str] = {}
        self.content = b""


Match = Callable[[str, dict[str, Any]], bool]


class Faults:
    """Counts every call (`calls`) and every HTTP attempt (`sends`) by operation, and
    fails the calls that `match`."""

    def __init__(self, client: Any) -> None:
        self.calls: Counter[str] = Counter()
        self.sends: Counter[str] = Counter()
        #: Calls answered by an injected error response (never sent).
        self.answered: Counter[str] = Counter()
        #: UpdateItem calls that try to double the shard count (not takes).
        self.doublings = 0
        self.kind: str | None = None
        self.match: Match = lambda op, params: False
        self.stall_s = 0.0
        events = client.meta.events
        events.register("before-call.dynamodb", self._before_call)
        # first: in-process moto answers at before-send too, and would answer before us
        events.register_first("before-send.dynamodb", self._before_send)
        self._async = "aiobotocore" in type(client).__module__ or hasattr(client, "__aenter__")

    def fail(self, kind: str, ops: tuple[str, ...] = WRITES, match: Match | None = None) -> None:
        self.kind = kind
        self.match = lambda op, params: op in ops and (match is None or match(op, params))

    def heal(self) -> None:
        self.kind = None

    def _before_call(self, model: Any, params: dict[str, Any], **_: Any) -> Any:
        op, body = model.name, _body(params)
        self.calls[op] += 1
        if A_SHARD_DOUBLED in body.get("ExpressionAttributeNames", {}).values():
            self.doublings += 1
        if self.kind is None or not self.match(op, body):
            return None
        if self.kind in ERRORS:
            self.answered[op] += 1
            status, code = ERRORS[self.kind]
            body = {
                "Error": {"Code": code, "Message": f"injected {code}"},
                "ResponseMetadata": {"HTTPStatusCode": status},
            }
            return _Http(status), body
        # A transport fault, raised when this very request is sent: marked on the request,
        # since concurrent calls of one operation (a cascade's two writes) interleave.
        params["headers"][FAULT_HEADER] = "timeout"
        return None

    def _before_send(self, request: Any, event_name: str, **_: Any) -> Any:
        op = event_name.rsplit(".", 1)[-1]
        self.sends[op] += 1
        if self.stall_s:
            return self._stall()
        if FAULT_HEADER in request.headers:
            raise ReadTimeoutError(endpoint_url=str(getattr(request, "url", "")))
        return None

    def _stall(self) -> Any:
        if self._async:

            async def wait() -> None:
                await asyncio.sleep(self.stall_s)

            return wait()
        time.sleep(self.stall_s)
        return None

    @property
    def writes(self) -> int:
        return sum(self.calls[op] for op in WRITES)

    @property
    def takes(self) -> int:
        """Write attempts at the buckets: every write but doubling tries."""
        return self.writes - self.doublings

    def one_attempt_per_call(self) -> bool:
        """Every call that was not answered by an injected error was sent exactly once."""
        return self.sends == self.calls - self.answered


def _body(request_dict: dict[str, Any]) -> dict[str, Any]:
    body = request_dict.get("body") or b"{}"
    return json.loads(body.decode() if isinstance(body, bytes) else body)  # type: ignore[no-any-return]


def pk_contains(text: str) -> Match:
    return lambda op, params: text in str(params.get("Key", {}).get("PK", {}).get("S", ""))


def faults(api: Api) -> Faults:
    return Faults(api.repo.client)


def limiter(api: Api, **options: Any) -> Api:
    """Another limiter (own options, own stats) on the same repository."""
    cls = SyncRateLimiter if api.loop is None else RateLimiter
    other = Api(cls(api.repo, **options), api.repo, api.loop)
    if "_factory" in api.__dict__:
        other._factory = api._factory
    return other
