"""moto's server as the local engine runs it: `python -m zae_limiter.local.moto_engine`.

The same server (`moto.server`, same options), with one answer made cheaper: DynamoDB
Streams' `GetRecords`. moto serializes it by walking the API's shapes value by value,
which costs milliseconds per record of a share item (measured: 600 records took 4.0 s
to answer on a loaded 2-core machine, the client's parsing 0.6 s). The replicator of
the local global table reads every record of every region, and at ~70 records a second
it fell tens of seconds behind a busy bench: replication's lag was no longer the lag
asked for (docs/global.md). The records moto keeps are already in the wire's form
(attribute values as `{"N": "..."}`), so they are written out as JSON directly; the
record's time is the epoch seconds the JSON protocol carries, as moto's serializer
writes it.
"""

from __future__ import annotations

import base64
import calendar
import datetime
import json
import sys
from typing import Any


def _wire(value: Any) -> Any:
    if isinstance(value, datetime.datetime):
        # moto's times are naive UTC: as its serializer, whole seconds then milliseconds.
        base = calendar.timegm(value.timetuple())
        return base + (value.microsecond // 1000) / 1000.0 if value.microsecond else base
    if isinstance(value, bytes):  # a binary attribute: base64, as the JSON protocol has it
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def records_body(result: dict[str, Any]) -> str:
    """GetRecords' answer body: `NextShardIterator` and the records, as the wire has them."""
    return json.dumps(result, default=_wire, separators=(",", ":"))


def install() -> None:
    """Answer GetRecords with `records_body` (the rest of moto is untouched)."""
    from moto.dynamodbstreams.responses import DynamoDBStreamsHandler

    def get_records(self: Any) -> str:
        limit = self._get_param("Limit")
        result = self.backend.get_records(self._get_param("ShardIterator"), limit or 1000)
        return records_body(result)

    # moto types the handler as answering an ActionResult; a str body is answered as is.
    DynamoDBStreamsHandler.get_records = get_records  # type: ignore[method-assign,assignment]


def main(argv: list[str] | None = None) -> None:  # pragma: no cover - the process entry
    from moto import server

    install()
    server.main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":  # pragma: no cover
    main()
