"""``om.export/v1``: everything om-stream holds for one resource, as JSON Lines (``om-stream export``,
``GET /v1/resources/{id}/export``), and what ``om-stream import`` reads back to rebuild the same memory.

One JSON object per line, its ``type`` saying what it is. A file is, in this order:

1. ``header``: the format (``schema``), the resource, the exporting deployment's scope and token encoding;
2. ``state``: each record's control state as its state table held it (ids, token counts, times, hints, overrides:
   what makes its context), read before the rows below, so every row a state refers to is in the file;
3. ``thread``: each thread, with the metadata the Observer keeps (title, hints, extracted values, working memory);
4. ``message``: every message, with the record that took it in, its place there (``seq``) and its token count;
5. ``record``: each record's epoch (how many times it was cleared);
6. ``segment``: every observation and reflection segment, with the generations whose log holds it;
7. ``generation``: each committed generation's log;
8. ``recall-point``: the recall index's payloads (the text of each chunk a vector was made from; no vectors);
9. ``end``: how many lines of each type came before it. A file without it is incomplete (a stream cut off), and
   ``om-stream import`` refuses it.

A state's own form is the state table's (``RecordState.to_dict``): it is versioned with the table (a worker
upgraded in place reads its old table), not by this schema, and it is checked field by field when it is imported.

The exporter writes message lines itself (the stored message JSON is spliced in as is, never parsed) and the other
lines through these models; a test holds both to the published schema.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel

from om_stream.core.export_rows import ExportedSegment, ExportedThread
from om_stream.core.messages import MAX_SAFE_INTEGER, Message
from om_stream.core.recall.records import GenerationRecord, MessageRange

__all__ = [
    "EXPORT_SCHEMA",
    "LINE_TYPES",
    "EndLine",
    "ExportLine",
    "GenerationLine",
    "HeaderLine",
    "LineCounts",
    "MessageLine",
    "RangeItem",
    "RecallPointLine",
    "RecordLine",
    "SegmentLine",
    "StateLine",
    "ThreadLine",
    "message_line",
]

EXPORT_SCHEMA: Literal["om.export/v1"] = "om.export/v1"
_Id = Annotated[str, Field(min_length=1, max_length=256)]
_Count = Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER)]
_Millis = Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER)]


class _Line(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True)

    def encode(self) -> bytes:
        """The line, newline included."""
        return self.model_dump_json(by_alias=True).encode() + b"\n"


class HeaderLine(_Line):
    """The first line."""

    type: Literal["header"] = "header"
    schema_: Literal["om.export/v1"] = Field(alias="schema")
    resource_id: _Id
    scope: Literal["thread", "resource"] = Field(description="The exporting deployment's scope: records are "
                                                             "threads, or the resource")
    token_encoding: str = Field(description="The tokenizer the token counts were made with")
    exported_at: datetime
    generator: str = Field(description="What wrote the file (om-stream and its version)")


class StateLine(_Line):
    """A record's control state, as its state table holds it."""

    type: Literal["state"] = "state"
    record_key: _Id
    state: dict[str, Any] = Field(description="The record's state (RecordState.to_dict): ids, token counts, times, "
                                              "hints and overrides; no message or observation text")


class ThreadLine(_Line):
    type: Literal["thread"] = "thread"
    thread_id: _Id
    created_at: _Millis | None = Field(None, description="Epoch ms of the thread's first message")
    updated_at: _Millis | None = Field(None, description="Epoch ms of its newest message")
    title: str | None = None
    current_task: str | None = None
    suggested_response: str | None = None
    extracted: dict[str, Any] = Field(default_factory=dict, description="Extracted values, by extractor slug")
    last_observed_message_id: str | None = None
    working_memory: Any = Field(None, description="The working memory: markdown text, or an object")

    @classmethod
    def of(cls, thread: ExportedThread) -> ThreadLine:
        return cls(thread_id=thread.thread_id, created_at=thread.created_at, updated_at=thread.updated_at,
                   title=thread.title, current_task=thread.current_task,
                   suggested_response=thread.suggested_response, extracted=thread.extracted,
                   last_observed_message_id=thread.last_observed_message_id, working_memory=thread.working_memory)


class MessageLine(_Line):
    type: Literal["message"] = "message"
    record_key: _Id = Field(description="The record that took the message in (the thread, or the resource)")
    seq: _Count = Field(description="Its place in that record's arrival order")
    tokens: _Count
    message: Message = Field(description="The message: the fields of om.message/v1, without its schema tag")


class RecordLine(_Line):
    type: Literal["record"] = "record"
    record_key: _Id
    epoch: _Count = Field(description="How many times its observations were cleared")


