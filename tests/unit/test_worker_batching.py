"""The memory agent's batches (runtime/worker/batching.py): chunks that show a backlog are merged, a trickle is not
held back, nothing is reordered, lost or held past ``within_s``."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Sequence

import pytest

from om_stream.runtime.worker.batching import gathered


class Chunks:
    """A chunk source the test feeds by hand (``None`` ends it), like Faust's ``noack_take``."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[Sequence[int] | None] = asyncio.Queue()

    def put(self, *chunks: Sequence[int] | None) -> None:
        for chunk in chunks:
            self.queue.put_nowait(chunk)

    async def __aiter__(self) -> AsyncIterator[Sequence[int]]:
        while (chunk := await self.queue.get()) is not None:
            yield chunk


async def next_batch(batches: AsyncIterator[list[int]], timeout: float = 1.0) -> list[int]:
    return await asyncio.wait_for(anext(batches), timeout)


async def test_a_trickle_goes_at_once_however_long_within_is() -> None:
    source = Chunks()
    batches = gathered(aiter(source), most=100, busy=4, within_s=60.0)
    source.put([1])
    assert await next_batch(batches) == [1]
    source.put([2, 3])
    assert await next_batch(batches) == [2, 3]
    await batches.aclose()


async def test_busy_chunks_merge_until_a_short_one() -> None:
    source = Chunks()
    batches = gathered(aiter(source), most=100, busy=4, within_s=60.0)
    source.put([0, 1, 2, 3], [4, 5, 6, 7, 8], [9])
    assert await next_batch(batches) == list(range(10))
    await batches.aclose()


async def test_no_batch_exceeds_most() -> None:
    source = Chunks()
    batches = gathered(aiter(source), most=10, busy=4, within_s=60.0)
    source.put([0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15, 16, 17], [18])
    assert await next_batch(batches) == list(range(8))  # 8 + 4 would exceed 10
    assert await next_batch(batches) == list(range(8, 18))  # 4 + 6 reaches 10: sent at once
    assert await next_batch(batches) == [18]
    await batches.aclose()


async def test_a_backlog_that_stops_is_sent_after_within_and_what_follows_keeps_its_order() -> None:
    source = Chunks()
    batches = gathered(aiter(source), most=100, busy=2, within_s=0.05)
    source.put([0, 1, 2])
    loop = asyncio.get_running_loop()
    began = loop.time()
    assert await next_batch(batches) == [0, 1, 2]
    assert 0.04 <= loop.time() - began < 0.5
    source.put([3, 4, 5], [6])
    assert await next_batch(batches) == [3, 4, 5, 6]
    await batches.aclose()


async def test_the_end_of_the_chunks_sends_what_is_pending() -> None:
    source = Chunks()
    batches = gathered(aiter(source), most=100, busy=2, within_s=60.0)
    source.put([0, 1], [2, 3], None)
    assert await next_batch(batches) == [0, 1, 2, 3]
    with pytest.raises(StopAsyncIteration):
        await next_batch(batches)


async def test_closing_the_batches_stops_reading_chunks() -> None:
    source = Chunks()
    batches = gathered(aiter(source), most=100, busy=2, within_s=60.0)
    source.put([0, 1])
    reading = asyncio.ensure_future(anext(batches))
    await asyncio.sleep(0.01)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    source.put([2])  # nobody reads it: the chunk task was cancelled with the batches
    await asyncio.sleep(0.01)
    assert source.queue.qsize() == 1


@pytest.mark.parametrize("seed", range(40))
async def test_every_record_once_in_order_and_no_batch_over_most(seed: int) -> None:
    rng = random.Random(seed)
    most, busy = rng.randint(3, 40), rng.randint(1, 10)
    sizes = [rng.randint(1, most) for _ in range(rng.randint(1, 30))]

    async def chunks() -> AsyncIterator[Sequence[int]]:
        start = 0
        for size in sizes:
            await asyncio.sleep(rng.choice((0, 0, 0.001, 0.004)))
            yield list(range(start, start + size))
            start += size

    seen: list[int] = []
    async for batch in gathered(chunks(), most=most, busy=busy, within_s=rng.choice((0.002, 0.01, 1.0))):
        assert 0 < len(batch) <= most
        seen.extend(batch)
        await asyncio.sleep(rng.choice((0, 0.003)))  # handling a batch while the next chunk is read
    assert seen == list(range(sum(sizes)))
