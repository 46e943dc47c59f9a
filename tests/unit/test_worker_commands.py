"""The memory agent's handling of ``om.commands`` records, without a broker: the worker's batch driver
(``MemoryProcessor``) on the in-memory store, a dict as its state table and a list as its producer.

What it checks is the worker's side of the manual commands: an override for a thread no message reached goes to the
dead-letter topic with its own reason and makes no record; ``force`` and ``replace`` reach the engine; a clear
gives the thread's stored conversation back."""

from __future__ import annotations

import json

from om_stream.core.commands import RequestObservation
from om_stream.core.inputs import ModelResultArrived
from om_stream.runtime.internal_codec import decode_internal, encode_internal
from tests.support.processor_doubles import KAFKA, CommandWorker


async def test_an_override_for_a_thread_no_message_reached_is_dead_lettered_as_unknown_thread() -> None:
    worker = CommandWorker({"observation": {"messageTokens": 1_000}})
    await worker.command("nobody", "override", message_tokens=2_000)
    (letter,) = worker.producer.to(KAFKA.topic_dlq)
    assert dict(letter.headers)["om_dlq_reason"] == b"unknown_thread"
    body = json.loads(letter.value)
    assert body["reason"] == "unknown_thread" and body["source_topic"] == KAFKA.topic_commands
    assert "'nobody'" in body["detail"]
    assert worker.table.states == {}  # the refused command made no record
    assert worker.producer.to(KAFKA.topic_context) == []


async def test_overrides_merge_and_replace_reaches_the_engine() -> None:
    worker = CommandWorker({"observation": {"messageTokens": 1_000}})
    await worker.say("t1", 0)
    await worker.command("t1", "override", message_tokens=2_000)
    await worker.command("t1", "override", observation_tokens=3_000)
    state = worker.table.states["t1"]
    assert (state.override_message_tokens, state.override_observation_tokens) == (2_000, 3_000)
    await worker.command("t1", "override", observation_tokens=4_000, replace=True)
    state = worker.table.states["t1"]
    assert (state.override_message_tokens, state.override_observation_tokens) == (None, 4_000)
    assert worker.producer.to(KAFKA.topic_dlq) == []


async def test_observe_waits_for_the_threshold_unless_forced() -> None:
    worker = CommandWorker({"observation": {"messageTokens": 1_000, "bufferTokens": False}})
    for index in range(3):
        await worker.say("t1", index, "user" if index % 2 == 0 else "assistant")
    await worker.command("t1", "observe")
    assert worker.producer.to(KAFKA.topic_model_requests) == []
    await worker.command("t1", "observe", force=True)
    (request,) = worker.producer.to(KAFKA.topic_model_requests)
    assert b"t1-m0" in request.value


async def test_clear_gives_the_stored_conversation_back_to_the_context() -> None:
    worker = CommandWorker({"observation": {"messageTokens": 1_000, "bufferTokens": False}})
    for index in range(3):
        await worker.say("t1", index, "user" if index % 2 == 0 else "assistant")
    await worker.command("t1", "observe", force=True)
    request = decode_internal(worker.producer.to(KAFKA.topic_model_requests)[-1].value)
    assert isinstance(request, RequestObservation)
    await worker.send(KAFKA.topic_model_results, "t1", encode_internal(ModelResultArrived(
        cycle_id=request.cycle_id, attempt=request.attempt, operation="observation", ok=True,
        observations="* 🔴 (09:00) User needs a partition plan before Friday.")))
    observed = json.loads(worker.producer.to(KAFKA.topic_context)[-1].value)
    assert "partition plan before Friday" in observed["observations"]
    assert [m["message_id"] for m in observed["messages"]] == ["t1-m2"]  # the current turn's message stays

    await worker.command("t1", "clear")
    cleared = json.loads(worker.producer.to(KAFKA.topic_context)[-1].value)
    assert cleared["observations"] == ""
    assert [m["message_id"] for m in cleared["messages"]] == ["t1-m0", "t1-m1", "t1-m2"]
    assert worker.table.states["t1"].epoch == 1
