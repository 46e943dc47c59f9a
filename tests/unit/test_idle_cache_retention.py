"""``activateAfterIdle: 'auto'`` and the actor's OpenAI prompt-cache retention, carried by ``om.message/v1``
(``prompt_cache_retention``): through the host (``tests.support.sim``) and the wire contract."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from om_stream.core.engine import record_key
from om_stream.core.inputs import MessageAppended
from om_stream.core.messages import Message, PromptCacheRetention, TextPart
from om_stream.core.ttl import HOUR, MINUTE, auto_ttl_ms
from om_stream.errors import WireDecodeError
from om_stream.wire.messages import MessageRecord
from om_stream.wire.schemas import decode_payload
from tests.support.engine_cases import TEN, buffered, events
from tests.support.sim import Sim

WORDS = " ".join(["w"] * 14)


def say(sim: Sim, role: str, text: str, *, model: str | None = None,
        retention: PromptCacheRetention | None = None, advance_ms: int = 1_000) -> None:
    sim.run_until(sim.now + advance_ms)
    message = Message(message_id=f"m{len(sim.messages) + 1}", thread_id="t1", resource_id="r1",
                      role=role,  # type: ignore[arg-type]
                      created_at=datetime.fromtimestamp(sim.now / 1000, UTC), parts=(TextPart(text=text),),
                      model=model, prompt_cache_retention=retention)
    sim.apply(record_key(sim.config.scope, "t1", "r1"), "r1", MessageAppended(message))


def a_buffered_turn(model: str, retention: PromptCacheRetention | None, *, on_user: bool = False) -> Sim:
    sim = Sim({"activateAfterIdle": "auto", **buffered()})
    say(sim, "user", WORDS, model=model if on_user else None, retention=retention if on_user else None)
    say(sim, "assistant", WORDS, model=None if on_user else model, retention=None if on_user else retention)
    sim.run_until(sim.now + 1_000)
    assert sim.state().buffered
    return sim


def idle_activations(sim: Sim, idle_minutes: int) -> list[object]:
    say(sim, "user", TEN, advance_ms=idle_minutes * MINUTE)
    return [e for e in events(sim, "data-om-activation") if e.triggered_by == "ttl"]


def test_an_openai_actor_keeping_its_cache_24h_is_not_activated_at_the_models_5_minutes() -> None:
    # gpt-5-mini's in-memory cache lasts 5 minutes; asked for '24h' retention it is kept past the hour's mark
    assert idle_activations(a_buffered_turn("openai/gpt-5-mini", "24h"), 6) == []
    assert idle_activations(a_buffered_turn("openai/gpt-5-mini", "24h"), 61)


def test_an_openai_actor_with_in_memory_retention_is_activated_after_5_minutes() -> None:
    # o3 keeps its cache an hour by default; 'in_memory' retention drops it after 5 minutes
    assert idle_activations(a_buffered_turn("openai/o3", "in_memory"), 6)
    assert idle_activations(a_buffered_turn("openai/o3", None), 6) == []


def test_the_retention_given_with_the_actors_model_on_any_message_counts() -> None:
    assert idle_activations(a_buffered_turn("openai/gpt-5-mini", "24h", on_user=True), 6) == []


def test_a_retention_is_only_openais() -> None:
    # the reference reads providerOptions.openai: an Anthropic actor's cache lifetime stays its provider's
    assert idle_activations(a_buffered_turn("anthropic/claude-sonnet-4-5", "24h"), 6)


def test_a_later_call_without_retention_goes_back_to_the_models_default() -> None:
    sim = a_buffered_turn("openai/gpt-5-mini", "24h")
    say(sim, "user", WORDS)
    say(sim, "assistant", WORDS, model="openai/gpt-5-mini")  # a new call, the provider's default retention

    assert idle_activations(sim, 6)


@pytest.mark.parametrize(("model", "retention", "ttl"), [
    ("openai/gpt-5-mini", "24h", HOUR),
    ("openai/gpt-5-mini", "in_memory", 5 * MINUTE),
    ("openai/gpt-5-mini", None, 5 * MINUTE),
    ("openai/o3", "in_memory", 5 * MINUTE),
    ("gpt-4.1", "24h", HOUR),  # a bare name is placed by its family
    ("google/gemini-2.5-flash", "in_memory", 24 * HOUR),
])
def test_auto_ttl_reads_an_openai_actors_retention_before_its_model_name(
        model: str, retention: PromptCacheRetention | None, ttl: int) -> None:
    assert auto_ttl_ms(model, retention) == ttl


def test_the_message_contract_carries_the_retention_and_refuses_other_values() -> None:
    raw = {"schema": "om.message/v1", "message_id": "m1", "thread_id": "t1", "resource_id": "r1",
           "role": "assistant", "created_at": "2026-03-01T09:00:00Z", "parts": [], "model": "openai/gpt-5-mini",
           "prompt_cache_retention": "24h"}

    decoded = decode_payload("om.message/v1", json.dumps(raw))

    assert isinstance(decoded, MessageRecord)
    assert decoded.to_message().prompt_cache_retention == "24h"
    with pytest.raises(WireDecodeError):
        decode_payload("om.message/v1", json.dumps({**raw, "prompt_cache_retention": "1h"}))
