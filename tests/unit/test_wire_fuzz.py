"""No input makes a decoder raise anything but ``WireDecodeError`` (with a reason the dead-letter topic knows), and
whatever a decoder accepts is usable downstream: it encodes, and its encoding decodes back to the same record.

Property-based over arbitrary bytes, arbitrary JSON-shaped records, nesting thousands of levels deep, and byte and
structure mutations of the contract's valid vectors; then the adversarial corpus, kind by kind.
"""

from __future__ import annotations

import dataclasses
import json
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from om_stream.core.inputs import ModelResultArrived
from om_stream.errors import WireDecodeError
from om_stream.runtime.internal_codec import _TYPES, InternalRecord, decode_internal, encode_internal
from om_stream.runtime.recall import decode_recall_request
from om_stream.wire.codec import MAX_DEPTH, MAX_SAFE_INTEGER, decode_command, decode_message, encode
from om_stream.wire.commands import COMMAND_SCHEMA, CommandRecord, record_key_of
from om_stream.wire.dlq import DLQ_REASONS
from om_stream.wire.messages import MESSAGE_SCHEMA, MessageRecord
from om_stream.wire.recall import RECALL_REQUEST_SCHEMA, RecallRequest
from tests.support.malformed import Malformed, edge_valid_messages, malformed_records

MAX_BYTES = 65_536
ROOT = Path(__file__).resolve().parents[2]
VECTORS = ROOT / "schemas" / "vectors"
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

Decoded = MessageRecord | CommandRecord | RecallRequest | InternalRecord


def _message(key: bytes | None, value: bytes | None) -> Decoded:
    return decode_message(key, value, max_bytes=MAX_BYTES)


def _command(key: bytes | None, value: bytes | None) -> Decoded:
    return decode_command(key, value, max_bytes=MAX_BYTES)


def _recall(key: bytes | None, value: bytes | None) -> Decoded:
    return decode_recall_request(value, MAX_BYTES)


def _internal(key: bytes | None, value: bytes | None) -> Decoded:
    return decode_internal(value, max_bytes=MAX_BYTES)


DECODERS: dict[str, Callable[[bytes | None, bytes | None], Decoded]] = {
    "messages": _message, "commands": _command, "recall_requests": _recall, "model_results": _internal}


def _again(decoded: Decoded) -> Decoded:
    """``decoded`` through its own encoder and decoder: what the next reader of om-stream's output sees."""
    if isinstance(decoded, MessageRecord):
        decoded.to_message().compact_json.encode()  # the form a context splices in
        return decode_message(decoded.thread_id.encode(), encode(decoded), max_bytes=2**30)
    if isinstance(decoded, CommandRecord):
        return decode_command(record_key_of(decoded).encode(), encode(decoded), max_bytes=2**30)
    if isinstance(decoded, RecallRequest):
        return decode_recall_request(encode(decoded), 2**30)
    return decode_internal(encode_internal(decoded))


def refused_or_valid(topic: str, key: bytes | None, value: bytes | None) -> str | None:
    """The refusal's reason, or None when the record was accepted (and then survived its own round trip)."""
    try:
        decoded = DECODERS[topic](key, value)
    except WireDecodeError as exc:
        refusal = exc
    else:
        assert _again(decoded) == decoded
        return None
    assert refusal.reason in DLQ_REASONS, refusal
    assert refusal.detail, refusal.reason
    return refusal.reason


