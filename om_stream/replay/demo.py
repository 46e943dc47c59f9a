"""``om-stream demo``: a sample conversation through Observational Memory, in under a minute, with no broker and no
API key. It shows, as the conversation goes, the lifecycle events and the context an agent would receive, then a
summary of what memory did and what it cost; last, a short shared thread (two people and two agents in one support
channel), whose observations say who stated, asked or did what."""

from __future__ import annotations

import importlib.resources
import textwrap
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from om_stream.core.config import OMConfig
from om_stream.core.events import OMEvent
from om_stream.core.messages import Author, Message, Role, TextPart
from om_stream.ports import ChatModel
from om_stream.replay.conversation import Turn, load_turns
from om_stream.replay.runner import ReplayResult, replay
from om_stream.runtime.clock import ManualClock
from om_stream.runtime.embedded import Memory
from om_stream.wire.context import ContextRecord

__all__ = ["DEMO_OPTIONS", "SHARED_THREAD", "run_demo", "sample_conversation"]

# Small thresholds so a short conversation shows buffering, activation and reflection; the reflection threshold
# leaves the condensed log room for every fact the user asked to keep (tests/component/test_demo_memory.py).
DEMO_OPTIONS: dict[str, Any] = {
    "observation": {"messageTokens": 500, "bufferTokens": 0.25, "bufferActivation": 0.8, "blockAfter": 1.2,
                    "threadTitle": True},
    "reflection": {"observationTokens": 600, "bufferActivation": 0.5, "blockAfter": 1.2},
    "temporalMarkers": True,
}


_ANA = Author(id="u-ana", name="Ana", kind="human")
_BEN = Author(id="u-ben", name="Ben", kind="human")
_BILLING = Author(id="billing-agent", kind="agent")
_SUPPORT = Author(id="support-agent", kind="agent")
# A support channel of one customer: who wrote each message is part of it (om.message/v1 ``author``)
SHARED_THREAD: tuple[tuple[Role, Author, str], ...] = (
    ("user", _ANA, "Our March invoice charged the Pro plan twice, 49 EUR each time."),
    ("user", _BEN, "I own the account: refund it to the card ending 4242, not as credit."),
    ("assistant", _BILLING, "I found the duplicate 49 EUR charge and refunded it to the card ending 4242."),
    ("user", _ANA, "Thanks! Can you send the corrected invoice to finance@acme.example?"),
    ("assistant", _SUPPORT, "Done: corrected invoice INV-0342 goes out to finance today, before 17:00 Berlin time."),
)
_SHARED_START = datetime.fromisoformat("2026-03-02T14:00:00+00:00")


def sample_conversation() -> Path:
    resource = importlib.resources.files("om_stream.replay") / "data" / "sample_conversation.jsonl"
    return Path(str(resource))


def _describe(event: OMEvent) -> str | None:
    data = event.model_dump(by_alias=False)
    kind = event.event_type.removeprefix("data-om-")
    op = data.get("operation_type", "")
    if kind == "status":
        return None
    if kind in ("buffering-start", "observation-start"):
        return f"{kind} ({op}): {data.get('tokens_to_buffer') or data.get('tokens_to_observe')} tokens in"
    if kind in ("buffering-end", "observation-end"):
        return (f"{kind} ({op}): {data.get('tokens_buffered') or data.get('tokens_observed')} tokens → "
                f"{data.get('buffered_tokens') or data.get('observation_tokens')} tokens of observations")
    if kind == "activation":
        return (f"activation ({op}, {data['triggered_by']}): {data['chunks_activated']} chunk(s), "
                f"{data['tokens_activated']} tokens out of the window, generation {data['generation_count']}")
    if kind.endswith("failed"):
        return f"{kind} ({op}): {data.get('error')}"
    if kind == "thread-update":
        return f"thread title: {data.get('new_title')!r}"
    if kind == "temporal-marker":
        return f"temporal marker: {data.get('gap_text')} later"
    return kind


def _print_context(context: ContextRecord, out: TextIO) -> None:
    out.write(f"    context v{context.version}: {len(context.system_blocks)} system blocks, "
              f"{context.tokens.observations} observation tokens, {len(context.messages)} raw messages "
              f"({context.tokens.messages} tokens), generation {context.generation}\n")
    if context.observations:
        lines = [line for line in context.observations.splitlines() if line.strip()][1:-1]
        shown = lines[-4:]
        for line in shown:
            out.write("      │ " + textwrap.shorten(line, 110) + "\n")
    if context.hints.current_task:
        out.write("      ↳ current task: " + textwrap.shorten(context.hints.current_task, 100) + "\n")


