"""An in-memory DynamoDB for the deterministic simulator (DESIGN.md, section 12).

`Engine(clock=...)` evaluates the requests zae-limiter sends, with DynamoDB's semantics,
deterministically (no wall clock, no randomness: `clock` only stamps stream records and
table creation); `EngineClient(engine)` is a boto3-shaped face for the library.

Supported: CreateTable / DescribeTable / DeleteTable (tables are ACTIVE at once; GSIs
with KEYS_ONLY, INCLUDE or ALL projection), GetItem, PutItem, UpdateItem, DeleteItem,
Query (table or GSI, key conditions =, <, <=, >, >=, BETWEEN, begins_with; filter,
projection, Limit, ExclusiveStartKey / LastEvaluatedKey, ScanIndexForward, Select COUNT),
Scan (the same, and Segment / TotalSegments), BatchGetItem, BatchWriteItem (nothing is
ever left unprocessed), TransactWriteItems (all or nothing, cancellation reasons,
ClientRequestToken idempotency for 10 minutes of the injected clock), the TTL settings
calls (recorded, never acted on: the simulator drives expiry itself if it needs it).
Condition, filter, key-condition, update and projection expressions are compiled once
per text and cached; `#names` and `:values` are bound per request, and unused or
undefined placeholders are ValidationExceptions as on DynamoDB. Numbers are exact (int,
or Decimal with 38 digits) and returned canonical. `ReturnConsumedCapacity` gets a
plausible answer (1 WCU per started KB of the larger image, plus each index the write
changes; reads 0.5 or 1 RCU per 4 KB; twice that in transactions). Every change is one
stream record (INSERT / MODIFY / REMOVE, `NEW_AND_OLD_IMAGES` as the table asks); a write
that changes nothing writes none, as DynamoDB documents.

Not supported, on purpose: the legacy parameters (Expected, AttributeUpdates,
AttributesToGet, KeyConditions), the reserved-word check on literal attribute names
(the library spells every name through `#placeholders` except a few it knows are safe),
the 1 MB page limit (the library's pages are small), local secondary indexes, PartiQL,
TransactGetItems, throttling and eventually consistent staleness (the simulator injects
those faults itself, outside the engine), and Scan's hash order (a Scan here runs in key
order: deterministic, but not DynamoDB's order).

Conformance: tests/engine/test_sim_conformance.py records the library's own requests
against DynamoDB Local (a schedule of entity, limit, acquire, cascade, reserve and shard
operations from several clients) plus a corpus of tricky requests, replays them on the
engine with `replay.replay`, and compares every response and the final table.
"""

from zae_limiter.sim.engine.client import EngineClient
from zae_limiter.sim.engine.engine import Engine
from zae_limiter.sim.engine.stream import StreamRecord

__all__ = ["Engine", "EngineClient", "StreamRecord"]
