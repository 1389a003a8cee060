"""Where a hot run's requests go: every request a client process sends, counted by the
flow functions that yielded it and by what came back.

A shim around the sync runner of each client process (benchmark-only: nothing in the
library changes). When a flow yields a round trip, the chain of generators it is
suspended in (`gi_yieldfrom`, outermost first) names the cause: a take, a read before a
first write, an evidence read, a doubling, a new shard. Each process writes its counts to
a JSON file in the trace directory; `merge` sums them. It also writes, per process, each
doubling try and each judgement of a throttle as evidence with the windows the client
held (`doublings-*.json`), and every request in order with its cause, outcome and shard
(`timeline-*.json`): the run's `start_at` (in its results) lines their times up with the
rows. Seconds stated in docs/hot-entity.md "every doubling on time" come from these.

    python -m benchmarks.hot_throttle --only reserve-off --trace /tmp/trace
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import Any

#: How many of the innermost flow functions name a request's cause.
DEPTH = 4


def _chain(flow: Any) -> list[str]:
    names: list[str] = []
    gen = flow
    while gen is not None:
        code = getattr(gen, "gi_code", None)
        if code is None:
            break
        names.append(code.co_name)
        gen = getattr(gen, "gi_yieldfrom", None)
    return names


def _outcome(result: Any) -> str:
    from zae_limiter.errors import RateLimiterUnavailable
    from zae_limiter.flows import Result

    if isinstance(result, tuple):
        return "+".join(_outcome(r) for r in result)
    if isinstance(result, Result):
        return "ok" if result.ok else "condition-failed"
    if isinstance(result, RateLimiterUnavailable):
        return "throttled" if "Throughput" in (result.code or "") else f"error:{result.code}"
    if isinstance(result, Exception):
        return f"error:{type(result).__name__}"
    return "other"


def install(directory: str) -> None:
    """Patch this process's sync runner to count every request by cause; the counts are
    written to `directory` when `flush` is called."""
    import time

    from zae_limiter import drivers
    from zae_limiter.flows import Call

    counts: Counter[str] = Counter()
    timeline: list[Any] = []
    lock = threading.Lock()
    causes: dict[int, str] = {}
    running = threading.local()
    run, prepare, step = drivers.SyncRunner.run, drivers._Runner.prepare, drivers.SyncRunner.step

    def traced_run(self: Any, flow: Any, *args: Any, **kwargs: Any) -> Any:
        # The flow being run in this thread: `prepare` is called right after it yields.
        stack = running.__dict__.setdefault("flows", [])
        stack.append(flow)
        try:
            return run(self, flow, *args, **kwargs)
        finally:
            stack.pop()

    def traced_prepare(self: Any, steps: Any, deadline: Any) -> Any:
        stack = running.__dict__.get("flows") or [None]
        cause = " > ".join(_chain(stack[-1])[-DEPTH:]) if stack[-1] is not None else "?"
        for s in steps:
            if isinstance(s, Call):
                causes[id(s)] = cause
        return prepare(self, steps, deadline)

    def traced_step(self: Any, s: Any, trip: int, cost: Any, left: Any) -> Any:
        result = step(self, s, trip, cost, left)
        if isinstance(s, Call):
            cause = causes.pop(id(s), "?")
            with lock:
                counts[f"{s.op} | {_outcome(result)} | {cause}"] += 1
                shard = s.params.get("Key", {}).get("PK", {}).get("S", "").rsplit("#", 1)[-1]
                timeline.append([round(time.time(), 3), s.op, _outcome(result), cause, shard])
        return result

    doublings: list[Any] = []
    _trace_doublings(doublings)
    setattr(drivers.SyncRunner, "run", traced_run)  # noqa: B010 (patched for the run)
    setattr(drivers._Runner, "prepare", traced_prepare)  # noqa: B010
    setattr(drivers.SyncRunner, "step", traced_step)  # noqa: B010

    def flush() -> None:
        path = Path(directory) / f"trace-{os.getpid()}.json"
        path.write_text(json.dumps(dict(counts), indent=1))
        (Path(directory) / f"doublings-{os.getpid()}.json").write_text(json.dumps(doublings))
        (Path(directory) / f"timeline-{os.getpid()}.json").write_text(json.dumps(timeline))

    globals()["flush"] = flush


def _trace_doublings(out: list[Any]) -> None:
    """Each doubling try (before its reads): when, from which count, the evidence's start,
    the caller, and the windows this client saw under that count (writes/s per limit)."""
    import time

    from zae_limiter.flows.scaling import any_shard, doubling
    from zae_limiter.flows.scaling.evidence import measured

    original = doubling.double

    def traced(state: Any, entity_id: str, resource: str, now_ms: int, since: int,
               confirm: bool = False, limits: Any = ()) -> Any:  # fmt: skip
        meta = state.entities.get(entity_id)
        count = 1 if meta is None else meta.shards.counts.get(resource, 1)
        rates = []
        if meta is not None:
            for (_name, shard), seen in meta.shards.seen.items():
                stretch = measured(seen)
                if seen.shard_count == count and stretch is not None:
                    rate = max(0, stretch[1] - 1) * 1000 / stretch[2] / seen.partition_wcu
                    rates.append((shard, round(rate, 2), now_ms - seen.seen_ms))
        may = doubling.may_double(state, entity_id, resource, now_ms)
        busy = None if meta is None else doubling.busy_on_average(meta, resource, count, now_ms)
        calls: list[Any] = []
        entry: dict[str, Any] = {"t": time.time(), "count": count, "age": now_ms - since,
                                 "confirm": confirm, "may": may, "busy": busy, "rates": rates,
                                 "caller": _caller(), "calls": calls}  # fmt: skip
        out.append(entry)
        flow = original(state, entity_id, resource, now_ms, since, confirm, limits)
        yield from _recorded(flow, calls)
        entry["after"] = None if meta is None else meta.shards.counts.get(resource, 1)
        entry["done"] = time.time()

    setattr(doubling, "double", traced)  # noqa: B010 (patched for the run)
    setattr(any_shard, "double", traced)  # noqa: B010 (its own name for it)
    _trace_judgements(out)


def _trace_judgements(out: list[Any]) -> None:
    """Each judgement of a throttle as doubling evidence: when, the count, the shard, the
    reason given, whether this client may double now, what it found, and its windows."""
    import time

    from zae_limiter.flows.scaling import any_shard, doubling

    original = any_shard._double_on_evidence

    def traced(state: Any, level: Any, here: Any, now_ms: int, partition: Any,
               refused_shards: int = 0) -> Any:  # fmt: skip
        meta = state.entities.get(level.entity_id)
        count = 1 if meta is None else meta.shards.counts.get(level.resource, 1)
        may = doubling.may_double(state, level.entity_id, level.resource, now_ms)
        entry: dict[str, Any] = {"t": time.time(), "judge": count, "shard": here.shard_id,
                                 "may": may, "partition": partition}  # fmt: skip
        calls: list[Any] = []
        tried = yield from _recorded(
            original(state, level, here, now_ms, partition, refused_shards), calls
        )
        if may:
            entry["tried"] = tried
            entry["calls"] = [c for c in calls if c[1] != "update_item"]
            views = [] if meta is None else sorted(meta.shards.seen.items())
            entry["views"] = [
                [shard, v.shard_count, v.start_ms - now_ms, v.writes, v.seen_ms - now_ms,
                 v.prev_start_ms - now_ms if v.prev_start_ms >= 0 else None, v.prev_writes]
                for (_r, shard), v in views
            ]  # fmt: skip
            out.append(entry)
        return tried

    setattr(any_shard, "_double_on_evidence", traced)  # noqa: B010 (patched for the run)


def _caller() -> str:
    """The flow function that asked for the doubling (after a good write, or a throttle)."""
    import sys

    frame = sys._getframe(2)
    return frame.f_code.co_name if frame is not None else "?"


def _recorded(flow: Any, calls: list[Any]) -> Any:
    """Run `flow` as `yield from` would, noting each request (op, outcome, shards read)."""
    import time

    send: Any = None
    throw: BaseException | None = None
    while True:
        try:
            request = flow.throw(throw) if throw is not None else flow.send(send)
        except StopIteration as finished:
            return finished.value
        throw = None
        try:
            send = yield request
        except BaseException as error:
            calls.append([round(time.time(), 3), _op(request), _outcome(error)])
            throw = error
            continue
        calls.append([round(time.time(), 3), _op(request), _outcome(send), _shards(send)])


def _op(request: Any) -> str:
    return "+".join(getattr(r, "op", "?") for r in request) if isinstance(request, tuple) else (
        getattr(request, "op", "?"))


def _shards(result: Any) -> Any:
    """The shard ids a BatchGetItem found (None for any other answer)."""
    response = getattr(result, "response", None)
    if not isinstance(response, dict) or "Responses" not in response:
        return None
    found = []
    for items in response["Responses"].values():
        for item in items:
            found.append(item.get("PK", {}).get("S", "?").rsplit("#", 1)[-1])
    return sorted(found, key=lambda x: int(x) if x.isdigit() else -1)


def flush() -> None:  # replaced by install()
    pass


def traced_worker(directory: str, spec: Any, ready: Any, go: Any, start: Any, results: Any) -> None:
    """`testing.load.worker`, traced."""
    from zae_limiter.testing.load import worker

    install(directory)
    try:
        worker(spec, ready, go, start, results)
    finally:
        flush()


def merge(directory: str) -> Counter[str]:
    total: Counter[str] = Counter()
    for path in Path(directory).glob("trace-*.json"):
        total.update(json.loads(path.read_text()))
    return total


def report(directory: str) -> str:
    total = merge(directory)
    lines = [f"{n:6d}  {key}" for key, n in total.most_common()]
    lines.append(f"{sum(total.values()):6d}  all")
    return "\n".join(lines)


if __name__ == "__main__":
    import sys

    print(report(sys.argv[1]))
