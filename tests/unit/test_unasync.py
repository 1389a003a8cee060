"""The generated sync faces are what tools/unasync.py makes of their async sources."""

from __future__ import annotations

import pytest

from tools import unasync


@pytest.mark.parametrize("name", unasync.FILES)
def test_the_generated_faces_are_up_to_date(name: str) -> None:
    text = (unasync.PACKAGE / name).read_text()
    assert unasync.SOURCE in text and unasync.GENERATED in text
    assert unasync.regenerate(text, name) == text, "run: python -m tools.unasync"


def test_a_hand_edit_of_a_generated_part_is_caught() -> None:
    text = (unasync.PACKAGE / "lease.py").read_text()
    source, _, generated = text.partition(unasync.GENERATED)
    edited = source + unasync.GENERATED + generated.replace("self._state.add", "self._state.ad", 1)
    assert unasync.regenerate(edited, "lease.py") == text


def test_the_rules_turn_an_async_face_into_its_sync_twin() -> None:
    source = (
        "class AsyncAcquiring(_Acquiring[Repository]):\n"
        '    """`async with limiter.acquire(...)` on aiobotocore."""\n'
        "    async def __aenter__(self) -> Lease:\n"
        "        return Lease(await self._repo.run(flow), RateLimiterUnavailable)\n"
    )
    assert unasync.unasync(source) == (
        "class SyncAcquiring(_Acquiring[SyncRepository]):\n"
        '    """`with limiter.acquire(...)` on boto3."""\n'
        "    def __enter__(self) -> SyncLease:\n"
        "        return SyncLease(self._repo.run(flow), RateLimiterUnavailable)\n"
    )


def test_a_line_only_the_async_face_has_is_left_out() -> None:
    source = (
        "    async def call(\n"
        "        self,\n"
        "        deadline: float | None = None,  # unasync: async only\n"
        "    ) -> None:\n"
        "        at = self._at(deadline)  # unasync: async only\n"
        "        await self.exchange(at)  # unasync: async only (a comment that says more)\n"
    )
    assert unasync.unasync(source) == (
        "    def call(\n"
        "        self,\n"
        "    ) -> None:\n"
        "        self.exchange(at)  # unasync: async only (a comment that says more)\n"
    )