def _reference_depth(value: bytes) -> int:
    """Nesting depth by the obvious state machine, to check the codec's scan against."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in value:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif byte in b"]}":
            depth -= 1
    return deepest


# -- what to feed them --------------------------------------------------------------------------------------------


def _vectors(schema: str) -> list[bytes]:
    index = json.loads((VECTORS / "index.json").read_text())
    return [(VECTORS / "valid" / f"{entry['name']}.json").read_bytes() for entry in index["valid"]
            if entry["schema"] == schema]


VALID: dict[str, list[bytes]] = {"messages": _vectors(MESSAGE_SCHEMA), "commands": _vectors(COMMAND_SCHEMA),
                                 "recall_requests": _vectors(RECALL_REQUEST_SCHEMA)}
FIELD_NAMES = sorted({*MessageRecord.model_fields, *CommandRecord.model_fields, *RecallRequest.model_fields,
                      "schema", "type", "text", "tool_call_id", "timer", "cycle_id"} - {"schema_"})
TAGS = [MESSAGE_SCHEMA, COMMAND_SCHEMA, RECALL_REQUEST_SCHEMA, "om.message/v2", *sorted(_TYPES)]

# every character, lone surrogates included (json.dumps writes them as \udxxx escapes)
any_text = st.text(st.characters(codec=None), max_size=12)
edge_numbers = st.sampled_from([MAX_SAFE_INTEGER, MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 10**30, 0, -1,
                                float("nan"), float("inf"), float("-inf"), 1e308, 5e-324, -0.0])
# the contract's values, and (a branch each, so most records still reach the models) numbers I-JSON excludes and
# strings with lone surrogates
scalars = (st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12) | edge_numbers | any_text)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(any_text | st.sampled_from(FIELD_NAMES), inner, max_size=4),
                           max_leaves=24)
record_shaped = st.dictionaries(st.sampled_from(FIELD_NAMES) | any_text, json_values, max_size=10)
keys = st.none() | st.binary(max_size=10) | st.sampled_from([b"thread-1", b"corpus-thread", "thread-𝄞".encode()])
topics = st.sampled_from(sorted(DECODERS))


def _dumps(record: Any, draw: st.DrawFn) -> bytes:
    return json.dumps(record, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


TAG_OF = {"messages": ("schema", MESSAGE_SCHEMA), "commands": ("schema", COMMAND_SCHEMA),
          "recall_requests": ("schema", RECALL_REQUEST_SCHEMA), "model_results": ("type", "result")}


@st.composite
def tagged_records(draw: st.DrawFn, topic: str) -> bytes:
    """JSON objects, mostly tagged for ``topic``, with fields of the right names holding values of any shape."""
    record = draw(record_shaped)
    name, tag = TAG_OF[topic]
    if draw(st.integers(0, 3)):
        record[name] = tag if draw(st.integers(0, 3)) else draw(st.sampled_from(TAGS))
    return _dumps(record, draw)


@st.composite
def deep_text(draw: st.DrawFn) -> tuple[str, bool]:
    """JSON nested up to 6,000 levels (arrays, objects, mixed), closed or not; and whether it is closed."""
    unit = draw(st.lists(st.sampled_from(["[", '{"k":', '{"":', "[1,", '{"a\\"[":']), min_size=1, max_size=5))
    levels = draw(st.integers(0, 6_000) | st.integers(MAX_DEPTH - 4, MAX_DEPTH + 4))
    openers = [unit[i % len(unit)] for i in range(levels)]
    closers = ["]" if opener.startswith("[") else "}" for opener in reversed(openers)]
    closed = draw(st.booleans()) or levels <= MAX_DEPTH + 4
    leaf = draw(st.sampled_from(["1", '"x"', "[]", "{}", "null", "9" * 4_400, "NaN", "1e400", '"\\ud800"']))
    return "".join(openers) + leaf + ("".join(closers) if closed else ""), closed


def _containers(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Paths of every value inside a parsed record (the record itself excluded)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for name, item in items:
        yield (*path, name)
        yield from _containers(item, (*path, name))


def _at(record: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        record = record[step]
    return record


_MARK = "\u0000placed\u0000"


def valid_records(topic: str) -> st.SearchStrategy[bytes]:
    """The contract's valid vectors of ``topic``; for the internal topics, records the engine could write."""
    if topic == "model_results":
        return internal_records.map(encode_internal)
    return st.sampled_from(VALID[topic])


