"""``make bench-tracing-cpu``: the memory agent's CPU per message with tracing off, and on at 0 %, 10 % and 100 %.

The end-to-end bench (``make bench-tracing``) measures throughput on real Kafka, where one trial differs from the
next by up to 25 % on this machine: a few per cent of tracing cost cannot be told apart there. This one measures
what tracing adds where it is paid, in the worker's own process: the real memory processor and host on the
in-memory store, records handed over in batches of ``--batch``, every span encoded as OTLP by a
``BatchSpanProcessor`` whose exporter encodes and then drops it (what a worker pays before the network), with the
worker's encoder (``otlp_encoding``) or, with ``--encoder sdk``, the SDK's. Figures:
process CPU time per message, each mode run ``--rounds`` times interleaved with the others, medians, and each mode's
extra CPU against tracing off in the same rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import random
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from om_stream.adapters.memory_store import InMemoryContentStore  # noqa: E402
from om_stream.core.config import OMConfig  # noqa: E402
from om_stream.core.tokens import TokenAccountant  # noqa: E402
from om_stream.observability.metrics import Metrics  # noqa: E402
from om_stream.observability.otlp_encoding import encode_request  # noqa: E402
from om_stream.observability.tracing import Tracing  # noqa: E402
from om_stream.runtime.effects import Effects  # noqa: E402
from om_stream.runtime.timers import TimerWheel  # noqa: E402
from om_stream.runtime.worker.kafka_records import SourceRecord  # noqa: E402
from om_stream.runtime.worker.processor import MemoryProcessor  # noqa: E402
from om_stream.settings import KafkaSettings, TracingSettings  # noqa: E402
from om_stream.wire.codec import encode  # noqa: E402
from om_stream.wire.messages import MessageRecord  # noqa: E402
from tests.support.processor_doubles import Producer, Table, words  # noqa: E402

KAFKA = KafkaSettings()
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
OPTIONS = {"observation": {"messageTokens": 100_000, "bufferTokens": False}}  # no model work: the ingest alone
TEXT = ("the ferry timetable changes next week for the whole island, and the lighthouse keeper moved the "
        "meeting to Friday; bring the signed forms and the spare key for the boathouse")


class EncodeAndDrop(SpanExporter):
    """Encodes every span as OTLP protobuf, as an OTLP exporter would before sending, and drops it."""

    sdk_encoder = False  # --encoder sdk

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self.sdk_encoder:
            encode_spans(spans).SerializeToString()
        else:
            encode_request(spans)
        self.spans += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.offset = 0

    def now_ms(self) -> int:
        return int(START.timestamp() * 1000) + self.offset * 1000


def tracing(ratio: float | None) -> tuple[Tracing, TracerProvider | None, EncodeAndDrop | None]:
    if ratio is None:
        return Tracing.off(), None, None
    exporter = EncodeAndDrop()
    provider = TracerProvider(sampler=ParentBased(TraceIdRatioBased(ratio)))
    provider.add_span_processor(BatchSpanProcessor(exporter, max_queue_size=65_536, schedule_delay_millis=200))
    traced = Tracing(tracer=provider.get_tracer("om_stream"), enabled=True, provider=provider, follows_parent=True)
    return traced.with_rules(TracingSettings()), provider, exporter


def batches(messages: int, threads: int, batch: int, upstream: float | None = None) -> list[list[SourceRecord]]:
    """The workload; with ``upstream``, each record carries the ``traceparent`` of a traced agent whose own sampler
    kept that share of its traces (the worker's parent-based sampler then follows it)."""
    chance = random.Random(7)
    records = []
    for n in range(messages):
        headers = [("content-type", b"application/json")]
        if upstream is not None:
            flags = "01" if chance.random() < upstream else "00"
            headers.append(("traceparent", f"00-{chance.getrandbits(128):032x}-{chance.getrandbits(64):016x}-"
                                           f"{flags}".encode()))
        thread, index = f"t{n % threads}", n // threads
        message = MessageRecord.model_validate({
            "message_id": f"t{n % threads}-m{index}", "thread_id": thread, "resource_id": f"r{n % threads}",
            "role": "user" if index % 2 == 0 else "assistant", "created_at": START + timedelta(minutes=index),
            "parts": [{"type": "text", "text": f"{TEXT} ({n})"}]})
        records.append(SourceRecord(topic=KAFKA.topic_messages, partition=0, offset=n, key=thread.encode(),
                                    value=encode(message), headers=headers,
                                    received_at=time.monotonic()))
    return [records[i:i + batch] for i in range(0, len(records), batch)]


async def one_run(ratio: float | None, messages: int, threads: int, batch: int,
                  upstream: bool = False) -> tuple[float, int]:
    """CPU seconds per message of one fresh processor over the workload, and the spans it exported. ``upstream``:
    the records come from agents traced at ``ratio`` (tracing off: from agents traced at 10 %)."""
    traced, provider, exporter = tracing(ratio)
    config = OMConfig.parse(OPTIONS).resolve()
    clock = Clock()
    processor = MemoryProcessor(
        kafka=KAFKA, config=config, accountant=TokenAccountant(words, message_overhead=1, conversation_overhead=0),
        effects=Effects(InMemoryContentStore(), config, count_text=words), publisher=Producer(), table=Table(),
        clock=clock, metrics=Metrics.create(), timers=TimerWheel(), tracing=traced)
    work = batches(messages, threads, batch, (0.1 if ratio is None else ratio) if upstream else None)
    gc.collect()  # the previous run's garbage is not this run's cost
    began = time.process_time()
    for records in work:
        clock.offset += 1
        assert await processor.process(records)
    if provider is not None:
        provider.force_flush()  # the exporter's encoding is part of the cost (it runs on a thread of this process)
    spent = time.process_time() - began
    if provider is not None:
        provider.shutdown()
    return spent / messages, exporter.spans if exporter is not None else 0


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--threads", type=int, default=200)
    parser.add_argument("--batch", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--upstream", action="store_true",
                        help="records carry a traced agent's traceparent, sampled by the agent at the same ratio")
    parser.add_argument("--encoder", choices=("om", "sdk"), default="om",
                        help="the worker's OTLP encoder (the default) or the SDK's")
    args = parser.parse_args()
    EncodeAndDrop.sdk_encoder = args.encoder == "sdk"
    modes: dict[str, float | None] = {"off": None, "0 %": 0.0, "10 %": 0.1, "100 %": 1.0}
    per_message: dict[str, list[float]] = {mode: [] for mode in modes}
    spans: dict[str, list[int]] = {mode: [] for mode in modes}
    await one_run(None, args.messages // 4, args.threads, args.batch)  # imports and caches warm
    for round_no in range(args.rounds):
        for mode, ratio in modes.items():
            seconds, exported = await one_run(ratio, args.messages, args.threads, args.batch, args.upstream)
            per_message[mode].append(seconds)
            spans[mode].append(exported)
        print(f"round {round_no + 1}: " + ", ".join(f"{mode} {per_message[mode][-1] * 1e6:.0f} µs"
                                                    for mode in modes), flush=True)
    off = statistics.median(per_message["off"])
    print(f"\nCPU per message, medians of {args.rounds} interleaved rounds of {args.messages} messages "
          f"({args.threads} threads, batches of {args.batch}; "
          f"{'agents traced upstream' if args.upstream else 'no trace headers'}; {args.encoder}'s OTLP encoder):")
    for mode in modes:
        median = statistics.median(per_message[mode])
        extra = [t - o for t, o in zip(per_message[mode], per_message["off"], strict=True)]
        print(f"tracing={mode} cpu_us_per_msg={median * 1e6:.0f} extra_us={statistics.median(extra) * 1e6:.0f} "
              f"ratio_to_off={median / off:.3f} spans_per_msg={statistics.median(spans[mode]) / args.messages:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
