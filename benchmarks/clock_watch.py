"""What the clock watch adds to each DynamoDB call the driver makes (docs/doctor.md).

`python -m benchmarks.clock_watch [calls]` prints, in ns per call (best of five rounds):
- `heard`: the watch taking one answer, its `Date` unchanged (the common case);
- `step, watch on` / `step, watch off`: `SyncRunner.step` on a client that answers at once
  (no network), with the watch as shipped and with it replaced by one that does nothing.
The difference between the two steps is the whole cost on the hot path, clock reads
included; compare it with a lean `UpdateItem`'s client CPU (`benchmarks.lean_call`).
"""

from __future__ import annotations

import sys
import time
from email.utils import formatdate
from typing import Any

from zae_limiter.capacity import CapacityMeter, Cost
from zae_limiter.clock_watch import ClockWatch
from zae_limiter.drivers import SyncRunner
from zae_limiter.flows import Call

ROUNDS = 5


class _Answering:
    """A DynamoDB client stand-in answering every GetItem at once, dated now."""

    def __init__(self) -> None:
        self.response = {
            "Item": {"pk": {"S": "x"}},
            "ResponseMetadata": {"HTTPHeaders": {"date": formatdate(time.time(), usegmt=True)}},
        }

    def get_item(self, **_: Any) -> dict[str, Any]:
        return self.response


class _Deaf(ClockWatch):
    def heard(self, sent_ms: int, received_ms: int, response: Any) -> None:
        return None


def _best(run: Any, calls: int) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.perf_counter_ns()
        run(calls)
        best = min(best, (time.perf_counter_ns() - started) / calls)
    return best


def bench_heard(calls: int) -> float:
    watch = ClockWatch(warn_after_ms=None)
    answer = _Answering().response
    now = time.time_ns() // 1_000_000

    def run(n: int) -> None:
        for _ in range(n):
            watch.heard(now, now + 1, answer)

    return _best(run, calls)


def bench_step(calls: int, watch: ClockWatch) -> float:
    runner = SyncRunner(_Answering(), CapacityMeter(), "t")
    runner.watch = watch
    call = Call("get_item", {"TableName": "t", "Key": {"pk": {"S": "x"}}})
    cost = Cost()

    def run(n: int) -> None:
        for _ in range(n):
            runner.step(call, 0, cost, None)

    return _best(run, calls)


def main(argv: list[str]) -> int:
    calls = int(argv[0]) if argv else 200_000
    heard = bench_heard(calls)
    on = bench_step(calls, ClockWatch(warn_after_ms=None))
    off = bench_step(calls, _Deaf())
    print(f"heard:          {heard:8.0f} ns/call")
    print(f"step, watch on: {on:8.0f} ns/call")
    print(f"step, watch off:{off:8.0f} ns/call")
    print(f"added by watch: {on - off:8.0f} ns/call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
