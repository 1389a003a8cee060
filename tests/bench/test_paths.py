"""What one steady acquire walks through (`python -m benchmarks.paths`): the per-request
path and a reserve hit stay within the sizes issue 37 brought them to. A count, not a
speed: the walk is traced once, no round is timed."""

from __future__ import annotations

from benchmarks import paths

#: Measured after issue 37's fourth cut (docs/performance.md, "The per-request walk"):
#: 83-84 functions in 20 files, a reserve hit 13 in 4. The traced acquire builds its
#: expression when its shape is new (the epochs its condition watches change every
#: 20 s): up to 8 functions more then (measured with the expression and name caches
#: cleared: 91 in 23 files), in keys/buckets.py (`window_parts`), keys/expiry.py and
#: keys/reserves.py; one more for an answer that narrows the clock watch's interval.
PER_REQUEST_FUNCTIONS = 92
PER_REQUEST_FILES = 23
HIT_FUNCTIONS = 14
HIT_FILES = 4


def test_the_acquire_paths_stay_short() -> None:
    per_request, hit = paths.walks(timed_rounds=0)
    assert per_request.requests == 1 and hit.requests == 0
    assert per_request.functions <= PER_REQUEST_FUNCTIONS, per_request.names
    assert per_request.files <= PER_REQUEST_FILES, per_request.names
    assert hit.functions <= HIT_FUNCTIONS, hit.names
    assert hit.files <= HIT_FILES, hit.names
