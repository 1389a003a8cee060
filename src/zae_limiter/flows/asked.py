"""What an acquire (and a lease's `adjust`, and the reads) may be asked: token amounts,
resources, and amounts that fit the limits they are taken from. Every check raises a
`ValidationError` that says what was wrong, before anything is written."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from zae_limiter import keys
from zae_limiter.errors import ValidationError
from zae_limiter.limits import MAX_TOKENS, RESERVED_LIMIT_NAMES, Limit


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
            if milli > limit.capacity_milli:
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
