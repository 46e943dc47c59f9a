"""Every context a replayed conversation publishes, as an agent would receive it, with the thread's messages in the
order they reached the memory (their position order).

Conversations of ``om_stream.replay.shapes`` go through ``tests.support.sim.Sim`` (the real host on the in-memory
store, model outcomes scripted per seed: successes, failures, degenerate output, lost and late results). At each
publication the context is rendered as the worker renders it (``Effects.context``, its system blocks made anew:
``rendered_afresh``) at that moment, beside its spec and the thread's position order then. Variations a seed picks:
buffering or not, dated observations, a retention window, messages stamped out of order (``created_at`` earlier
than the one before), a clear in the middle, and resource scope with two threads of one user interleaved.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from om_stream.core.commands import Command, ContextSpec, PersistMessage, PublishContext
from om_stream.core.engine import record_key
from om_stream.core.inputs import ClearRecord, MessageAppended
from om_stream.core.messages import Message
from om_stream.core.state import RecordState
from om_stream.replay.shapes import SHAPES, generate
from om_stream.runtime.reference_memo import RenderedThreads
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_refs import ByReference, Sent, by_reference
from tests.support.sim import Outcome, Sim

__all__ = ["Replayed", "Variation", "first_thread_by_reference", "rendered_afresh", "replayed_contexts", "variation"]


@dataclass(frozen=True)
class Variation:
    shape: str
    seed: int
    turns: int
    options: dict[str, Any]
    scope: str = "thread"
    retention_days: int | None = None
    skewed: bool = False  # some messages stamped up to a day before the message they follow
    clear_at: int | None = None  # the turn after which the record is cleared
    dated: bool = False
    second_shape: str | None = None  # resource scope: a second thread of the same user, turns interleaved


@dataclass(frozen=True)
class Replayed:
    """One published context: its spec, the record rendered from it, and the thread's messages in position order
    (ids) when it was published."""

    spec: ContextSpec
    record: ContextRecord
    order: tuple[str, ...]
    pinnable: str | None  # the thread's open turn message when it was observed (it may be pinned before the run)
    messages: dict[str, Message] = field(repr=False)


def variation(seed: int) -> Variation:
    """The variation seed ``seed`` picks (each dimension drawn independently, so every combination turns up)."""
    rng = random.Random(f"variation:{seed}")
    options: dict[str, Any] = {"observation": {"messageTokens": rng.choice([60, 150, 400])},
                               "reflection": {"observationTokens": rng.choice([40, 120, 600])},
                               "temporalMarkers": rng.random() < 0.5}
    resource = rng.random() < 0.3
    if rng.random() < 0.5 or resource:  # resource scope has no async buffering
        options["observation"]["bufferTokens"] = False
    else:
        options["observation"].update(bufferTokens=rng.choice([0.2, 0.5]), bufferActivation=rng.choice([0.5, 1.0]),
                                      blockAfter=rng.choice([1.2, 2.0]))
    shapes = sorted(SHAPES)
    return Variation(
        shape=rng.choice(shapes), seed=seed, turns=rng.randint(8, 30), options=options,
        scope="resource" if resource else "thread",
        retention_days=rng.choice([None, None, 1, 2]), skewed=rng.random() < 0.4,
        clear_at=rng.randint(3, 8) if rng.random() < 0.25 else None, dated=rng.random() < 0.5,
        second_shape=rng.choice(shapes) if resource else None)


def _outcomes(seed: int) -> Any:
    rng = random.Random(f"outcomes:{seed}")

    def outcome(_request: object) -> Outcome:
        roll = rng.random()
        delay = rng.choice([100, 1_000, 30_000, 120_000])
        if roll < 0.7:
            return Outcome(delay_ms=delay)
        if roll < 0.8:
            return Outcome(ok=False, delay_ms=delay)
        if roll < 0.9:
            return Outcome(delay_ms=delay, text="")
        return Outcome(lost=True)

    return outcome


def _changed(message: Message, **fields: Any) -> Message:
    """``message`` with other field values, validated again: ``model_copy`` would keep the cached ``created_at_ms``
    and ``compact_json`` of the original."""
    return Message.model_validate({**{name: getattr(message, name) for name in Message.model_fields}, **fields})


def _messages(v: Variation) -> list[Message]:
    """The messages in the order the agents publish them: one conversation, or two interleaved turn by turn (the
    second shifted so that both run at once)."""
    first = generate(v.shape, v.turns, seed=v.seed).turns()
    if v.second_shape is None:
        return [m for turn in first for m in turn.messages]
    second = generate(v.second_shape, v.turns, seed=v.seed + 1).turns()
    out: list[Message] = []
    for one, two in zip(first, second, strict=False):
        out.extend(one.messages)
        out.extend(_changed(m, thread_id=f"{m.thread_id}-b", message_id=f"b:{m.message_id}",
                            resource_id=one.messages[0].resource_id) for m in two.messages)
    return out


def rendered_afresh(sim: Sim, spec: ContextSpec) -> ContextRecord:
    """The context ``spec`` renders at this moment from the store alone, as the definition: the system blocks made
    anew, not taken from what the worker remembers of the thread's last ones (``Effects.rendered_threads``, which
    this leaves as it found)."""
    effects = sim.host.effects
    remembered, effects.rendered_threads = effects.rendered_threads, RenderedThreads()
    try:
        return sim._loop.run_until_complete(effects.context(spec, now_ms=sim.now))
    finally:
        effects.rendered_threads = remembered


def replayed_contexts(v: Variation, on_publish: Callable[[Sim, ContextSpec, ContextRecord], None] | None = None,
                      ) -> Iterator[Replayed]:
    """Every context the variation publishes, in publication order. ``on_publish`` sees each one at the moment it is
    published, beside the simulation (its store and content cache as they are then)."""
    sim = Sim(v.options, outcome=_outcomes(v.seed), scope=v.scope, retention_days=v.retention_days, dated=v.dated)
    messages = _messages(v)
    sim.now = messages[0].created_at_ms - 1_000
    rng = random.Random(f"skew:{v.seed}")
    order: dict[str, list[str]] = {}
    found: list[Replayed] = []

    def watch(sim_: Sim, _before: RecordState, after: RecordState, commands: list[Command]) -> None:
        for command in commands:
            if isinstance(command, PersistMessage):
                order.setdefault(command.message.thread_id, []).append(command.message.message_id)
        for command in commands:
            if isinstance(command, PublishContext):
                spec = command.spec
                record = rendered_afresh(sim_, spec)
                if on_publish is not None:
                    on_publish(sim_, spec, record)
                thread = after.threads[spec.thread_id]
                turn = None if thread.turn_answered or thread.turn_message is None else thread.turn_message.id
                pinnable = turn if turn is not None and all(m.id != turn for m in after.unobserved) else None
                found.append(Replayed(spec, record, tuple(order.get(spec.thread_id, ())), pinnable, sim_.messages))

    sim.checks.append(watch)
    turn_of: dict[str, int] = {}
    for published in messages:
        sim.run_until(max(sim.now, published.created_at_ms))
        message = published
        if v.skewed and rng.random() < 0.15:  # stamped before the message it follows: an agent's clock behind
            message = _changed(published, created_at=published.created_at - timedelta(
                minutes=rng.choice([1, 30, 1_200, 1_435, 2_875])))
        key = record_key(sim.config.scope, message.thread_id, message.resource_id)
        sim.apply(key, message.resource_id, MessageAppended(message))
        turn = turn_of.setdefault(message.thread_id, 0)
        if message.role == "assistant" and not message.tool_call_ids():
            turn_of[message.thread_id] = turn + 1
            if v.clear_at is not None and turn + 1 == v.clear_at:
                sim.apply(key, message.resource_id, ClearRecord(message.thread_id))
        yield from found
        found.clear()
    sim.settle()
    yield from found


def first_thread_by_reference(seed: int) -> list[tuple[ByReference, ContextRecord]]:
    """The v2 records the worker would publish for each context of the first thread of ``variation(seed)``, in
    order, each beside the v1 record it stands for."""
    out: list[tuple[ByReference, ContextRecord]] = []
    sent: Sent | None = None
    contexts = list(replayed_contexts(variation(seed)))
    for seen in contexts:
        if seen.spec.thread_id != contexts[0].spec.thread_id:
            continue
        published, sent = by_reference(seen.record, pinned_message_id=seen.spec.pinned_message_id,
                                       run_ids=seen.spec.message_ids, expire_before=seen.spec.expire_before,
                                       previous=sent)
        out.append((published, seen.record))
    return out