@st.composite
def placed_in_a_valid_record(draw: st.DrawFn, topic: str, deep: tuple[str, bool] | None = None) -> bytes:
    """A valid record of ``topic`` with one value replaced (by ``deep`` text when given), removed, or one added."""
    record = json.loads(draw(valid_records(topic)))
    path = draw(st.sampled_from(list(_containers(record))))
    parent, last = _at(record, path[:-1]), path[-1]
    action = "replace" if deep is not None else draw(st.sampled_from(["replace", "remove", "add"]))
    if action == "remove":
        del parent[last]
    elif action == "add" and isinstance(parent, dict):
        parent[draw(any_text | st.sampled_from(FIELD_NAMES))] = draw(json_values)
    elif action == "add":
        parent.insert(draw(st.integers(0, len(parent))), draw(json_values))
    else:
        parent[last] = _MARK if deep is not None else draw(json_values)
    raw = _dumps(record, draw)
    return raw if deep is None else raw.replace(json.dumps(_MARK).encode(), deep[0].encode())


# the free-form objects of each record: the contract says nothing of their contents but that they are I-JSON
OPEN_OBJECTS = {"messages": (VALID["messages"], "metadata"),
                "model_results": ([encode_internal(ModelResultArrived("c-1", 1, "observation", ok=True))],
                                  "extracted_values")}


@st.composite
def with_open_values(draw: st.DrawFn, topic: str) -> bytes:
    originals, field = OPEN_OBJECTS[topic]
    record = json.loads(draw(st.sampled_from(originals)))
    record[field] = draw(st.dictionaries(any_text, json_values, min_size=1, max_size=3))
    return _dumps(record, draw)


TOKENS = [b"[", b"{", b"]", b"}", b'"', b"\\", b",", b":", b"NaN", b"-Infinity", b"1e400", b"\xff", b"\xed\xa0\x80",
          b"\\ud800", b"\\udc00", b'"thread_id": "x",', b"9" * 40, b"null", b"\x00", b"\xef\xbb\xbf"]


@st.composite
def byte_mutations(draw: st.DrawFn, topic: str) -> bytes:
    """A valid record with a few bytes flipped, inserted, deleted, duplicated, or cut off."""
    data = bytearray(draw(valid_records(topic)))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        operation = draw(st.sampled_from(["flip", "insert", "delete", "duplicate", "truncate"]))
        if operation == "flip" and at < len(data):
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif operation == "insert":
            data[at:at] = draw(st.sampled_from(TOKENS) | st.binary(min_size=1, max_size=4))
        elif operation == "delete":
            del data[at:at + draw(st.integers(1, 8))]
        elif operation == "duplicate":
            data[at:at] = data[at:at + draw(st.integers(1, 64))]
        else:
            del data[at:]
    return bytes(data)


