"""The flow protocol and combinators (flows/__init__.py)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from tests.unit._flowkit import (
    drive,
    ok,
)
from zae_limiter.flows import Call, Result, lockstep


# ---------------------------------------------------------------- lockstep
def _steps(name: str, n: int, log: list[Any]) -> Generator[Any, Any, str]:
    try:
        for i in range(n):
            try:
                result = yield Call("get_item", {"who": name, "step": i})
            except RuntimeError as error:
                log.append((name, "caught", str(error)))
                return f"{name}:failed"
            log.append((name, result))
        return f"{name}:done"
    finally:
        log.append((name, "closed"))


def test_lockstep_advances_flows_one_tuple_per_round() -> None:
    log: list[Any] = []
    rounds: list[Any] = []
    flow = lockstep([_steps("a", 2, log), _steps("b", 1, log)])
    request = next(flow)
    try:
        while True:
            rounds.append(request)
            request = flow.send(tuple(f"r{len(rounds)}" for _ in request))
    except StopIteration as done:
        value = done.value
    assert value == ["a:done", "b:done"]
    assert [[step.params["who"] for step in r] for r in rounds] == [["a", "b"], ["a"]]
    assert [step.params["step"] for step in rounds[0]] == [0, 0]
    assert ("a", "r1") in log and ("b", "r1") in log and ("a", "r2") in log


def test_lockstep_stop_closes_the_others() -> None:
    log: list[Any] = []

    def fails_first() -> Generator[Any, Any, str]:
        yield Call("update_item", {"who": "x"})
        return "rejected"

    flow = lockstep([fails_first(), _steps("b", 3, log)], stop=lambda v: v == "rejected")
    value, requests = drive(flow, [(ok(), ok())])
    assert value == ["rejected", None]
    assert len(requests) == 1
    assert log == [("b", Result()), ("b", "closed")]


def test_lockstep_stop_keeps_what_a_flow_already_took() -> None:
    """A take whose write succeeded and that goes on with a follow-up (a doubling) when
    another level refuses: stopped, it still returns what it took, so the acquire gives
    it back (the simulator's seed 438 lost a child's tokens to a close here)."""
    from zae_limiter.flows import Stopped

    followed: list[str] = []

    def refused() -> Generator[Any, Any, str]:
        yield Call("update_item", {"who": "parent"})
        return "rejected"

    def took_then_doubles() -> Generator[Any, Any, str]:
        yield Call("update_item", {"who": "child"})
        try:
            yield Call("update_item", {"who": "child", "doubling": True})
            followed.append("doubled")
        except Stopped:
            followed.append("stopped")
        return "taken"

    flow = lockstep([refused(), took_then_doubles()], stop=lambda v: v == "rejected")
    value, requests = drive(flow, [(ok(), ok())])
    assert value == ["rejected", "taken"]
    assert len(requests) == 1 and followed == ["stopped"]


def test_lockstep_without_stop_runs_everything() -> None:
    log: list[Any] = []

    def short() -> Generator[Any, Any, str]:
        yield Call("update_item", {})
        return "rejected"

    value, requests = drive(lockstep([short(), _steps("b", 2, log)]), [(ok(), ok()), (ok(),)])
    assert value == ["rejected", "b:done"]
    assert len(requests) == 2


def test_lockstep_throws_an_error_into_its_own_flow_only() -> None:
    log: list[Any] = []
    flow = lockstep([_steps("a", 2, log), _steps("b", 2, log)])
    value, _ = drive(flow, [(RuntimeError("boom"), "fine"), ("more",)])
    assert value == ["a:failed", "b:done"]
    assert ("a", "caught", "boom") in log
    assert ("b", "fine") in log and ("b", "more") in log
    assert not any(entry[0] == "b" and entry[1] == "caught" for entry in log)
