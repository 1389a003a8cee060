"""One entity's buckets as a throttled client holds them back: the gate a throttle closes
(flows/scaling/throttled.py decides for how long), when a write was last refused, and
which waiting acquire writes for a reserve. `ThrottleGate` is the only writer of that
state.
"""

from __future__ import annotations


class ThrottleGate:
    """Per resource of one entity: the gate, the last refusal, the lead's claim."""

    __slots__ = ("closed", "leading", "refused")

    def __init__(self) -> None:
        #: (no write before this time in ms, throttles in a row), so this client's other
        #: acquires wait instead of piling on.
        self.closed: dict[str, tuple[int, int]] = {}
        #: When this client's last throttled write to a resource was refused (ms).
        self.refused: dict[str, int] = {}
        #: While acquires wait for a reserve: until when one of them writes for it (ms),
        #: so this client's waiting acquires write one at a time.
        self.leading: dict[str, int] = {}

    def state(self, resource: str) -> tuple[int, int]:
        """(closed until ms, throttles in a row); (0, 0) when never throttled."""
        return self.closed.get(resource, (0, 0))

    def note_refusal(self, resource: str, now_ms: int) -> None:
        self.refused[resource] = now_ms

    def close(self, resource: str, until_ms: int, row: int) -> None:
        self.closed[resource] = (until_ms, row)

    def open(self, resource: str) -> None:
        """The gate opens and the row of throttles is forgotten."""
        self.closed.pop(resource, None)

    def claim_lead(self, resource: str, now_ms: int, lead_ms: int) -> bool:
        """Whether no other waiting acquire holds the claim to write for the reserve (and
        then this one holds it for `lead_ms`)."""
        if self.leading.get(resource, 0) > now_ms:
            return False
        self.leading[resource] = now_ms + lead_ms
        return True
