"""An in-memory DynamoDB for the deterministic simulator (DESIGN.md, section 12).

    engine = Engine(clock=lambda: now_ms)        # the clock only stamps records and tables
    engine.call("update_item", params)           # botocore's name, boto3's low-level params
    client = EngineClient(engine)                # client.update_item(**params), .exceptions
    AsyncEngineClient(engine)                    # the same, awaitable, for the async faces
    engine.items(table)  engine.get(table, key)  engine.records(table)  engine.apply_image(...)
    engine.forget_records(table, through=sequence_number)   # a long run need not keep all

It evaluates the requests zae-limiter sends with DynamoDB's semantics, deterministically:
no wall clock, no randomness, one lock (the sync runner calls from a thread pool).
Errors are botocore's `ClientError` (a subclass per code, so `client.exceptions.X`
catches them) shaped as botocore parses them: `Item` on a failed condition with
`ReturnValuesOnConditionCheckFailure=ALL_OLD`, `CancellationReasons` and `Message` on a
cancelled transaction. A value of the wrong Python type is botocore's
`ParamValidationError`, as boto3 would refuse it before sending.

Supported:
- CreateTable / DescribeTable / DeleteTable / ListTables and the TTL settings calls.
  Tables are ACTIVE at once; GSIs project KEYS_ONLY, INCLUDE or ALL.
- GetItem, PutItem, UpdateItem, DeleteItem, with conditions, every ReturnValues, and
  ReturnValuesOnConditionCheckFailure; UpdateItem creates a missing item as DynamoDB does.
- Query (table or GSI; =, <, <=, >, >=, BETWEEN, begins_with on the sort key; filter,
  projection, Limit, ExclusiveStartKey / LastEvaluatedKey, ScanIndexForward, Select
  COUNT) and Scan (the same, and Segment / TotalSegments).
- BatchGetItem and BatchWriteItem (nothing is ever left unprocessed).
- TransactWriteItems: all or nothing, a reason per part, ClientRequestToken idempotency
  for 10 minutes of the injected clock (IdempotentParameterMismatch on a changed request).
- Expressions (expressions.py, updates.py): compiled once per text and cached; `#names`
  and `:values` bound per request; unused or undefined placeholders, overlapping paths,
  key attributes as targets, `a + :x` on a missing `a`: ValidationException, as DynamoDB.
  Comparisons of different types are false, `<>` with a missing side is true. Paths with
  `.` and `[n]` work; the library sends top-level names only (a test checks it).
- Numbers: int when integral, else Decimal with 38 digits; DynamoDB's range; returned in
  canonical form (DynamoDB Local keeps an arithmetic result's scale, "2.00"; DynamoDB
  does not, and the conformance comparison allows for it).
- ReturnConsumedCapacity (capacity.py): 1 WCU per started KB of the larger image, plus
  each index the write changes (a KEYS_ONLY index whose keys did not move: nothing);
  reads 0.5 or 1 RCU per 4 KB; twice that in a transaction. Every single-item call
  reports exactly what DynamoDB Local reports (checked); transactions, BatchGetItem and
  index scans follow AWS's documented rules where Local's differ. A failed conditional
  write returns no ConsumedCapacity; the library's meter counts it as 1 WCU itself.
- The stream (stream.py): one record per change, INSERT / MODIFY / REMOVE with the
  table's view type, increasing 21-digit sequence numbers; a write that changes nothing
  writes no record (DynamoDB documents this, and DynamoDB Local's stream agrees).

Not supported, on purpose: the legacy parameters (Expected, AttributeUpdates,
AttributesToGet, KeyConditions), the reserved-word check on literal names, the 1 MB page
limit (the library's pages are small), local secondary indexes, PartiQL,
TransactGetItems, throttling and stale reads (the simulator injects faults outside the
engine), TTL expiry (the simulator may delete with `apply_image`), and DynamoDB's hash
order for Scan (here: key order, deterministic, so a paginated Scan's pages differ from
DynamoDB Local's, which orders by a hash) and the order of GSI entries with equal index
keys (here: by table key; the library's index keys are unique). Error messages are
DynamoDB Local's words where AWS words them differently (same codes). The stream and
every old image it references stay in memory until `forget_records`.

Conformance (tests/engine/test_sim_conformance.py, on DynamoDB Local): the library's own
requests are recorded (`replay.RecordingClient`) over a schedule of entities, limits,
acquires with cascade, adjust and rollback, three interleaved clients with reserves, a
doubling of shards and the off-path operations (defaults, audit, namespaces); they are
replayed in order on a fresh engine (`replay.replay`), and every response
(`replay.normalise` drops request ids, capacity, creation times and ARNs, and orders
sets and Scan results), the final table, the stream records, and the capacity of
single-item calls must be equal. The aggregator's usage writes from that stream, a
corpus of tricky requests (tests/sim/tricky_corpus.py) and seeded random requests over
every type (tests/sim/random_requests.py: conditional updates, puts, deletes, queries of
the table and of GSIs with filters and start keys, scans, batches, transactions; 33 seeds of
updates and 30 of the mix, 300 requests each, agreed while the engine was built) are
compared the same way, messages included.
`python -m zae_limiter.sim.engine.bench` measures ops/s.
"""

from zae_limiter.sim.engine.client import AsyncEngineClient, EngineClient
from zae_limiter.sim.engine.engine import Engine
from zae_limiter.sim.engine.stream import StreamRecord

__all__ = ["AsyncEngineClient", "Engine", "EngineClient", "StreamRecord"]
