"""The web front: an ASGI middleware, a FastAPI dependency and the RateLimit header fields.

Needs the `web` extra (`pip install 'zae-limiter[web]'`); `import zae_limiter` never
imports this package.
"""

from zae_limiter.asgi.extract import (
    Refused,
    RequestView,
    bearer,
    header,
    json_field,
    path_param,
    query,
)
from zae_limiter.asgi.guard import Guard
from zae_limiter.asgi.headers import Quota, header_pairs, policy_value, ratelimit_value
from zae_limiter.asgi.middleware import RateLimitMiddleware, lease_of
from zae_limiter.asgi.quota import QuotaView

__all__ = [
    "Guard",
    "Quota",
    "QuotaView",
    "RateLimitMiddleware",
    "Refused",
    "RequestView",
    "bearer",
    "header",
    "header_pairs",
    "json_field",
    "lease_of",
    "path_param",
    "policy_value",
    "query",
    "ratelimit_value",
]
