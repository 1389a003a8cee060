"""Render the CloudFormation template from Jinja, the table definition and StackOptions.

No AWS calls here: `zae-limiter render` and the tests use this alone.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from zae_limiter import keys, table
from zae_limiter.aggregator.archive import ARCHIVE_PREFIX
from zae_limiter.errors import ValidationError
from zae_limiter.flows.records.version import client_version
from zae_limiter.infra import options as opts
from zae_limiter.infra.dashboard import dashboard_body
from zae_limiter.infra.options import StackOptions
from zae_limiter.schema import SCHEMA_VERSION

STACK_TEMPLATE = "stack.yaml.j2"
#: The stack each replica region but the first gets: its aggregator and alarms.
REGIONAL_TEMPLATE = "regional.yaml.j2"

_PARTITION_ARN = "arn:${AWS::Partition}:dynamodb"


def templates_dir() -> Path:
    """Where the Jinja templates are: in the wheel, or at the top of a source checkout."""
    package_dir = Path(__file__).resolve().parent.parent
    installed = package_dir / "templates"
    if (installed / STACK_TEMPLATE).is_file():
        return installed
    # Editable installs run from src/zae_limiter; the templates sit at the repo root.
    checkout = package_dir.parent.parent / "templates"
    if (checkout / STACK_TEMPLATE).is_file():
        return checkout
    raise FileNotFoundError(f"{STACK_TEMPLATE} not found in {installed} or {checkout}")


def yaml_block(value: Any, indent: int) -> str:
    """A value as block YAML, indented to sit under a key: `Key:{{ v | yaml_block(8) }}`."""
    text = yaml.safe_dump(value, default_flow_style=False, sort_keys=False).rstrip("\n")
    pad = " " * indent
    return "".join(f"\n{pad}{line}" for line in text.splitlines())


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # YAML, not HTML; values are validated by StackOptions
        keep_trailing_newline=True,
    )
    env.filters["yaml_block"] = yaml_block
    return env


def package_version() -> str:
    return client_version()


def _single_region_refs() -> dict[str, Any]:
    # YAML flow text the templates paste where they name the table. Here the table is a
    # resource of the stack: everything refers to it by logical id.
    return {
        "table_name": "{Ref: Table}",
        "table_arn": '{"Fn::GetAtt": [Table, Arn]}',
        "stream_arn": '{"Fn::GetAtt": [Table, StreamArn]}',
        "stream_resource": '{"Fn::Sub": "${Table.Arn}/stream/*"}',
        "policy_tables": ['{"Fn::GetAtt": [Table, Arn]}'],
        "policy_indexes": ['{"Fn::Sub": "${Table.Arn}/index/*"}'],
        "policy_streams": ['{"Fn::Sub": "${Table.Arn}/stream/*"}'],
    }


def _replica_arn(region: str, name: str, suffix: str = "") -> str:
    """A replica's ARN (or its indexes' or stream's) as a flow-style Fn::Sub."""
    arn = f"{_PARTITION_ARN}:{region}:${{AWS::AccountId}}:table/{name}{suffix}"
    return json.dumps({"Fn::Sub": arn})


def _global_refs(options: StackOptions) -> dict[str, Any]:
    # The GlobalTable's Arn and StreamArn are the stack region's replica: right for the
    # aggregator there. Users' policies must reach every replica, since a client talks to
    # the replica of its own region.
    refs = _single_region_refs()
    regions = options.regions
    refs["policy_tables"] = [_replica_arn(r, options.name) for r in regions]
    refs["policy_indexes"] = [_replica_arn(r, options.name, "/index/*") for r in regions]
    refs["policy_streams"] = [_replica_arn(r, options.name, "/stream/*") for r in regions]
    return refs


def _regional_refs(options: StackOptions) -> dict[str, Any]:
    # No Table resource in a regional stack: the replica is named, and its stream ARN
    # (which carries a creation label no template can know) comes in as a parameter.
    return {
        "table_name": json.dumps(options.name),
        "table_arn": _replica_arn("${AWS::Region}", options.name),
        "stream_arn": "{Ref: StreamArn}",
        # As for one region: the replica's streams, whichever label the current one has.
        "stream_resource": _replica_arn("${AWS::Region}", options.name, "/stream/*"),
        "policy_tables": [],
        "policy_indexes": [],
        "policy_streams": [],
    }