async def run_demo(out: TextIO, *, model: ChatModel | None = None, model_label: str = "offline",
                   conversation: Path | None = None, options: dict[str, Any] | None = None) -> ReplayResult:
    turns = load_turns(conversation or sample_conversation())
    config = OMConfig.parse(options or DEMO_OPTIONS)
    out.write(f"om-stream demo — {len(turns)} turns through Observational Memory (model: {model_label})\n")
    out.write(f"thresholds: observe at {config.observation.message_tokens} message tokens, reflect at "
              f"{config.reflection.observation_tokens} observation tokens\n\n")
    pending: list[str] = []

    def on_event(event: OMEvent, _event_id: str) -> None:
        line = _describe(event)
        if line:
            pending.append(line)

    def on_turn(turn: Turn, context: ContextRecord | None, _memory: Memory) -> None:
        first = next((m for m in turn.messages if m.role == "user"), turn.messages[0])
        out.write(f"▶ turn {turn.number}: {textwrap.shorten(first.text, 90)}\n")
        for line in pending:
            out.write(f"    · {line}\n")
        pending.clear()
        if context is not None and (turn.number % 5 == 0 or turn.number == len(turns)):
            _print_context(context, out)

    clock = ManualClock(turns[0].messages[0].created_at_ms)
    memory = Memory(config, model=model, clock=clock, on_event=on_event)
    result = await replay(turns, config, on_turn=on_turn, memory=memory)
    _summary(result, turns, out, model_label)
    await _shared_thread(out, model)
    return result


async def _shared_thread(out: TextIO, model: ChatModel | None) -> None:
    """The shared thread, observed at once: the transcript the Observer reads names each message's author."""
    out.write("\nWho said what — a shared support thread: two people and two agents\n")
    clock = ManualClock(int(_SHARED_START.timestamp() * 1000))
    async with Memory(model=model, clock=clock) as memory:
        for i, (role, author, text) in enumerate(SHARED_THREAD):
            out.write(f"  {author.label} ({author.kind}): {text}\n")
            await memory.add_message(Message(
                message_id=f"support-{i}", thread_id="demo-support", resource_id="acme", role=role,
                created_at=_SHARED_START + timedelta(minutes=2 * i), parts=(TextPart(text=text),), author=author))
        await memory.observe("demo-support", force=True)
        await memory.settle()
        context = await memory.context("demo-support")
    observations = context.observations if context is not None else ""
    out.write("  observations:\n")
    for line in observations.splitlines():
        if line.strip().startswith(("*", "Date:")):
            indent = " " * (len(line) - len(line.lstrip()))
            out.write(f"      │ {indent}{textwrap.shorten(line, 110)}\n")


def _summary(result: ReplayResult, turns: list[Turn], out: TextIO, model_label: str) -> None:
    report = result.report()
    assert result.memory is not None
    memory = result.memory
    totals = report["totals"]
    messages = sum(len(t.messages) for t in turns)
    raw_tokens = sum(memory.accountant.message_tokens(m) for t in turns for m in t.messages)
    final = result.turns[-1]
    kept = final.observation_tokens + final.active_message_tokens
    calls = totals["observer"]["calls"] + totals["reflector"]["calls"]
    cost = totals["cost_usd"]
    out.write("\nSummary\n")
    rows: list[tuple[str, str]] = [
        ("messages", f"{messages} ({raw_tokens:,} tokens)"),
        ("observations", f"{report['final_state']['active_observation_lines']} lines, "
                         f"{final.observation_tokens:,} tokens, generation {final.generation_count}"),
        ("context now", f"{kept:,} tokens (observations + {final.active_message_tokens:,} raw)"),
        ("compression", f"{raw_tokens / max(1, kept):.1f}x"),
        ("model calls", f"{calls} (Observer {totals['observer']['calls']}, Reflector {totals['reflector']['calls']})"),
        ("model tokens", f"{totals['tokens_sent_to_models']:,} in, "
                         f"{totals['observer']['output_tokens'] + totals['reflector']['output_tokens']:,} out"),
        ("cost", "unknown" if cost is None else f"${cost:.4f} ({model_label})"),
        ("events", ", ".join(f"{k.removeprefix('data-om-')}={v}" for k, v in totals["events_by_type"].items())),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        out.write(f"  {key.ljust(width)}  {value}\n")

