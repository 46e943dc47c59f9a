"""A take-over asks again only for the model calls this process did not ask for itself (``asked_cycles``).

The outlet notes a model request once the broker acknowledged it. A request that failed, or that never went out
because its batch was fenced, is not noted, so a take-over still asks for it again.
"""

from __future__ import annotations

import asyncio
import dataclasses

from om_stream.core.commands import RequestObservation
from om_stream.core.inputs import ObserveNow
from om_stream.core.state import Cycle
from om_stream.runtime.host_ports import Arrival
from om_stream.runtime.internal_codec import decode_internal
from om_stream.runtime.worker.asked_cycles import AskedCycles, to_resend
from om_stream.runtime.worker.kafka_records import Publication, SourceRecord
from tests.support.processor_doubles import KAFKA, CommandWorker


def cycle(cycle_id: str, attempt: int = 1) -> Cycle:
    return Cycle(id=cycle_id, kind="sync", operation="observation", trigger="turn-sync", attempt=attempt,
                 started_at=0, deadline_at=180_000, tokens=100)


class AckingProducer:
    """A producer whose sends resolve as the test says: acknowledged, or failed."""

    def __init__(self) -> None:
        self.sent: list[tuple[Publication, asyncio.Future[object]]] = []

    async def send(self, publication: Publication) -> asyncio.Future[object]:
        future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        self.sent.append((publication, future))
        return future

    def requests(self) -> list[tuple[RequestObservation, asyncio.Future[object]]]:
        found = []
        for publication, future in self.sent:
            if publication.topic == KAFKA.topic_model_requests:
                request = decode_internal(publication.value or b"")
                assert isinstance(request, RequestObservation)
                found.append((request, future))
        return found


def worker_with(producer: AckingProducer) -> CommandWorker:
    worker = CommandWorker({"observation": {"messageTokens": 1_000, "bufferTokens": False}})
    parts = worker.processor.outlet_parts
    worker.processor.outlet_parts = dataclasses.replace(parts, publisher=producer)
    return worker


def test_a_take_over_resends_the_calls_not_asked_here_and_another_attempt_of_one_that_was() -> None:
    asked = AskedCycles()
    asked.asked("obs-a", 1)
    asked.asked("obs-b", 1)
    held = [cycle("obs-a"), cycle("obs-b", attempt=2), cycle("obs-c")]
    assert [c.id for c in to_resend(held, asked)] == ["obs-b", "obs-c"]


def test_the_calls_remembered_are_bounded_and_a_take_over_keeps_only_those_still_held() -> None:
    asked = AskedCycles(kept=3)
    for index in range(5):
        asked.asked(f"obs-{index}", 1)
    assert len(asked) == 3 and cycle("obs-0") not in asked and cycle("obs-4") in asked
    asked.keep([cycle("obs-3"), cycle("obs-9")])
    assert len(asked) == 1 and cycle("obs-3") in asked


async def test_a_request_counts_as_asked_here_once_the_broker_acknowledged_it() -> None:
    producer = AckingProducer()
    worker = worker_with(producer)
    for index in range(3):
        await worker.say("t1", index, "user" if index % 2 == 0 else "assistant")
        await worker.say("t2", index, "user" if index % 2 == 0 else "assistant")
    await worker.command("t1", "observe", force=True)
    await worker.command("t2", "observe", force=True)
    (first, acknowledged), (second, refused) = producer.requests()
    in_flight = {key: state.cycles[0] for key, state in worker.table.states.items()}
    assert {c.id for c in in_flight.values()} == {first.cycle_id, second.cycle_id}
    assert to_resend(in_flight.values(), worker.processor.asked) == list(in_flight.values())  # nothing acknowledged

    acknowledged.set_result(None)
    refused.set_exception(RuntimeError("NotLeaderForPartition"))
    await asyncio.sleep(0)  # the futures' callbacks
    assert [c.id for c in to_resend(in_flight.values(), worker.processor.asked)] == [second.cycle_id]
    assert (first.cycle_id, first.attempt) == (in_flight["t1"].id, in_flight["t1"].attempt)


async def test_a_request_of_a_batch_that_never_committed_is_not_asked_here() -> None:
    producer = AckingProducer()
    worker = worker_with(producer)
    for index in range(3):
        await worker.say("t1", index, "user" if index % 2 == 0 else "assistant")
    await worker.command("t1", "observe", force=True)
    ((request, _),) = producer.requests()
    fenced = worker.processor.new_outlet()  # a batch that straddled a rebalance: its outlet is discarded
    record = SourceRecord(topic=KAFKA.topic_commands, partition=0, offset=99, key=b"t1", value=b"{}")
    await fenced.request(request, Arrival("t1", "r1", ObserveNow(force=True), record))
    fenced.discard()
    await fenced.commit()
    assert len(producer.requests()) == 1 and len(worker.processor.asked) == 0
