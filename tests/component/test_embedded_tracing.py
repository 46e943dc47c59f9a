"""The embedded runner traced on an application's own provider: an application span around ``add_message`` holds
the memory's ``om.ingest`` span and the host's spans under it; an observation's cycle span sits in the trace of the
input that asked for it, linked to the covered messages, with its model call as a child; no content unless opted
in; and no span at all unless the application asks (``Memory(tracing=...)``), whatever providers exist."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from opentelemetry import trace as otel_trace
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode
from pydantic import SecretStr

from om_stream.core.messages import Message, TextPart
from om_stream.errors import InputRejected
from om_stream.observability.tracing import Tracing
from om_stream.runtime.embedded import ManualClock, Memory
from om_stream.settings import TracingSettings
from om_stream.testing.fake_openai import FakeOpenAI, Reply
from tests.support.spans import attribute_values, parent_of, provider_into, span_id, spans_named

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SECRET = "the quartermaster hid zanzibar lanterns beneath the observatory"
# small enough that a few turns cross the threshold: a synchronous observation, no buffering
OBSERVING = {"observation": {"messageTokens": 40, "bufferTokens": False}}


def said(index: int, thread: str = "t1") -> Message:
    return Message(message_id=f"m{index}", thread_id=thread, resource_id="tenant-r1",
                   role="user" if index % 2 == 0 else "assistant", created_at=START + timedelta(minutes=index),
                   parts=(TextPart(text=f"{SECRET} number {index}"),))


def memory(options: dict[str, object], tracing: Tracing | None) -> Memory:
    return Memory(options, clock=ManualClock(int(START.timestamp() * 1000)), tracing=tracing)


async def test_an_added_message_is_handled_in_the_applications_span(exporter: InMemorySpanExporter) -> None:
    provider = provider_into(exporter)
    app = provider.get_tracer("the application")
    async with memory({"observation": {"messageTokens": 10_000}}, Tracing.from_provider(provider)) as om:
        with app.start_as_current_span("agent turn") as turn:
            await om.add_message(said(0))

    (ingest,) = spans_named(exporter, "om.ingest")
    assert ingest.context is not None and ingest.context.trace_id == turn.get_span_context().trace_id
    assert parent_of(ingest) == turn.get_span_context().span_id
    attributes = ingest.attributes or {}
    assert attributes["om.input"] == "MessageAppended" and attributes["om.message.role"] == "user"
    (decide,) = spans_named(exporter, "om.decide")
    assert parent_of(decide) == span_id(ingest)
    writes = spans_named(exporter, "om.store write")
    assert writes and all(parent_of(w) == span_id(ingest) for w in writes)
    values = attribute_values(exporter)  # the defaults: no content, no ids
    assert "zanzibar" not in values and "t1" not in values.split() and "tenant-r1" not in values


async def test_an_observation_is_traced_from_its_asker_to_its_result(exporter: InMemorySpanExporter) -> None:
    provider = provider_into(exporter)
    app = provider.get_tracer("the application")
    tracing = Tracing.from_provider(provider, TracingSettings(ids="hashed", id_key=SecretStr("k")))
    async with memory(OBSERVING, tracing) as om:
        for index in range(12):
            with app.start_as_current_span(f"agent turn {index}"):
                await om.add_message(said(index))
            await om.settle()
            if spans_named(exporter, "om.observe"):
                break

    (observe,) = spans_named(exporter, "om.observe")
    ingests = {span_id(s): s for s in spans_named(exporter, "om.ingest")}
    messages = [s for s in ingests.values() if (s.attributes or {})["om.input"] == "MessageAppended"]
    # a synchronous observation waits in om.blocking wait, a child of the ingest span of the message that asked
    (wait,) = spans_named(exporter, "om.blocking wait")
    asker = ingests[parent_of(wait) or 0]
    assert (asker.attributes or {})["om.input"] == "MessageAppended" and parent_of(observe) == span_id(wait)
    linked = {link.context.span_id for link in observe.links}
    assert linked and linked <= {span_id(m) for m in messages}
    assert span_id(asker) in linked  # the asker's message is among those it covers
    attributes = observe.attributes or {}
    assert attributes["gen_ai.operation.name"] == "update_memory"
    assert attributes["gen_ai.memory.record.count"] == len(linked)
    assert attributes["om.cycle.ok"] is True

    # its model call is its child, named and attributed as the GenAI conventions say
    calls = [s for s in exporter.get_finished_spans() if parent_of(s) == span_id(observe) and s.name != "om.ingest"]
    assert len(calls) == 1
    call = calls[0].attributes or {}
    assert call["gen_ai.operation.name"] == "chat" and call["om.role"] == "observer"
    assert calls[0].name == f"chat {call['gen_ai.request.model']}"
    assert call["gen_ai.usage.input_tokens"] > 0  # type: ignore[operator]

    # the result is applied in the cycle's trace
    (result,) = [s for s in ingests.values() if (s.attributes or {})["om.input"] == "ModelResultArrived"]
    assert parent_of(result) == span_id(observe)
    assert any(parent_of(d) == span_id(result) for d in spans_named(exporter, "om.decide"))
    assert (asker.attributes or {})["om.thread.hash"] == tracing.digest("t1")
    assert "zanzibar" not in attribute_values(exporter)


async def test_content_is_in_spans_only_when_the_application_opts_in(exporter: InMemorySpanExporter) -> None:
    tracing = Tracing.from_provider(provider_into(exporter), TracingSettings(content=True))
    async with memory(OBSERVING, tracing) as om:
        for index in range(12):
            await om.add_message(said(index))
            await om.settle()
            if spans_named(exporter, "om.observe"):
                break
    assert (spans_named(exporter, "om.ingest")[0].attributes or {})["om.message.text"] == f"{SECRET} number 0"
    (observe,) = spans_named(exporter, "om.observe")
    assert "om.observations" in (observe.attributes or {})


async def test_an_untraced_memory_records_nothing_even_inside_a_traced_application(
        exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = provider_into(exporter)
    # the application's provider is the process's global one too (set as the API would, undone after the test)
    monkeypatch.setattr(otel_trace, "_TRACER_PROVIDER", provider)
    assert otel_trace.get_tracer_provider() is provider
    async with memory(OBSERVING, None) as om:
        with provider.get_tracer("the application").start_as_current_span("agent turn"):
            for index in range(12):
                await om.add_message(said(index))
                await om.settle()
        state = om.state("t1")
    assert state is not None and state.log  # the Observer ran: there was something to trace
    assert [s.name for s in exporter.get_finished_spans()] == ["agent turn"]


def stranger(index: int) -> Message:
    """A message to thread t1 from another resource: refused (a thread belongs to one resource)."""
    return Message(message_id=f"x{index}", thread_id="t1", resource_id="tenant-r2", role="user",
                   created_at=START, parts=(TextPart(text="let me in"),))


@pytest.mark.parametrize("traced", [True, False])
async def test_a_refused_message_fails_the_memorys_span_never_the_applications(
        exporter: InMemorySpanExporter, traced: bool) -> None:
    provider = provider_into(exporter)
    tracing = Tracing.from_provider(provider) if traced else None
    async with memory({"observation": {"messageTokens": 10_000}}, tracing) as om:
        await om.add_message(said(0))
        with provider.get_tracer("the application").start_as_current_span("agent turn"), \
                pytest.raises(InputRejected):
            await om.add_message(stranger(1))

    (turn,) = spans_named(exporter, "agent turn")
    assert turn.status.status_code is StatusCode.UNSET  # the application decides what a refusal means to it
    refused = [s for s in spans_named(exporter, "om.ingest") if parent_of(s) == span_id(turn)]
    assert len(refused) == (1 if traced else 0)
    for span in refused:
        assert span.status.status_code is StatusCode.ERROR
        assert (span.attributes or {})["error.type"] == "resource_mismatch"


async def test_an_erase_is_traced_under_the_applications_span(exporter: InMemorySpanExporter) -> None:
    provider = provider_into(exporter)
    async with memory({"observation": {"messageTokens": 10_000}}, Tracing.from_provider(provider)) as om:
        await om.add_message(said(0))
        with provider.get_tracer("the application").start_as_current_span("forget me") as forget:
            receipt = await om.erase(thread_id="t1")
    assert receipt.found
    (ingest,) = [s for s in spans_named(exporter, "om.ingest") if (s.attributes or {})["om.input"] == "EraseRequested"]
    assert parent_of(ingest) == forget.get_span_context().span_id
    deletes = spans_named(exporter, "delete_memory om-stream")
    assert deletes and all(parent_of(d) == span_id(ingest) for d in deletes)


async def test_a_named_models_calls_are_reported_by_the_gateway_inside_the_cycle(
        exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch) -> None:
    observed = "<observations>\nDate: Mar 2, 2026\n* 🔴 (09:00) User planned a trip.\n</observations>"
    with FakeOpenAI(default=lambda _request: Reply(observed)) as provider_api:
        monkeypatch.setenv("OPENAI_API_BASE", provider_api.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        tracing = Tracing.from_provider(provider_into(exporter))
        async with Memory(OBSERVING, model="openai/gpt-5-mini", clock=ManualClock(int(START.timestamp() * 1000)),
                          tracing=tracing) as om:
            for index in range(12):
                await om.add_message(said(index))
                await om.settle()
                if spans_named(exporter, "om.observe"):
                    break
    (observe,) = spans_named(exporter, "om.observe")
    (call,) = spans_named(exporter, "chat openai/gpt-5-mini")
    assert parent_of(call) == span_id(observe)
    attributes = call.attributes or {}
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.usage.output_tokens"] > 0  # type: ignore[operator]
    assert "zanzibar" not in attribute_values(exporter)
