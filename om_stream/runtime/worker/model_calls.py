"""Model requests answered once: a request asked again (after a crash, a rebalance, a deadline) is not paid again.

A model worker looks a request up in the content store's ``CycleResults`` before it calls a model:

1. a result stored under the request's key is the answer (``om_model_calls_saved_total{reason="stored"}``);
2. else the worker claims the key's lease; while another worker holds it (it is calling the model right now and
   renews its lease as it waits), this one polls for the stored result (``reason="in_flight"``); a lease that
   expires (its holder died) is taken over;
3. the holder calls the model, stores the result under the key, and publishes it; its lease is left to expire
   (every step 1 reads the result before any claim, so a stored result answers a repeat whatever the lease);
4. a holder whose call is cancelled (a worker draining on SIGTERM hands its stalled calls back) shortens its lease
   to the least the store keeps (``HAND_BACK_LEASE_S``: at once in memory and SQLite, ~2 s on Cassandra, which
   counts whole seconds), so the next owner asking again calls the model without waiting out ``lease_s``.

The key is the request's cycle with a digest of the whole request but its attempt and deadline, so a request that
differs in what the model is asked is never answered with another's result, while a deadline's re-ask (the next
attempt of a cycle whose result did not come in time) is the same request: when the model workers fall behind, a
cycle's first attempt may still wait in the requests topic past ``worker.cycle_timeout_s``, and the re-ask then queued
behind it is answered from the first one's result instead of paying the provider again. A result is handed back
stamped with the attempt it answers. The store failing never stops model work: the call is made (and may then be
paid twice), and the failure is logged. Nor does a store too slow to answer: each of these steps waits
``store_wait_s`` at most. On Cassandra the lease is a lightweight transaction, and while a node that just died is not
yet counted down by the others (up to ~20 s), a transaction can wait for it and time out again and again although a
quorum of replicas is up; an Observer call behind it would hold its thread's context that long. A result that takes
longer than that to store is published at once, but its write goes on for ``lease_s`` more with the lease renewed: a
repeat meanwhile waits on the lease and then finds the result, instead of paying the provider again. Once the write
lands the ledger is read again, as the next paragraph says.

A request of a record incarnation that was erased (``core.erasure``; the content store's ledger says so) is not
answered: before the call, nothing is called; after it, the result written meanwhile is removed again and
nothing is published (an erase that ran during the call may have swept the results before this one was written).
A ledger that cannot be read after the call removes the stored result too: nothing else would, if an erase ran.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import suppress
from dataclasses import replace
from typing import TypeVar

from om_stream.core.commands import RequestObservation, RequestReflection
from om_stream.core.erasure import record_digest
from om_stream.core.inputs import ModelResultArrived
from om_stream.errors import StorageError, WireDecodeError
from om_stream.observability.metrics import Metrics
from om_stream.ports import CycleResults, ErasableStore
from om_stream.runtime.internal_codec import decode_internal, encode_internal

__all__ = ["ModelCalls", "request_key"]

log = logging.getLogger(__name__)
Request = RequestObservation | RequestReflection
R = TypeVar("R")
HAND_BACK_LEASE_S = 0.001  # the port has no release: a renewal this short ends the lease (see step 4)
STORE_WAIT_S = 2.0  # longest wait for one step of the bookkeeping (a stored result read, a claim, a result stored)


def request_key(request: Request) -> str:
    """The request's cycle and a digest of what it asks, whatever its attempt."""
    asked = replace(request, request_id=request.cycle_id, attempt=0, deadline_at=0)
    digest = hashlib.sha256(encode_internal(asked)).hexdigest()[:24]
    return f"{request.cycle_id}:{digest}"