def replication_pairs(options: StackOptions, source: str | None) -> list[dict[str, str]]:
    """(source, receiving) replica pairs whose latency an alarm in `source` watches.

    ReplicationLatency is published in the region a change comes from, one series per
    receiving region, and an alarm sees only its own region's metrics: so each stack
    alarms on the pairs leaving its region, and together the stacks cover every pair.
    """
    if source is None:
        return []
    return [
        {"source": source, "receiving": other, "logical_id": opts.region_logical_id(other)}
        for other in options.regions
        if other != source
    ]


def template_context(options: StackOptions) -> dict[str, Any]:
    """What the templates see. The table's shape comes from zae_limiter.table only."""
    return {
        "o": options,
        "ref": _global_refs(options) if options.is_global else _single_region_refs(),
        "role_name": options.role_name,
        "replication": replication_pairs(options, options.primary_region),
        "replication_threshold_ms": opts.REPLICATION_LATENCY_ALARM_MS,
        "version": package_version(),
        "schema_version": SCHEMA_VERSION,
        "version_pk": keys.VERSION_PK,
        "audit_leading_keys": list(opts.AUDIT_LEADING_KEYS),
        "audit_write_actions": list(opts.AUDIT_DENIED_TO_ACQUIRE),
        "runtime": opts.LAMBDA_RUNTIME,
        "handler": opts.AGGREGATOR_HANDLER,
        "namespaces": options.scoped_policies,
        "dashboard_body": dashboard_body(options),
        "archive_prefix": ARCHIVE_PREFIX,
        "table": {
            "billing_mode": table.BILLING_MODE,
            "attribute_definitions": table.attribute_definitions(),
            "key_schema": table.key_schema(keys.PK, keys.SK),
            "global_secondary_indexes": table.global_secondary_indexes(),
            "stream_view_type": table.STREAM_VIEW_TYPE,
            "ttl_attribute": table.TTL_ATTRIBUTE,
        },
        "actions": {
            "acquire": list(opts.ACQUIRE_ACTIONS),
            "read_only": list(opts.READ_ONLY_ACTIONS),
            "full_access": list(opts.FULL_ACCESS_ACTIONS),
            "stream_read": list(opts.STREAM_READ_ACTIONS),
            "aggregator_table": list(opts.AGGREGATOR_TABLE_ACTIONS),
            "scoped_acquire": list(opts.scoped(opts.ACQUIRE_ACTIONS)),
            "scoped_read_only": list(opts.scoped(opts.READ_ONLY_ACTIONS)),
            "scoped_full_access": list(opts.scoped(opts.FULL_ACCESS_ACTIONS)),
        },
    }


def render_template(options: StackOptions) -> str:
    """The stack's CloudFormation template as YAML text."""
    template = _environment().get_template(STACK_TEMPLATE)
    return template.render(template_context(options))


def render_regional_template(options: StackOptions, region: str) -> str:
    """The stack of a replica region other than the first: its aggregator and alarms.

    A GlobalTable is one resource in one stack (the first region's), but a replica's
    stream can only feed a Lambda in the replica's own region: so each other region gets
    this stack, under the same name, with the replica's stream ARN as a parameter.
    The audit archive stays with the first region's stack.
    """
    if region not in options.other_regions:
        raise ValidationError(
            f"{region!r} is not one of the other replica regions "
            f"({', '.join(options.other_regions) or 'none: deploy with --regions'})"
        )
    regional = replace(options, audit_archive=False)
    context = template_context(regional)
    context.update(
        {
            "ref": _regional_refs(regional),
            "role_name": options.regional_role_name(region),
            "replication": replication_pairs(options, region),
            "region": region,
        }
    )
    return _environment().get_template(REGIONAL_TEMPLATE).render(context)
