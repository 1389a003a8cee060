"""A hot entity past one partition: which shard to write (any_shard), what a throttle
does next (throttled), the evidence that a partition is full (evidence), the doubling
of the shard count (doubling) and the new shard made from its donor (split)."""
