"""A lease's changes on a regional share after its acquire: the rollback of an acquire or
of a lease that raised (tokens given back), and `adjust()` (tokens taken or given back),
exactly, as for a regional limit (docs/global.md, "Leases, adjustments and rollbacks").

A change is one conditional write to this region's own share item, planned on the share
version this client last saw: a transfer re-expresses `fa` for a new rate, so a change
planned on the old version must not land after it. A failed condition returns the item
and the change is planned again from it; a frozen item (a transfer on its way) is read
again after FROZEN_WAIT_MS, as a take does. The write is never re-sent after a lost
answer (an ADD applied twice would count twice): a give-back lost is under-admission, an
adjustment lost is logged, as for a regional limit.

`fa` is the full-at time times the share's rate, so one millitoken is `rp` of it whatever
the rate: a give-back ADDs `-n x rp` (a bucket given back past full is full: the deficit
is clamped at 0, as in bucket.py), a charge ADDs `n x rp` to a bucket short of full or
SETs `fa` from now on a full one. Neither asks for tokens: an adjustment may leave the
share in debt, which later takes wait out, as for a regional limit.

No I/O here.
"""

from __future__ import annotations

from zae_limiter.flows import Call, Flow, one, pause
from zae_limiter.flows import regional as core
from zae_limiter.flows.regional_run import MAX_TRIES, Memory, Target, ensure_item
from zae_limiter.keys import regions as rk

#: A bound no `fa` reaches (DynamoDB numbers hold 38 digits): a change asks no tokens.
ANY = 10**30


def plan_change(image: core.ShareImage, delta_milli: int, now_ms: int) -> core.TakePlan:
    """The write of a change of `delta_milli` (> 0: taken, < 0: given back) on `image`."""
    state = image.state()
    if delta_milli < 0:
        return core.TakePlan(delta_milli * state.unit(), (-ANY, ANY))
    threshold = state.threshold(now_ms)
    if state.is_full(now_ms):
        return core.TakePlan(state.charged(delta_milli, now_ms), (threshold, None))
    return core.TakePlan(delta_milli * state.unit(), (threshold, ANY))


def change_share(target: Target, memory: Memory, delta_milli: int, now_ms: int) -> Flow[bool]:
    """Apply a change of `delta_milli` to this region's share: True once written (or, for
    a charge, spent from this client's live reserve, whose tokens already left the
    bucket); False when every try's condition failed."""
    if delta_milli == 0 or (delta_milli > 0 and memory.spend(delta_milli, now_ms)):
        return True
    image = memory.image
    for _ in range(MAX_TRIES):
        if image is None or image.frozen_at is not None:
            if image is not None:
                woke = yield from pause(core.FROZEN_WAIT_MS)
                now_ms = woke if woke is not None else now_ms + core.FROZEN_WAIT_MS
            image = yield from ensure_item(target, memory)
            if image.frozen_at is not None:
                continue
        plan = plan_change(image, delta_milli, now_ms)
        # Tokens taken by an adjustment are demand of this region like any take's.
        call = rk.share_take_write(
            target.table, target.key, image.version, delta_milli, plan.full_at, plan.window,
            max(0, delta_milli),
        )  # fmt: skip
        result = yield from one(Call("update_item", call))
        item = result.attributes if result.ok else result.old
        image = core.decode(item) if item else None
        memory.image = image
        if result.ok:
            if delta_milli < 0:
                memory.short_until_ms = 0  # tokens came back: the next acquire asks again
            return True
    return False


__all__ = ["ANY", "change_share", "plan_change"]
