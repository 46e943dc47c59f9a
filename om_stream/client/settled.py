"""``OMClient.settled``: waiting, over Kafka alone, until a thread's memory has settled through a message.

The worker answers a ``progress`` command (``om.commands``) with a ``data-om-progress`` event carrying the command's
id as ``requestId`` and where the message stands (``through``: its ``seq``, its status, whether memory has settled
through it). After that answer, every change of the thread's progress is published too (at most once per batch),
so the client needs nothing from before it asked:

1. follow the thread's partition of ``om.events`` from its end, *then* ask (nothing published after the question
   can be missed, and the answer reflects everything the worker took in before it);
2. the answer settled: done. The message taken in but not settled: remember its ``seq``, and wait for a progress
   event whose ``settledThrough.seq`` reaches it (settled through a message means settled through every earlier
   one). The message not taken in yet (it travels another topic than the question, so the question may overtake
   it): wait for a context of the thread that includes it, received after the question, and ask again.

Every claim is about a state the worker committed: a progress event is published after its state is written, so
a client never hears "settled" for a state that is then lost. A worker that dies while a client waits publishes
nothing: the client's ``TimeoutError`` says so. (A progress event published again after a restart repeats a state
the worker had reached, replayed from the same inputs.)
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from om_stream.core.events import ProgressEvent
from om_stream.wire.context import ContextRecord

if TYPE_CHECKING:
    from om_stream.client.client import OMClient

__all__ = ["settle"]


async def settle(client: OMClient, thread_id: str, through_message_id: str | None, *, timeout: float,
                 resource_id: str | None) -> ProgressEvent:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout

    def late() -> TimeoutError:
        return TimeoutError(f"memory of thread {thread_id!r} has not settled through "
                            f"{through_message_id or 'its newest message'!r} after {timeout}s")

    def remaining() -> float:
        left = deadline - loop.time()
        if left <= 0:
            raise late()
        return left

    async with client.events(thread_id) as events:
        asked_after = client.latest_context(thread_id)
        request_id = await client.ask_progress(thread_id, through_message_id, resource_id=resource_id)
        target: int | None = None  # the message's seq, once an answer placed it
        while True:
            try:
                envelope = await events.next(timeout=remaining())
            except TimeoutError:
                raise late() from None
            progress = envelope.data
            if not isinstance(progress, ProgressEvent) or progress.thread_id != thread_id:
                continue
            if progress.request_id is not None:
                if progress.request_id != request_id or progress.through is None:
                    continue  # another client's answer
                through = progress.through
                if through.settled:
                    return progress
                if through.status != "unknown" and through.seq is not None:
                    target = through.seq
                    continue
                # not taken in when the question was: ask again once a context received since shows it is
                wanted = through_message_id or through.message_id
                if wanted is None:
                    continue  # the thread had no message: an answer says settled, so this is not reached
                previous = asked_after

                def shows_it(context: ContextRecord, wanted: str = wanted,
                             previous: ContextRecord | None = previous) -> bool:
                    return context is not previous and client.includes(context, wanted)

                try:
                    await client.wait_context(thread_id, shows_it, timeout=remaining())
                except TimeoutError:
                    raise late() from None
                asked_after = client.latest_context(thread_id)
                request_id = await client.ask_progress(thread_id, through_message_id, resource_id=resource_id)
            elif target is not None and progress.settled_through is not None \
                    and progress.settled_through.seq >= target:
                return progress
