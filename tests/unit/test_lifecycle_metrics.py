"""What each kind of the core's lifecycle events counts when it is published (``observability.lifecycle_metrics``),
and the buffer→activation waits read from a step's activation events. The series and their labels are those the
dashboards and docs/operate.md name."""

from __future__ import annotations

from typing import Any

import pytest

from om_stream.core.commands import EmitEvent
from om_stream.core.events import (
    ActivationEvent,
    BufferingEndEvent,
    BufferingFailedEvent,
    BufferingStartEvent,
    CondensationEvent,
    ErasedCounts,
    ErasedEvent,
    ExpiredCounts,
    ExpiredEvent,
    MarkerConfig,
    ObservationEndEvent,
    ObservationFailedEvent,
    ObservationStartEvent,
    OMEvent,
    OperationType,
    ThreadUpdateEvent,
)
from om_stream.core.state import BufferedReflection, ChunkRef, RecordState
from om_stream.observability.lifecycle_metrics import activation_waits, count_event
from om_stream.observability.metrics import Metrics

IDS: dict[str, Any] = {"record_id": "t1", "thread_id": "t1"}
MARKER = MarkerConfig(message_tokens=30_000, observation_tokens=40_000, scope="thread")
AT = "2026-03-02T09:00:00.000Z"


def _end(operation: OperationType, tokens_in: int, tokens_out: int) -> ObservationEndEvent:
    return ObservationEndEvent(**IDS, cycle_id="c1", operation_type=operation, completed_at=AT, duration_ms=5,
                               tokens_observed=tokens_in, observation_tokens=tokens_out, observations="* obs")


def _buffered(operation: OperationType, tokens_in: int, tokens_out: int) -> BufferingEndEvent:
    return BufferingEndEvent(**IDS, cycle_id="c1", operation_type=operation, completed_at=AT, duration_ms=5,
                             tokens_buffered=tokens_in, buffered_tokens=tokens_out, observations="* obs")


def _failed(operation: OperationType) -> ObservationFailedEvent:
    return ObservationFailedEvent(**IDS, cycle_id="c1", operation_type=operation, failed_at=AT, duration_ms=5,
                                  tokens_attempted=100, error="timeout")


def _buffering_failed(operation: OperationType) -> BufferingFailedEvent:
    return BufferingFailedEvent(**IDS, cycle_id="c1", operation_type=operation, failed_at=AT, duration_ms=5,
                                tokens_attempted=100, error="timeout")


def _activation(operation: OperationType, trigger: Any = "threshold") -> ActivationEvent:
    return ActivationEvent(**IDS, cycle_id="b1", operation_type=operation, activated_at=AT, chunks_activated=1,
                           tokens_activated=400, observation_tokens=50, messages_activated=3, generation_count=0,
                           observations="", triggered_by=trigger, buffer_cycle_ids=["b1"], config=MARKER)


