"""Export and import on the in-memory and SQLite stores (the shared checks of ``tests/support/export_contract.py``;
Cassandra runs them in ``tests/integration/test_cassandra_export.py``), what an export costs in memory, and what an
import refuses."""

from __future__ import annotations

import gc
import json
import tracemalloc
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.adapters.sqlite_export import MESSAGE_PAGE
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.core.messages import Message, TextPart
from om_stream.errors import InputRejected, WireDecodeError
from om_stream.ports import ExportSource
from om_stream.runtime.exporter import write_lines
from om_stream.runtime.importer import import_lines
from om_stream.wire.export import ExportLine
from tests.support.export_contract import EXPORT_CHECKS, Collected, export_of, fill
from tests.support.store_contract import T0

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "om.export" / "v1.json"


@cache
def _validator() -> Draft202012Validator:
    return Draft202012Validator(json.loads(SCHEMA.read_text()))


def test_every_store_is_an_export_source() -> None:
    assert isinstance(InMemoryContentStore(), ExportSource) and isinstance(SqliteContentStore(), ExportSource)


@pytest.mark.parametrize("check", EXPORT_CHECKS, ids=lambda c: c.__name__)
async def test_memory_store_export_contract(check: Any) -> None:
    await check(InMemoryContentStore(), InMemoryContentStore(), "p-")


@pytest.mark.parametrize("check", EXPORT_CHECKS, ids=lambda c: c.__name__)
async def test_sqlite_store_export_contract(check: Any, tmp_path: Path) -> None:
    source, target = SqliteContentStore(tmp_path / "a.db"), SqliteContentStore(tmp_path / "b.db")
    try:
        await check(source, target, "p-")
    finally:
        await source.close()
        await target.close()


async def test_every_line_is_what_the_published_schema_and_the_models_say() -> None:
    store = InMemoryContentStore()
    resource, states = await fill(store, "p-")
    lines = await export_of(store, resource, states=states)
    for line in lines:
        value = json.loads(line)
        _validator().validate(value)
        assert ExportLine.model_validate_json(line).root.type == value["type"]
        assert line.endswith(b"\n") and b"\n" not in line[:-1]  # one object per line, whatever the text holds


async def test_an_export_holds_a_page_of_rows_at_a_time(tmp_path: Path) -> None:
    """Exporting 8,000 messages of 2 KB (16 MB of bodies) takes a few pages' worth of memory, not the export's:
    measured with tracemalloc around the export, the rows written to a sink that keeps nothing."""
    store = SqliteContentStore(tmp_path / "big.db")
    text = "x" * 2000
    count = 8000
    async with store.batched_writes():
        for i in range(count):
            thread = f"t{i % 4}"
            await store.put_message(thread, Message(message_id=f"m{i}", thread_id=thread, resource_id="r",
                                                    role="user", created_at=T0 + timedelta(seconds=i),
                                                    parts=(TextPart(text=text),)), i // 4, 500)
    written = 0

    async def sink(chunk: bytes) -> None:
        nonlocal written
        written += len(chunk)

    gc.collect()
    tracemalloc.start()
    try:
        size = await write_lines(_lines(store), sink)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await store.close()
    assert size == written > count * 2000
    page = MESSAGE_PAGE * 2200  # one page of rows as bytes
    assert peak < 4 * page < written / 3, (peak, page, written)


async def _lines(store: SqliteContentStore) -> Any:
    from om_stream.runtime.exporter import ExportSpec, HeldStates, export_lines

    async for line in export_lines(ExportSpec("r", store, HeldStates({}), "thread", "o200k_base")):
        yield line


# -- what an import refuses --------------------------------------------------------------------------------------


async def _export() -> tuple[str, list[bytes]]:
    store = InMemoryContentStore()
    resource, states = await fill(store, "p-")
    return resource, await export_of(store, resource, states=states)


async def test_a_file_cut_off_restores_nothing() -> None:
    _, lines = await _export()
    collected = Collected()
    with pytest.raises(WireDecodeError, match="no end line") as raised:
        await import_lines(lines[:-3], store=InMemoryContentStore(), restorer=collected, scope="thread")
    assert raised.value.reason == "truncated" and collected.states == []


async def test_an_end_line_that_does_not_count_what_came_before_is_refused() -> None:
    _, lines = await _export()
    missing_a_message = [line for line in lines if b'"p-m5"' not in line]
    collected = Collected()
    with pytest.raises(WireDecodeError, match="the end line counts") as raised:
        await import_lines(missing_a_message, store=InMemoryContentStore(), restorer=collected, scope="thread")
    assert raised.value.reason == "truncated" and collected.states == []


async def test_a_row_of_another_resource_stops_the_import() -> None:
    _, lines = await _export()
    forged = [line.replace(b'"resource_id":"p-r"', b'"resource_id":"victim"') if b'"p-m3"' in line else line
              for line in lines]
    target = InMemoryContentStore()
    with pytest.raises(WireDecodeError, match="is not one of resource 'p-r'"):
        await import_lines(forged, store=target, restorer=Collected(), scope="thread")
    assert await target.get_messages(["p-m3"], resource_id="victim") == []


async def test_a_segment_of_a_record_the_file_holds_no_message_of_is_refused() -> None:
    _, lines = await _export()
    forged = [line.replace(b'"record_key":"p-t1"', b'"record_key":"someone-else"') if b'"type":"segment"' in line
              else line for line in lines]
    with pytest.raises(WireDecodeError, match="record 'someone-else' holds no message"):
        await import_lines(forged, store=InMemoryContentStore(), restorer=Collected(), scope="thread")


async def test_lines_out_of_order_and_a_missing_header_are_refused() -> None:
    _, lines = await _export()
    with pytest.raises(WireDecodeError, match="starts with its header"):
        await import_lines(lines[1:], store=InMemoryContentStore(), restorer=Collected(), scope="thread")
    swapped = [lines[0], *[line for line in lines if b'"type":"segment"' in line][:1], *lines[1:]]
    with pytest.raises(WireDecodeError, match="a state line after the segment lines"):
        await import_lines(swapped, store=InMemoryContentStore(), restorer=Collected(), scope="thread")


async def test_a_state_that_is_not_a_record_state_is_refused_before_anything_is_written() -> None:
    _, lines = await _export()
    broken = [line.replace(b'"msg_seq":11', b'"msg_seq":"eleven"') for line in lines]
    target = InMemoryContentStore()
    with pytest.raises(WireDecodeError, match="msg_seq"):
        await import_lines(broken, store=target, restorer=Collected(), scope="thread")
    assert target.message_count() == 0


async def test_an_export_of_another_scope_is_refused() -> None:
    _, lines = await _export()
    with pytest.raises(InputRejected, match="thread scope; this one is in resource scope") as raised:
        await import_lines(lines, store=InMemoryContentStore(), restorer=Collected(), scope="resource")
    assert raised.value.reason == "scope_mismatch"
