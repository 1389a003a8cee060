"""Moving an entity to a new parent (`set_parent`, docs/controls.md) on both faces: the
move is audited with who and why, every client's cascade follows it, and a lease open
across it settles with the parent it took from."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from zae_limiter import EntityNotFoundError, Limit, ValidationError

if TYPE_CHECKING:
    from tests.conftest import Api

RPM = [Limit.per_minute("rpm", 100)]


def take(api: Api, n: int = 10) -> None:
    with api.acquire("k1", "gpt-4", {"rpm": n}, limits=RPM):
        pass


def parents(api: Api) -> tuple[int, int]:
    """Tokens left in (org-a, org-b)."""
    return tuple(  # type: ignore[return-value]
        api.available(org, "gpt-4", limits=RPM)["rpm"] for org in ("org-a", "org-b")
    )


def moved_family(api: Api) -> tuple[Api, Api]:
    """k1 under org-a with cascade; a second client that knows k1 before the move."""
    mover = api.new_client(reserve=False, principal="ops@example.com")
    other = api.new_client(reserve=False)
    mover.create_entity("org-a")
    mover.create_entity("org-b")
    mover.create_entity("k1", parent_id="org-a", cascade=True)
    take(mover)
    take(other)
    assert parents(api) == (80, 100)
    return mover, other


def test_cascade_follows_the_move_for_every_client(api: Api) -> None:
    mover, other = moved_family(api)
    entity = mover.set_parent("k1", "org-b", reason="acme bought beta")
    assert (entity.parent_id, entity.cascade) == ("org-b", True)
    event = mover.get_audit_events("k1")[-1]
    assert (event.action, event.principal) == ("set_parent", "ops@example.com")
    assert event.before["parent_id"] == "org-a"
    assert event.after["parent_id"] == "org-b"
    assert event.after["reason"] == "acme bought beta"
    take(mover)  # forgot k1 when it moved it: reads the new record
    assert parents(api) == (80, 90)
    # The other client still knows org-a: its next acquire goes there once, and the
    # child's write shows it the relinked parent.
    take(other)
    assert parents(api) == (70, 90)
    take(other)
    take(api.new_client(reserve=False))  # a client that never knew k1
    assert parents(api) == (70, 70)


def test_a_lease_open_across_the_move_settles_with_the_parent_it_took_from(api: Api) -> None:
    mover, _ = moved_family(api)
    with mover.acquire("k1", "gpt-4", {"rpm": 10}, limits=RPM) as lease:
        mover.set_parent("k1", "org-b")
        lease.adjust(rpm=5)
    assert parents(api) == (65, 100)
    with pytest.raises(RuntimeError):
        with mover.acquire("k1", "gpt-4", {"rpm": 10}, limits=RPM):  # to org-b
            mover.set_parent("k1", "org-a")
            raise RuntimeError("the call failed")
    assert parents(api) == (65, 100)  # given back to org-b, where it was taken


def test_set_parent_refuses_what_it_cannot_do(api: Api) -> None:
    api.create_entity("org-a")
    api.create_entity("k1", parent_id="org-a", cascade=True)
    with pytest.raises(EntityNotFoundError):
        api.set_parent("k1", "nowhere")
    with pytest.raises(EntityNotFoundError):
        api.set_parent("nobody", "org-a")
    with pytest.raises(ValidationError, match="cycle"):
        api.set_parent("org-a", "k1")
    with pytest.raises(ValidationError, match="update_entity"):
        api.set_parent("k1", None)
    assert api.get_entity("k1").parent_id == "org-a"
