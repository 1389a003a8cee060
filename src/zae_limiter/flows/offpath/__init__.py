"""What touches buckets outside an acquire: reads (available tokens, time until
available, an entity's shards) and an operator's controls (reset, top-up)."""
