"""The limit-config TTL cache (config_cache.py): time is passed in, never read."""

from __future__ import annotations

import pytest

from zae_limiter.config_cache import ConfigCache
from zae_limiter.models import CacheStats

T0 = 1_800_000_000_000


def test_miss_then_hit_and_stats() -> None:
    cache: ConfigCache[str] = ConfigCache(60)
    assert cache.lookup("k", T0) == (False, None)
    cache.store("k", "v", T0)
    assert cache.lookup("k", T0 + 1) == (True, "v")
    assert cache.lookup("k", T0 + 2) == (True, "v")
    assert cache.lookup("other", T0) == (False, None)
    assert cache.stats() == CacheStats(hits=2, misses=2, size=1, ttl_seconds=60)


def test_entry_expires_exactly_at_ttl() -> None:
    cache: ConfigCache[str] = ConfigCache(1.5)
    cache.store("k", "v", T0)
    assert cache.lookup("k", T0 + 1499) == (True, "v")
    assert cache.lookup("k", T0 + 1500) == (False, None)
    # the expired entry is dropped, not just hidden
    assert cache.stats().size == 0
    assert cache.lookup("k", T0 + 1) == (False, None)


def test_store_refreshes_expiry_and_value() -> None:
    cache: ConfigCache[str] = ConfigCache(10)
    cache.store("k", "old", T0)
    cache.store("k", "new", T0 + 9_000)
    assert cache.lookup("k", T0 + 15_000) == (True, "new")
    assert cache.lookup("k", T0 + 19_000) == (False, None)


def test_negative_entries_are_hits() -> None:
    cache: ConfigCache[str] = ConfigCache(60)
    cache.store("absent", None, T0)
    assert cache.lookup("absent", T0 + 10) == (True, None)
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.size) == (1, 0, 1)


def test_ttl_zero_disables_storing() -> None:
    cache: ConfigCache[str] = ConfigCache(0)
    assert not cache.enabled
    cache.store("k", "v", T0)
    assert cache.lookup("k", T0) == (False, None)
    assert cache.stats() == CacheStats(hits=0, misses=1, size=0, ttl_seconds=0)


def test_sub_millisecond_ttl_is_disabled() -> None:
    cache: ConfigCache[str] = ConfigCache(0.0001)
    assert not cache.enabled
    cache.store("k", "v", T0)
    assert cache.stats().size == 0


def test_enabled_with_positive_ttl() -> None:
    assert ConfigCache(0.001).enabled
    assert ConfigCache(60).enabled


@pytest.mark.parametrize("ttl", [-1, -0.5])
def test_negative_ttl_rejected(ttl: float) -> None:
    with pytest.raises(ValueError, match="config_cache_ttl"):
        ConfigCache(ttl)


def test_evict() -> None:
    cache: ConfigCache[str] = ConfigCache(60)
    cache.store(("e", "r"), "v", T0)
    cache.store(("e", "s"), "w", T0)
    cache.evict(("e", "r"))
    cache.evict(("never", "stored"))  # no error
    assert cache.lookup(("e", "r"), T0) == (False, None)
    assert cache.lookup(("e", "s"), T0) == (True, "w")
    assert cache.stats().size == 1


def test_clear_keeps_counters() -> None:
    cache: ConfigCache[str] = ConfigCache(60)
    cache.store("a", "1", T0)
    cache.store("b", None, T0)
    cache.lookup("a", T0)
    cache.clear()
    assert cache.stats() == CacheStats(hits=1, misses=0, size=0, ttl_seconds=60)
    assert cache.lookup("a", T0) == (False, None)
    assert cache.lookup("b", T0) == (False, None)


def test_tuple_keys_are_distinct() -> None:
    cache: ConfigCache[int] = ConfigCache(60)
    cache.store(("e", "r"), 1, T0)
    cache.store(("r", "e"), 2, T0)
    assert cache.lookup(("e", "r"), T0) == (True, 1)
    assert cache.lookup(("r", "e"), T0) == (True, 2)
