"""The idle period after which a full bucket's item expires, stored per level like limits
(entity+resource > entity default > resource default > system), audited like them.

It sits on the level's config item (`bucket_ttl`, seconds; 0: never expire), next to the
limits, and is fetched in the same BatchGetItem (flows/records/config.py); a level that
stores none defers to the next, and the library's default (`DEFAULT_BUCKET_TTL_S`) comes
last. The `ttl` a write gives its item from it: flows/write/plan.py `expires_at_s`.
"""

from __future__ import annotations

from typing import Any

from zae_limiter import keys
from zae_limiter.errors import ValidationError
from zae_limiter.flows import Call, Flow, one
from zae_limiter.flows.context import RepoState
from zae_limiter.flows.records.audit import Auditor, audited_change
from zae_limiter.flows.records.config import config_key_for, evict, validate_level

#: The idle period after which a full bucket's item may go, when no level sets one.
DEFAULT_BUCKET_TTL_S = 86_400
#: The longest bucket_ttl a level may store (a year); 0 stores "never expire".
MAX_BUCKET_TTL_S = 366 * 86_400


def check_bucket_ttl(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"bucket_ttl must be a whole number of seconds, got {value!r}")
    if not 0 <= value <= MAX_BUCKET_TTL_S:
        raise ValueError(
            f"bucket_ttl must be between 0 (never expire) and {MAX_BUCKET_TTL_S} seconds "
            f"(366 days), got {value}"
        )
    return value

def _kind(entity_id: str | None, resource: str | None) -> str:
    if entity_id is not None:
        return "entity_config"
    return "resource_config" if resource is not None else "system_config"


def set_bucket_ttl(
    state: RepoState,
    entity_id: str | None,
    resource: str | None,
    seconds: int | None,
    now_ms: int,
    auditor: Auditor,
) -> Flow[None]:
    """Store (None: remove) the bucket TTL of one level, with its audit event."""
    validate_level(entity_id, resource)
    if seconds is not None:
        try:
            check_bucket_ttl(seconds)
        except ValueError as error:
            raise ValidationError(str(error)) from None
    item_key = config_key_for(state, entity_id, resource)

    def plan(before: keys.Item | None) -> list[dict[str, Any]] | None:
        if before is None and seconds is None:
            return None
        extra = {keys.A_ENTITY_ID: entity_id} if entity_id is not None else {}
        if resource is not None:
            extra[keys.A_RESOURCE] = resource
        base = (
            dict(before)
            if before is not None
            else keys.config_item(
                item_key, (), state.namespace, now_ms, _kind(entity_id, resource), **extra
            )
        )
        item = keys.with_bucket_ttl(base, seconds)
        event = auditor.put(
            state,
            "set_bucket_ttl",
            entity_id=entity_id,
            resource=resource,
            before={"bucket_ttl": keys.bucket_ttl_of(before)},
            after={"bucket_ttl": seconds},
        )
        put = keys.tx_put(state.table, item, keys.unchanged(before, keys.CONFIG_VERSION_ATTRS))
        return [put, event]

    pk, sk = keys.key_id(item_key)
    yield from audited_change(state, item_key, f"the bucket TTL at {pk} {sk}", plan)
    evict(state, entity_id, resource)


def get_bucket_ttl(
    state: RepoState, entity_id: str | None, resource: str | None
) -> Flow[int | None]:
    """The bucket TTL stored at exactly this level (None: none; it defers)."""
    validate_level(entity_id, resource)
    item_key = config_key_for(state, entity_id, resource)
    result = yield from one(Call("get_item", keys.get_consistent(state.table, item_key)))
    return keys.bucket_ttl_of(result.item)
