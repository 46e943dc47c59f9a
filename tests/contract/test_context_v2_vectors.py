"""The Python client passes the shared ``om.context/v2`` vectors (``schemas/vectors/context-v2.json``): reading each
sequence's records in the order given (the three topics interleaved, a cursor before its index or blocks), it
delivers exactly the ``om.context/v1`` contexts the vectors say, at the records they say, and nothing else."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from om_stream.client.assembly import ContextAssembly
from om_stream.wire.codec import encode
from om_stream.wire.context import ContextRecord
from om_stream.wire.context_v2 import split_block_key
from om_stream.wire.schemas import decode_payload, wire_form

VECTORS = Path(__file__).resolve().parents[2] / "schemas" / "vectors" / "context-v2.json"
SEQUENCES: list[dict[str, Any]] = json.loads(VECTORS.read_text(encoding="utf-8"))["sequences"]


def _payload(name: str, value: dict[str, Any]) -> Any:
    return decode_payload(name, json.dumps(value))


@pytest.mark.parametrize("sequence", SEQUENCES, ids=[s["name"] for s in SEQUENCES])
def test_the_client_delivers_what_the_vectors_say(sequence: dict[str, Any]) -> None:
    assembly = ContextAssembly()
    delivered = 0
    for step in sequence["records"]:
        topic, key, value = step["topic"], step["key"], step["value"]
        if topic == "om.context":
            if value is None:
                assert step.get("erased")
                assembly.forget(key)
                continue
            outcome = assembly.on_cursor(_payload("om.context/v2", value))
        elif topic == "om.context.index":
            outcome = assembly.on_index(key, _payload("om.context-index/v1", value) if value is not None else None)
        else:
            thread_id, digest = split_block_key(key)
            text = _payload("om.context-block/v1", value).text if value is not None else None
            outcome = assembly.on_block(thread_id, digest, text)
        if "delivers" in step:
            expected = _payload("om.context/v1", step["delivers"])
            assert isinstance(outcome, ContextRecord) and isinstance(expected, ContextRecord)
            assert wire_form(outcome) == step["delivers"]
            assert encode(outcome) == encode(expected)
            delivered += 1
        else:
            assert outcome is None, (sequence["name"], step["topic"], step["key"])
    assert delivered >= 3
    assert any(s.get("erased") for s in sequence["records"])


def test_the_vectors_hold_records_out_of_cross_topic_order() -> None:
    """A cursor read before the index it names, and an index before its blocks: the cases a client must wait on."""
    early = 0
    for sequence in SEQUENCES:
        indexes: set[int] = set()
        for step in sequence["records"]:
            if step["topic"] == "om.context.index" and step["value"] is not None:
                indexes.add(step["value"]["version"])
            if step["topic"] == "om.context" and step["value"] is not None and \
                    step["value"]["index_version"] not in indexes:
                early += 1
    assert early >= 2
