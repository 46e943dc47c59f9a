"""A seeded generator of synthetic conversations in the replay format, for benchmarks and load tests.

Turns of varied length between a user and an assistant, about 12 % of them with tool calls returning long
results, and a few personal facts planted early (so a run can check they survive observation and reflection).
Each line is ``{"thread_id","resource_id","role","text","created_at","turn"}``; tool lines also carry
``"tool_name","tool_args","tool_call_id"`` and their text is the tool's result.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

__all__ = ["PLANTED_FACTS", "generate", "write_jsonl"]

PLANTED_FACTS = (
    "My name is Ada Lovelace and I work as a data engineer in Lisbon.",
    "I'm allergic to peanuts, so never suggest recipes with them.",
    "Our product launch deadline is 2026-03-14 and I must present to the board on 2026-03-10.",
    "I prefer answers in bullet points, with code in Python rather than Java.",
    "My daughter's birthday is on July 9 and she loves astronomy.",
)
_TOPICS = ("kafka consumer lag", "the quarterly budget", "a flaky integration test", "the cassandra schema",
           "a trip to Porto", "the onboarding document", "grafana dashboards", "a memory leak in the worker",
           "the helm chart values", "prompt caching costs", "the vendor contract", "the data retention policy")
_WORDS = ("the", "we", "should", "check", "whether", "latency", "throughput", "partition", "deploy", "review",
          "budget", "schedule", "metrics", "error", "retry", "timeout", "cluster", "query", "index", "window",
          "customer", "report", "summary", "design", "option", "tradeoff", "because", "however", "then", "after",
          "before", "value", "config", "service", "node", "table", "stream", "event", "alert", "threshold")
_TOOLS = ("search_docs", "run_query", "read_file", "fetch_metrics")


def _sentence(rng: random.Random, words: int) -> str:
    picked = [rng.choice(_WORDS) for _ in range(max(3, words))]
    return " ".join(picked).capitalize() + "."


def _paragraph(rng: random.Random, tokens: int) -> str:
    sentences: list[str] = []
    while sum(len(s.split()) for s in sentences) < tokens:
        sentences.append(_sentence(rng, rng.randint(6, 18)))
    return " ".join(sentences)


def _tool_result(rng: random.Random, tokens: int) -> str:
    rows = [{"id": i, "name": rng.choice(_WORDS), "value": round(rng.random() * 1000, 2),
             "note": _sentence(rng, rng.randint(4, 10))} for i in range(max(1, tokens // 28))]
    return json.dumps({"rows": rows, "count": len(rows)})


def generate(turns: int = 2000, *, seed: int = 42, thread_id: str = "bench-thread", resource_id: str = "bench-user",
             start: datetime | None = None) -> Iterator[dict[str, Any]]:
    rng = random.Random(seed)
    moment = start or datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    call = 0
    for turn in range(1, turns + 1):
        moment += timedelta(seconds=rng.choice([20, 45, 90, 180, 600, 3600]) if turn > 1 else 0)
        topic = rng.choice(_TOPICS)
        if turn <= len(PLANTED_FACTS) * 3 and turn % 3 == 1:
            text = f"{PLANTED_FACTS[turn // 3]} Also, can you help me with {topic}?"
        else:
            length = rng.choice([12, 25, 40, 60, 120, 250])
            text = f"About {topic}: {_paragraph(rng, length)}"
            if rng.random() < 0.3:
                text += " What do you suggest?"
        base = {"thread_id": thread_id, "resource_id": resource_id, "turn": turn}
        yield {**base, "role": "user", "text": text, "created_at": moment.isoformat()}
        if rng.random() < 0.12:
            for _ in range(rng.choice([1, 1, 2])):
                call += 1
                moment += timedelta(seconds=rng.randint(1, 5))
                tool = rng.choice(_TOOLS)
                yield {**base, "role": "tool", "tool_name": tool, "tool_args": {"query": topic, "limit": 50},
                       "tool_call_id": f"call-{call}", "created_at": moment.isoformat(),
                       "text": _tool_result(rng, rng.choice([600, 1200, 2500]))}
        moment += timedelta(seconds=rng.randint(2, 30))
        reply = _paragraph(rng, rng.choice([30, 60, 100, 160, 240]))
        yield {**base, "role": "assistant", "text": f"Regarding {topic}: {reply}", "created_at": moment.isoformat()}


def write_jsonl(path: Path, turns: int = 2000, *, seed: int = 42) -> int:
    """Write a conversation to ``path``; returns the number of lines."""
    lines = 0
    with path.open("w") as out:
        for line in generate(turns, seed=seed):
            out.write(json.dumps(line) + "\n")
            lines += 1
    return lines