class RangeItem(BaseModel):
    """A run of one thread's messages a segment covers (``first_seq``/``last_seq``: their record sequence
    numbers, when known)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    thread_id: _Id
    first_message_id: str
    last_message_id: str
    first_seq: _Count | None = None
    last_seq: _Count | None = None

    def to_range(self) -> MessageRange:
        return MessageRange(self.thread_id, self.first_message_id, self.last_message_id, self.first_seq,
                            self.last_seq)


class SegmentLine(_Line):
    type: Literal["segment"] = "segment"
    record_key: _Id
    segment_id: _Id
    kind: Literal["observation", "reflection"]
    generation: _Count = Field(description="The generation it was computed in")
    text: str
    tokens: _Count
    cycle_id: str
    thread_ids: list[str]
    first_message_id: str
    last_message_id: str
    message_ids: list[str]
    message_tokens: _Count
    boundary_at: _Millis = Field(description="Epoch ms of the newest message it covers")
    created_at: _Millis
    generations: list[_Count] = Field(description="The generations whose log holds it; empty: buffered")
    ranges: list[RangeItem]
    replaced: list[str] = Field(default_factory=list, description="A committed reflection: the segments it "
                                                                  "condensed")

    @classmethod
    def of(cls, segment: ExportedSegment) -> SegmentLine:
        return cls(record_key=segment.record_key, segment_id=segment.segment_id, kind=segment.kind,
                   generation=segment.generation, text=segment.text, tokens=segment.tokens,
                   cycle_id=segment.cycle_id, thread_ids=list(segment.thread_ids),
                   first_message_id=segment.first_message_id, last_message_id=segment.last_message_id,
                   message_ids=list(segment.message_ids), message_tokens=segment.message_tokens,
                   boundary_at=segment.boundary_at, created_at=segment.created_at,
                   generations=list(segment.generations),
                   ranges=[RangeItem(thread_id=r.thread_id, first_message_id=r.first_message_id,
                                     last_message_id=r.last_message_id, first_seq=r.first_seq, last_seq=r.last_seq)
                           for r in segment.ranges],
                   replaced=list(segment.replaced))


class GenerationLine(_Line):
    type: Literal["generation"] = "generation"
    record_key: _Id
    generation: _Count
    segment_ids: list[str] = Field(description="Its log: the reflection that started it, then the segments kept")
    reflection_id: str
    replaced_segment_ids: list[str]
    observation_tokens: _Count

    @classmethod
    def of(cls, record: GenerationRecord) -> GenerationLine:
        return cls(record_key=record.record_key, generation=record.generation, segment_ids=list(record.segment_ids),
                   reflection_id=record.reflection_id, replaced_segment_ids=list(record.replaced_segment_ids),
                   observation_tokens=record.observation_tokens)


class RecallPointLine(_Line):
    """A point of the recall index without its vector: the chunk of text it was embedded from."""

    type: Literal["recall-point"] = "recall-point"
    record_key: _Id
    thread_id: _Id
    kind: Literal["message", "group"]
    source_id: _Id = Field(description="The message id, or the observation group (segment) id")
    chunk: _Count
    text: str
    observed_at: _Millis
    range: str | None = None
    cursor: str | None = None
    author_keys: list[str] | None = Field(None, description="A message's author, as a search by author matches it "
                                                          "(its id and the name shown for it); absent: no author")

    def encode(self) -> bytes:
        """The line, newline included; without ``author_keys`` when it has none, so the points of a resource
        without authors export as they did before authors existed."""
        exclude = {"author_keys"} if self.author_keys is None else None
        return self.model_dump_json(by_alias=True, exclude=exclude).encode() + b"\n"


class LineCounts(BaseModel):
    """How many lines of each type an export holds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    states: _Count
    threads: _Count
    messages: _Count
    records: _Count
    segments: _Count
    generations: _Count
    recall_points: _Count


class EndLine(_Line):
    """The last line: how many lines of each type came before it."""

    type: Literal["end"] = "end"
    counts: LineCounts
    records_without_state: list[str] = Field(default_factory=list, description="Records whose state could not be "
                                                                               "read: their rows are exported, "
                                                                               "their memory is not")


_Any = Annotated[HeaderLine | StateLine | ThreadLine | MessageLine | RecordLine | SegmentLine | GenerationLine
                 | RecallPointLine | EndLine, Field(discriminator="type")]


class ExportLine(RootModel[_Any]):
    """One line of an ``om.export/v1`` file."""

    model_config = ConfigDict(frozen=True, title="om.export/v1")


LINE_TYPES = ("header", "state", "thread", "message", "record", "segment", "generation", "recall-point", "end")


def message_line(record_key: str, seq: int, tokens: int, body: str) -> bytes:
    """A message line with the stored message JSON spliced in as is (a :class:`MessageLine`, without parsing the
    message: an export of a long conversation is mostly message bodies)."""
    return (f'{{"type":"message","record_key":{json.dumps(record_key)},"seq":{seq},"tokens":{tokens},'
            f'"message":{body}}}\n').encode()
