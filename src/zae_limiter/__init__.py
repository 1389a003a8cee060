"""zae-limiter: distributed token-bucket rate limiting on one DynamoDB table."""

from zae_limiter.errors import (
    EntityExistsError,
    EntityNotFoundError,
    RateLimiterUnavailable,
    RateLimitExceeded,
    SchemaVersionError,
    TableNotFoundError,
    ValidationError,
    ZaeLimiterError,
)
from zae_limiter.limits import Limit
from zae_limiter.models import (
    BucketState,
    CacheStats,
    Entity,
    LimitStatus,
    ResolvedLimits,
    ShardInfo,
    UsageSnapshot,
    UsageSummary,
)

__all__ = [
    "BucketState",
    "CacheStats",
    "Entity",
    "EntityExistsError",
    "EntityNotFoundError",
    "Limit",
    "LimitStatus",
    "RateLimitExceeded",
    "RateLimiterUnavailable",
    "ResolvedLimits",
    "SchemaVersionError",
    "ShardInfo",
    "TableNotFoundError",
    "UsageSnapshot",
    "UsageSummary",
    "ValidationError",
    "ZaeLimiterError",
]

from zae_limiter.lease import Lease, SyncLease
from zae_limiter.limiter import RateLimiter, SyncRateLimiter
from zae_limiter.repository import Repository, SyncRepository

__all__ += ["Lease", "RateLimiter", "Repository", "SyncLease", "SyncRateLimiter", "SyncRepository"]
