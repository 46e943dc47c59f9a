"""Spans as an OTLP ``ExportTraceServiceRequest``, written straight to protobuf's wire format.

The SDK's encoder builds a protobuf object for every span, attribute and value and then serializes the tree: about
32 µs per span of the worker's, on the exporter's thread, which holds the GIL the event loop needs (a fully traced
message makes four spans). ``encode_request`` writes the same bytes directly, in a fraction of that time: the same
fields in the same order (field-number order, as protobuf's serializer writes them), the same grouping by resource
and instrumentation scope in first-seen order, and the same treatment of a value it cannot encode (that attribute is
left out and logged, the rest of the span goes). ``tests/unit/test_otlp_encoding.py`` holds it to the SDK's bytes
for any span the SDK can make.

The wire format, for the reader: a field is a tag (its number shifted left by three, or'ed with a wire type) and a
value: a varint (type 0), 8 little-endian bytes (type 1), a length-prefixed run of bytes (type 2: strings, bytes,
embedded messages) or 4 little-endian bytes (type 5). A proto3 scalar at its zero value is not written; a field of a
``oneof`` (``AnyValue``'s) and an embedded message that is set always are.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanContext, SpanKind

__all__ = ["encode_request"]

log = logging.getLogger(__name__)

_SMALL = [bytes((n,)) for n in range(128)]
_INT64 = 1 << 63
_KIND = {SpanKind.INTERNAL: 1, SpanKind.SERVER: 2, SpanKind.CLIENT: 3, SpanKind.PRODUCER: 4, SpanKind.CONSUMER: 5}
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200  # SpanFlags: whether the parent is known to be remote, and whether it is
_fixed64 = struct.Struct("<Q").pack
_fixed32 = struct.Struct("<I").pack
_double = struct.Struct("<d").pack
_FALSE, _TRUE = b"\x10\x00", b"\x10\x01"  # AnyValue.bool_value


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _embedded(tag: bytes, payload: bytes) -> bytes:
    """A length-delimited field: ``tag``, the payload's length, the payload."""
    return tag + _varint(len(payload)) + payload


def _value(value: Any) -> bytes:
    """An ``AnyValue``'s fields, as the SDK's ``_encode_value`` chooses them (bool before int, str and bytes before
    sequences). Raises on what OTLP cannot carry."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return _TRUE if value else _FALSE
    if isinstance(value, str):
        return _embedded(b"\x0a", value.encode())
    if isinstance(value, int):
        return b"\x18" + _int64(value)
    if isinstance(value, float):
        return b"\x21" + _double(value)
    if isinstance(value, bytes):
        return _embedded(b"\x3a", value)
    if isinstance(value, Sequence):
        return _embedded(b"\x2a", b"".join([_embedded(b"\x0a", _value(item)) for item in value]))
    if isinstance(value, Mapping):
        return _embedded(b"\x32", b"".join([_embedded(b"\x0a", _key_value(str(key), item))
                                            for key, item in value.items()]))
    raise TypeError(f"Invalid type {type(value)} of value {value}")


def _int64(value: int) -> bytes:
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"Value out of range: {value}")
    return _varint(value if value >= 0 else value + (1 << 64))


def _key_value(key: str, value: Any) -> bytes:
    head = _embedded(b"\x0a", key.encode()) if key else b""
    return head + _embedded(b"\x12", _value(value))


def _attributes(tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
    """Every attribute as a ``KeyValue`` field of number ``tag``; one whose value cannot be encoded is left out
    and logged, as the SDK's encoder does."""
    if not attributes:
        return b""
    fields = []
    for key, value in attributes.items():
        try:
            fields.append(_embedded(tag, _key_value(key, value)))
        except Exception as error:
            log.exception("Failed to encode key %s: %s", key, error)
    return b"".join(fields)


def _count(tag: bytes, count: int) -> bytes:
    return tag + _varint(count) if count else b""


def _flags(parent: SpanContext | None) -> int:
    return _HAS_IS_REMOTE | _IS_REMOTE if parent is not None and parent.is_remote else _HAS_IS_REMOTE


