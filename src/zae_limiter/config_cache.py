"""A TTL cache for stored limit configs, with negative entries and statistics.

The clock is passed in on every call, so that tests move time by hand.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

from zae_limiter.models import CacheStats

V = TypeVar("V")
_MISSING = object()


@dataclass(slots=True)
class _Entry(Generic[V]):
    value: V | None
    expires_ms: int


class ConfigCache(Generic[V]):
    """`None` values are stored too: "no config at this level" is worth remembering."""

    def __init__(self, ttl_seconds: float) -> None:
        if ttl_seconds < 0:
            raise ValueError("config_cache_ttl must be 0 (disabled) or more seconds")
        self.ttl_seconds = ttl_seconds
        self._ttl_ms = int(ttl_seconds * 1000)
        self._entries: dict[Hashable, _Entry[V]] = {}
        self.hits = 0
        self.misses = 0

    @property
    def enabled(self) -> bool:
        return self._ttl_ms > 0

    def lookup(self, key: Hashable, now_ms: int) -> tuple[bool, V | None]:
        """(found, value). A found None is a negative entry."""
        entry = self._entries.get(key)
        if entry is None or entry.expires_ms <= now_ms:
            if entry is not None:
                del self._entries[key]
            self.misses += 1
            return False, None
        self.hits += 1
        return True, entry.value

    def store(self, key: Hashable, value: V | None, now_ms: int) -> None:
        if self.enabled:
            self._entries[key] = _Entry(value, now_ms + self._ttl_ms)

    def evict(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def stats(self) -> CacheStats:
        return CacheStats(
            hits=self.hits,
            misses=self.misses,
            size=len(self._entries),
            ttl_seconds=self.ttl_seconds,
        )
