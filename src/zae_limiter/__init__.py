"""zae-limiter: distributed token-bucket rate limiting on one DynamoDB table."""

from zae_limiter.capacity import AdaptiveRate, CapacityStats, FixedRate
from zae_limiter.clock_watch import ClockStats
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
from zae_limiter.flows.offpath.controls import TopUp
from zae_limiter.flows.records.namespace import NamespaceInfo
from zae_limiter.flows.records.version import client_version as _client_version
from zae_limiter.flows.reserves.book import ReserveSettings, ReserveStats
from zae_limiter.lease import Lease, SyncLease
from zae_limiter.limiter import RateLimiter, SyncRateLimiter
from zae_limiter.limits import Limit
from zae_limiter.models import (
    AuditEvent,
    BucketState,
    CacheStats,
    Entity,
    LimitStatus,
    ResolvedLimits,
    ShardInfo,
    UsageSnapshot,
    UsageSummary,
)
from zae_limiter.regional import GlobalShares, RegionShare, SyncGlobalShares
from zae_limiter.repository import Repository, SyncRepository
from zae_limiter.stats import LimiterStats, ResourceStats

#: The installed distribution's version, from its metadata (pyproject.toml is its one source).
__version__ = _client_version()

__all__ = [
    "AdaptiveRate",
    "AuditEvent",
    "BucketState",
    "CacheStats",
    "CapacityStats",
    "ClockStats",
    "Entity",
    "EntityExistsError",
    "EntityNotFoundError",
    "FixedRate",
    "GlobalShares",
    "Lease",
    "Limit",
    "LimitStatus",
    "LimiterStats",
    "NamespaceInfo",
    "RateLimitExceeded",
    "RateLimiter",
    "RateLimiterUnavailable",
    "RegionShare",
    "Repository",
    "ReserveSettings",
    "ReserveStats",
    "ResolvedLimits",
    "ResourceStats",
    "SchemaVersionError",
    "ShardInfo",
    "SyncGlobalShares",
    "SyncLease",
    "SyncRateLimiter",
    "SyncRepository",
    "TableNotFoundError",
    "TopUp",
    "UsageSnapshot",
    "UsageSummary",
    "ValidationError",
    "ZaeLimiterError",
    "__version__",
]
