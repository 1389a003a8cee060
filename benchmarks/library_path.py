"""The library's own CPU per steady sync acquire, without I/O: flows, driver and lease.

`python -m benchmarks.library_path [--acquires N]` opens a repository on moto in
process, makes 50 acquires to reach the steady state (the bucket exists, the client
remembers it), then answers every `UpdateItem` with the last real response moto gave (a
canned response: no engine, no socket, no HTTP), and prints for reserves off and on:

- Python function calls of the library per acquire (`sys.setprofile`, deterministic: the
  figure to compare builds with on a loaded machine);
- CPU microseconds per acquire, best and median of five rounds (`time.process_time`).

A hot loop like this one runs in warm caches; between real socket waits the same code
costs several times more (docs/performance.md, "Why small code counts more than it
seems"), so a microsecond here is worth several in `benchmarks.cpu`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from moto import mock_aws

from zae_limiter import Limit, SyncRateLimiter, SyncRepository
from zae_limiter.wire import LEAN_OPS

LIMIT = Limit.per_second("rps", 1_000_000)  # never binds: every acquire succeeds
WARM_UP = 50
COUNTED = 100
ROUNDS = 5


class _Recorder:
    """The real client, keeping its last response per operation."""

    def __init__(self, client: Any, last: dict[str, Any]) -> None:
        self._client, self._last = client, last

    def __getattr__(self, op: str) -> Callable[..., Any]:
        call = getattr(self._client, op)

        def recorded(**params: Any) -> Any:
            response = call(**params)
            self._last[op] = response
            return response

        return recorded


class _Canned:
    """Answers every UpdateItem with one real response (a fresh copy of its item)."""

    def __init__(self, response: dict[str, Any]) -> None:
        self._response = response

    def update_item(self, **_params: Any) -> dict[str, Any]:
        return {**self._response, "Attributes": dict(self._response["Attributes"])}


def _calls_per_acquire(one: Callable[[], None]) -> float:
    counted = [0]

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and "zae_limiter" in frame.f_code.co_filename:
            counted[0] += 1

    sys.setprofile(profile)
    try:
        for _ in range(COUNTED):
            one()
    finally:
        sys.setprofile(None)
    return counted[0] / COUNTED


def measure(reserve: bool, acquires: int) -> tuple[float, float, float]:
    """(library calls per acquire, best us, median us) of a steady acquire."""
    repo = SyncRepository.open(name=f"path-{int(reserve)}", create_table=True, reserve=reserve)
    try:
        limiter = SyncRateLimiter(repo)

        def one() -> None:
            with limiter.acquire("bench", "path", {LIMIT.name: 1}, limits=[LIMIT]):
                pass

        runner: Any = repo._runner
        # Every call through `target`, which the bench replaces: the sync runner calls the
        # lean client itself when it has one.
        lean, real = runner.lean, runner.target
        runner.lean = None

        def real_target(op: str) -> Any:
            return lean if lean is not None and op in LEAN_OPS else real(op)

        last: dict[str, Any] = {}
        runner.target = lambda op: _Recorder(real_target(op), last)
        for _ in range(WARM_UP):
            one()
        if "update_item" not in last:
            raise RuntimeError("the warm-up made no UpdateItem: nothing to replay")
        canned = _Canned(last["update_item"])
        runner.target = lambda _op: canned
        for _ in range(WARM_UP):
            one()
        calls = _calls_per_acquire(one)
        rounds = []
        for _ in range(ROUNDS):
            start = time.process_time()
            for _ in range(acquires):
                one()
            rounds.append((time.process_time() - start) / acquires * 1e6)
        rounds.sort()
        return calls, rounds[0], rounds[len(rounds) // 2]
    finally:
        repo.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--acquires", type=int, default=20_000, help="acquires per round")
    args = parser.parse_args(argv)
    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):  # fmt: skip
        os.environ.setdefault(name, value)
    print("| reserves | library calls per acquire | CPU us, best | CPU us, median |")
    print("|---|---|---|---|")
    with mock_aws():
        for reserve in (False, True):
            calls, best, median = measure(reserve, args.acquires)
            label = "on" if reserve else "off"
            print(f"| {label} | {calls:.1f} | {best:.1f} | {median:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
