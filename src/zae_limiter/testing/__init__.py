"""Test helpers that ship with the library: the partition emulator.

from zae_limiter.testing import PartitionEmulator

with PartitionEmulator(local_endpoint_url, writes_per_second=50) as emu:
    repo = SyncRepository.open(endpoint_url=emu.endpoint_url, partition_wcu=50)
"""

from __future__ import annotations

from zae_limiter.testing.emulator import (
    FIXED,
    SMOOTH,
    THROTTLE_TYPE,
    Count,
    EmulatorStats,
    PartitionEmulator,
    PartitionWindow,
    written_partitions,
)

__all__ = [
    "FIXED",
    "SMOOTH",
    "THROTTLE_TYPE",
    "Count",
    "EmulatorStats",
    "PartitionEmulator",
    "PartitionWindow",
    "written_partitions",
]