def _string(tag: bytes, text: str | None) -> bytes:
    return _embedded(tag, text.encode()) if text else b""


def _span(span: ReadableSpan) -> bytes:
    context = span.get_span_context()
    assert context is not None  # an SDK span always has one
    parent = span.parent
    fields = [b"\x0a\x10", context.trace_id.to_bytes(16, "big"), b"\x12\x08", context.span_id.to_bytes(8, "big")]
    if context.trace_state:
        fields.append(_embedded(b"\x1a", ",".join(f"{key}={value}"
                                                  for key, value in context.trace_state.items()).encode()))
    if parent is not None:
        fields += (b"\x22\x08", parent.span_id.to_bytes(8, "big"))
    fields += (_string(b"\x2a", span.name), b"\x30", _SMALL[_KIND[span.kind]])
    if span.start_time:
        fields += (b"\x39", _fixed64(span.start_time))
    if span.end_time:
        fields += (b"\x41", _fixed64(span.end_time))
    fields += (_attributes(b"\x4a", span.attributes), _count(b"\x50", span.dropped_attributes))
    for event in span.events:
        time = b"\x09" + _fixed64(event.timestamp) if event.timestamp else b""
        fields.append(_embedded(b"\x5a", time + _string(b"\x12", event.name) + _attributes(b"\x1a", event.attributes)
                                + _count(b"\x20", event.dropped_attributes)))
    fields.append(_count(b"\x60", span.dropped_events))
    for link in span.links:
        fields.append(_embedded(b"\x6a", b"\x0a\x10" + link.context.trace_id.to_bytes(16, "big") + b"\x12\x08"
                                + link.context.span_id.to_bytes(8, "big") + _attributes(b"\x22", link.attributes)
                                + _count(b"\x28", link.dropped_attributes) + b"\x35" + _fixed32(_flags(link.context))))
    fields.append(_count(b"\x70", span.dropped_links))
    status = span.status
    if status is not None:
        code = status.status_code.value
        fields.append(_embedded(b"\x7a", _string(b"\x12", status.description)
                                + (b"\x18" + _varint(code) if code else b"")))
    fields += (b"\x85\x01", _fixed32(_flags(parent)))
    return b"".join(fields)


def _resource(resource: Resource) -> bytes:
    return _embedded(b"\x0a", _attributes(b"\x0a", resource.attributes))


def _scope(scope: InstrumentationScope | None) -> bytes:
    if scope is None:
        return b"\x0a\x00"
    return _embedded(b"\x0a", _string(b"\x0a", scope.name) + _string(b"\x12", scope.version)
                     + _attributes(b"\x1a", scope.attributes))


def encode_request(spans: Sequence[ReadableSpan]) -> bytes:
    """The serialized ``ExportTraceServiceRequest`` of ``spans``: the bytes the SDK's
    ``encode_spans(spans).SerializeToString()`` gives."""
    # grouped as the SDK groups them (by equal resources, then equal scopes, in first-seen order); the spans of one
    # provider share one resource and one scope object, so the identity checks spare hashing them per span
    groups: dict[Resource, dict[InstrumentationScope | None, list[bytes]]] = {}
    last_resource: Resource | None = None
    last_scope: InstrumentationScope | None = None
    bucket: list[bytes] = []
    for span in spans:
        resource, scope = span.resource, span.instrumentation_scope or None
        if resource is not last_resource or scope is not last_scope:
            bucket = groups.setdefault(resource, {}).setdefault(scope, [])
            last_resource, last_scope = resource, scope
        bucket.append(_embedded(b"\x12", _span(span)))
    request = []
    for resource, scopes in groups.items():
        scope_spans = b"".join([_embedded(b"\x12", _scope(scope) + b"".join(encoded)
                                          + _string(b"\x1a", scope.schema_url if scope else None))
                                for scope, encoded in scopes.items()])
        request.append(_embedded(b"\x0a", _resource(resource) + scope_spans + _string(b"\x1a", resource.schema_url)))
    return b"".join(request)
