"""Credentials and region: can this caller reach the deployment at all?"""

from __future__ import annotations

from zae_limiter.doctor.context import AwsCallError, Context, call
from zae_limiter.doctor.report import Check, fail, ok

NAME = "credentials"
_SET_CREDENTIALS = (
    "set AWS_PROFILE (or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), or run where a role "
    "is attached; `aws sts get-caller-identity` shows who you are"
)


def check(ctx: Context) -> Check:
    """On AWS: credentials found and accepted by STS. Locally any credentials do, but
    botocore still needs some to sign with."""
    credentials = ctx.aws.credentials()
    if credentials is None:
        return fail(NAME, "no AWS credentials found", _SET_CREDENTIALS, region=ctx.aws.region)
    if ctx.target.local:
        return ok(
            NAME,
            f"region {ctx.aws.region}; a local engine accepts any credentials",
            region=ctx.aws.region,
            method=credentials.method,
        )
    try:
        who = call(ctx.client("sts"), "get_caller_identity")
    except AwsCallError as error:
        return fail(
            NAME,
            f"STS refused the credentials ({credentials.method}): {error}",
            _SET_CREDENTIALS,
            region=ctx.aws.region,
            method=credentials.method,
        )
    ctx.caller_arn = str(who.get("Arn"))
    return ok(
        NAME,
        f"{ctx.caller_arn} in region {ctx.aws.region}",
        region=ctx.aws.region,
        method=credentials.method,
        arn=ctx.caller_arn,
        account=who.get("Account"),
    )
