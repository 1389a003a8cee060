"""A schedule as a reader follows it: one line per request, fault and event, with the
bucket's limits before and after each write to a bucket item.

Off while seeds are searched (it costs a read per write); on when a failing schedule is
replayed to be printed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from zae_limiter import keys
from zae_limiter.flows import Call

Peek = Callable[[str], Mapping[str, Any] | None]


class Trace:
    def __init__(self, start_ms: int, peek: Peek | None = None) -> None:
        self.start_ms = start_ms
        self.peek = peek
        self.lines: list[str] = []

    @property
    def on(self) -> bool:
        return self.peek is not None

    def note(self, true_ms: int, text: str) -> None:
        if self.on:
            self.lines.append(f"{true_ms - self.start_ms:>8} ms  {text}")

    def image(self, pk: str | None) -> Mapping[str, Any] | None:
        if self.peek is None or pk is None or "BUCKET#" not in pk:
            return None
        return self.peek(pk)

    def request(self, true_ms: int, who: str, call: Call, what: str,
                before: Any = None, pk: str | None = None) -> None:  # fmt: skip
        if not self.on:
            return
        where = _where(call)
        self.note(true_ms, f"{who:<8} {call.op:<20} {where:<28} -> {what}")
        if call.op in ("update_item", "put_item") and pk is not None and "BUCKET#" in pk:
            after = self.image(pk)
            if before != after:
                self.lines.append(f"{'':>12}  before: {bucket_summary(before)}")
                self.lines.append(f"{'':>12}  after:  {bucket_summary(after)}")

    def text(self) -> str:
        return "\n".join(self.lines)


def _where(call: Call) -> str:
    key = call.params.get("Key") or call.params.get("Item") or {}
    pk = key.get(keys.PK, {}).get("S", "") if isinstance(key, dict) else ""
    return str(pk).split("/", 1)[-1][:28]


def bucket_summary(item: Mapping[str, Any] | None) -> str:
    """The limit attributes of a bucket item, short: `rpm fa=... tc=... rs93=...`."""
    if not item:
        return "(absent)"
    parts = []
    for attr in sorted(item):
        if attr.startswith(keys.BUCKET_PREFIX) or attr == keys.A_SHARD_COUNT:
            value = item[attr]
            parts.append(f"{attr}={value.get('N', value.get('S', value))}")
    return " ".join(parts)
