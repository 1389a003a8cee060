"""Render the CloudFormation template from Jinja, the table definition and StackOptions.

No AWS calls here: `zae-limiter render` and the tests use this alone.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import yaml

from zae_limiter import keys, table
from zae_limiter.flows.version import client_version
from zae_limiter.infra import options as opts
from zae_limiter.infra.dashboard import dashboard_body
from zae_limiter.infra.options import StackOptions
from zae_limiter.schema import SCHEMA_VERSION

STACK_TEMPLATE = "stack.yaml.j2"
#: Where archived audit events go in the archive bucket (the lifecycle rule's filter).
AUDIT_ARCHIVE_PREFIX = "audit/"


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


def template_context(options: StackOptions) -> dict[str, Any]:
    """What the templates see. The table's shape comes from zae_limiter.table only."""
    return {
        "o": options,
        "version": package_version(),
        "schema_version": SCHEMA_VERSION,
        "version_pk": keys.VERSION_PK,
        "audit_leading_keys": list(opts.AUDIT_LEADING_KEYS),
        "audit_write_actions": list(opts.AUDIT_DENIED_TO_ACQUIRE),
        "runtime": opts.LAMBDA_RUNTIME,
        "handler": opts.AGGREGATOR_HANDLER,
        "namespaces": options.scoped_policies,
        "dashboard_body": dashboard_body(options),
        "archive_prefix": AUDIT_ARCHIVE_PREFIX,
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
