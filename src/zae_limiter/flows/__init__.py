"""Behaviour written once, without I/O.

A flow is a generator. It yields a `Call` (one DynamoDB request), a `Sleep`, or a tuple
of them (to be run concurrently: one round trip), and receives a `Result` (or a tuple of
results) back. `drivers.SyncRunner.run` and `drivers.AsyncRunner.run` are the only code
that performs the requests. DynamoDB errors other than a failed condition are thrown into
the flow as the library's own exceptions, so a flow can compensate what it already wrote.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """One DynamoDB request: a low-level client method name and its arguments."""

    op: str
    params: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Sleep:
    """Wait before the next attempt (jittered contention backoff). The driver answers
    with its clock (ms) once it woke."""

    ms: int


Step = Call | Sleep
Request = Step | tuple[Step, ...]


@dataclass(slots=True)
class Result:
    """What came back. `ok` is False when a condition failed; `old` is then ALL_OLD."""

    response: dict[str, Any] = field(default_factory=dict)
    ok: bool = True
    old: dict[str, Any] | None = None

    @property
    def attributes(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.response.get("Attributes") or {})

    @property
    def item(self) -> dict[str, Any] | None:
        return cast("dict[str, Any] | None", self.response.get("Item"))

    @property
    def items(self) -> list[dict[str, Any]]:
        return cast(list[dict[str, Any]], self.response.get("Items") or [])


Flow = Generator[Request, Any, T]


def one(step: Call) -> Flow[Result]:
    """Yield one call and hand its result back, typed."""
    result = yield step
    return cast(Result, result)


def pause(ms: int) -> Flow[int | None]:
    """Wait `ms`; the driver's clock when it woke (ms), or None when it does not say. A
    flow never reads a clock: this is how one that waited learns the time again."""
    woke = yield Sleep(ms)
    return woke if isinstance(woke, int) else None


def together(*steps: Call) -> Flow[tuple[Result, ...]]:
    """Yield several calls as one concurrent round trip."""
    if not steps:
        return ()
    results = yield tuple(steps)
    return together_or_raise(results)


def paginate(call: Call) -> Flow[list[dict[str, Any]]]:
    """All items of a Query or Scan, following LastEvaluatedKey."""
    items: list[dict[str, Any]] = []
    params = dict(call.params)
    while True:
        result = yield from one(Call(call.op, params))
        items.extend(result.items)
        last = result.response.get("LastEvaluatedKey")
        if not last:
            return items
        params = {**params, "ExclusiveStartKey": last}


def run_pure(flow: Flow[T], results: list[Any]) -> T:
    """Drive a flow with canned results (for tests of the state machine)."""
    try:
        request = next(flow)
        for result in results:
            request = flow.send(result)
        raise AssertionError(f"flow wanted more results; next request: {request!r}")
    except StopIteration as done:
        return cast(T, done.value)


def together_or_raise(results: tuple[Any, ...]) -> tuple[Result, ...]:
    """Results of a concurrent round trip; the first failed call's error is raised."""
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return cast(tuple[Result, ...], results)


class Stopped(Exception):
    """Thrown into a flow that `lockstep` stops: another flow of its round failed."""


def _stopped(flow: Flow[T], i: int) -> dict[int, T]:
    """Stop one flow of a lockstep: what it returns, if it has something to return."""
    try:
        flow.throw(Stopped())
    except StopIteration as finished:
        return {i: cast(T, finished.value)}
    except Stopped:
        return {}
    except Exception as error:  # it failed on the way out: the caller settles it
        return {i: cast(T, error)}
    flow.close()  # it went on: nothing taken, stop it where it stands
    return {}


def lockstep(flows: list[Flow[T]], stop: Any = None) -> Flow[list[T | None]]:
    """Run single-step flows side by side: each round trip carries one step of each.

    A flow's failed call is thrown into that flow alone. When `stop(value)` is true for
    a finished flow, the others are stopped where they stand (`Stopped` is thrown in):
    one that has taken something returns it (its follow-up, such as a doubling, is
    skipped), so the caller gives it back; the others come back as None.
    """
    pending: dict[int, Step] = {}
    done: dict[int, T] = {}

    def advance(i: int, send: Any) -> None:
        try:
            if isinstance(send, BaseException):
                pending[i] = cast(Step, flows[i].throw(send))
            else:
                pending[i] = cast(Step, flows[i].send(send))
        except StopIteration as finished:
            pending.pop(i, None)
            done[i] = cast(T, finished.value)
        except Exception as error:  # that flow failed; the caller settles (compensates)
            pending.pop(i, None)
            done[i] = cast(T, error)

    for i in range(len(flows)):
        advance(i, None)
    while pending:
        if stop is not None and any(stop(v) for v in done.values()):
            for i in list(pending):
                done.update(_stopped(flows[i], i))
            break
        order = list(pending)
        results = yield tuple(pending[i] for i in order)
        for i, result in zip(order, results, strict=True):
            advance(i, result)
    return [done.get(i) for i in range(len(flows))]
