"""The soak's fake provider (``bench/soak_judge.py``) through the real engine: the embedded runner, the gateway,
litellm and the fake OpenAI server failing a tenth of its calls. Every user message is found exactly once in each
thread's newest context after observations, activations and reflections, and no request is answered twice; so a
``lost``, ``duplicated`` or ``paid twice`` that ``make bench-soak`` reports comes from the system, not from its
provider."""

from __future__ import annotations

from typing import Any

from om_stream.adapters.gateway import ModelGateway
from om_stream.runtime.embedded import Memory
from om_stream.testing.fake_openai import FailurePlan, FakeOpenAI
from om_stream.wire.codec import encode
from tests.support.bench import load_bench
from tests.support.cluster import turn_text
from tests.support.scripted_provider import fast_settings
from tests.support.worker import message_record

judge = load_bench("soak_judge")
soak = load_bench("soak")
THREADS, TURNS = 4, 160


async def test_every_user_message_survives_observation_and_reflection_once_and_nothing_is_paid_twice() -> None:
    ledger = judge.ProviderLedger()
    contexts = judge.ContextJudge()
    plan = FailurePlan(rate=0.1, seed=28, kinds=("429", "500", "503"), retry_after=0.01)
    options: dict[str, Any] = {**soak.OPTIONS, "model": "openai/gpt-4o-mini"}
    with FakeOpenAI(default=judge.answer, failures=plan, keep_requests=8, on_answer=ledger.heard) as srv:
        memory = Memory(options, model=ModelGateway(fast_settings(srv, max_retries=4)))
        async with memory:
            for index in range(TURNS):
                for n in range(THREADS):
                    thread = f"t{n}"
                    role = "user" if index % 2 == 0 else "assistant"
                    record = message_record(thread, index, role, turn_text(thread, index), resource=f"user-{thread}")
                    record.pop("schema")  # the wire envelope's field: the engine takes the message itself
                    context = await memory.add_message(record)
                    assert context is not None
                    contexts.seen(thread, encode(context))
            await memory.settle()
            for n in range(THREADS):
                final = await memory.context(f"t{n}")
                assert final is not None
                contexts.seen(f"t{n}", encode(final))
                state = memory.state(f"t{n}")
                assert state is not None and state.generation >= 2, "reflections ran"
        assert srv.received > ledger.answers > 0  # failures were answered too, and are not counted
    assert contexts.verdict({f"t{n}": TURNS for n in range(THREADS)}) == {
        "lost": 0, "duplicated": 0, "regressed_threads": 0, "two_contents_threads": 0}
    assert ledger.summary()["paid_twice"] == 0
