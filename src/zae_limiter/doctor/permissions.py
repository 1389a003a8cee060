"""May this caller do what a client does? The acquire path's actions (`ACQUIRE_ACTIONS`,
what the stack's AcquirePolicy grants) on this table and namespace.

On AWS, IAM's policy simulator answers for the caller's identity when the caller may use
it; otherwise (and on a local engine) a dry probe makes each request the acquire path
makes on the namespace's system-defaults key, writes guarded by a condition that never
holds (`keys.probe`), so that DynamoDB authorises each request and changes nothing.
The report says which actions were checked, how, and which were not.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from zae_limiter import keys
from zae_limiter.doctor.context import AwsCallError, Context, call
from zae_limiter.doctor.report import Check, fail, ok, warn
from zae_limiter.infra.options import ACQUIRE_ACTIONS, FULL_ACCESS_ACTIONS

NAME = "permissions"
DENIED = "AccessDeniedException"
#: What a write that was authorised but never applied answers.
REFUSED_BY_CONDITION = "ConditionalCheckFailedException"
_ASSUMED = re.compile(r"^arn:(?P<part>[^:]+):sts::(?P<acct>\d+):assumed-role/(?P<role>[^/]+)/")


def principal_arn(caller_arn: str) -> str | None:
    """The IAM ARN the simulator takes for a caller (a role for an assumed-role session;
    None for the root user, whom no policy limits)."""
    assumed = _ASSUMED.match(caller_arn)
    if assumed:
        return f"arn:{assumed['part']}:iam::{assumed['acct']}:role/{assumed['role']}"
    if caller_arn.endswith(":root"):
        return None
    return caller_arn


def simulate(ctx: Context, namespace: str) -> dict[str, str]:
    """action -> IAM's decision ("allowed", "implicitDeny", "explicitDeny")."""
    assert ctx.described is not None and ctx.caller_arn is not None
    source = principal_arn(ctx.caller_arn)
    if source is None:
        return dict.fromkeys(ACQUIRE_ACTIONS, "allowed")
    answer = call(
        ctx.client("iam"),
        "simulate_principal_policy",
        PolicySourceArn=source,
        ActionNames=list(ACQUIRE_ACTIONS),
        ResourceArns=[str(ctx.described["TableArn"])],
        # Namespace-scoped policies allow only keys that lead with the namespace.
        ContextEntries=[{
            "ContextKeyName": "dynamodb:LeadingKeys",
            "ContextKeyValues": [keys.system_pk(namespace)],
            "ContextKeyType": "stringList",
        }],
    )  # fmt: skip
    return {r["EvalActionName"]: r["EvalDecision"] for r in answer["EvaluationResults"]}


def _probes(ctx: Context, namespace: str) -> dict[str, Callable[[], Any]]:
    ddb, table = ctx.client("dynamodb"), ctx.name
    key = keys.system_config_key(namespace)
    return {
        "dynamodb:GetItem": lambda: call(ddb, "get_item", **keys.probe_get(table, key)),
        "dynamodb:BatchGetItem": lambda: call(
            ddb, "batch_get_item", **keys.probe_batch_get(table, key)
        ),
        "dynamodb:UpdateItem": lambda: call(ddb, "update_item", **keys.probe_update(table, key)),
        "dynamodb:PutItem": lambda: call(ddb, "put_item", **keys.probe_put(table, key)),
    }


def probe(ctx: Context, namespace: str) -> dict[str, str]:
    """action -> "allowed", "denied" or the unexpected answer. DescribeTable was made by
    the table check already."""
    found = {"dynamodb:DescribeTable": "allowed" if ctx.described is not None else "denied"}
    for action, send in _probes(ctx, namespace).items():
        try:
            send()
            found[action] = "allowed"
        except AwsCallError as error:
            if error.code == REFUSED_BY_CONDITION:
                found[action] = "allowed"
            elif error.code == DENIED:
                found[action] = "denied"
            else:
                found[action] = f"error: {error}"
    return found


def judge(name: str, namespace: str, how: str, found: dict[str, str], note: str) -> Check:
    """Pure: the verdict from each action's answer, and what was not checked."""
    checked = sorted(found)
    unchecked = sorted(set(FULL_ACCESS_ACTIONS) - set(checked))
    details = {"method": how, "actions": found, "not_checked": unchecked}
    refused = sorted(a for a, got in found.items() if got != "allowed")
    errors = sorted(a for a in refused if found[a].startswith("error"))
    if refused and len(errors) < len(refused):
        denied = [a for a in refused if a not in errors]
        return fail(
            NAME, f"denied ({how}): {', '.join(denied)} on table {name}, namespace {namespace}",
            f"attach the stack's AcquirePolicy (output AcquirePolicyArn of `zae-limiter status "
            f"--name {name}`), or a policy granting {', '.join(denied)} on the table and its "
            "indexes",
            **details,
        )  # fmt: skip
    if errors:
        return warn(
            NAME, f"could not tell ({how}): {'; '.join(f'{a} {found[a]}' for a in errors)}",
            "run doctor again; check the endpoint", **details,
        )  # fmt: skip
    return ok(
        NAME, f"the acquire path's {len(checked)} actions allowed ({how}){note}; not checked: "
        "the management actions (Query, Scan, DeleteItem ...)", **details,
    )  # fmt: skip


def check(ctx: Context) -> Check:
    namespace = keys.validate_namespace(ctx.target.namespace)
    if ctx.target.local:
        found = probe(ctx, namespace)
        note = "; a local engine enforces no IAM, so this shows only that they are accepted"
        return judge(ctx.name, namespace, "dry probe", found, note)
    why = "no caller identity"
    if ctx.caller_arn is not None:
        try:
            return judge(ctx.name, namespace, "IAM policy simulation", simulate(ctx, namespace),
                         "")  # fmt: skip
        except AwsCallError as error:  # no iam:SimulatePrincipalPolicy, a role with a path
            why = f"the simulator answered {error.code}"
    return judge(ctx.name, namespace, "dry probe", probe(ctx, namespace), f" ({why})")
