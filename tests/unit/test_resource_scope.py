"""Resource scope through the host (``tests/support/sim.py`` drives the host the worker uses): the other threads'
unobserved messages reach each thread's published context, and a multi-thread observation updates every thread's
metadata, each with its own ``data-om-thread-update``."""

from __future__ import annotations

from dataclasses import replace

from om_stream.core.commands import PersistThreadMetadata, RequestObservation, ThreadPrior
from om_stream.core.events import ThreadUpdateEvent
from om_stream.core.inputs import ModelResultArrived, ObserveNow, ThreadMetadataUpdate
from om_stream.core.labels import thread_label
from om_stream.runtime.internal_codec import decode_internal, encode_internal
from tests.support.sim import Outcome, Sim

OPTIONS = {"scope": "resource", "observation": {"messageTokens": 1000, "threadTitle": True}}


def test_the_published_context_of_a_thread_shows_the_resources_other_threads() -> None:
    sim = Sim(OPTIONS)
    sim.say("ta", "user", "My dog is called Biscuit.")
    sim.say("tb", "user", "What is my dog's name?")
    spec = sim.last_context("tb")
    assert spec.other_threads == (("ta", ("m1",)),)
    rendered = sim._loop.run_until_complete(sim.host.effects.context(spec, now_ms=sim.now))
    label = thread_label("ta", sim.config.obscure_thread_ids)
    block = next(b for b in rendered.system_blocks if "<other-conversation" in b)
    assert f'<other-conversation id="{label}">' in block and "My dog is called Biscuit." in block
    assert "What is my dog's name?" not in block
    assert rendered.continuation is None  # nothing observed yet: no memory to continue from


def _observe_by_hand(sim: Sim) -> RequestObservation:
    state = sim.state("ta")
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))
    request = sim.requests[-1]
    assert isinstance(request, RequestObservation)
    return request


def test_a_multi_thread_observation_updates_each_threads_title_hints_and_values() -> None:
    sim = Sim(OPTIONS, outcome=lambda _request: Outcome(lost=True))  # the test delivers the result itself
    sim.say("ta", "user", "My dog is called Biscuit.")
    sim.say("tb", "user", "I plan a trip to Lisbon.")
    request = _observe_by_hand(sim)
    assert request.thread_ids == ("ta", "tb")
    state = sim.state("ta")
    result = ModelResultArrived(
        cycle_id=request.cycle_id, attempt=request.attempt, operation="observation", ok=True,
        observations="<thread>…</thread>", per_thread={"ta": "* 🔴 User has a dog.", "tb": "* 🔴 User plans a trip."},
        current_task="Dog care", thread_title="Dog names", extracted_values={"mood": "calm"},
        thread_metadata={"ta": ThreadMetadataUpdate(current_task="Dog care", thread_title="Dog names",
                                                    extracted_values={"mood": "calm"}),
                         "tb": ThreadMetadataUpdate(suggested_response="Ask about dates",
                                                    thread_title="Trip planning",
                                                    extracted_values={"mood": "eager"})})
    commands = sim.apply(state.key, state.resource_id, result)
    updates = [c.event for c in sim.events if isinstance(c.event, ThreadUpdateEvent)]
    assert sorted((u.thread_id, u.new_title) for u in updates) == [("ta", "Dog names"), ("tb", "Trip planning")]
    persisted = {c.thread_id: c for c in commands if isinstance(c, PersistThreadMetadata)}
    assert (persisted["ta"].title, persisted["ta"].current_task, persisted["ta"].extracted_values) == (
        "Dog names", "Dog care", {"mood": "calm"})
    assert (persisted["tb"].title, persisted["tb"].suggested_response, persisted["tb"].extracted_values) == (
        "Trip planning", "Ask about dates", {"mood": "eager"})
    assert sim.last_context("tb").thread_title == "Trip planning"
    assert sim.last_context("tb").suggested_response == "Ask about dates"

    sim.say("ta", "user", "He likes the beach.")
    sim.say("tb", "user", "In May, probably.")
    again = _observe_by_hand(sim)
    priors = {p.thread_id: (p.title, p.current_task, p.suggested_response) for p in again.thread_priors}
    assert priors == {"ta": ("Dog names", "Dog care", None), "tb": ("Trip planning", None, "Ask about dates")}


def test_a_thread_scope_request_carries_no_thread_priors() -> None:
    sim = Sim({"observation": {"messageTokens": 1000}}, outcome=lambda _request: Outcome(lost=True))
    sim.say("t1", "user", "Hello there.")
    state = sim.state("t1")
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))
    request = sim.requests[-1]
    assert isinstance(request, RequestObservation) and request.thread_priors == ()


def test_per_thread_priors_and_metadata_survive_the_workers_internal_topics() -> None:
    sim = Sim(OPTIONS, outcome=lambda _request: Outcome(lost=True))
    sim.say("ta", "user", "My dog is called Biscuit.")
    sim.say("tb", "user", "I plan a trip to Lisbon.")
    request = replace(_observe_by_hand(sim), thread_priors=(ThreadPrior("ta", title="Dog names"),
                                                            ThreadPrior("tb", current_task="Plan the trip")))
    assert decode_internal(encode_internal(request)) == request
    result = ModelResultArrived(cycle_id=request.cycle_id, attempt=1, operation="observation", ok=True,
                                observations="x", thread_metadata={
                                    "ta": ThreadMetadataUpdate(thread_title="Dog names",
                                                               extracted_values={"mood": {"level": 2}})})
    assert decode_internal(encode_internal(result)) == result
