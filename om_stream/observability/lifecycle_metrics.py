"""Lifecycle metrics counted from the core's typed events: what a published ``data-om-*`` event counts
(cycles by kind and outcome, activations, generations, condensations, compression, purges, erasures), and how
long each activated chunk waited in the buffer, from the activation events a step emitted.

Each event class is matched by its type, never by its ``data-om-*`` name or by probing for fields: an event class
the core adds counts only ``om_events_published_total`` until it is given a case here. The metric names, labels
and values are those the dashboards (``grafana/``) and ``docs/operate.md`` name.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from om_stream.core.commands import Command, EmitEvent
from om_stream.core.events import (
    ActivationEvent,
    BufferingEndEvent,
    BufferingFailedEvent,
    CondensationEvent,
    ErasedEvent,
    ExpiredEvent,
    ObservationEndEvent,
    ObservationFailedEvent,
    OMEvent,
)
from om_stream.core.state import RecordState
from om_stream.observability.metrics import Metrics

__all__ = ["activation_waits", "count_event"]


def count_event(metrics: Metrics, event: OMEvent) -> None:
    """What one published event counts."""
    metrics.events_published.labels(event.event_type).inc()
    if isinstance(event, ObservationEndEvent):
        _cycle(metrics, event.operation_type, "sync", "ok")
        if event.operation_type == "reflection":
            metrics.generations.inc()
        _compression(metrics, event.operation_type, event.tokens_observed, event.observation_tokens)
    elif isinstance(event, BufferingEndEvent):
        _cycle(metrics, event.operation_type, "buffer", "ok")
        _compression(metrics, event.operation_type, event.tokens_buffered, event.buffered_tokens)
    elif isinstance(event, ObservationFailedEvent):
        _cycle(metrics, event.operation_type, "sync", "failed")
    elif isinstance(event, BufferingFailedEvent):
        _cycle(metrics, event.operation_type, "buffer", "failed")
    elif isinstance(event, ActivationEvent):
        metrics.activations.labels(event.operation_type, event.triggered_by).inc()
        if event.operation_type == "reflection":
            metrics.generations.inc()
    elif isinstance(event, CondensationEvent):
        metrics.condensations.labels(event.reason).inc()
    elif isinstance(event, ExpiredEvent):
        metrics.expirations.inc()
        for store, count in event.removed.model_dump().items():
            metrics.expired_items.labels(store).inc(count)
    elif isinstance(event, ErasedEvent):
        metrics.erasures.labels(event.scope, str(event.found).lower()).inc()
        requested = datetime.fromisoformat(event.requested_at.replace("Z", "+00:00"))
        completed = datetime.fromisoformat(event.completed_at.replace("Z", "+00:00"))
        metrics.erasure_seconds.labels(event.scope).observe(max(0.0, (completed - requested).total_seconds()))


def _cycle(metrics: Metrics, operation: str, kind: str, outcome: str) -> None:
    (metrics.observations if operation == "observation" else metrics.reflections).labels(kind, outcome).inc()


def _compression(metrics: Metrics, operation: str, tokens_in: int, tokens_out: int) -> None:
    """Message tokens observed per observation token written (an observation that wrote nothing has no ratio)."""
    if operation == "observation" and tokens_in and tokens_out:
        metrics.compression_ratio.observe(tokens_in / tokens_out)


def activation_waits(before: RecordState, commands: Iterable[Command], now_ms: int) -> list[float]:
    """Seconds each chunk (or the buffered reflection) a step activated had waited since it was buffered: one per
    activation event the step emitted, the chunk it names (``EmitEvent.observations_from``) looked up in the state
    the step began with. A chunk buffered and activated within the same step waited for nothing it could measure
    and is not counted, as a chunk that left the buffer without an activation (a clear) is not."""
    activated = [chunk_id for command in commands
                 if isinstance(command, EmitEvent) and isinstance(command.event, ActivationEvent)
                 for chunk_id in command.observations_from]
    if not activated:
        return []
    buffered_at = {chunk.id: chunk.buffered_at for chunk in before.buffered}
    if before.buffered_reflection is not None:
        buffered_at[before.buffered_reflection.id] = before.buffered_reflection.buffered_at
    return [max(0.0, (now_ms - buffered_at[chunk_id]) / 1000) for chunk_id in activated if chunk_id in buffered_at]
