"""The embedded runner end to end: the library API, the offline model, replay reports and the demo."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from om_stream.adapters.offline_model import OfflineModel, states_personal_fact
from om_stream.core.config import OMConfig
from om_stream.core.messages import Message, TextPart, ToolCallPart, ToolResultPart
from om_stream.core.prompts.parsing import parse_observer_output, parse_reflector_output
from om_stream.core.prompts.tasks import ObserverTask, ReflectorTask
from om_stream.errors import InputRejected
from om_stream.ports import ChatRequest
from om_stream.replay.conversation import load_turns
from om_stream.replay.demo import run_demo, sample_conversation
from om_stream.replay.runner import replay
from om_stream.replay.synthetic import PLANTED_FACTS, write_jsonl
from om_stream.runtime.embedded import ManualClock, Memory

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def msg(index: int, role: str, text: str, thread: str = "t1", **parts: object) -> Message:
    return Message(message_id=f"m{index}", thread_id=thread, resource_id="r1", role=role,  # type: ignore[arg-type]
                   created_at=START + timedelta(minutes=index), parts=(TextPart(text=text),))


def test_offline_observer_marks_personal_facts_high_priority_and_groups_by_date() -> None:
    model = OfflineModel()
    messages = (msg(0, "user", "My name is Ada and I prefer tea."), msg(1, "assistant", "Noted, Ada."),
                msg(2, "user", "What's the weather like?"),
                Message(message_id="m3", thread_id="t1", resource_id="r1", role="assistant",
                        created_at=START + timedelta(days=1), parts=(ToolCallPart(tool_call_id="c1",
                                                                                   tool_name="weather",
                                                                                   args={"city": "Lisbon"}),)),
                Message(message_id="m4", thread_id="t1", resource_id="r1", role="tool",
                        created_at=START + timedelta(days=1), parts=(ToolResultPart(tool_call_id="c1",
                                                                                     tool_name="weather",
                                                                                     result={"sky": "clear"}),)))
    text = model.observe(ObserverTask(messages=messages, want_hints=True, want_thread_title=True))
    parsed = parse_observer_output(text, extractors=(), multi_thread=False)
    lines = parsed.observations.splitlines()
    assert lines[0] == "Date: Mar 2, 2026"
    assert lines[1].startswith("* 🔴 (09:00) User stated: My name is Ada")
    assert any(line.startswith("* 🟡 (09:02) User asked") for line in lines)
    assert "Date: Mar 3, 2026" in lines
    assert any("Assistant called weather" in line and "clear" in line for line in lines)
    assert parsed.current_task is not None and "weather" in parsed.current_task
    assert parsed.suggested_response
    title = parsed.thread_title or ""
    assert 2 <= len(title.split()) <= 5 and "Ada" in title


def test_offline_observer_is_deterministic() -> None:
    task = ObserverTask(messages=(msg(0, "user", "I have a deadline on 2026-04-01."),))
    assert OfflineModel().observe(task) == OfflineModel().observe(task)
    assert states_personal_fact("I have a deadline on 2026-04-01.")
    assert not states_personal_fact("Explain the CAP theorem.")


def test_offline_reflector_keeps_high_priority_lines_and_condenses_more_at_each_level() -> None:
    log = "\n".join(["Date: Mar 2, 2026"] + [f"* 🟡 (09:{i:02d}) detail number {i} about the plan" for i in range(20)]
                    + ["* 🔴 (10:00) User stated their name is Ada", "* ✅ (10:05) Deployed the fix",
                       "  * -> sub detail"])
    sizes = []
    for level in range(5):
        text = OfflineModel().reflect(ReflectorTask(observations=log, level=level, target_tokens=400,
                                                    input_tokens=400))
        parsed = parse_reflector_output(text)
        assert "User stated their name is Ada" in parsed.observations
        assert "Deployed the fix" in parsed.observations
        sizes.append(len(parsed.observations))
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[-1] < sizes[0]


async def test_offline_model_reports_usage_and_zero_cost() -> None:
    task = ObserverTask(messages=(msg(0, "user", "hello"),))
    response = await OfflineModel().complete(ChatRequest(role="observer", model="", messages=(), task=task))
    assert response.cost_usd == 0.0
    assert response.usage.output_tokens > 0


async def test_memory_library_api_returns_the_context_including_each_message() -> None:
    config = {"observation": {"messageTokens": 120, "bufferTokens": 0.25}, "reflection": {"observationTokens": 300}}
    clock = ManualClock(int(START.timestamp() * 1000))
    async with Memory(config, clock=clock) as om:
        for index in range(12):
            role = "user" if index % 2 == 0 else "assistant"
            message = msg(index, role, f"turn {index}: the staging cluster needs a new partition plan for friday")
            clock.now = message.created_at_ms
            context = await om.add_message(message)
            assert context is not None
            assert context.through_message_id == message.message_id
            await om.settle()
        context = await om.context("t1")
        assert context is not None
        assert context.observations.startswith("<observations>")
        assert om.events_by_type["data-om-activation"] >= 1
        await om.reflect("t1", guidance="keep dates")
        await om.settle()
        state = om.state("t1", "r1")
        assert state is not None
        assert state.generation >= 1
        await om.clear("t1")
        await om.settle()
        cleared = await om.context("t1")
        after = om.state("t1", "r1")
        assert cleared is not None and after is not None
        assert after.generation == 0 and cleared.generation == 0  # what OM made of the conversation is forgotten
        # the conversation is not: its messages are back, raw or observed again (the log is rebuilt from them)
        assert "turn 0:" in cleared.observations + " ".join(m.text for m in cleared.messages)


async def test_replay_report_has_every_field_of_the_issue(tmp_path: Path) -> None:
    path = tmp_path / "conversation.jsonl"
    write_jsonl(path, 120, seed=3)
    options = OMConfig.parse({"observation": {"messageTokens": 1500, "bufferTokens": 0.2, "bufferActivation": 0.8,
                                              "blockAfter": 1.2},
                              "reflection": {"observationTokens": 1500, "bufferActivation": 0.5, "blockAfter": 1.2}})
    report = (await replay(load_turns(path), options)).report()
    totals = report["totals"]
    for role in ("observer", "reflector"):
        assert set(totals[role]) == {"calls", "buffered", "sync", "input_tokens", "output_tokens"}
    assert totals["observer"]["calls"] > 0
    assert totals["tokens_sent_to_models"] == totals["observer"]["input_tokens"] + totals["reflector"]["input_tokens"]
    assert {"activations", "generations", "events_by_type", "cost_usd", "model_failures", "retries",
            "offline_fallback_calls"} <= set(totals)
    assert set(report["timing"]["overhead_ms"]) == {"mean", "p50", "p90"}
    assert "overhead_ms_first_half_mean" in report["timing"]
    assert len(report["per_turn"]) == 120
    assert set(report["per_turn"][0]) == {"turn", "active_message_tokens", "observation_tokens", "buffered_chunks",
                                          "generation_count", "context_message_tokens",
                                          "context_has_current_user_message"}
    assert set(report["final_state"]) == {"observation_tokens", "active_observation_lines", "generation_count"}
    assert report["invariants"]["turns_over_block_after"] == 0
    assert report["invariants"]["turns_without_current_user_message"] == 0


async def test_planted_facts_survive_observation_and_reflection(tmp_path: Path) -> None:
    path = tmp_path / "conversation.jsonl"
    write_jsonl(path, 300, seed=5)
    options = OMConfig.parse({"observation": {"messageTokens": 1500}, "reflection": {"observationTokens": 1200}})
    result = await replay(load_turns(path), options)
    assert result.memory is not None
    context = await result.memory.context("bench-thread")
    assert context is not None
    assert result.turns[-1].generation_count >= 1
    for fact in ("Ada Lovelace", "peanuts", "2026-03-14"):
        assert fact in context.observations, fact


def test_replay_cli_writes_the_report(tmp_path: Path) -> None:
    conversation = tmp_path / "c.jsonl"
    report = tmp_path / "report.json"
    write_jsonl(conversation, 40, seed=1)
    done = subprocess.run([sys.executable, "-m", "om_stream", "replay", str(conversation), "--report", str(report),
                           "--message-tokens", "800", "--buffer-tokens", "false", "--observation-tokens", "600"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    data = json.loads(report.read_text())
    assert data["totals"]["observer"]["buffered"] == 0  # --buffer-tokens false: synchronous only
    assert data["totals"]["observer"]["sync"] > 0
    assert "engine overhead per turn" in done.stdout


async def test_demo_runs_with_no_broker_and_no_key() -> None:
    out = io.StringIO()
    result = await run_demo(out)
    text = out.getvalue()
    assert "turn 1:" in text
    assert "activation" in text
    assert "Summary" in text and "compression" in text
    assert result.memory is not None
    assert result.memory.events_by_type.get("data-om-activation", 0) >= 1
    assert sample_conversation().exists()
    assert PLANTED_FACTS  # the generator and the demo share nothing but the format


async def test_tenants_sharing_message_ids_never_see_each_others_messages() -> None:
    def said(resource: str, thread: str, text: str) -> Message:
        return Message(message_id="m1", thread_id=thread, resource_id=resource, role="user", created_at=START,
                       parts=(TextPart(text=text),))

    async with Memory(clock=ManualClock(int(START.timestamp() * 1000))) as om:
        first = await om.add_message(said("ana", "t-ana", "ana's secret"))
        second = await om.add_message(said("bob", "t-bob", "bob's note"))  # the same message id, another tenant
        assert first is not None and second is not None
        assert [m.text for m in second.messages] == ["bob's note"]
        again = await om.context("t-ana")
        assert again is not None and [m.text for m in again.messages] == ["ana's secret"]
        with pytest.raises(InputRejected) as refused:
            await om.add_message(Message(message_id="m2", thread_id="t-ana", resource_id="bob", role="user",
                                         created_at=START, parts=(TextPart(text="let me in"),)))
        assert refused.value.reason == "resource_mismatch"
        after = await om.context("t-ana")
        assert after is not None and [m.text for m in after.messages] == ["ana's secret"]


async def test_the_library_recalls_and_searches_what_it_observed() -> None:
    from om_stream.adapters.embedders import OfflineMiniLMEmbedder

    facts = ["my sister Ingrid lives in Trondheim", "the budget review moved to the ninth of April",
             "I am allergic to peanuts", "the deployment freeze starts in December"]
    options = {"observation": {"messageTokens": 60, "bufferTokens": False}, "retrieval": {"vector": True}}
    async with Memory(options, clock=ManualClock(int(START.timestamp() * 1000)),
                      embedder=OfflineMiniLMEmbedder()) as om:
        for index, fact in enumerate(facts * 2):
            await om.add_message(msg(index, "user", f"{fact}, note {index}."))
        await om.settle()
        state = om.state("t1", "r1")
        assert state is not None and state.log, "the messages were observed"
        page = await om.recall("r1", {"threadId": "current", "limit": 3}, thread_id="t1")
        assert page.mode == "messages" and "Ingrid" in page.messages
        found = await om.recall("r1", {"mode": "search", "query": "which city does the sister live in"})
        assert found.mode == "search" and found.count > 0 and "Trondheim" in found.results
        context = await om.context("t1")
        assert context is not None and "## Group `" in context.observations
        assert "the recall tool" in context.system_blocks[0]
