"""Cascade per resource: an entity takes from its parent for some resources and not for
others (Entity.cascade_for), on both faces; a client that learns the entity from its
record, or from a bucket, honours it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from zae_limiter import Limit, ValidationError

if TYPE_CHECKING:
    from tests.conftest import Api

RPM = [Limit.per_minute("rpm", 100)]


def take(api: Api, resource: str, n: int = 10) -> None:
    with api.acquire("k1", resource, {"rpm": n}, limits=RPM):
        pass


def parent_tokens(api: Api, resource: str) -> int:
    return api.available("org", resource, limits=RPM)["rpm"]


def test_only_the_named_resources_cascade(api: Api) -> None:
    api.create_entity("org")
    entity = api.create_entity("k1", parent_id="org", cascade_for={"gpt-4": True})
    assert entity.cascades("gpt-4") and not entity.cascades("embed")
    assert api.get_entity("k1").cascade_for == (("gpt-4", True),)
    for client in (api, api.new_client()):  # one that created it, one that reads it
        take(client, "gpt-4")
        take(client, "embed")
    assert parent_tokens(api, "gpt-4") == 80
    assert parent_tokens(api, "embed") == 100


def test_a_resource_can_be_left_out_of_a_cascading_entity(api: Api) -> None:
    api.create_entity("org")
    api.create_entity("k1", parent_id="org", cascade=True, cascade_for={"embed": False})
    take(api, "gpt-4")
    take(api, "embed")
    assert (parent_tokens(api, "gpt-4"), parent_tokens(api, "embed")) == (90, 100)


def test_an_update_changes_the_choice_and_the_buckets_follow(api: Api) -> None:
    api.create_entity("org")
    api.create_entity("k1", parent_id="org", cascade_for={"gpt-4": True})
    take(api, "gpt-4")
    api.update_entity("k1", cascade_for={"gpt-4": False, "embed": True})
    event = api.get_audit_events("k1")[-1]
    assert event.before["cascade_for"] == {"gpt-4": True}
    assert event.after["cascade_for"] == {"embed": True, "gpt-4": False}
    fresh = api.new_client()
    take(fresh, "gpt-4")  # learns k1 from its gpt-4 bucket, relinked by the update
    take(fresh, "embed")
    assert (parent_tokens(api, "gpt-4"), parent_tokens(api, "embed")) == (90, 90)
    api.update_entity("k1", parent_id=None)  # detached: no cascade anywhere
    assert api.get_entity("k1").cascade_for == ()


def test_a_cascade_needs_a_parent(api: Api) -> None:
    with pytest.raises(ValidationError, match="needs a parent_id"):
        api.create_entity("k1", cascade_for={"gpt-4": True})
    api.create_entity("k2", cascade_for={"gpt-4": False})  # saying no needs nothing
