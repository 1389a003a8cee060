"""A global table: the GlobalTable in the first region's stack, the regional stacks of
the other regions, replication alarms and the dashboard's replication widget."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from moto import mock_aws

from tests.infra._helpers import REGIONS, parsed, resources
from zae_limiter import keys, table
from zae_limiter.errors import ValidationError
from zae_limiter.infra import Aws, Deployer
from zae_limiter.infra.lint import check_template, lint_template
from zae_limiter.infra.options import StackOptions
from zae_limiter.infra.render import render_regional_template

GLOBAL = StackOptions("demo", regions=REGIONS, pitr_recovery_days=7)


def _regional(options: StackOptions, region: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(render_regional_template(options, region))
    return data


def test_the_global_table_has_the_single_region_tables_shape() -> None:
    single = resources(StackOptions("demo", pitr_recovery_days=7))["Table"]["Properties"]
    glob = resources(GLOBAL)["Table"]
    assert glob["Type"] == "AWS::DynamoDB::GlobalTable"
    props = glob["Properties"]
    for shared in (
        "TableName", "BillingMode", "AttributeDefinitions", "KeySchema",
        "GlobalSecondaryIndexes", "StreamSpecification", "TimeToLiveSpecification",
        "SSESpecification",
    ):  # fmt: skip
        assert props[shared] == single[shared], shared
    assert props["GlobalSecondaryIndexes"] == table.global_secondary_indexes()
    gsi3 = next(i for i in props["GlobalSecondaryIndexes"] if i["IndexName"] == keys.GSI3)
    assert gsi3["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert props["StreamSpecification"] == {"StreamViewType": "NEW_AND_OLD_IMAGES"}


def test_one_replica_per_region_the_stacks_first_with_per_replica_settings() -> None:
    single = resources(StackOptions("demo", pitr_recovery_days=7))["Table"]["Properties"]
    replicas = resources(GLOBAL)["Table"]["Properties"]["Replicas"]
    assert [r["Region"] for r in replicas] == list(REGIONS)
    for replica in replicas:
        assert (
            replica["PointInTimeRecoverySpecification"]
            == (single["PointInTimeRecoverySpecification"])
        )
        assert replica["ContributorInsightsSpecification"] == {"Enabled": True}
        assert replica["DeletionProtectionEnabled"] is False
        assert replica["Tags"] == single["Tags"]


def test_users_policies_reach_every_replica_and_the_aggregator_only_its_own() -> None:
    res = resources(GLOBAL)
    statement = res["AcquirePolicy"]["Properties"]["PolicyDocument"]["Statement"][0]
    subs = [r["Fn::Sub"] for r in statement["Resource"]]
    for region in REGIONS:
        assert f"arn:${{AWS::Partition}}:dynamodb:{region}:${{AWS::AccountId}}:table/demo" in subs
        assert any(s.endswith(f"{region}:${{AWS::AccountId}}:table/demo/index/*") for s in subs)
    role = res["AggregatorRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    write = next(s for s in role if s["Sid"] == "WriteTable")
    assert write["Resource"] == [{"Fn::GetAtt": ["Table", "Arn"]}]


def test_replication_alarms_watch_the_pairs_leaving_each_stacks_region() -> None:
    def pairs(template: dict[str, Any], source: str) -> set[tuple[str, str]]:
        found = set()
        for resource in template["Resources"].values():
            props = resource.get("Properties") or {}
            if props.get("MetricName") == "ReplicationLatency":
                dims = {d["Name"]: d["Value"] for d in props["Dimensions"]}
                found.add((source, dims["ReceivingRegion"]))
        return found

    covered = pairs(parsed(GLOBAL), REGIONS[0])
    for region in REGIONS[1:]:
        covered |= pairs(_regional(GLOBAL, region), region)
    every_pair = {(a, b) for a in REGIONS for b in REGIONS if a != b}
    assert covered == every_pair
    assert not pairs(parsed(StackOptions("demo")), "us-east-1")


def test_the_dashboard_draws_every_pair_each_from_its_source_region() -> None:
    body = json.loads(resources(GLOBAL)["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"])
    titled = [w for w in body["widgets"] if "title" in w["properties"]]
    widget = next(w for w in titled if "ReplicationLatency" in w["properties"]["title"])
    lines = widget["properties"]["metrics"]
    drawn = {(line[-1]["region"], line[5]) for line in lines}
    assert drawn == {(a, b) for a in REGIONS for b in REGIONS if a != b}
    assert all(line[:4] == ["AWS/DynamoDB", "ReplicationLatency", "TableName", "${Table}"]
               for line in lines)  # fmt: skip


def test_a_regional_stack_runs_the_aggregator_on_its_replicas_stream() -> None:
    template = _regional(StackOptions("demo", regions=REGIONS, role_name_format="{}-agg"),
                         "eu-west-1")  # fmt: skip
    res = template["Resources"]
    assert "Table" not in res and "AuditArchiveBucket" not in res
    assert "StreamArn" in template["Parameters"]
    mapping = res["AggregatorEventSourceMapping"]["Properties"]
    assert mapping["EventSourceArn"] == {"Ref": "StreamArn"}
    env = res["AggregatorFunction"]["Properties"]["Environment"]["Variables"]
    assert env["ZAEL_NAME"] == "demo" and "ZAEL_AUDIT_ARCHIVE_BUCKET" not in env
    # IAM is global: the regional role may not take the first region's role name.
    assert res["AggregatorRole"]["Properties"]["RoleName"] == "demo-eu-west-1-agg"


@pytest.mark.parametrize("region", REGIONS[1:])
@pytest.mark.parametrize("aggregator", [True, False])
def test_regional_stacks_pass_cfn_lint_and_our_checks(region: str, aggregator: bool) -> None:
    options = StackOptions("demo", regions=REGIONS, aggregator=aggregator)
    findings = lint_template(render_regional_template(options, region), regions=[region])
    assert findings == [], "\n".join(map(str, findings))


def test_the_first_region_has_no_regional_stack() -> None:
    with pytest.raises(ValidationError, match="not one of the other replica regions"):
        render_regional_template(GLOBAL, "us-east-1")
    with pytest.raises(ValidationError, match="deploy with --regions"):
        render_regional_template(StackOptions("demo"), "eu-west-1")


@pytest.mark.parametrize(
    ("regions", "message"),
    [
        (("us-east-1", "us-east-1"), "twice"),
        (("us-east-1", "Europe"), "not an AWS region"),
    ],
)
def test_bad_region_lists_are_refused(regions: tuple[str, ...], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        StackOptions("demo", regions=regions)


def test_a_regional_role_name_that_grows_too_long_is_refused() -> None:
    with pytest.raises(ValidationError, match="ap-southeast-1"):
        StackOptions("demo", regions=REGIONS, role_name_format="{}" + "r" * 50)


def test_our_rules_catch_a_replica_listed_twice_and_a_narrow_stream() -> None:
    template = parsed(GLOBAL)
    props = template["Resources"]["Table"]["Properties"]
    props["Replicas"].append({"Region": "eu-west-1"})
    props["StreamSpecification"]["StreamViewType"] = "KEYS_ONLY"
    gsi3 = next(i for i in props["GlobalSecondaryIndexes"] if i["IndexName"] == keys.GSI3)
    gsi3["Projection"]["NonKeyAttributes"] = ["rf"]
    rules = sorted(f.rule for f in check_template(template))
    assert rules == ["Z1001", "Z1003", "Z1004"]


@pytest.fixture
def eu() -> Iterator[Aws]:
    with mock_aws(), pytest.MonkeyPatch.context() as patch:
        for variable in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            patch.setenv(variable, "testing")
        yield Aws("eu-west-1")


@pytest.mark.filterwarnings("ignore::UserWarning")  # moto: "no alarm support"
def test_a_regional_stack_deploys_on_the_replicas_stream(eu: Aws) -> None:
    """moto has no GlobalTable, but a regional stack is ordinary resources: stand the
    replica in with a table of the same name in eu-west-1 and deploy that region's stack
    the way `deploy` does after the first region's."""
    eu.client("dynamodb").create_table(**table.create_table_params("demo"))
    stream = eu.client("dynamodb").describe_table(TableName="demo")["Table"]["LatestStreamArn"]
    options = StackOptions("demo", regions=("us-east-1", "eu-west-1"))
    deployer = Deployer(Aws("us-east-1"), poll_seconds=0.01)
    created = deployer._deploy_regional(options, "eu-west-1", plan=False, approve=lambda _: True)
    assert (created.region, created.action, created.status) == (
        "eu-west-1", "create", "CREATE_COMPLETE"
    )  # fmt: skip
    mappings = eu.client("lambda").list_event_source_mappings()["EventSourceMappings"]
    assert [m["EventSourceArn"] for m in mappings] == [stream]
    # The zip went to eu-west-1's own artifact bucket: Lambda reads code in its region.
    buckets = [b["Name"] for b in eu.client("s3").list_buckets()["Buckets"]]
    assert any(b.endswith("-eu-west-1") for b in buckets)
    again = deployer._deploy_regional(options, "eu-west-1", plan=True, approve=lambda _: True)
    assert again.action == "plan" and again.status == "CREATE_COMPLETE"


def test_a_global_stack_draws_the_shares_from_the_aggregators_log() -> None:
    """docs/global.md, "Usage snapshots and top": a Logs Insights table over the
    aggregator's share lines (aggregator/share_log.py)."""
    options = StackOptions("demo", regions=REGIONS)
    body = json.loads(resources(options)["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"])
    (widget,) = [w for w in body["widgets"] if w["type"] == "log"]
    query = widget["properties"]["query"]
    assert query.startswith("SOURCE '${AggregatorLogGroup}'") and 'zael = "share"' in query
    assert parsed(options)["Resources"]["AggregatorLogGroup"]["Type"] == "AWS::Logs::LogGroup"
    for single in (StackOptions("demo"), StackOptions("demo", regions=REGIONS, aggregator=False)):
        one = json.loads(resources(single)["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"])
        assert not [w for w in one["widgets"] if w["type"] == "log"]
