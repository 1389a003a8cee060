"""Benchmarks to plan with: `python -m benchmarks [--out DIR] [--quick]`.

- `capacity`: round trips, RCU and WCU (indexes included) of every acquire path, read
  from the capacity meter on DynamoDB Local (or modelled on moto), against the budget;
- `cost`: dollars per million acquires of each path at on-demand prices;
- `latency`: latency percentiles, throughput and client CPU per call, sync and async,
  sequential and concurrent, on a moto server;
- `hot_entity`: one entity offered many times a partition's write limit (when present).

`suite.run()` runs them all on engines it starts itself and returns a `report.Report`.
"""
