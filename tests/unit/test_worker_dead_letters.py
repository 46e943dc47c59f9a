"""Dead letters of the memory agent's batches, without a broker: a batch whose every record is malformed has no
input for the host to commit, and its dead letters must still go out before its offsets are committed."""

from __future__ import annotations

import json

from om_stream.runtime.worker.kafka_records import SourceRecord
from tests.support.fenced_worker import FencedWorker
from tests.support.processor_doubles import KAFKA


def _malformed(driver: FencedWorker, offset: int) -> SourceRecord:
    return SourceRecord(topic=KAFKA.topic_messages, partition=0, offset=offset, key=b"t1", value=b"{not json",
                        generation=driver.generation)


def _dead_letters(driver: FencedWorker) -> list[dict[str, object]]:
    return [json.loads(p.value or b"") for p in driver.producer.sent if p.topic == KAFKA.topic_dlq]


async def test_a_batch_of_nothing_but_a_malformed_record_sends_its_dead_letter_at_once() -> None:
    driver = FencedWorker()
    assert await driver.handle(0)
    async with driver.ledger.batch():
        assert await driver.processor.process([_malformed(driver, 1)])
    letters = _dead_letters(driver)
    assert [(letter["source_offset"], letter["reason"]) for letter in letters] == [(1, "invalid_json")], letters


async def test_a_later_fenced_batch_does_not_take_an_earlier_dead_letter_with_it() -> None:
    driver = FencedWorker()
    async with driver.ledger.batch():
        assert await driver.processor.process([_malformed(driver, 0)])
    stale = SourceRecord(topic=KAFKA.topic_messages, partition=0, offset=1, key=b"t1", value=b"{}",
                         generation=driver.generation)
    driver.generation = 2  # the next batch was read before a rebalance: fenced off, nothing of it goes out
    async with driver.ledger.batch():
        assert not await driver.processor.process([stale])
    assert [letter["source_offset"] for letter in _dead_letters(driver)] == [0]


def _message(driver: FencedWorker, offset: int) -> SourceRecord:
    value = json.dumps({"schema": "om.message/v1", "message_id": f"m{offset}", "thread_id": "t1", "resource_id": "r1",
                        "role": "user", "created_at": "2026-03-02T09:00:00Z",
                        "parts": [{"type": "text", "text": f"message {offset}"}]}).encode()
    return SourceRecord(topic=KAFKA.topic_messages, partition=0, offset=offset, key=b"t1", value=value,
                        generation=driver.generation)


async def test_a_batch_with_inputs_and_a_malformed_record_sends_its_dead_letter_once_with_the_batch() -> None:
    driver = FencedWorker()
    async with driver.ledger.batch():
        assert await driver.processor.process([_message(driver, 0), _malformed(driver, 1), _message(driver, 2)])
    assert [letter["source_offset"] for letter in _dead_letters(driver)] == [1]
    contexts = [p for p in driver.producer.sent if p.topic == KAFKA.topic_context]
    assert [json.loads(p.value or b"")["through_message_id"] for p in contexts] == ["m2"]
    async with driver.ledger.batch():  # the next batch's outlet starts empty: nothing of this one goes again
        assert await driver.processor.process([_message(driver, 3)])
    assert [letter["source_offset"] for letter in _dead_letters(driver)] == [1]


async def test_a_batch_fenced_at_its_commit_sends_neither_its_publications_nor_its_dead_letters() -> None:
    driver = FencedWorker()
    confirmed = driver.generation

    async def confirm(generation: int) -> bool:
        return generation == confirmed

    driver.processor.confirm = confirm
    confirmed = 0  # the group no longer holds the batch's generation when it comes to commit
    async with driver.ledger.batch():
        assert not await driver.processor.process([_message(driver, 0), _malformed(driver, 1)])
    assert driver.producer.sent == []
