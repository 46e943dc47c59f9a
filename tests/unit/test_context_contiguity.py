"""The invariant ``om.context/v2`` rests on (docs/context-wire-v2.md): the raw messages of every context are the
pinned turn message (if any), then a contiguous run of the thread's messages in position order (the order they
reached the memory), less an ``excluded`` set.

Checked from the outside on every context of many replayed conversations (``tests.support.replayed_contexts``:
every shape, buffering or not, random model outcomes, retention windows, clears, resource scope with two threads),
against the thread's position order; the spec's ``pinned_message_id`` (what the worker publishes as the pin) must
agree with it.

The case that breaks plain contiguity, found here and nowhere else: a message stamped before one it follows
(``created_at`` out of order) that the retention cutoff reaches while later ones stay. Such a hole is always a
message older than the context's cutoff (``expire_before``), so a client tells it from the message itself. Nothing
else leaves a hole: observations, buffered chunks and activations cover a prefix of the unobserved messages; a clear
makes the whole stored conversation unobserved again, in order; the pinned message is observed, so it lies before
the run.
"""

from __future__ import annotations

from datetime import timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.core.inputs import MessageAppended
from om_stream.core.messages import Message
from tests.support.replayed_contexts import Replayed, replayed_contexts, variation
from tests.support.sim import Sim


def holes(seen: Replayed) -> tuple[list[str], list[str]]:
    """(violations, excluded): the messages inside the run that the context leaves out, and what is wrong."""
    spec, record, order = seen.spec, seen.record, seen.order
    ids = [m.message_id for m in record.messages]
    position = {m: i for i, m in enumerate(order)}
    problems = [f"{i} is not a message of the thread" for i in ids if i not in position]
    if problems or not ids:
        return problems, []
    pinned = ids[0] if ids[0] == seen.pinnable else None
    run = ids[1:] if pinned is not None else ids
    if spec.pinned_message_id != pinned and not (pinned is None and spec.pinned_message_id not in ids):
        problems.append(f"the spec pins {spec.pinned_message_id}, the context {pinned}")
    if not run:
        return problems, []
    places = [position[i] for i in run]
    if places != sorted(places) or len(set(places)) != len(places):
        problems.append(f"the run is not in position order: {run}")
        return problems, []
    if pinned is not None and position[pinned] > places[0]:
        problems.append(f"the pinned {pinned} comes after the run's first message")
    inside = set(run)
    excluded = [m for m in order[places[0]:places[-1] + 1] if m not in inside]
    before = spec.expire_before  # a hole a client can tell from the message itself: it is past the cutoff
    for message_id in excluded:
        message = seen.messages[message_id]
        if before is None or message.created_at_ms >= before:
            problems.append(f"{message_id} is missing from the middle of the run, and not expired")
    return problems, excluded


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31))
def test_the_raw_messages_are_a_pinned_message_then_a_run_less_expired_ones(seed: int) -> None:
    v = variation(seed)
    contexts = 0
    for seen in replayed_contexts(v):
        contexts += 1
        problems, excluded = holes(seen)
        assert not problems, (v, seen.spec.version, problems)
        # the only hole: messages stamped out of order that the retention window reached before their neighbours
        assert not excluded or (v.skewed and v.retention_days is not None), (v, excluded)
    assert contexts > 0


def test_a_message_stamped_out_of_order_leaves_a_hole_past_the_cutoff() -> None:
    """The real case that breaks contiguity, on purpose: with a one-day window, a message stamped 20 hours before
    the ones around it expires first; the context keeps its neighbours, and what tells the hole is the message's own
    time against the context's cutoff (the record's purge may have removed it from the state already, so the
    worker cannot always name it: ``om.context/v2`` sends the cutoff, not a list)."""
    sim = Sim({"observation": {"messageTokens": 10_000, "bufferTokens": False}}, retention_days=1)
    sim.say("t1", "user", "first question")
    late = sim.say("t1", "assistant", "an answer")
    sim.say("t1", "user", "second question")
    key = sim.state().key
    # validated anew: model_copy would keep the original's cached created_at_ms
    stamped = Message.model_validate({**{name: getattr(late, name) for name in Message.model_fields},
                                      "message_id": "skewed", "created_at": late.created_at - timedelta(hours=20)})
    sim.apply(key, "r1", MessageAppended(stamped))
    sim.say("t1", "assistant", "after the skewed one")
    sim.run_until(sim.now + 5 * 3_600_000)  # the skewed message is now past the window, its neighbours are not
    sim.say("t1", "user", "third question")
    spec = sim.last_context()
    assert "skewed" not in spec.message_ids
    assert spec.message_ids[0] == "m1" and spec.message_ids[-1] == "m6" and "m5" in spec.message_ids
    assert spec.expire_before is not None
    assert stamped.created_at_ms < spec.expire_before <= sim.messages["m1"].created_at_ms
