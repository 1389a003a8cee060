"""What an acquire (and a lease's `adjust`, and the reads) may be asked: token amounts,
resources, and amounts that fit the limits they are taken from. Every check raises a
`ValidationError` that says what was wrong, before anything is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zae_limiter import keys
from zae_limiter.errors import ValidationError
from zae_limiter.flows.context import RepoState
from zae_limiter.limits import MAX_TOKENS, RESERVED_LIMIT_NAMES, Limit, in_force, validate_limits


def validate_amounts(what: str, amounts: object, *, allow_negative: bool = False) -> dict[str, int]:
    """Token amounts by limit name, in millitokens."""
    if not isinstance(amounts, Mapping):
        raise ValidationError(f"{what} must be a mapping of limit name to whole tokens")
    out: dict[str, int] = {}
    for name, value in amounts.items():
        if name in RESERVED_LIMIT_NAMES:
            raise ValidationError(f"{what}: limit {name!r} is reserved and cannot be consumed")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValidationError(f"{what}[{name!r}] must be a whole number, got {value!r}")
        if (value < 0 and not allow_negative) or abs(value) > MAX_TOKENS:
            raise ValidationError(
                f"{what}[{name!r}] must be between 0 and {MAX_TOKENS}, got {value}"
            )
        out[str(name)] = value * 1000
    return out


def check_fits(
    amounts: Mapping[str, int], limits: Mapping[str, Sequence[Limit]], entity_id: str
) -> None:
    """Every consumed limit is configured for at least one of the resources (`limits`:
    the entity's, by resource), and no amount exceeds a capacity it is taken from."""
    for name, milli in amounts.items():
        having = []
        for r, ls in limits.items():
            for lim in ls:
                if lim.name == name:
                    having.append((r, lim))
        if not having:
            where = " or ".join(repr(r) for r in limits)
            configured = sorted({lim.name for ls in limits.values() for lim in ls})
            raise ValidationError(
                f"consume names limit {name!r}, which is not configured for entity "
                f"{entity_id!r} on resource {where} (configured: {configured})"
            )
        for _resource, limit in having:
            if milli > limit.capacity * 1000:  # `capacity_milli`, inline: every acquire
                raise ValidationError(
                    f"consume[{name!r}] = {milli // 1000} can never be granted: the limit's "
                    f"capacity is {limit.capacity}"
                )


#: One acquire takes from at most this many resources: each is a write (two with
#: cascade) in the acquire's one round trip.
MAX_RESOURCES = 10


def validate_resources(resource: object) -> tuple[str, ...]:
    """One resource, or several distinct ones (a sequence of names), in the order given."""
    if isinstance(resource, str):
        return (keys.validate_resource(resource),)
    if not isinstance(resource, (list, tuple)) or not resource:
        raise ValidationError(
            f"resource must be a name or a non-empty list of names, got {resource!r}"
        )
    if len(resource) > MAX_RESOURCES:
        raise ValidationError(
            f"an acquire takes from at most {MAX_RESOURCES} resources, got {len(resource)}"
        )
    names = tuple(keys.validate_resource(r) for r in resource)
    if len(set(names)) != len(names):
        raise ValidationError(f"resource names a resource twice: {list(names)}")
    return names


#: Call shapes this client has validated, at most this many: (entity, resource, the ids
#: of the limits passed, or None) -> (resources, those limits, whether one is scheduled).
#: A hot key asked again skips the checks of its ids and limits; the entry holds the
#: limits, so their ids cannot be reused while it stands. Cleared whole when full.
ASKED_MAX = 4096


def validate_acquire(
    state: RepoState,
    entity_id: str,
    resource: str | Sequence[str],
    consume: Mapping[str, int],
    limits: Sequence[Limit] | None,
    now_ms: int,
) -> tuple[tuple[str, ...], dict[str, int], tuple[Limit, ...] | None]:
    """What an acquire asks, validated: its resources, its amounts in millitokens, and
    the limits it passes (those in force at `now_ms`), or None (the stored ones apply)."""
    shape: tuple[object, ...] | None = None
    if type(entity_id) is str and type(resource) is str:
        if limits is None:
            shape = (entity_id, resource, None)
        elif type(limits) is list or type(limits) is tuple:
            shape = (entity_id, resource, *map(id, limits))
    known = state.asked_shapes.get(shape) if shape is not None else None
    if known is None:  # a new shape: checked in full, in the order errors are reported
        keys.validate_id("entity_id", entity_id)
        resources = validate_resources(resource)
    amounts = validate_amounts("consume", consume)
    if not any(amounts.values()):
        raise ValidationError("consume must take at least one token of one limit")
    if known is None:
        given = validate_limits(limits) if limits is not None else None
        scheduled = given is not None and any(limit.schedule for limit in given)
        known = (resources, given, scheduled)
        if shape is not None:
            if len(state.asked_shapes) >= ASKED_MAX:
                state.asked_shapes.clear()
            state.asked_shapes[shape] = known
    resources, override, scheduled = known
    if scheduled and override is not None:
        return resources, amounts, in_force(override, now_ms)
    return resources, amounts, override
