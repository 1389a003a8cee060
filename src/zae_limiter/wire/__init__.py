"""The lean request path: the hot DynamoDB operations without botocore's per-call
machinery, on the regular client's endpoint, credentials and connections.

`lean_client(client)` wraps a boto3 or aiobotocore DynamoDB client; it returns None when
the client does not expose what the lean path borrows, and the driver then uses the
regular client for everything. See docs/lean-path.md.
"""

from __future__ import annotations

from typing import Any

from zae_limiter.wire.protocol import OPERATIONS

LEAN_OPS = frozenset(OPERATIONS)


def lean_client(client: Any, *, asynchronous: bool) -> Any:
    """A lean stand-in for `client`'s hot operations, or None when it cannot be built."""
    # Imported here, not with the package: botocore's HTTP parts bring urllib3's ssl module,
    # which must not be loaded before a gevent monkey-patch (Locust) when the library is.
    from zae_limiter.wire.client import AsyncLeanClient, SyncLeanClient, borrowable

    if not borrowable(client):
        return None
    return AsyncLeanClient(client) if asynchronous else SyncLeanClient(client)


__all__ = ["LEAN_OPS", "OPERATIONS", "lean_client"]
