"""Stored limits: the level (entity, resource, default) a config item's key stands for."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from zae_limiter.keys.core import A_CREATED, DEFAULT_RESOURCE, PK, SK, SK_CONFIG, get_s

#: The attributes whose values tell that a config item was rewritten since it was read.
CONFIG_VERSION_ATTRS = (A_CREATED,)


def config_level(item: Mapping[str, Any]) -> tuple[str | None, str | None] | None:
    """(entity, resource) of a config item's key; None if the key is not a config's.

    An entity default comes back with the resource None, as `set_limits` takes it.
    """
    pk, sk = get_s(item, PK) or "", get_s(item, SK) or ""
    if sk.startswith(SK_CONFIG + "#") and "/ENTITY#" in pk:
        resource = sk[len(SK_CONFIG) + 1 :]
        return pk.partition("/ENTITY#")[2], None if resource == DEFAULT_RESOURCE else resource
    if sk != SK_CONFIG:
        return None
    if "/RESOURCE#" in pk:
        return None, pk.partition("/RESOURCE#")[2]
    if pk.endswith("/SYSTEM#"):
        return None, None
    return None


__all__ = [
    "CONFIG_VERSION_ATTRS",
    "config_level",
]
