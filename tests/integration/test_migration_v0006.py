"""The step to schema 6 (global limits): a global limit is stored only in a table an older
client refuses (docs/migrate.md, "Version 6"). Both faces, moto."""

from __future__ import annotations

import pytest

from tests.conftest import Api
from zae_limiter import Limit, SchemaVersionError, migrations, schema
from zae_limiter.flows.records.version import check_record, read_version, write_version

REGIONS = ("us-east-1", "eu-west-1", "ap-southeast-1")
GLOBAL = Limit.per_second("rps", 300).across(*REGIONS)
BY = "test-suite"


def _at(api: Api, version: int) -> None:
    api.run(api.repo.run(write_version(api.repo.state, version, "0.3.0", 0, BY)))


def test_a_global_limit_is_refused_below_schema_6_at_every_level(api: Api) -> None:
    _at(api, 5)
    stores = (
        lambda: api.set_limits("tenant", [GLOBAL], "api"),
        lambda: api.set_limits("tenant", [GLOBAL]),
        lambda: api.set_resource_defaults("api", [GLOBAL, Limit.per_minute("rpm", 9)]),
        lambda: api.set_system_defaults([GLOBAL]),
    )
    for store in stores:
        with pytest.raises(SchemaVersionError) as caught:
            store()
        message = str(caught.value)
        assert "schema version 5" in message and "global limits need 6" in message
        assert f"zae-limiter migrate --name {api.repo.table_name}" in message
    assert api.get_limits("tenant", "api") == ()  # nothing stored
    api.set_limits("tenant", [Limit.per_second("rps", 300)], "api")  # a regional one is fine


def test_after_the_step_global_limits_are_stored_and_older_clients_refuse(api: Api) -> None:
    _at(api, 5)
    state = api.repo.state
    plan = api.run(api.repo.run(migrations.status(state)))
    assert [step.version for step in plan.steps] == [6]
    outcomes = api.run(api.repo.run(migrations.migrate(state, plan, 0, BY)))
    assert [(o.version, o.items) for o in outcomes] == [(6, 0)]
    api.set_limits("tenant", [GLOBAL], "api")
    assert api.get_limits("tenant", "api") == (GLOBAL,)

    record = api.run(api.repo.run(read_version(state)))
    assert record is not None and record.schema_version == schema.GLOBAL_SCHEMA_VERSION
    check_record(record, "t", "0.3.0")  # this release
    # A release that knows schemas up to 5 (it predates global limits and would ignore the
    # regions): refused, with what to do.
    with pytest.raises(SchemaVersionError, match=r"understands only up to 5: upgrade zae-limiter"):
        check_record(record, "t", "0.3.0", supported=5)
    # A 0.2 release (schema 3): refused by the schema and by the minimum client alike.
    with pytest.raises(SchemaVersionError, match="upgrade zae-limiter"):
        check_record(record, "t", "0.2.9", supported=3)
    # A second run changes nothing.
    again = api.run(api.repo.run(migrations.status(state)))
    assert not again.pending
