"""Whether this worker is still the group member a batch was read as: asked before the batch writes its states.

A member the group has dropped does not know it until its consumer next hears from the coordinator. Dropped, it
was: its process was frozen past the session timeout (a paused VM, a throttled container, a long collection), or it
answered a rebalance after the rebalance timeout. A batch it had in hand would meanwhile write its record states over
the new owners' (the next owner recovers what was written last) and publish contexts older than the ones the agents
already have. Measured here before this check: a member frozen for 16 s with a batch in hand published, the moment
it woke, contexts 16 versions behind for three threads.

Two checks, both on the aiokafka consumer Faust runs on a thread of its own (Faust reads the same coordinator for its
generation id; the way there is private: ``faust_internals``):

* the coordinator's generation: aiokafka resets it the moment a heartbeat or a commit is refused for an unknown
  member or an old generation, before Faust hears of any rebalance;
* a heartbeat of our own when no heartbeat has succeeded for a third of the session timeout (a frozen process
  heartbeats nobody), or when a revocation has waited that long for the batch (the rebalance goes on without us
  once its timeout passes, while our heartbeats still count as answered): the coordinator's answer settles it.
  Refused, the generation is reset and the batch is fenced; unanswered in time, the batch is fenced too (it is read
  again, never lost).

What stays open is a process frozen between that check and its state writes, a few statements later; only Kafka
transactions close that, and Faust's are not dependable (../shared/notes/field-notes.md, faust #517).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from aiokafka.errors import KafkaError
from faust.types import ConsumerT

from om_stream.runtime.worker.faust_internals import group_coordinator, heartbeat_now, observe_heartbeats

__all__ = ["Membership"]

log = logging.getLogger(__name__)


class Membership:
    def __init__(self, consumer: Callable[[], ConsumerT], *, session_timeout_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._consumer = consumer  # Faust's consumer (its thread runs the aiokafka consumer)
        self._fresh_s = session_timeout_s / 3  # heartbeat silence that makes a batch ask, and its wait
        self._clock = clock
        self._watched: Any = None  # the coordinator whose heartbeats are timed
        self.last_heartbeat = clock()  # when a heartbeat last succeeded (monotonic seconds)
        self.revoking_since: float | None = None  # when the revocation now waiting for the batch began

    def _coordinator(self) -> Any:
        # Faust's own route to the generation (faust.transport.drivers.aiokafka.ConsumerRebalanceListener)
        coordinator = group_coordinator(self._consumer())
        if coordinator is not self._watched:
            observe_heartbeats(coordinator, self._heard)  # on the consumer's thread: a float assignment
            self._watched = coordinator
            self.last_heartbeat = self._clock()
        return coordinator

    def _heard(self, answered: bool) -> None:
        if answered:
            self.last_heartbeat = self._clock()

    def revoking(self, began: bool) -> None:
        """A revocation begins (it waits for the batch in hand) or is over."""
        self.revoking_since = self._clock() if began else None

    def current(self, generation: int) -> bool:
        """The coordinator still holds ``generation`` (False once a refusal reset it, or a new one began)."""
        return int(self._coordinator().generation) == generation

    async def confirm(self, generation: int) -> bool:
        """``generation`` still holds, heartbeating first if none succeeded lately (see the module's docstring)."""
        coordinator = self._coordinator()
        now = self._clock()
        revoking = self.revoking_since is not None and now - self.revoking_since > self._fresh_s
        if revoking or now - self.last_heartbeat > self._fresh_s:
            try:
                answered = await asyncio.wait_for(heartbeat_now(self._consumer(), coordinator), self._fresh_s)
            except (KafkaError, TimeoutError) as exc:  # no answer saying we are a member: fenced, read again
                log.warning("the group coordinator did not confirm this member before a batch commit: %r", exc)
                return False
            if not answered:
                return False
        return self.current(generation)
