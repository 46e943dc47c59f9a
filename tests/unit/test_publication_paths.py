"""The short paths taken for every published context give what the general ones give, at every publication of many
replayed conversations (every shape, buffering or not, random model outcomes, retention windows with their purges,
messages stamped out of order, clears, resource scope with two threads):

- ``Effects.context`` takes a thread's system blocks from the last ones it made when nothing they are made of
  changed (``Effects.rendered_threads``); the record is the one rendered from the store alone, byte for byte, also
  when the hints, the retention cutoff or the bound alone change;
- ``core.views.context_spec`` filters nothing for a record of one thread without a retention window; its spec names
  the messages, tokens and segments the general filter names.
"""

from __future__ import annotations

import random
from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.core.commands import ContextSpec
from om_stream.core.retention import cutoff
from om_stream.core.state import RecordState
from om_stream.core.views import context_spec
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextRecord
from tests.support.replayed_contexts import rendered_afresh, replayed_contexts, variation
from tests.support.sim import Sim


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31))
def test_a_context_with_remembered_blocks_is_the_one_rendered_from_the_store(seed: int) -> None:
    rng = random.Random(f"odd:{seed}")
    remembered = 0

    def same(sim: Sim, spec: ContextSpec, afresh: ContextRecord) -> None:
        record = sim._loop.run_until_complete(sim.host.effects.context(spec, now_ms=sim.now))
        assert encode(record) == encode(afresh), (spec.thread_id, spec.version)

    def check(sim: Sim, spec: ContextSpec, afresh: ContextRecord) -> None:
        nonlocal remembered
        remembered += len(sim.host.effects.rendered_threads) > 0
        same(sim, spec, afresh)
        # what the replays change rarely alone, changed alone: the hints, the cutoff, the bound
        odd = spec
        if rng.random() < 0.3:
            odd = replace(odd, current_task=rng.choice([None, "the task changed"]),
                          suggested_response=rng.choice([None, "say so"]))
        if rng.random() < 0.3:
            held = [m for m in sim.messages.values() if m.message_id in spec.message_ids]
            if held:
                odd = replace(odd, expire_before=rng.choice(held).created_at_ms + rng.choice([0, 1]))
        if spec.segment_ids and rng.random() < 0.2:
            odd = replace(odd, observation_limit=max(1, spec.observation_tokens // 2))
        if odd is not spec:
            same(sim, odd, rendered_afresh(sim, odd))
            same(sim, spec, afresh)  # and back

    for _ in replayed_contexts(variation(seed), on_publish=check):
        pass
    assert remembered > 0


def _as_filtered(state: RecordState, thread_id: str, before: int | None) -> tuple[object, ...]:
    """What the spec names, by the general filter: the thread's unobserved messages not past the window (the open
    turn's message first when it is not among them), and the segments not past it."""
    raw = [m for m in state.unobserved if m.thread_id == thread_id and (before is None or m.created_at >= before)]
    ids = [m.id for m in raw]
    tokens = sum(m.tokens for m in raw)
    thread = state.threads[thread_id]
    pinned = None if thread.turn_answered else thread.turn_message
    if pinned is not None and pinned.id not in ids and (before is None or pinned.created_at >= before):
        ids.insert(0, pinned.id)
        tokens += pinned.tokens
    log = [s for s in state.log if before is None or s.boundary_at >= before]
    return (tuple(ids), tokens, tuple(s.id for s in log), tuple(s.boundary_at for s in log),
            sum(s.tokens for s in log))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31))
def test_the_context_spec_names_what_the_general_filter_names(seed: int) -> None:
    checked = 0

    def check(sim: Sim, published: ContextSpec, _record: ContextRecord) -> None:
        nonlocal checked
        state = sim.states[published.record_key]  # as committed with this publication
        if published.thread_id not in state.threads:
            return
        spec = context_spec(state, published.thread_id, sim.config, published.version, sim.now)
        named = (spec.message_ids, spec.message_tokens, spec.segment_ids, spec.segment_boundaries,
                 spec.observation_tokens)
        assert named == _as_filtered(state, published.thread_id, cutoff(sim.now, sim.config.retention_ms))
        checked += 1

    for _ in replayed_contexts(variation(seed), on_publish=check):
        pass
    assert checked > 0
