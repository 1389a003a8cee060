"""Run a flow against DynamoDB: boto3 (sync) or aiobotocore (async). The only I/O.

Each yielded `Call` becomes a client method call with `ReturnConsumedCapacity=INDEXES`;
a tuple becomes one concurrent round trip. A failed condition comes back as a `Result`
carrying ALL_OLD; every other DynamoDB or transport error is translated once, by
`errors.map_client_error`, and thrown into the flow.

Never an unbounded wait, and never a retry of our own:
- before a round trip, admission control (`capacity.Admission`) may ask for a bounded
  wait, done here with `time.sleep` / `asyncio.sleep`, or refuse the round trip;
- a run may carry a deadline (`timeout` seconds, wall clock). Once it has passed, the
  next round trip is not made: `RateLimiterUnavailable` is thrown into the flow instead
  (async calls in flight are also cut at the deadline). After the flow has been told of
  any failure it is cleaning up (giving tokens back), so its later calls are neither
  refused nor cut by the deadline; each is still bounded by the client's timeouts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from botocore.exceptions import BotoCoreError, ClientError

from zae_limiter.capacity import (
    METERED_OPS,
    REFUSE,
    THROTTLE_CODES,
    Admission,
    CapacityMeter,
    Cost,
    estimate,
)
from zae_limiter.clock_watch import ClockWatch
from zae_limiter.errors import (
    CALL_TIMEOUT,
    CAPACITY_EXHAUSTED,
    CONDITION_FAILED,
    CONDITION_FAILED_REASON,
    TRANSACTION_CANCELLED,
    RateLimiterUnavailable,
    map_client_error,
    throttling_reasons,
)
from zae_limiter.flows import Call, Flow, Result, Sleep, Step
from zae_limiter.wire import LEAN_OPS, OPERATIONS, lean_client

T = TypeVar("T")
log = logging.getLogger("zae_limiter")
_FREE = Cost()
#: A call's result or error; after a Sleep, the clock (ms) when it woke.
Outcome = Result | Exception | int | None


@dataclass(slots=True)
class _Deadline:
    """One run's deadline (monotonic seconds), and whether the flow is cleaning up."""

    at: float | None
    cleanup: bool = False

    def remaining(self) -> float | None:
        """Seconds left; None when no deadline binds (none given, or cleaning up)."""
        if self.at is None or self.cleanup:
            return None
        return max(0.0, self.at - time.monotonic())


@dataclass(slots=True)
class _Round:
    """A round trip about to be made: the wait first, and each step's estimated cost."""

    wait_ms: int
    costs: list[Cost]
    #: Seconds left of the run's deadline when the round was admitted (None: unbound).
    left: float | None = None


