"""`zae-limiter top`: the busiest buckets, live, from the table's stream.

`rates` turns stream records into rates and bucket states (pure); `reader` reads every
shard of the stream from LATEST, gently, and backs off when the stream throttles it.
"""
