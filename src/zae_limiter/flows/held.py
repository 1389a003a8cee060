"""One token reserve: the tokens a client holds from one bucket shard, what it raised each
epoch's held count by, and when it was taken (see flows/reserves/book.py, which keeps them)."""

from __future__ import annotations

from dataclasses import dataclass

from zae_limiter.flows.reserves.settings import RETURN_MARGIN_MS
from zae_limiter.keys import RESERVE_EPOCH_MS, reserve_epoch
from zae_limiter.limits import Limit


@dataclass(slots=True)
class Reserve:
    """Tokens this client holds from one bucket shard (millitokens per limit)."""

    shard_id: int
    limits: tuple[Limit, ...]
    left: dict[str, int]
    #: What each epoch's held count on the item was raised by: epoch -> limit -> millitokens.
    taken: dict[int, dict[str, int]]
    born_ms: int
    used_ms: int
    #: The end of the earliest quota window among `limits` when it was taken (a
    #: calendar window, or the session the take's item held; None: none): past it the
    #: reserve is never spent, and goes back (docs/quotas.md).
    window_end_ms: int | None = None
    #: The end of the session of its session quotas when it was taken (None: none).
    session_end_ms: int | None = None

    def crossed(self, now_ms: int) -> bool:
        """Whether a quota of the reserve has reset since it was taken."""
        return self.window_end_ms is not None and now_ms >= self.window_end_ms

    def gone(self, now_ms: int) -> frozenset[str]:
        """The quotas of the reserve whose window has ended since it was taken:
        what it spent went with that window, so its report is counted as usage and
        never charged to the next window (docs/quotas.md, "Reserves at a reset")."""
        if not self.crossed(now_ms):
            return frozenset()
        session_over = self.session_end_ms is not None and now_ms >= self.session_end_ms
        return frozenset(
            limit.name
            for limit in self.limits
            if limit.window is not None
            and (
                limit.window.bounds(now_ms)[0] >= (self.window_end_ms or 0)
                if limit.window.cron is not None
                else session_over
            )
        )

    def taken_total(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for amounts in self.taken.values():
            for name, milli in amounts.items():
                total[name] = total.get(name, 0) + milli
        return total

    def returnable(self, now_ms: int) -> bool:
        """Whether the tokens left may still go back (see RETURN_MARGIN_MS)."""
        oldest = min(self.taken, default=reserve_epoch(now_ms))
        return now_ms < (oldest + 2) * RESERVE_EPOCH_MS - RETURN_MARGIN_MS

    def fits(self, limits: tuple[Limit, ...], shard_count: int) -> bool:
        """Whether a write to the bucket under `limits` and `shard_count` can carry it."""
        return self.limits == limits and self.shard_id < shard_count

    def settlement(self, now_ms: int) -> tuple[dict[str, int], dict[str, int]]:
        """(spent, back) of giving the whole reserve back now: the tokens left go back
        while readers still count its held counts (later they are lost, counted as
        spent, since the capacity they held is already free again); the rest of what it
        took was spent. A give-back into the reserve can leave `spent` negative."""
        taken = self.taken_total()
        back = {n: max(0, v) for n, v in self.left.items()} if self.returnable(now_ms) else {}
        spent = {name: taken.get(name, 0) - back.get(name, 0) for name in set(taken) | set(back)}
        return spent, back
