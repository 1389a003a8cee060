"""Canned-result helpers for driving flows in unit tests (no I/O)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from zae_limiter import keys
from zae_limiter.bucket import LimitState
from zae_limiter.config_cache import ConfigCache
from zae_limiter.errors import RateLimiterUnavailable
from zae_limiter.flows import Call, Flow, Result, Sleep, run_pure
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.scaling.knowledge import WindowSeen
from zae_limiter.flows.write.levels import Level
from zae_limiter.limits import Limit
from zae_limiter.models import BucketState

T0 = 1_800_000_000_000  # divisible by 60_000: refill boundaries line up with T0
NS = "ns"
TABLE = "limits"
RPM = Limit.per_minute("rpm", 10)  # 10_000 millitokens per 60_000 ms: 1 token per 6 s
TPM = Limit.per_minute("tpm", 1000)
LIMITS = (RPM, TPM)
KEY = keys.bucket_key(NS, "e1", "gpt", 0)


def make_state(*, known: bool = True) -> RepoState:
    """A client; `known`: it knows entity e1 and has written its shard 0 (an image with
    nothing in it, taken at T0: its next write plans the bucket as full, as a client's
    first write after its config read does, and the conditions decide)."""
    state = RepoState(table=TABLE, namespace=NS, config_cache=ConfigCache(60))
    if known:
        meta = state.entities.learn("e1", False, None)
        meta.images.items[("gpt", 0)] = {}
        meta.images.at[("gpt", 0)] = T0
    return state


def two_shards(wcu: int, windows: tuple[WindowSeen, WindowSeen]) -> RepoState:
    """A client of a two-shard entity that saw these windows of its shards just now."""
    state = make_state()
    state.partition_wcu = wcu
    meta = state.entities["e1"]
    meta.shards.counts["gpt"] = 2
    meta.shards.seen[("gpt", 0)], meta.shards.seen[("gpt", 1)] = windows
    return state


def make_level(
    consume: dict[str, int] | None = None,
    limits: tuple[Limit, ...] = LIMITS,
    shard_count: int = 1,
) -> Level:
    return Level(
        entity_id="e1",
        resource="gpt",
        limits=limits,
        consume_milli={"rpm": 1000, "tpm": 100_000} if consume is None else consume,
        shard_count=shard_count,
    )


def bucket(
    at: int, tokens: dict[str, int], shard_count: int = 1, limits: tuple[Limit, ...] = LIMITS
) -> BucketState:
    """A shard holding `tokens` (millitokens per limit) at `at`: full-at times set so."""
    by_name = {limit.name: limit for limit in limits}
    states = {}
    for name, tk in tokens.items():
        cfg = LimitState(
            capacity_milli=by_name[name].capacity_milli,
            refill_amount_milli=by_name[name].refill_amount_milli,
            refill_period_ms=by_name[name].refill_period_ms,
        )
        states[name] = replace(cfg, full_at=cfg.with_tokens(tk, at, shard_count))
    return BucketState(
        entity_id="e1",
        resource="gpt",
        shard_id=0,
        shard_count=shard_count,
        last_refill_ms=0,
        limits=states,
    )


def item(at: int, tokens: dict[str, int], **kw: Any) -> dict[str, Any]:
    return keys.new_bucket_item(NS, bucket(at, tokens, **kw), at)


def limit_part(params: dict[str, Any], name: str) -> tuple[str, dict[str, int]]:
    """(form, {placeholder: value}) of one limit in a take write (keys/takes.py); the
    value placeholders without their limit number, `:delta` and `:full_at` as `amount`."""
    names = params["ExpressionAttributeNames"]
    [i] = [k[len("#full_at_") :] for k, v in names.items() if v == f"b_{name}_fa"]
    update, condition = params["UpdateExpression"], params["ConditionExpression"]
    given = params["ExpressionAttributeValues"]
    stems = {"delta": "amount", "full_at": "amount", "bound": "bound", "now": "now",
             "used": "used", "cap": "cap", "was_full_at": "was_full_at"}  # fmt: skip
    values = {
        label: int(given[f":{stem}_{i}"]["N"])
        for stem, label in stems.items()
        if f":{stem}_{i}" in given
    }
    if f"#full_at_{i} :delta_{i}" in update:
        form = "add" if f"#full_at_{i} > :now_{i}" in condition else "give"
    elif f"#full_at_{i} = :full_at_{i}" in update:
        form = "rebase" if f"#cap_{i} = :cap_{i}" in update else "set"
    else:
        form = "check"
    return form, values


def failed(old: dict[str, Any] | None) -> Result:
    return Result(response={}, ok=False, old=old)


def ok(attributes: dict[str, Any] | None = None) -> Result:
    return Result(response={"Attributes": attributes} if attributes else {})


def recorded(flow: Flow[Any], log: list[Any]) -> Flow[Any]:
    request = next(flow)
    while True:
        log.append(request)
        response = yield request
        try:
            request = flow.send(response)
        except StopIteration as done:
            return done.value


def drive(flow: Flow[Any], results: list[Any]) -> tuple[Any, list[Any]]:
    """Run a flow on canned results; every result must be consumed, no request left over."""
    log: list[Any] = []
    value = run_pure(recorded(flow, log), results)
    assert len(log) == len(results), f"flow finished after {len(log)} of {len(results)} results"
    return value, log


def value_of(params: dict[str, Any], before: str, expression: str) -> int:
    match = re.search(re.escape(before) + r"\s*(:\w+)", params[expression])
    assert match, f"{before!r} not in {params[expression]!r}"
    return int(params["ExpressionAttributeValues"][match.group(1)]["N"])


def answered(
    flow: Any, answer: Callable[[Call], Any], on_sleep: Callable[[int], None] | None = None
) -> tuple[Any, list[Call], int]:
    """Run a flow to its end: (value or raised error, calls, simulated ms slept);
    `on_sleep(slept_ms)` is told after each simulated wait."""
    calls: list[Call] = []
    slept = 0
    send: Any = None
    try:
        request = next(flow)
        while True:
            if isinstance(request, Sleep):
                slept += request.ms
                if on_sleep is not None:
                    on_sleep(slept)
                send = None
            else:
                calls.append(request)
                send = answer(request)
            request = flow.throw(send) if isinstance(send, BaseException) else flow.send(send)
    except StopIteration as done:
        return done.value, calls, slept
    except RateLimiterUnavailable as error:
        return error, calls, slept


def made_below(
    read: Call, missing: frozenset[int] = frozenset(), drained: frozenset[int] = frozenset()
) -> Result:
    """The answer to the read before a raise from n (flows/scaling/made.py: shards 1 ..
    2n - 1, or 0 .. 2n - 1 with shard 0): every shard below n made, recording n, but
    `missing`; of those at or above n, only `drained` (recording n: a merge drained it)."""
    request = read.params["RequestItems"][TABLE]
    ids = [int(key[keys.PK]["S"].rsplit("#", 1)[1]) for key in request["Keys"]]
    count = (max(ids) + 1) // 2
    found = [
        {**key, keys.A_SHARD_COUNT: keys.n(count)}
        for shard, key in zip(ids, request["Keys"], strict=True)
        if (shard < count and shard not in missing) or shard in drained
    ]
    return Result({"Responses": {TABLE: found}})


def shards_answer(read: Call, items: dict[int, dict[str, Any]]) -> Result:
    """The answer to a BatchGetItem of whole shards (`keys.shards_read`): the items given,
    by shard id, for the shards it asks; a shard not given is absent."""
    found = []
    for key in read.params["RequestItems"][TABLE]["Keys"]:
        shard = int(key[keys.PK]["S"].rsplit("#", 1)[1])
        if shard in items:
            found.append({**items[shard], **key})
    return Result({"Responses": {TABLE: found}})