def _sample(metrics: Metrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


def _counted(*events: OMEvent) -> Metrics:
    metrics = Metrics.create()
    for event in events:
        count_event(metrics, event)
    return metrics


@pytest.mark.parametrize(("event", "series"), [
    (_end("observation", 800, 100), {("om_observations_total", ("sync", "ok")): 1}),
    (_end("reflection", 900, 300), {("om_reflections_total", ("sync", "ok")): 1, ("om_generations_total", ()): 1}),
    (_buffered("observation", 600, 200), {("om_observations_total", ("buffer", "ok")): 1}),
    (_buffered("reflection", 900, 300), {("om_reflections_total", ("buffer", "ok")): 1}),
    (_failed("observation"), {("om_observations_total", ("sync", "failed")): 1}),
    (_failed("reflection"), {("om_reflections_total", ("sync", "failed")): 1}),
    (_buffering_failed("observation"), {("om_observations_total", ("buffer", "failed")): 1}),
    (_buffering_failed("reflection"), {("om_reflections_total", ("buffer", "failed")): 1}),
    (_activation("observation", "ttl"), {("om_activations_total", ("observation", "ttl")): 1}),
    (_activation("reflection"), {("om_activations_total", ("reflection", "threshold")): 1,
                                 ("om_generations_total", ()): 1}),
])
def test_each_cycle_and_activation_event_counts_its_series_once(event: OMEvent,
                                                               series: dict[tuple[str, tuple[str, ...]], int]) -> None:
    metrics = _counted(event)
    assert _counts(metrics, "om_observations_total", "om_reflections_total", "om_activations_total",
                   "om_generations_total") == series
    assert _sample(metrics, "om_events_published_total", type=event.event_type) == 1


def _counts(metrics: Metrics, *names: str) -> dict[tuple[str, tuple[str, ...]], float]:
    """Every sample of ``names`` that counted something, by name and label values."""
    return {(s.name, tuple(s.labels.values())): s.value for m in metrics.registry.collect() for s in m.samples
            if s.name in names and s.value}


def test_an_observation_that_wrote_something_observes_its_compression_and_nothing_else_does() -> None:
    metrics = _counted(_end("observation", 800, 100), _buffered("observation", 600, 200),
                       _end("observation", 800, 0), _end("reflection", 900, 300), _buffered("reflection", 900, 300),
                       _failed("observation"))
    assert _sample(metrics, "om_compression_ratio_count") == 2
    assert _sample(metrics, "om_compression_ratio_sum") == pytest.approx(8.0 + 3.0)


def test_condensations_count_by_reason() -> None:
    events = [CondensationEvent(**IDS, condensed_at=AT, reason=reason, tokens_before=900, target_tokens=400)
              for reason in ("over_target", "over_target", "context_over_bound")]
    metrics = _counted(*events)
    assert _sample(metrics, "om_condensations_total", reason="over_target") == 2
    assert _sample(metrics, "om_condensations_total", reason="context_over_bound") == 1
    assert _sample(metrics, "om_condensations_total", reason="failed") == 0
    assert _sample(metrics, "om_events_published_total", type="data-om-condensation") == 3


def test_a_purge_receipt_counts_the_purge_and_what_each_store_lost() -> None:
    removed = ExpiredCounts(messages=4, observations=1, rewritten=2, entries=7, threads=0, cycle_results=3)
    metrics = _counted(ExpiredEvent(**IDS, expiry_id="x1", thread_ids=["t1"], retention_days=30, cutoff=AT,
                                    expired_at=AT, removed=removed))
    assert _sample(metrics, "om_expirations_total") == 1
    assert {store: _sample(metrics, "om_expired_items_total", store=store) for store in removed.model_dump()} == \
        removed.model_dump()


def test_an_erase_receipt_counts_the_erase_by_scope_and_outcome_and_how_long_it_took() -> None:
    removed = ErasedCounts(messages=2, observations=1, generations=0, threads=1, cycle_results=0, recall_points=0,
                           state_records=1, contexts=1)
    metrics = _counted(ErasedEvent(record_id="thread:t1", thread_id="t1", erase_id="e1", scope="thread",
                                   resource_id="r1", found=True, removed=removed, requested_at=AT,
                                   completed_at="2026-03-02T09:00:02.500Z", verified=True, parts=1))
    assert _sample(metrics, "om_erasures_total", scope="thread", found="true") == 1
    assert _sample(metrics, "om_erasure_seconds_sum", scope="thread") == pytest.approx(2.5)
    assert _sample(metrics, "om_events_published_total", type="data-om-erased") == 1


def test_events_that_count_no_lifecycle_series_are_only_published() -> None:
    start = ObservationStartEvent(**IDS, cycle_id="c1", operation_type="observation", started_at=AT,
                                  tokens_to_observe=10, thread_ids=["t1"], config=MARKER)
    buffering = BufferingStartEvent(**IDS, cycle_id="c1", operation_type="observation", started_at=AT,
                                    tokens_to_buffer=10, thread_ids=["t1"], config=MARKER)
    title = ThreadUpdateEvent(**IDS, cycle_id="c1", new_title="Launch plan", timestamp=AT)
    metrics = _counted(start, buffering, title)
    published = {s.labels["type"]: s.value for m in metrics.registry.collect() for s in m.samples
                 if s.name == "om_events_published_total"}
    assert published == {"data-om-observation-start": 1, "data-om-buffering-start": 1, "data-om-thread-update": 1}
    counted = {s.name for m in metrics.registry.collect() for s in m.samples
               if s.value and not s.name.endswith("_created") and s.name != "om_events_published_total"}
    assert counted == set()


def _chunk(chunk_id: str, at: int) -> ChunkRef:
    return ChunkRef(id=chunk_id, cycle_id=f"b-{chunk_id}", first_seq=0, last_seq=1, first_message_id="m0",
                    last_message_id="m1", message_count=2, message_tokens=100, tokens=20, last_message_at=at,
                    buffered_at=at, thread_ids=("t1",))


def _activated(*chunk_ids: str) -> list[EmitEvent]:
    return [EmitEvent("t1", _activation("observation"), f"ev-{chunk_id}", observations_from=(chunk_id,))
            for chunk_id in chunk_ids]


def test_each_activated_chunk_waited_from_its_buffering_to_the_step_that_activated_it() -> None:
    before = RecordState(key="t1", scope="thread", resource_id="r1", buffered=[_chunk("a", 1_000), _chunk("b", 4_000)],
                         buffered_reflection=BufferedReflection(id="rf", cycle_id="b-rf", generation=0, covers=1,
                                                                input_tokens=900, tokens=300, buffered_at=6_000))
    reflection = EmitEvent("t1", _activation("reflection"), "ev-rf", observations_from=("rf",))
    assert activation_waits(before, [*_activated("a", "b"), reflection], 11_000) == [10.0, 7.0, 5.0]
    # only an activation event counts: another event naming a chunk's text, or none (a clear), is no activation
    ended = EmitEvent("t1", _end("observation", 800, 100), "ev-end", observations_from=("a",))
    assert activation_waits(before, [ended], 11_000) == []
    assert activation_waits(before, [], 11_000) == []
    # a chunk the same step buffered and activated is not in the state the step began with
    assert activation_waits(RecordState(key="t1", scope="thread", resource_id="r1"), _activated("a"), 11_000) == []
