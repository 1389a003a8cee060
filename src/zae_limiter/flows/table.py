"""Check that the table exists, or create it from the table definition."""

from __future__ import annotations

from zae_limiter import table as table_def
from zae_limiter.errors import TableNotFoundError, ZaeLimiterError
from zae_limiter.flows import Call, Flow, one, pause
from zae_limiter.flows.context import RepoState


def describe(state: RepoState) -> Flow[dict[str, object] | None]:
    try:
        result = yield from one(Call("describe_table", {"TableName": state.table}))
    except TableNotFoundError:
        return None
    return dict(result.response.get("Table") or {})


def ensure_table(state: RepoState, create: bool, wait_seconds: int = 60) -> Flow[None]:
    """Return when the table is ACTIVE; create it first when asked and it is missing."""
    info = yield from describe(state)
    if info is None:
        if not create:
            raise TableNotFoundError(state.table)
        yield from one(Call("create_table", table_def.create_table_params(state.table)))
    for _ in range(wait_seconds * 4):
        if info is not None and info.get("TableStatus") == "ACTIVE":
            return
        yield from pause(250)
        info = yield from describe(state)
    raise ZaeLimiterError(f"table {state.table!r} did not become ACTIVE in {wait_seconds}s")
