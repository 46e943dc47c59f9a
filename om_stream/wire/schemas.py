"""The published wire contract: JSON Schema 2020-12 for every topic payload and HTTP body, generated from the models.

``schemas/`` in the repository holds the output of :func:`export_schemas`; :func:`check_schemas` lists how it
differs from what the models generate now (CI fails on any difference). What the generator adds to pydantic's
output, and why:

* ``$schema`` and a versioned ``$id`` (``https://schemas.om-stream.dev/om.message/v1.json``);
* a closed content model everywhere (``additionalProperties: false`` on every object with properties; the models
  already refuse unknown fields, and the check fails if one ever stops doing so);
* the ``schema`` tag of a record is required (the codec refuses a record without it, although the model has a
  default);
* the tag of a tagged union (``type`` of a message part, ``mode`` of a recall result) is required in each variant,
  and the OpenAPI-only ``discriminator`` keyword is dropped: ``oneOf`` with a ``const`` tag says the same in plain
  JSON Schema;
* defaults made by a factory (``retrieval``, ``arguments``, ``headers``) are written out, so a client can fill them;
* the cross-field rules of the models' validators, as ``allOf``/``oneOf`` (``_CROSS_FIELD_RULES``);
* property titles are dropped (pydantic derives them from the field names; they only add noise to generated
  types).

Also here: the HTTP bodies that have no model elsewhere, :func:`decode_payload` (how a consumer checks a payload
against the contract) and :func:`wire_form` (a payload's normal form, whose RFC 8785 bytes the test vectors pin).
This module never touches the network and imports nothing beyond pydantic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from om_stream.core.events import EVENT_TYPES
from om_stream.core.messages import MAX_SAFE_INTEGER
from om_stream.core.retention import MAX_RETENTION_DAYS
from om_stream.errors import WireDecodeError
from om_stream.wire.codec import decode_json
from om_stream.wire.commands import COMMAND_SCHEMA, CommandRecord
from om_stream.wire.context import CONTEXT_SCHEMA, ContextRecord
from om_stream.wire.context_v2 import (
    BLOCK_SCHEMA,
    CURSOR_SCHEMA,
    INDEX_SCHEMA,
    BlockRecord,
    ContextCursor,
    ContextIndex,
    ThreadMessages,
)
from om_stream.wire.dlq import DLQ_SCHEMA, DeadLetterRecord
from om_stream.wire.export import EXPORT_SCHEMA, ExportLine
from om_stream.wire.messages import MESSAGE_SCHEMA, MessageRecord
from om_stream.wire.recall import RECALL_REQUEST_SCHEMA, RECALL_RESPONSE_SCHEMA, RecallRequest, RecallResponse

__all__ = [
    "DIALECT",
    "ID_BASE",
    "PAYLOADS",
    "CommandAccepted",
    "CommandRequest",
    "EraseAccepted",
    "ErasureStatus",
    "HttpError",
    "HttpFieldProblem",
    "Payload",
    "check_schemas",
    "contract_schema",
    "decode_payload",
    "export_schemas",
    "payload",
    "wire_form",
]

DIALECT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "https://schemas.om-stream.dev/"
INDEX_FILE = "index.json"


# -- HTTP bodies (runtime/worker/web.py) ------------------------------------------------------------------------


class _Closed(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class CommandRequest(_Closed):
    """Body of ``POST /v1/threads/{id}/observe``, ``.../reflect`` and ``.../override`` (an empty body means
    ``{}``). ``force`` is for observe only, ``guidance`` for reflect only, the token counts, ``retention_days``
    and ``replace`` for override only; ``resource_id`` is needed in resource scope."""

    resource_id: str | None = Field(None, min_length=1, max_length=256)
    guidance: str | None = Field(None, max_length=10_000)
    force: bool | None = Field(None, strict=True)
    message_tokens: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)
    observation_tokens: int | None = Field(None, gt=0, le=MAX_SAFE_INTEGER)
    retention_days: int | None = Field(None, ge=1, le=MAX_RETENTION_DAYS)
    replace: bool | None = Field(None, strict=True)


class CommandAccepted(_Closed):
    """``202`` answer to observe/reflect/override: the command was queued on the commands topic under
    ``command_id``."""

    accepted: Literal[True]
    command_id: str = Field(min_length=1, max_length=256)


class EraseAccepted(_Closed):
    """``202`` answer of ``DELETE /v1/threads/{id}`` and ``/v1/resources/{id}``: the erase was queued on the
    commands topic under ``erase_id``; ``status`` is where to ask how it went (its receipt is also a
    ``data-om-erased`` event)."""

    accepted: Literal[True]
    erase_id: str = Field(min_length=1, max_length=256)
    status: str


class ErasureStatus(_Closed):
    """``GET /v1/erasures/{id}`` (and ``DELETE ...?wait_s=N`` once done): ``done`` with what it removed, or
    ``running``. Counts only, never an id of the subject."""

    erase_id: str = Field(min_length=1, max_length=256)
    state: Literal["running", "done"]
    found: bool | None = None
    removed: dict[str, int] | None = None
    completed_at: str | None = None


class HttpFieldProblem(_Closed):
    loc: list[str | int]
    msg: str


class HttpError(_Closed):
    """``4xx`` answers: ``not_found`` (the thread is not held by this worker: read the context topic instead; for
    an override, also: no message reached the thread), ``invalid_json`` or ``invalid_fields`` (``detail`` lists
    the problems)."""

    error: Literal["not_found", "invalid_json", "invalid_fields"]
    detail: str | list[HttpFieldProblem] | None = None


# -- the catalogue ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Payload:
    """One published schema. ``name`` is ``<type>/v<N>``; ``tag`` is the value of the payload's ``schema`` field
    (None for event payloads, whose type travels in the ``ce_type`` header, and for HTTP bodies)."""

    name: str
    model: type[BaseModel]
    carried_by: str
    tag: str | None = None

    @property
    def id(self) -> str:
        return f"{ID_BASE}{self.name}.json"

    @property
    def file(self) -> str:
        return f"{self.name}.json"


def _catalogue() -> tuple[Payload, ...]:
    topics = [
        Payload(MESSAGE_SCHEMA, MessageRecord, "topic om.messages (input; key = thread id)", MESSAGE_SCHEMA),
        Payload(COMMAND_SCHEMA, CommandRecord, "topic om.commands (input; key = thread id, or resource id for an "
                                               "erase of a whole resource)", COMMAND_SCHEMA),
        Payload(CONTEXT_SCHEMA, ContextRecord, "topic om.context (output, compacted; key = thread id); "
                                               "GET /v1/threads/{id}/context", CONTEXT_SCHEMA),
        Payload(CURSOR_SCHEMA, ContextCursor, "topic om.context (output, compacted; key = thread id) with "
                                              "OM_CONTEXT_WIRE=v2: a context by reference", CURSOR_SCHEMA),
        Payload(INDEX_SCHEMA, ContextIndex, "topic om.context.index (output, compacted; key = thread id) with "
                                            "OM_CONTEXT_WIRE=v2: the thread's system blocks by digest", INDEX_SCHEMA),
        Payload(BLOCK_SCHEMA, BlockRecord, "topic om.context.blocks (output, compacted; key = <thread id>/<digest>) "
                                           "with OM_CONTEXT_WIRE=v2: one system block", BLOCK_SCHEMA),
        Payload(DLQ_SCHEMA, DeadLetterRecord, "topic om.dlq (output; key = the original key)", DLQ_SCHEMA),
        Payload(RECALL_REQUEST_SCHEMA, RecallRequest, "topic om.recall.requests (input; key = resource id)",
                RECALL_REQUEST_SCHEMA),
        Payload(RECALL_RESPONSE_SCHEMA, RecallResponse, "topic om.recall.responses (output; key = resource id)",
                RECALL_RESPONSE_SCHEMA),
    ]
    # the key of most events is their thread; the lifecycle receipts say what else theirs can be
    event_keys = {"data-om-erased": "thread id for an erase of a thread, resource id for an erase of a resource",
                  "data-om-expired": "thread id, the record's primary thread in resource scope"}
    events = [Payload(f"{event_type}/v1", model, f"topic om.events (output; key = "
                                                 f"{event_keys.get(event_type, 'thread id')}; ce_type = {event_type})"
                      + ("; GET /v1/threads/{id}/status" if event_type == "data-om-status" else ""))
              for event_type, model in sorted(EVENT_TYPES.items())]
    http = [
        Payload("om.http.command-request/v1", CommandRequest,
                "body of POST /v1/threads/{id}/observe|reflect|override"),
        Payload("om.http.command-accepted/v1", CommandAccepted,
                "202 answer of POST /v1/threads/{id}/observe|reflect|override"),
        Payload("om.http.erase-accepted/v1", EraseAccepted,
                "202 answer of DELETE /v1/threads/{id} and DELETE /v1/resources/{id}"),
        Payload("om.http.erasure-status/v1", ErasureStatus,
                "GET /v1/erasures/{id}; DELETE /v1/threads/{id} or /v1/resources/{id} with wait_s, once done"),
        Payload("om.http.error/v1", HttpError, "4xx answers of the HTTP API"),
        Payload("om.http.thread-messages/v1", ThreadMessages,
                "GET /v1/threads/{id}/messages?from=<message id>&through=<message id>"),
        Payload(EXPORT_SCHEMA, ExportLine, "each line of an export (JSON Lines): om-stream export, "
                                           "GET /v1/resources/{id}/export; read by om-stream import"),
    ]
    return (*topics, *events, *http)


PAYLOADS: tuple[Payload, ...] = _catalogue()
_BY_NAME = {p.name: p for p in PAYLOADS}


def payload(name: str) -> Payload:
    """The catalogue entry of ``name`` (``om.message/v1``, ``data-om-status/v1``, ...); KeyError if unknown."""
    return _BY_NAME[name]


# -- generation ---------------------------------------------------------------------------------------------------


class _ContractJsonSchema(GenerateJsonSchema):
    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        # a default made by a factory is still a default a client must fill in: write it out
        factory = schema.get("default_factory")
        if factory is not None and not schema.get("default_factory_takes_data"):
            schema = {**schema, "default": factory()}  # type: ignore[call-arg]
            schema.pop("default_factory", None)
        return super().default_schema(schema)


def _if_const(field: str, value: str, *, negate: bool = False) -> dict[str, Any]:
    const: dict[str, Any] = {"const": value}
    return {"properties": {field: {"not": const} if negate else const}, "required": [field]}


_ABSENT_OR_NULL: dict[str, Any] = {"type": "null"}
_PRESENT: dict[str, Any] = {"not": {"type": "null"}}

# The models' cross-field validators, as JSON Schema. Keys: payload name, then "" (the root) or a $defs name.
_CROSS_FIELD_RULES: dict[str, dict[str, dict[str, Any]]] = {
    COMMAND_SCHEMA: {"": {"allOf": [
        # CommandRecord._fields_fit_the_command
        {"if": _if_const("command", "reflect", negate=True),
         "then": {"properties": {"guidance": _ABSENT_OR_NULL}}},
        {"if": _if_const("command", "override", negate=True),
         "then": {"properties": {"message_tokens": _ABSENT_OR_NULL, "observation_tokens": _ABSENT_OR_NULL,
                                 "retention_days": _ABSENT_OR_NULL, "replace": _ABSENT_OR_NULL}}},
        {"if": _if_const("command", "observe", negate=True),
         "then": {"properties": {"force": _ABSENT_OR_NULL}}},
        {"if": _if_const("command", "erase", negate=True),
         "then": {"required": ["thread_id"], "properties": {"thread_id": _PRESENT, "scope": _ABSENT_OR_NULL,
                                                           "requested_at": _ABSENT_OR_NULL}}},
        {"if": _if_const("command", "erase"),
         "then": {"required": ["scope"], "properties": {"scope": _PRESENT}}},
        {"if": {"required": ["command", "scope"], "properties": {"command": {"const": "erase"},
                                                                "scope": {"const": "resource"}}},
         "then": {"required": ["resource_id"], "properties": {"resource_id": _PRESENT, "thread_id": _ABSENT_OR_NULL}},
         "else": {"required": ["thread_id"], "properties": {"thread_id": _PRESENT}}},
        {"if": _if_const("command", "progress", negate=True),
         "then": {"properties": {"through_message_id": _ABSENT_OR_NULL}}},
    ]}},
    RECALL_RESPONSE_SCHEMA: {"": {"oneOf": [
        # RecallResponse._one_outcome: exactly one of result and error
        {"required": ["result"], "properties": {"result": _PRESENT}},
        {"required": ["error"], "properties": {"error": _PRESENT}},
    ]}},
    RECALL_REQUEST_SCHEMA: {"RecallArguments": {"allOf": [
        # RecallArguments._consistent (before/after must also parse as ISO 8601 dates: checked by the model only)
        {"if": _if_const("mode", "search"),
         "then": {"required": ["query"], "properties": {"query": {"type": "string", "pattern": "\\S"}}}},
        {"if": {"required": ["charOffset"], "properties": {"charOffset": _PRESENT}},
         "then": {"required": ["partIndex"], "properties": {"partIndex": _PRESENT}}},
        {"if": _if_const("mode", "threads"), "then": {"properties": {"author": _ABSENT_OR_NULL}}},
        {"if": {"required": ["author"], "properties": {"author": _PRESENT}},
         "then": {"properties": {"partIndex": _ABSENT_OR_NULL}}},
    ]}},
}


def _walk(node: Any, visit: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _walk(value, visit)
    elif isinstance(node, list):
        for item in node:
            _walk(item, visit)


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    target: Any = root
    for step in ref.removeprefix("#/").split("/"):
        target = target[step]
    assert isinstance(target, dict)
    return target


def contract_schema(entry: Payload) -> dict[str, Any]:
    """The published JSON Schema of one payload (see the module docstring for what is added to pydantic's)."""
    generated = entry.model.model_json_schema(mode="validation", schema_generator=_ContractJsonSchema)
    generated.pop("title", None)
    defs: dict[str, Any] = generated.get("$defs", {})

    def strip_property_titles(node: dict[str, Any]) -> None:
        for prop in (node.get("properties") or {}).values():
            if isinstance(prop, dict):
                prop.pop("title", None)

    def close_and_require_tags(node: dict[str, Any]) -> None:
        if node.get("type") == "object" and "properties" in node and node.get("additionalProperties") is not False:
            raise ValueError(f"{entry.name}: {node.get('title', 'the root')} accepts unknown fields; "
                             "the wire contract is closed (extra='forbid')")
        discriminator = node.pop("discriminator", None)
        if discriminator is not None:
            tag = discriminator["propertyName"]
            for variant in node["oneOf"]:
                target = _resolve(generated, variant["$ref"]) if "$ref" in variant else variant
                if tag not in target.get("required", []):
                    target["required"] = [tag, *target.get("required", [])]

    _walk(generated, strip_property_titles)
    _walk(generated, close_and_require_tags)
    if entry.tag is not None and "schema" not in generated.get("required", []):
        generated["required"] = ["schema", *generated.get("required", [])]
    for where, rule in _CROSS_FIELD_RULES.get(entry.name, {}).items():
        (defs[where] if where else generated).update(rule)
    description = generated.pop("description", None)
    head: dict[str, Any] = {
        "$schema": DIALECT,
        "$id": entry.id,
        "title": entry.model.__name__,
        "description": f"{entry.name}: {entry.carried_by}." + (f"\n\n{description}" if description else ""),
    }
    return {**head, **generated}


def _render(document: Mapping[str, Any]) -> str:
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _index() -> dict[str, Any]:
    return {"$comment": "Generated by om_stream.wire.schemas.export_schemas: every published schema, by name.",
            "schemas": [{"name": p.name, "id": p.id, "file": p.file, "title": p.model.__name__,
                         "tag": p.tag, "carried_by": p.carried_by} for p in PAYLOADS]}


def _expected_files() -> dict[str, str]:
    files = {p.file: _render(contract_schema(p)) for p in PAYLOADS}
    files[INDEX_FILE] = _render(_index())
    return files


def _published_files(out_dir: Path) -> set[str]:
    """Schema files under ``out_dir`` (the vectors and the README are not schemas)."""
    return {str(path.relative_to(out_dir)) for path in out_dir.rglob("*.json")
            if path.relative_to(out_dir).parts[0] != "vectors"}


def export_schemas(out_dir: str | Path) -> list[Path]:
    """Write every schema (and ``index.json``) under ``out_dir``; removes schema files no model generates any more.
    Returns the paths written."""
    root = Path(out_dir)
    expected = _expected_files()
    for stale in _published_files(root) - set(expected) if root.exists() else ():
        (root / stale).unlink()
    written = []
    for relative, text in expected.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def check_schemas(out_dir: str | Path) -> list[str]:
    """How the files under ``out_dir`` differ from what the models generate now; empty when they are in sync."""
    root = Path(out_dir)
    expected = _expected_files()
    present = _published_files(root) if root.exists() else set()
    problems = [f"missing: {name} (run `om-stream schemas export`)" for name in sorted(set(expected) - present)]
    problems += [f"not generated by any model: {name}" for name in sorted(present - set(expected))]
    for name in sorted(set(expected) & present):
        if (root / name).read_text(encoding="utf-8") != expected[name]:
            problems.append(f"out of date: {name} (the model changed; run `om-stream schemas export` and follow "
                            "the evolution rules in schemas/README.md)")
    return problems


# -- decoding and the normal form -------------------------------------------------------------------------------


def decode_payload(name: str, raw: bytes | str) -> BaseModel:
    """Parse one payload as a consumer of the contract does: a JSON object, the right ``schema`` tag (for tagged
    records), every field as the model says. Raises :class:`WireDecodeError` with the codec's reasons."""
    entry = payload(name)
    body = raw.encode() if isinstance(raw, str) else raw
    data = decode_json(body, max_bytes=len(body))  # the codec's bounds, but for size: a consumer sets its own
    if entry.tag is not None and data.get("schema") != entry.tag:
        raise WireDecodeError("unknown_schema", f"schema {data.get('schema')!r} is not {entry.tag!r}")
    try:
        return entry.model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:10])
        raise WireDecodeError("invalid_fields", problems) from None


def wire_form(model: BaseModel) -> dict[str, Any]:
    """The normal form of a payload, as JSON values: wire (alias) names, defaults written out, optional fields that
    are null left out, required fields kept even when null. RFC 8785 of this is the payload's canonical bytes."""
    if isinstance(model, RootModel):  # a union of records (om.export/v1's lines): the record it holds
        return wire_form(model.root)
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    _keep_required_nulls(model, data)
    return data


def _keep_required_nulls(model: BaseModel, data: dict[str, Any]) -> None:
    for name, field in type(model).model_fields.items():
        key = field.serialization_alias or field.alias or name
        value = getattr(model, name)
        if value is None:
            if field.is_required():
                data[key] = None
        elif isinstance(value, BaseModel):
            _keep_required_nulls(value, data[key])
        elif isinstance(value, list | tuple):
            for item, dumped in zip(value, data[key], strict=True):
                if isinstance(item, BaseModel):
                    _keep_required_nulls(item, dumped)
