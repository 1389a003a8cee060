"""The items beside the buckets: stored limits and their resolution (config), entities,
audit events, usage snapshots, the schema version record, namespaces and the table."""
