"""What went through the internal topics of a soak: how many model requests per cycle (a deadline's re-ask is the
cycle's next attempt; a take-over's resend sends an attempt again), and how the results topic splits between
model results and the timers that share it (``deadline:``, ``resend:``, ``retry:``, ``idle:``...). Every record of
the results topic is one more input for the memory agent; when the group falls behind, timers multiply."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

__all__ = ["internal_traffic"]


async def _records(bootstrap: str, topic: str, partitions: int) -> list[dict[str, Any]]:
    """Every record of ``topic`` from its beginning to the end offsets read at the start, decoded as JSON."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                max_partition_fetch_bytes=4 << 20)
    await consumer.start()
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        await consumer.seek_to_beginning(*assigned)
        ends = await consumer.end_offsets(assigned)
        waiting = {tp for tp in assigned if ends[tp] > 0}
        found: list[dict[str, Any]] = []
        while waiting:
            batch = await consumer.getmany(timeout_ms=5000, max_records=10_000)
            if not batch:
                raise TimeoutError(f"{topic}: no record in 5 s with {len(waiting)} partitions not read to the end")
            for tp, records in batch.items():
                for record in records:
                    if record.offset < ends[tp]:
                        found.append(json.loads(record.value))
                if records and records[-1].offset + 1 >= ends[tp]:
                    waiting.discard(tp)
        return found
    finally:
        await consumer.stop()


async def internal_traffic(bootstrap: str, topics: dict[str, str], partitions: int) -> dict[str, Any]:
    """Counts of the model requests and of the results topic's records, by what they are."""
    requests = await _records(bootstrap, topics["model_requests"], partitions)
    calls = Counter((r["cycle_id"], r["attempt"]) for r in requests if "cycle_id" in r)
    results = await _records(bootstrap, topics["model_results"], partitions)
    kinds = Counter(f"timer {str(r['timer']).split(':')[0]}" if r.get("type") == "timer" else str(r.get("type"))
                    for r in results)
    return {"model_requests": len(requests), "cycles_asked": len({cycle for cycle, _ in calls}),
            "re_asks": sum(1 for _, attempt in calls if attempt > 1),
            "requests_sent_again": sum(n - 1 for n in calls.values()),
            "results_topic_records": len(results), "results_topic_by_kind": dict(kinds.most_common())}
