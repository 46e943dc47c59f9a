"""``make bench-faults``: Observational Memory through litellm while the provider fails 30 % of its calls.

A 300-turn synthetic conversation is replayed through the embedded runner and the model gateway (litellm, model
``openai/gpt-5-mini``, priced from litellm's map) to the local fake OpenAI server, which answers like an Observer /
Reflector but fails 30 % of chat calls with a mix of 429 (with Retry-After), 500 and timeouts. The run must
complete and:

* lose no user message: each is covered by an active observation, or still in the thread's context at the end;
* never hand an agent a context with more unobserved message tokens than blockAfter (plus the message that just
  arrived): the replay report's ``invariants``.

It prints cost, failed attempts, failed cycles, retries and offline fallback calls, and exits 1 if a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from om_stream.adapters.gateway import GatewaySettings, ModelGateway
from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.core.config import OMConfig
from om_stream.replay.conversation import Turn, load_turns
from om_stream.replay.runner import ReplayResult, replay
from om_stream.replay.synthetic import write_jsonl
from om_stream.testing.fake_openai import FailurePlan, FakeOpenAI, RecordedRequest, Reply, Response

OPTIONS: dict[str, Any] = {
    "model": "openai/gpt-5-mini",
    "observation": {"messageTokens": 3000, "bufferTokens": 0.2, "bufferActivation": 0.8, "blockAfter": 1.2},
    "reflection": {"observationTokens": 4000, "bufferActivation": 0.5, "blockAfter": 1.2},
}
_SPEAKER = re.compile(r"^(User|Assistant)(?: \((\d\d:\d\d)\))?: (.*)$")


def _gist(text: str, words: int) -> str:
    parts = text.split()
    return " ".join(parts[:words]) + (" …" if len(parts) > words else "")


def observer_answer(history: str) -> str:
    """One line per user message (and a sub-line per assistant reply) of the transcript, like a terse Observer."""
    lines: list[str] = []
    clock = "09:00"
    for raw in history.splitlines():
        match = _SPEAKER.match(raw.strip())
        if not match:
            continue
        speaker, at, text = match.groups()
        clock = at or clock
        if speaker == "User":
            lines.append(f"* 🔴 ({clock}) User said: {_gist(text, 14)}")
        elif lines:
            lines.append(f"  * -> Assistant replied: {_gist(text, 8)}")
    if not lines:
        lines.append(f"* 🟡 ({clock}) The assistant worked with tools.")
    return "<observations>\nDate: Jan 5, 2026\n" + "\n".join(lines) + "\n</observations>"


def reflector_answer(observations: str) -> str:
    """Keeps the day headers and the newest 60 top-level lines, shortened: it always compresses."""
    kept = [line.strip() for line in observations.splitlines() if line.strip().startswith("* ")]
    return ("<observations>\nDate: Jan 5, 2026\n" + "\n".join(_gist(line, 10) for line in kept[-60:])
            + "\n</observations>")


def answer(request: RecordedRequest) -> Response:
    messages = request.messages
    text = str(messages[-1].get("content", "")) if messages else ""
    if "## Observations to reflect on" in text:
        body = text.split("## Observations to reflect on", 1)[1].split("## Your task", 1)[0]
        return Reply(reflector_answer(body))
    return Reply(observer_answer(text))


async def lost_user_messages(result: ReplayResult, turns: list[Turn]) -> tuple[int, list[str]]:
    """(user messages covered by an active observation, user messages neither observed nor in the context)."""
    memory = result.memory
    assert memory is not None
    assert isinstance(memory.store, InMemoryContentStore)
    observed: set[str] = set()
    for stored in memory.store.segments.values():
        if stored.status == "active" and stored.segment.kind == "observation":
            observed.update(stored.segment.message_ids)
    thread_id, resource_id = turns[0].thread_id, turns[0].messages[0].resource_id
    state = memory.state(thread_id, resource_id)
    unobserved = {m.id for m in state.unobserved} if state else set()
    context = await memory.context(thread_id)
    in_context = {m.message_id for m in context.messages} if context else set()
    users = [m.message_id for turn in turns for m in turn.messages if m.role == "user"]
    lost = [i for i in users if not ((i in observed and i not in unobserved) or i in in_context)]
    return sum(1 for i in users if i in observed and i not in unobserved), lost


async def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "conversation.jsonl"
        write_jsonl(path, args.turns, seed=args.seed)
        turns = load_turns(path)
    plan = FailurePlan(rate=args.failure_rate, seed=args.seed, kinds=("429", "500", "timeout"),
                       timeout_delay=args.timeout * 4, retry_after=args.retry_after)
    with FakeOpenAI(default=answer, failures=plan) as server:
        gateway = ModelGateway(GatewaySettings(
            api_bases={"*": server.base_url}, api_keys={"*": "fault-run"}, timeout_s=args.timeout,
            deadline_s=args.deadline, max_retries=args.retries, backoff_initial_s=0.05, backoff_max_s=0.5,
            retry_after_max_s=1.0, breaker_failures=6, breaker_cooldown_s=1.0))
        began = time.perf_counter()
        # the in-memory store: the loss check below reads its segments directly
        result = await replay(turns, OMConfig.parse(OPTIONS), model=gateway, drain=not args.no_drain,
                              store=InMemoryContentStore())
        wall = time.perf_counter() - began
        requests = server.requests
        faults = Counter(k for k in (plan.fault_for(i) for i in range(len([r for r in requests
                                                                          if r.path.endswith("/completions")])))
                         if k is not None)
    report = result.report()
    totals, invariants = report["totals"], report["invariants"]
    observed, lost = await lost_user_messages(result, turns)
    users = sum(1 for t in turns for m in t.messages if m.role == "user")
    figures = {
        "turns": len(turns),
        "user_messages": users,
        "model_calls": len(requests),
        "injected_faults": dict(sorted(faults.items())),
        "failed_attempts": gateway.failure_count,
        "failed_cycles": totals["model_failures"],
        "retries": totals["retries"],
        "offline_fallback_calls": totals["offline_fallback_calls"],
        "circuit_skips": gateway.stats.circuit_skips,
        "cost_usd": totals["cost_usd"],
        "cost_unknown_calls": totals["cost_unknown_calls"],
        "observer_calls": totals["observer"]["calls"],
        "reflector_calls": totals["reflector"]["calls"],
        "user_messages_observed": observed,
        "user_messages_lost": len(lost),
        "turns_over_block_after": invariants["turns_over_block_after"],
        "turns_without_current_user_message": invariants["turns_without_current_user_message"],
        "block_after_tokens": invariants["message_limit"],
        "wall_seconds": round(wall, 1),
    }
    print(json.dumps(figures, indent=2, ensure_ascii=False))
    ok = not lost and invariants["turns_over_block_after"] == 0 \
        and invariants["turns_without_current_user_message"] == 0
    if lost:
        print(f"LOST user messages: {lost[:10]}", file=sys.stderr)
    print("fault run: OK" if ok else "fault run: FAILED", file=sys.stderr if not ok else sys.stdout)
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--failure-rate", type=float, default=0.3)
    parser.add_argument("--timeout", type=float, default=0.5, help="per-call timeout (s)")
    parser.add_argument("--deadline", type=float, default=5.0, help="gateway deadline per call (s)")
    parser.add_argument("--retries", type=int, default=1, help="retries per call")
    parser.add_argument("--retry-after", type=float, default=0.2, help="Retry-After of the injected 429s (s)")
    parser.add_argument("--no-drain", action="store_true", help="do not wait for background cycles between messages")
    logging.basicConfig(level=logging.ERROR)  # failed cycles are expected here; the figures say how many
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