class _Runner:
    def __init__(
        self,
        client: Any,
        meter: CapacityMeter,
        table_name: str,
        admission: Admission | None = None,
        clock: Callable[[], int] | None = None,
        call_timeout: float | None = None,
    ) -> None:
        self.client = client
        self.meter = meter
        self.table_name = table_name
        self.admission = admission
        self.clock = clock or (lambda: time.time_ns() // 1_000_000)
        #: Bound on one async call while cleaning up (sync calls are bound by botocore).
        self.call_timeout = call_timeout
        #: The lean client that carries the hot operations (`wire`), or None: all regular.
        self.lean: Any = None
        #: With the lean path off on a client that retries by itself: a lean client that
        #: carries only the writes that must never be sent twice (`ONE_ATTEMPT_OPS`).
        self.once: Any = None
        #: This client's clock against DynamoDB's, from the `Date` of every answer.
        self.watch = ClockWatch()

    def borrow(self, client: Any, *, lean: bool, asynchronous: bool) -> None:
        """Set up the lean path on `client` (when `lean`), and the one-attempt path for
        writes that must never be sent twice (`one_attempt_client`)."""
        self.lean = lean_client(client, asynchronous=asynchronous) if lean else None
        self.once = one_attempt_client(client, self.lean, asynchronous=asynchronous)

    def lean_for(self, op: str) -> Any:
        """The lean client that makes this call, or None (the regular client makes it)."""
        if self.lean is not None and op in LEAN_OPS:
            return self.lean
        if self.once is not None and op in ONE_ATTEMPT_OPS:
            return self.once
        return None

    def target(self, op: str) -> Any:
        """The client that makes this call: the lean one for the hot operations."""
        lean = self.lean_for(op)
        return self.client if lean is None else lean

    def close_lean(self) -> None:
        """Close the lean clients' idle connections (the regular client closes its own)."""
        for lean in (self.lean, self.once):
            if lean is not None:
                lean.close()

    @staticmethod
    def params(call: Call) -> dict[str, Any]:
        if call.op in METERED_OPS:
            return {**call.params, "ReturnConsumedCapacity": "INDEXES"}
        return call.params

    def prepare(self, steps: Sequence[Step], deadline: _Deadline) -> _Round | list[Exception]:
        """Admit a round trip, or say why it is not made (one error per step)."""
        left = deadline.remaining()
        if left is not None and left <= 0:
            deadline.cleanup = True
            return [_unavailable("the call's deadline passed", CALL_TIMEOUT) for _ in steps]
        if self.admission is None:  # an estimate only serves admission control
            return _Round(0, [_FREE] * len(steps), left)
        costs = [estimate(s.op, s.params) if isinstance(s, Call) else _FREE for s in steps]
        total = costs[0] if len(costs) == 1 else sum(costs, _FREE)
        if not total:
            return _Round(0, costs, left)
        if deadline.cleanup:  # giving back is never refused
            return _Round(self.admission.admit(total, self.clock(), force=True), costs, left)
        cap = None if left is None else int(left * 1000)
        wait = self.admission.admit(total, self.clock(), cap)
        if wait == REFUSE:
            return [
                _unavailable("the client's capacity budget is exhausted", CAPACITY_EXHAUSTED)
                for _ in steps
            ]
        return _Round(wait, costs, left)

    def answered(self, call: Call, sent: int, response: Any, trip: int, cost: Cost) -> Outcome:
        """What both runners do with an answer: the clock watch hears its `Date`, the
        meter and the admission its cost."""
        self.watch.heard(sent, self.clock(), response)
        actual = self.meter.record(call.op, response, True, trip)
        if self.admission is not None:
            self.admission.settle(cost, actual)
        return Result(response)

    def refused(self, call: Call, sent: int, error: Exception, trip: int, cost: Cost) -> Outcome:
        """As `answered`, for a call that raised (`failed`)."""
        if isinstance(error, ClientError):
            self.watch.heard(sent, self.clock(), error.response)
        return self.failed(call, error, trip, cost)

    def failed(self, call: Call, error: Exception, trip: int, cost: Cost) -> Result | Exception:
        outcome = error_outcome(error, self.table_name)
        code = _code(error)
        if isinstance(outcome, Result):
            actual = self.meter.record(call.op, outcome.response, False, trip)
            if self.admission is not None:
                self.admission.settle(cost, actual)
        elif code in THROTTLE_CODES:
            self.meter.record_throttle()
            if self.admission is not None:
                self.admission.settle(cost, Cost())  # a throttled call consumed nothing
                self.admission.throttled(self.clock())
        return outcome

    @staticmethod
    def outcome(request: Any, results: Sequence[Outcome], deadline: _Deadline) -> Any:
        for r in results:
            if isinstance(r, Exception):
                deadline.cleanup = True
                break
        return tuple(results) if isinstance(request, tuple) else results[0]


#: Requests that must never be sent twice (docs/resilience.md, "Writes sent once"): every
#: bucket write. A give-back or a return is an unconditional ADD (a second one creates
#: tokens); a take applied twice takes twice; a flush sent twice releases its held counts
#: twice (the bucket's room grows: tokens created). Transactions carry botocore's
#: ClientRequestToken (DynamoDB applies a repeat once), and BatchWriteItem puts or deletes
#: whole items: both may go through a client that retries. All of these are lean
#: operations (`wire.LEAN_OPS`), so a lean client can always carry them.
ONE_ATTEMPT_OPS: frozenset[str] = frozenset({"update_item", "put_item"})


def resend_safe(op: str) -> bool:
    """Whether a request of `op` may go through a client that retries on its own (a
    user's boto3 client keeps botocore's retries): reads, and writes whose second
    application changes nothing."""
    return op not in ONE_ATTEMPT_OPS


def retries_by_itself(client: Any) -> bool:
    """Whether `client` may send a request again on its own (botocore's retries): any
    client not configured for one attempt, and any object that does not say."""
    config = getattr(getattr(client, "meta", None), "config", None)
    retries = getattr(config, "retries", None)
    if not isinstance(retries, dict):
        return True
    total = retries.get("total_max_attempts")
    if total is None and retries.get("max_attempts") is not None:
        total = int(retries["max_attempts"]) + 1
    return total is None or int(total) > 1


def one_attempt_client(client: Any, lean: Any, *, asynchronous: bool) -> Any:
    """The path for the writes that must never be sent twice (`drivers.ONE_ATTEMPT_OPS`),
    when the lean path (one attempt) is off and `client` retries by itself, as a boto3
    client of the user's own does by default: a lean client borrowing it for those writes
    alone (None: not needed, or `client` is not a botocore client it can borrow, which is
    logged once: such a client may apply a give-back twice, docs/resilience.md)."""
    if lean is not None or not retries_by_itself(client):
        return None
    once = lean_client(client, asynchronous=asynchronous)
    if once is None:
        log.warning(
            "the DynamoDB client given to zae-limiter retries by itself and is not a botocore "
            "client the library can borrow: a write whose answer is lost may be sent twice "
            "(give it retries={'total_max_attempts': 1}; see docs/resilience.md)"
        )
    return once


def _code(error: Exception) -> str:
    if not isinstance(error, ClientError):
        return ""
    return str(error.response.get("Error", {}).get("Code", ""))


def error_outcome(error: Exception, table_name: str) -> Result | Exception:
    """What a flow is told of a failed call: a failed condition is a `Result` carrying
    ALL_OLD; anything else the library's own error (`errors.map_client_error`). The
    runners and the fault simulator (`zae_limiter.sim`) both answer flows through this."""
    if not isinstance(error, ClientError):
        return _unavailable(f"DynamoDB unreachable: {error}", type(error).__name__)
    err = error.response.get("Error", {})
    code = str(err.get("Code", ""))
    if code == CONDITION_FAILED or _cancelled_by_condition(code, error.response):
        old: dict[str, Any] | None = error.response.get("Item") or None  # type: ignore[assignment]
        return Result(dict(error.response), ok=False, old=old)
    return map_client_error(
        code,
        str(err.get("Message", "")),
        table_name=table_name,
        reasons=throttling_reasons(error.response),
    )


def _cancelled_by_condition(code: str, response: Any) -> bool:
    """A transaction cancelled because one of its conditions failed: a result, like a
    failed conditional write (its `CancellationReasons` say which), not an error."""
    if code != TRANSACTION_CANCELLED:
        return False
    reasons = response.get("CancellationReasons") or []
    return any(r.get("Code") == CONDITION_FAILED_REASON for r in reasons)


def _unavailable(message: str, code: str) -> RateLimiterUnavailable:
    return RateLimiterUnavailable(message, code=code)


# unasync: source
class _AsyncLoop(_Runner):
    """The run loop; the runner below it makes the calls, runs a round's calls
    concurrently and sleeps."""

    async def step(self, step: Step, trip: int, cost: Cost, left: float | None) -> Outcome:
        raise NotImplementedError

    async def together(
        self, steps: Sequence[Step], trip: int, costs: Sequence[Cost], left: float | None
    ) -> Sequence[Outcome]:
        raise NotImplementedError

    async def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    async def run(self, flow: Flow[T], timeout: float | None = None, cleanup: bool = False) -> T:
        deadline = _Deadline(None if timeout is None else time.monotonic() + timeout, cleanup)
        send: Any = None
        meter = self.meter
        while True:
            # The flow's next round trip (a call, or a tuple of them), or its result.
            try:
                request = flow.throw(send) if isinstance(send, Exception) else flow.send(send)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            steps = request if isinstance(request, tuple) else (request,)
            trip = meter.next_round_trip()
            planned = self.prepare(steps, deadline)
            if isinstance(planned, list):
                send = self.outcome(request, planned, deadline)
                continue
            left = planned.left
            if planned.wait_ms:
                await self.sleep(planned.wait_ms / 1000)
                left = deadline.remaining()
            if len(steps) == 1:  # the common round trip: nothing to run concurrently
                only = await self.step(steps[0], trip, planned.costs[0], left)
                if isinstance(only, Exception):
                    deadline.cleanup = True  # told of a failure: cleaning up from now on
                send = (only,) if isinstance(request, tuple) else only
            else:
                results = await self.together(steps, trip, planned.costs, left)
                send = self.outcome(request, results, deadline)


# unasync: generated from the source above by tools/unasync.py; do not edit
class _SyncLoop(_Runner):
    """The run loop; the runner below it makes the calls, runs a round's calls
    concurrently and sleeps."""

    def step(self, step: Step, trip: int, cost: Cost, left: float | None) -> Outcome:
        raise NotImplementedError

    def together(
        self, steps: Sequence[Step], trip: int, costs: Sequence[Cost], left: float | None
    ) -> Sequence[Outcome]:
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def run(self, flow: Flow[T], timeout: float | None = None, cleanup: bool = False) -> T:
        deadline = _Deadline(None if timeout is None else time.monotonic() + timeout, cleanup)
        send: Any = None
        meter = self.meter
        while True:
            # The flow's next round trip (a call, or a tuple of them), or its result.
            try:
                request = flow.throw(send) if isinstance(send, Exception) else flow.send(send)
            except StopIteration as finished:
                return finished.value  # type: ignore[no-any-return]
            steps = request if isinstance(request, tuple) else (request,)
            trip = meter.next_round_trip()
            planned = self.prepare(steps, deadline)
            if isinstance(planned, list):
                send = self.outcome(request, planned, deadline)
                continue
            left = planned.left
            if planned.wait_ms:
                self.sleep(planned.wait_ms / 1000)
                left = deadline.remaining()
            if len(steps) == 1:  # the common round trip: nothing to run concurrently
                only = self.step(steps[0], trip, planned.costs[0], left)
                if isinstance(only, Exception):
                    deadline.cleanup = True  # told of a failure: cleaning up from now on
                send = (only,) if isinstance(request, tuple) else only
            else:
                results = self.together(steps, trip, planned.costs, left)
                send = self.outcome(request, results, deadline)


# unasync: end


class SyncRunner(_SyncLoop):
    """boto3: concurrent steps run on a small thread pool (boto3 clients are thread-safe)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pool: ThreadPoolExecutor | None = None

    def step(self, step: Step, trip: int, cost: Cost, left: float | None) -> Outcome:
        if isinstance(step, Sleep):
            time.sleep(step.ms / 1000 if left is None else min(left, step.ms / 1000))
            return self.clock()
        op, lean = step.op, self.lean
        sent = self.clock()
        try:
            if lean is not None and op in LEAN_OPS:  # the hot operations: called directly
                params = step.params  # `params`, inline: every acquire
                if op in METERED_OPS:
                    params = {**params, "ReturnConsumedCapacity": "INDEXES"}
                response = lean.call(OPERATIONS[op], params)
            else:  # `lean_for` says who makes the rest
                response = getattr(self.target(op), op)(**self.params(step))
        except (ClientError, BotoCoreError) as error:
            return self.refused(step, sent, error, trip, cost)
        return self.answered(step, sent, response, trip, cost)

    def together(
        self, steps: Sequence[Step], trip: int, costs: Sequence[Cost], left: float | None
    ) -> Sequence[Outcome]:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="zae")
        n = len(steps)
        return list(self._pool.map(self.step, steps, [trip] * n, costs, [left] * n))

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def close(self) -> None:
        self.close_lean()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None


class AsyncRunner(_AsyncLoop):
    """aiobotocore: concurrent steps run with asyncio.gather; calls are cut at the deadline."""

    async def step(self, step: Step, trip: int, cost: Cost, left: float | None) -> Outcome:
        if isinstance(step, Sleep):
            await asyncio.sleep(step.ms / 1000 if left is None else min(left, step.ms / 1000))
            return self.clock()
        limit = left if left is not None else self.call_timeout
        sent = self.clock()
        try:
            lean = self.lean_for(step.op)
            if lean is not None:
                # The lean client keeps the deadline on the timer it already has.
                wire_op = OPERATIONS[step.op]
                response = await lean.call(wire_op, self.params(step), deadline=limit)
            else:
                call = getattr(self.client, step.op)(**self.params(step))
                async with asyncio.timeout(limit):  # unlike wait_for, no task per call
                    response = await call
        except (ClientError, BotoCoreError) as error:
            return self.refused(step, sent, error, trip, cost)
        except TimeoutError:
            return _unavailable(f"DynamoDB did not answer {step.op} in {limit:.3f}s", CALL_TIMEOUT)
        return self.answered(step, sent, response, trip, cost)

    async def together(
        self, steps: Sequence[Step], trip: int, costs: Sequence[Cost], left: float | None
    ) -> Sequence[Outcome]:
        return await asyncio.gather(
            *(self.step(s, trip, c, left) for s, c in zip(steps, costs, strict=True))
        )

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)

    def close(self) -> None:
        """Close the lean transport; the aiobotocore client closes with its repository's
        exit stack (it is an async context)."""
        self.close_lean()
