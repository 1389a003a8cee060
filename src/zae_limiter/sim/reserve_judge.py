"""What the checker is told of token reserves at the writes that move them: what a grant
left behind in its shard, and what a give-back meets at the top of a bucket
(docs/reserves.md, "The guarantee" and "Leases")."""

from __future__ import annotations

from typing import Any

from zae_limiter import keys
from zae_limiter.flows import Call
from zae_limiter.flows.write.shares import current, tokens_now
from zae_limiter.sim.threads import Machine


def behind(world: Machine, key: str, call: Call, before: Any, after: Any, clock: Any) -> None:
    """Tell the checker what a write that raised a held count (a reserve granted)
    left in its shard, by the clock it was planned with (`Checker.kept_behind`).
    A held count's rise is the grant less what the same write released of that
    epoch (a flush of the reserve it tops up): never more than the grant. A write
    that also raised the shard's count (a doubling riding on it) left the shares it
    split off in the shard until their shards are made (`tokens_now`'s `shares`).
    Judged where the item stores the world's numbers for the limit (a write under
    other numbers rebases, and its grant was sized by those)."""
    if not after or clock is None or call.op != "update_item":
        return
    raised = {a: {"N": str(m)} for a, m in keys.held_adds_of(call.params).items() if m > 0}
    if not raised:
        return
    bucket = keys.decode_bucket(after)
    shares = max(1, _count(after) // _count(before)) if before else 1
    for name, epochs in keys.decode_reserved(raised).items():
        limit = next((lm for lm in world.spec.limits if lm.name == name), None)
        if limit is None or current(bucket, limit, clock)[2]:
            continue
        left = tokens_now(bucket, limit, clock, shares)
        world.checker.kept_behind(keys.parse_bucket_pk(key)[1], bucket.shard_id, name,
                                 sum(epochs.values()), left)  # fmt: skip


def at_top(world: Machine, key: str, intent: Any) -> None:
    """A lease end's give-back past what its client's reserve had spent when it
    settled there is written to the full-at time (flows/reserves/book.py
    `apply_change`), which stops at full: tokens reserves spent and did not report
    yet (charged to it only with their next flush or return) are not there to give
    back to. What the client's reserve served since its settlement (another thread),
    and what other clients' held counts on the shard hold beyond their reserves' own
    tokens, is such spending; a bucket at its top by the full-at time drops as much
    of the give-back (docs/reserves.md, "Leases"): the checker allows the smaller."""
    change = {n: -v for n, v in intent.change.items() if v < 0}
    item = world.peek(key)
    if not change or not item:
        return
    mark, then = intent.served if intent.served is not None else (None, {})
    reserved = keys.decode_reserved(item)
    bucket_key = (intent.taken.entity_id, intent.taken.resource)
    for name, milli in change.items():
        own = world.served.get(mark, {}).get(name, 0) - then.get(name, 0) if mark else 0
        others = keys.held_milli(reserved.get(name, {}), world.true_ms)
        for client in world._live():
            book = client.state.reserves
            held = None if book is None else book.holding(bucket_key)
            if held is None or held.shard_id != intent.taken.shard_id:
                continue
            others -= held.taken_total().get(name, 0)
            if mark is None or client.name != mark[0]:
                others += held.taken_total().get(name, 0) - held.left.get(name, 0)
        allowed = min(milli, own + max(0, others))
        if allowed > 0:
            world.checker.dropped_at_top(intent.taken.entity_id, name, allowed)


def _count(item: Any) -> int:
    return keys.get_n(item, keys.A_SHARD_COUNT, 1)