class ModelCalls:
    def __init__(self, call: Callable[[Request], Awaitable[ModelResultArrived]], results: CycleResults,
                 metrics: Metrics, *, owner: str, lease_s: float = 10.0, poll_s: float = 0.5,
                 ledger: ErasableStore | None = None, store_wait_s: float = STORE_WAIT_S) -> None:
        self.call = call
        self.results = results
        self.ledger = ledger  # the erasure ledger (the content store); None: nothing is ever erased
        self.metrics = metrics
        self.owner = owner
        self.lease_s = lease_s
        self.poll_s = poll_s
        self.store_wait_s = store_wait_s
        self._in_flight: dict[str, asyncio.Future[ModelResultArrived | None]] = {}  # this process's calls, by key
        self._late_writes: set[asyncio.Task[None]] = set()  # results still being stored after their answer went out

    def __len__(self) -> int:
        """Requests this process is calling a model for now."""
        return len(self._in_flight)

    async def answer(self, request: Request) -> ModelResultArrived | None:
        """The result of ``request``, stamped with its attempt; None when its record was erased (nothing to
        publish)."""
        result = await self._answer_once(request)
        if result is None or result.attempt == request.attempt:
            return result
        return replace(result, attempt=request.attempt)  # another attempt's answer to the same question

    async def _answer_once(self, request: Request) -> ModelResultArrived | None:
        if await self._erased(request) is True:  # unknown: answered (the check after the call decides again)
            self.metrics.erasure_writes_undone.labels("model_call_skipped").inc()
            return None
        key = request_key(request)
        running = self._in_flight.get(key)
        if running is not None:  # asked again while this very process is calling the model for it
            self.metrics.model_calls_saved.labels("in_flight").inc()
            return await asyncio.shield(running)
        future: asyncio.Future[ModelResultArrived | None] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            result = await self._answer(key, request)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: a failure is re-raised to whoever waits, never logged as lost
            raise
        else:
            future.set_result(result)
            return result
        finally:
            del self._in_flight[key]

    async def _erased(self, request: Request) -> bool | None:
        """Whether the ledger says the request's record incarnation was erased; None when it cannot be read."""
        if self.ledger is None:
            return False
        try:
            through = await self._bounded(self.ledger.erased_through(record_digest(request.record_key)))
        except (StorageError, TimeoutError) as exc:
            log.warning("erasure ledger unavailable for %s: %r", request.request_id, exc)
            return None
        return through is not None and request.epoch <= through

    async def _answer(self, key: str, request: Request) -> ModelResultArrived | None:
        try:
            waited = False
            while True:
                stored = await self._bounded(self._stored(key))
                if stored is None and await self._bounded(self._claim(key)):
                    # read again: the previous holder may have stored its answer and ended its lease meanwhile
                    stored = await self._bounded(self._stored(key))
                    if stored is None:
                        break  # this worker calls the model
                if stored is not None:
                    self.metrics.model_calls_saved.labels("in_flight" if waited else "stored").inc()
                    return stored
                waited = True  # another worker is calling the model for this request right now
                await asyncio.sleep(self.poll_s)
        except (StorageError, TimeoutError) as exc:
            log.warning("model results store unavailable, calling the model without it: %s",
                        exc if isinstance(exc, StorageError) else f"no answer in {self.store_wait_s:.0f} s")
            return await self.call(request)
        return await self._call_holding(key, request)

    async def _claim(self, key: str) -> bool:
        """True when this worker holds the lease now."""
        return await self.results.claim(key, self.owner, self.lease_s) is None

    async def _call_holding(self, key: str, request: Request) -> ModelResultArrived | None:
        renewal = asyncio.create_task(self._renew(key))
        try:
            result = await self.call(request)
        except asyncio.CancelledError:
            await _stopped(renewal)
            await self._hand_back(key, request)
            raise
        finally:
            await _stopped(renewal)
        write = asyncio.ensure_future(self.results.put_result(key, encode_internal(result),
                                                              record_key=request.record_key))
        try:
            await self._bounded(asyncio.shield(write))
        except TimeoutError:  # the answer goes out now; the write goes on, and is checked once it lands
            self._late_writes.add(late := asyncio.create_task(self._landed(write, key, request)))
            late.add_done_callback(self._late_writes.discard)
        except StorageError as exc:  # the lease then ends by itself within lease_s
            _not_stored(request, exc)
        erased = await self._erased(request)
        if erased is None:
            # unknown: an erase may have swept the results before this one was stored, and then nothing would
            # remove it; the stored copy goes (a repeat of the request would pay the model again), the answer is
            # still published (an erased record has no cycle to apply it to)
            await self._drop(key, request)
        elif erased:
            self.metrics.erasure_writes_undone.labels("cycle_result").inc()
            log.info("model result of %s came after its record was erased; removed", request.request_id)
            await self._drop(key, request)
            return None
        return result

    async def _landed(self, write: asyncio.Future[None], key: str, request: Request) -> None:
        """A result stored later than ``store_wait_s``: given ``lease_s`` more to land (a repeat meanwhile waits on
        the lease, then finds it), then the ledger is read again, as after any write of a result."""
        renewal = asyncio.create_task(self._renew(key))  # the lease is held until the result is stored
        try:
            await asyncio.wait_for(write, self.lease_s)
        except StorageError as exc:
            _not_stored(request, exc)
            return
        except TimeoutError:
            _not_stored(request, f"no answer in {self.store_wait_s + self.lease_s:.0f} s")
            return
        finally:
            await _stopped(renewal)
        if await self._erased(request) is not False:  # erased meanwhile, or unknown: no stored copy is left
            await self._drop(key, request)

    async def _drop(self, key: str, request: Request) -> None:
        """The result just stored may hold an erased record's text: removed."""
        try:
            await self._bounded(self.results.drop_result(key))
        except (StorageError, TimeoutError) as exc:  # it expires with the results' TTL; the ledger tells a repeat
            log.warning("model result of %s could not be removed: %r", request.request_id, exc)

    async def _bounded(self, step: Awaitable[R]) -> R:
        """One step of the bookkeeping, given ``store_wait_s`` at most (TimeoutError past it)."""
        return await asyncio.wait_for(step, self.store_wait_s)

    async def _hand_back(self, key: str, request: Request) -> None:
        try:
            await asyncio.wait_for(self.results.claim(key, self.owner, HAND_BACK_LEASE_S), self.lease_s / 3)
        except (StorageError, TimeoutError) as exc:  # the lease then ends by itself within lease_s
            log.warning("lease on %s not handed back: %r", request.request_id, exc)
        else:
            log.info("model call %s handed back", request.request_id)

    async def _renew(self, key: str) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await self.results.claim(key, self.owner, self.lease_s)
            except StorageError as exc:
                log.warning("lease on %s not renewed: %s", key, exc)

    async def _stored(self, key: str) -> ModelResultArrived | None:
        payload = await self.results.get_result(key)
        if payload is None:
            return None
        try:
            result = decode_internal(payload)
        except WireDecodeError as exc:  # written by another version, or damaged: asked again
            log.warning("stored model result %s unreadable, calling the model again: %s", key, exc)
            return None
        return result if isinstance(result, ModelResultArrived) else None


async def _stopped(task: asyncio.Task[None]) -> None:
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task


def _not_stored(request: Request, why: object) -> None:
    log.warning("model result of %s could not be stored (a repeat would call the model again): %s",
                request.request_id, why)
