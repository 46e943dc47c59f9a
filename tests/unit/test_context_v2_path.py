"""The worker's ``om.context/v2`` path (``Effects.by_reference``: no v1 record, block digests remembered by text,
raw messages by id and creation time) publishes exactly what the definition (``wire.context_refs.by_reference`` of
the rendered v1 record) publishes: the same blocks, index, cursor and tombstones, and leaves readers holding the same,
at every publication of many replayed conversations (every shape, buffering or not, random model outcomes, retention
windows with their purges, messages stamped out of order, clears, resource scope with two threads), also when the
worker forgets at random what it published (a restart or a hand-over) or what it remembered to save work.

What the replayed conversations never produce is tried on purpose: a message that leaves the store (a purge or an
erase: the content cache evicts it too) while the worker remembers it, and specs that name a message the store does
not hold, whose retention cutoff falls inside the raw messages, whose log is over its bound (condensed as it is
rendered), or whose hints alone changed."""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.commands import ContextSpec
from om_stream.runtime.effects import message_prefix
from om_stream.runtime.reference_memo import BlockDigests, MessageDates
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_refs import Sent, by_reference
from tests.support.replayed_contexts import rendered_afresh, replayed_contexts, variation
from tests.support.sim import Sim


def leave_store(sim: Sim, resource_id: str, message_id: str) -> None:
    """The message leaves the store as a purge or an erase removes it: from the store and the content cache."""
    store = sim.host.effects.store
    assert isinstance(store, InMemoryContentStore)
    store._messages.get(message_id, {}).pop(resource_id, None)
    key = message_prefix(resource_id) + message_id
    sim.host.effects.cache.evict(lambda cached, _value: cached == key)


def compare(sim: Sim, spec: ContextSpec, record: ContextRecord, previous: Sent | None) -> Sent:
    expected, expected_sent = by_reference(
        record, pinned_message_id=spec.pinned_message_id, expire_before=spec.expire_before,
        run_ids=[i for i in spec.message_ids if i != spec.pinned_message_id], previous=previous)
    published, sent = sim._loop.run_until_complete(
        sim.host.effects.by_reference(spec, now_ms=sim.now, previous=previous))
    assert published == expected, spec.version
    assert sent == expected_sent, spec.version
    assert [encode(b) for b in published.blocks] == [encode(b) for b in expected.blocks]
    assert encode(published.cursor) == encode(expected.cursor)
    return sent


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31))
def test_the_worker_path_publishes_what_the_full_render_publishes(seed: int) -> None:
    v = variation(seed)
    rng = random.Random(f"forget:{seed}")
    sent: dict[str, Sent] = {}
    compared = 0

    def check(sim: Sim, spec: ContextSpec, record: ContextRecord) -> None:
        nonlocal compared
        effects = sim.host.effects
        roll = rng.random()
        if roll < 0.05:
            sent.pop(spec.thread_id, None)  # the worker restarted: it publishes everything again
        elif roll < 0.08:
            effects.message_dates = MessageDates(limit=rng.choice([1, 2048]))
        elif roll < 0.1:
            effects.block_digests = BlockDigests(max_bytes=rng.choice([0, 1_000]))
        previous = sent.get(spec.thread_id)
        if spec.message_ids and rng.random() < 0.1:
            leave_store(sim, spec.resource_id, rng.choice(spec.message_ids))
            record = rendered_afresh(sim, spec)
        if spec.message_ids and rng.random() < 0.3:  # compared only: readers are not told
            odd = spec
            if rng.random() < 0.5:
                ids = list(spec.message_ids)
                ids.insert(rng.randrange(len(ids) + 1), "not-in-the-store")
                odd = replace(odd, message_ids=tuple(ids))
            if rng.random() < 0.5:
                held = [m for m in sim.messages.values() if m.message_id in spec.message_ids]
                if held:
                    odd = replace(odd, expire_before=rng.choice(held).created_at_ms + rng.choice([0, 1]))
            if spec.segment_ids and rng.random() < 0.3:  # over its bound: condensed as it is rendered
                odd = replace(odd, observation_limit=max(1, spec.observation_tokens // 2))
            if rng.random() < 0.5:
                odd = replace(odd, current_task=rng.choice([None, "the task changed"]),
                              suggested_response=rng.choice([None, "say so"]))
            compare(sim, odd, rendered_afresh(sim, odd), previous)
        sent[spec.thread_id] = compare(sim, spec, record, previous)
        compared += 1

    for _ in replayed_contexts(v, on_publish=check):
        pass
    assert compared > 0
