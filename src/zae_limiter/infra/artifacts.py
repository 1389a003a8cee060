"""Where the aggregator zip lives for CloudFormation: an S3 bucket.

`Code.ZipFile` takes inline source up to 4 KB only, so the zip goes to S3: to
`--artifact-bucket` when given, else to `zae-limiter-artifacts-{account}-{region}`,
created on first use (private, like CDK's and SAM's bootstrap buckets).
"""

from __future__ import annotations

from dataclasses import dataclass

from botocore.exceptions import ClientError

from zae_limiter.infra.aws import Aws, error_code, translated
from zae_limiter.infra.package import artifact_key, build_aggregator_zip


@dataclass(frozen=True, slots=True)
class Artifact:
    bucket: str
    key: str
    data: bytes

    @property
    def parameters(self) -> dict[str, str]:
        """The stack parameters that point the Lambda at this zip."""
        return {"ArtifactBucket": self.bucket, "ArtifactKey": self.key}


def default_bucket(aws: Aws) -> str:
    with translated("looking up the AWS account"):
        account = aws.client("sts").get_caller_identity()["Account"]
    return f"zae-limiter-artifacts-{account}-{aws.region}"


def locate(aws: Aws, bucket: str | None) -> Artifact:
    """Where the zip of this package goes; reads, writes nothing (for --plan)."""
    data = build_aggregator_zip()
    return Artifact(bucket or default_bucket(aws), artifact_key(data), data)


def upload(aws: Aws, artifact: Artifact, *, create_bucket: bool) -> None:
    """Put the zip in place unless that exact zip (same digest) is there already."""
    s3 = aws.client("s3")
    if create_bucket:
        _ensure_bucket(aws, artifact.bucket)
    with translated(f"uploading the aggregator to s3://{artifact.bucket}"):
        try:
            s3.head_object(Bucket=artifact.bucket, Key=artifact.key)
            return
        except ClientError as error:
            if error_code(error) not in ("404", "NoSuchKey", "NotFound"):
                raise
        s3.put_object(Bucket=artifact.bucket, Key=artifact.key, Body=artifact.data)


def _ensure_bucket(aws: Aws, bucket: str) -> None:
    s3 = aws.client("s3")
    with translated(f"creating artifact bucket {bucket}"):
        try:
            s3.head_bucket(Bucket=bucket)
            return
        except ClientError as error:
            if error_code(error) not in ("404", "NoSuchBucket", "NotFound"):
                raise
        params: dict[str, object] = {"Bucket": bucket}
        if aws.region != "us-east-1":  # us-east-1 rejects an explicit location
            params["CreateBucketConfiguration"] = {"LocationConstraint": aws.region}
        s3.create_bucket(**params)
        s3.put_public_access_block(
            Bucket=bucket,
            PublicAccessBlockConfiguration={
                "BlockPublicAcls": True,
                "IgnorePublicAcls": True,
                "BlockPublicPolicy": True,
                "RestrictPublicBuckets": True,
            },
        )
