"""Deploying zae-limiter: templates, the aggregator package, CloudFormation, status.

Nothing here imports click; the CLI in `zae_limiter.cli.deploy` is a shell over it.
`zae_limiter.infra.lint` is not imported here: cfn-lint is a dev dependency, and slow
to import.
"""

from __future__ import annotations

from zae_limiter.infra.aws import Aws
from zae_limiter.infra.deploy import Deployer, DeployResult
from zae_limiter.infra.errors import InfraError, StackError, StackNotFoundError
from zae_limiter.infra.options import ACQUIRE_ACTIONS, StackOptions
from zae_limiter.infra.render import render_template, templates_dir
from zae_limiter.infra.stack import ResourceChange, StackEvent
from zae_limiter.infra.status import StatusReport, status
from zae_limiter.infra.table_only import TableResult, deploy_table_only

__all__ = [
    "ACQUIRE_ACTIONS",
    "Aws",
    "DeployResult",
    "Deployer",
    "InfraError",
    "ResourceChange",
    "StackError",
    "StackEvent",
    "StackNotFoundError",
    "StackOptions",
    "StatusReport",
    "TableResult",
    "deploy_table_only",
    "render_template",
    "status",
    "templates_dir",
]
