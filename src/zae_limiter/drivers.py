"""Run a flow against DynamoDB: boto3 (sync) or aiobotocore (async). The only I/O.

Each yielded `Call` becomes a client method call with `ReturnConsumedCapacity=INDEXES`;
a tuple becomes one concurrent round trip. A failed condition comes back as a `Result`
carrying ALL_OLD; every other DynamoDB or transport error is translated once, by
`errors.map_client_error`, and thrown into the flow.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from zae_limiter.capacity import METERED_OPS, CapacityMeter
from zae_limiter.errors import RateLimiterUnavailable, map_client_error
from zae_limiter.flows import Call, Flow, Result, Sleep, Step

T = TypeVar("T")
CONDITION_FAILED = "ConditionalCheckFailedException"


class _Runner:
    def __init__(self, client: Any, meter: CapacityMeter, table_name: str) -> None:
        self.client = client
        self.meter = meter
        self.table_name = table_name

    @staticmethod
    def params(call: Call) -> dict[str, Any]:
        if call.op in METERED_OPS:
            return {**call.params, "ReturnConsumedCapacity": "INDEXES"}
        return call.params

    def done(self, call: Call, response: dict[str, Any], trip: int) -> Result:
        self.meter.record(call.op, response, True, trip)
        return Result(response)

    def failed(self, call: Call, error: Exception, trip: int) -> Result | Exception:
        if isinstance(error, ClientError):
            err = error.response.get("Error", {})
            code = str(err.get("Code", ""))
            if code == CONDITION_FAILED:
                self.meter.record(call.op, error.response, False, trip)
                old: dict[str, Any] | None = error.response.get("Item") or None  # type: ignore[assignment]
                return Result(dict(error.response), ok=False, old=old)
            return map_client_error(code, str(err.get("Message", "")), table_name=self.table_name)
        return RateLimiterUnavailable(f"DynamoDB unreachable: {error}", code=type(error).__name__)


class SyncRunner(_Runner):
    """boto3: concurrent steps run on a small thread pool (boto3 clients are thread-safe)."""

    def __init__(self, client: Any, meter: CapacityMeter, table_name: str) -> None:
        super().__init__(client, meter, table_name)
        self._pool: ThreadPoolExecutor | None = None

    def step(self, step: Step, trip: int) -> Result | Exception | None:
        if isinstance(step, Sleep):
            time.sleep(step.ms / 1000)
            return None
        try:
            response = getattr(self.client, step.op)(**self.params(step))
        except (ClientError, BotoCoreError) as error:
            return self.failed(step, error, trip)
        return self.done(step, response, trip)

    def run(self, flow: Flow[T]) -> T:
        send: Any = None
        while True:
            try:
                request = flow.throw(send) if isinstance(send, Exception) else flow.send(send)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            trip = self.meter.next_round_trip()
            if isinstance(request, tuple):
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="zae")
                send = tuple(self._pool.map(self.step, request, [trip] * len(request)))
            else:
                send = self.step(request, trip)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


class AsyncRunner(_Runner):
    """aiobotocore: concurrent steps run with asyncio.gather."""

    async def step(self, step: Step, trip: int) -> Result | Exception | None:
        if isinstance(step, Sleep):
            await asyncio.sleep(step.ms / 1000)
            return None
        try:
            response = await getattr(self.client, step.op)(**self.params(step))
        except (ClientError, BotoCoreError) as error:
            return self.failed(step, error, trip)
        return self.done(step, response, trip)

    async def run(self, flow: Flow[T]) -> T:
        send: Any = None
        while True:
            try:
                request = flow.throw(send) if isinstance(send, Exception) else flow.send(send)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            trip = self.meter.next_round_trip()
            if isinstance(request, tuple):
                send = tuple(await asyncio.gather(*(self.step(s, trip) for s in request)))
            else:
                send = await self.step(request, trip)