def _strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    """Values of an internal record's field type, as the engine would produce them."""
    origin, args = get_origin(hint), get_args(hint)
    plain: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(max_size=12), int: st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER), bool: st.booleans(),
        type(None): st.none(),
        Any: st.recursive(st.none() | st.booleans() | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
                          | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
                          lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                      max_size=3), max_leaves=8)}
    if hint in plain:
        return plain[hint]
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):  # a value nested in a record
        return _records_of(hint)
    if origin is Literal:
        return st.sampled_from(args)
    if origin in (Union, types.UnionType):
        return st.one_of(*(_strategy_for(arg) for arg in args))
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return st.lists(_strategy_for(args[0]), max_size=3).map(tuple)
    if origin is tuple:
        return st.tuples(*(_strategy_for(arg) for arg in args))
    if origin is list:  # a restore's record state
        return st.lists(_strategy_for(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(st.text(max_size=6), _strategy_for(args[1]), max_size=3)
    raise AssertionError(f"no strategy for {hint!r}")


def _records_of(cls: type[Any]) -> st.SearchStrategy[Any]:
    hints = get_type_hints(cls)
    return st.builds(cls, **{field.name: _strategy_for(hints[field.name]) for field in dataclasses.fields(cls)})


internal_records = st.one_of(*(_records_of(cls) for cls in _TYPES.values()))


# -- properties -----------------------------------------------------------------------------------------------------


@FUZZ
@given(topic=topics, key=keys, value=st.none() | st.binary(max_size=600))
def test_arbitrary_bytes_are_refused_for_a_reason_or_valid(topic: str, key: bytes | None, value: bytes | None) -> None:
    refused_or_valid(topic, key, value)


@FUZZ
@given(data=st.data(), topic=topics, key=keys)
def test_json_of_any_shape_is_refused_for_a_reason_or_valid(data: st.DataObject, topic: str,
                                                            key: bytes | None) -> None:
    refused_or_valid(topic, key, data.draw(tagged_records(topic)))


@FUZZ
@given(data=st.data(), topic=topics, deep=deep_text(), inside=st.booleans())
def test_nesting_is_refused_as_too_deep_exactly_past_the_limit(data: st.DataObject, topic: str,
                                                               deep: tuple[str, bool], inside: bool) -> None:
    text, closed = deep
    value = data.draw(placed_in_a_valid_record(topic, deep)) if inside else text.encode()
    reason = refused_or_valid(topic, b"thread-1", value)
    if closed and len(value) <= MAX_BYTES:  # well-formed JSON: the scan's depth is the true one
        assert (reason == "too_deep") == (_reference_depth(value) > MAX_DEPTH), (reason, _reference_depth(value))


@FUZZ
@given(data=st.data(), topic=topics)
def test_structure_mutations_of_valid_records_are_refused_for_a_reason_or_valid(data: st.DataObject,
                                                                               topic: str) -> None:
    refused_or_valid(topic, b"thread-1", data.draw(placed_in_a_valid_record(topic)))


@FUZZ
@given(data=st.data(), topic=topics)
def test_byte_mutations_of_valid_records_are_refused_for_a_reason_or_valid(data: st.DataObject, topic: str) -> None:
    refused_or_valid(topic, b"thread-1", data.draw(byte_mutations(topic)))


@FUZZ
@given(data=st.data(), topic=st.sampled_from(sorted(OPEN_OBJECTS)))
def test_free_form_values_are_refused_for_a_reason_or_valid(data: st.DataObject, topic: str) -> None:
    refused_or_valid(topic, b"thread-1", data.draw(with_open_values(topic)))


@FUZZ
@given(record=internal_records)
def test_internal_records_survive_their_round_trip(record: InternalRecord) -> None:
    assert decode_internal(encode_internal(record)) == record


# -- the corpus, kind by kind ----------------------------------------------------------------------------------------

CORPUS = malformed_records(MAX_BYTES)


def test_the_corpus_covers_many_kinds_on_every_input_topic() -> None:
    assert len({entry.kind for entry in CORPUS if entry.topic == "messages"}) >= 20
    assert {entry.topic for entry in CORPUS} == set(DECODERS)
    assert {entry.reason for entry in CORPUS} <= set(DLQ_REASONS)
    assert {"too_deep", "invalid_json", "invalid_utf8", "invalid_fields", "unknown_schema", "oversize",
            "missing_key", "key_mismatch"} <= {entry.reason for entry in CORPUS}
    assert malformed_records(MAX_BYTES) == CORPUS, "the corpus is deterministic"


@pytest.mark.parametrize("entry", CORPUS, ids=[entry.kind for entry in CORPUS])
def test_each_corpus_kind_is_refused_with_its_reason(entry: Malformed) -> None:
    assert refused_or_valid(entry.topic, entry.key, entry.value) == entry.reason


@pytest.mark.parametrize("record", edge_valid_messages("thread-1", "user-1", 0), ids=lambda r: r["message_id"])
def test_records_at_the_edges_of_the_contract_are_accepted(record: dict[str, Any]) -> None:
    value = json.dumps(record).encode()
    assert refused_or_valid("messages", b"thread-1", value) is None


@pytest.mark.parametrize("topic", sorted(VALID))
def test_every_valid_vector_is_accepted(topic: str) -> None:
    for raw in VALID[topic]:
        record = json.loads(raw)
        key = (record.get("thread_id") or record.get("resource_id") or "").encode()  # an erase of a resource
        assert refused_or_valid(topic, key, raw) is None, raw[:80]

