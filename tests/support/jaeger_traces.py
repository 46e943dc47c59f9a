"""Reading traces back from Jaeger's query API, and drawing one as a tree (the picture docs/operate.md shows).

``GET /api/traces/{trace id}`` answers in Jaeger's JSON model: spans with ``operationName``, ``references``
(``CHILD_OF`` the parent; a span's links come as further references), ``tags`` and the ``processID`` whose
``serviceName`` says which process wrote the span.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TraceSpan:
    span_id: str
    trace_id: str
    name: str
    service: str
    parent: str | None  # the CHILD_OF reference within the same trace
    references: tuple[tuple[str, str, str], ...]  # (refType, traceID, spanID), the parent included
    tags: dict[str, Any]
    start_us: int
    duration_us: int


@dataclass(frozen=True)
class Trace:
    spans: tuple[TraceSpan, ...]

    def named(self, name: str) -> list[TraceSpan]:
        return [s for s in self.spans if s.name == name]

    def by_id(self, span_id: str) -> TraceSpan | None:
        return next((s for s in self.spans if s.span_id == span_id), None)

    def children(self, span: TraceSpan, name: str | None = None) -> list[TraceSpan]:
        return [s for s in self.spans if s.parent == span.span_id and (name is None or s.name == name)]

    def values(self) -> list[str]:
        """Every tag value and log field of every span, as text (what a privacy check searches)."""
        return [str(v) for s in self.spans for v in s.tags.values()]

    def tree(self) -> str:
        """The trace as an indented tree: service, span, duration, and the tags that say what it was."""
        lines: list[str] = []
        shown = ("gen_ai.operation.name", "gen_ai.request.model", "gen_ai.response.model",
                 "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "gen_ai.response.finish_reasons",
                 "om.input", "om.commands", "om.store.commands", "om.cycle.kind", "om.context.version",
                 "messaging.destination.name", "om.decode.duration_ms")

        def walk(span: TraceSpan, depth: int) -> None:
            tags = ", ".join(f"{k}={span.tags[k]}" for k in shown if k in span.tags)
            links = sum(1 for ref in span.references if ref[2] != span.parent)
            extra = f" [{links} link{'s' if links != 1 else ''}]" if links else ""
            lines.append(f"{'  ' * depth}{span.name} ({span.service}, {span.duration_us / 1000:.1f} ms){extra}"
                         f"{'  ' + tags if tags else ''}")
            for child in sorted(self.children(span), key=lambda s: s.start_us):
                walk(child, depth + 1)

        ids = {s.span_id for s in self.spans}
        for root in sorted((s for s in self.spans if s.parent not in ids), key=lambda s: s.start_us):
            walk(root, 0)
        return "\n".join(lines)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def read_trace(query: str, trace_id: str) -> Trace | None:
    try:
        body = _get(f"{query}/api/traces/{trace_id}")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise
    data = body.get("data") or []
    return _parse(data[0]) if data else None


def _parse(found: dict[str, Any]) -> Trace:
    services = {pid: p["serviceName"] for pid, p in found["processes"].items()}
    spans = []
    for raw in found["spans"]:
        refs = tuple((r["refType"], r["traceID"], r["spanID"]) for r in raw.get("references") or [])
        parent = next((r[2] for r in refs if r[0] == "CHILD_OF" and r[1] == raw["traceID"]), None)
        tags = {t["key"]: t["value"] for t in raw.get("tags") or []}
        for log in raw.get("logs") or []:
            for item in log.get("fields") or []:
                tags[f"log.{item['key']}"] = item["value"]
        spans.append(TraceSpan(raw["spanID"], raw["traceID"], raw["operationName"], services[raw["processID"]],
                               parent, refs, tags, raw["startTime"], raw["duration"]))
    return Trace(tuple(spans))


def find_traces(query: str, service: str, operation: str, *, since_us: int, limit: int = 200) -> list[Trace]:
    """The traces holding a span of ``service`` named ``operation`` that started after ``since_us`` (epoch µs)."""
    params = urllib.parse.urlencode({"service": service, "operation": operation, "start": since_us,
                                     "end": int(time.time() * 1_000_000) + 1_000_000, "limit": limit})
    return [_parse(raw) for raw in _get(f"{query}/api/traces?{params}").get("data") or []]


def answered(trace: Trace) -> bool:
    """The trace holds a handling of a message whole: an ``om.ingest`` span with an ``om.context publish`` under it.

    What a wait asserts on must be what it waits for: a span reaches the backend in the exporter's batch after it
    ends, and an ingest span ends after its children, once its batch has committed, which can be after the agent
    read the context it published. A trace with the publish can therefore still miss its ingest.
    """
    return any(trace.children(ingest, "om.context publish") for ingest in trace.named("om.ingest"))


async def wait_trace(query: str, trace_id: str, complete: Callable[[Trace], bool], *,
                     timeout: float = 60.0) -> Trace:
    """The trace once ``complete`` holds for it (spans arrive in the exporters' batches)."""
    deadline = time.monotonic() + timeout
    trace = None
    while time.monotonic() < deadline:
        trace = await asyncio.to_thread(read_trace, query, trace_id)
        if trace is not None and complete(trace):
            return trace
        await asyncio.sleep(0.5)
    raise AssertionError(f"trace {trace_id} incomplete after {timeout}s:\n"
                         f"{trace.tree() if trace is not None else '(not found)'}")
