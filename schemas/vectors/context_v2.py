"""Writes ``context-v2.json``: sequences of ``om.context/v2`` records as a client reads them, with the
``om.context/v1`` context each one makes available.

Run from the repository root: ``.venv/bin/python schemas/vectors/context_v2.py``. Each sequence is a replayed
conversation (``tests.support.replayed_contexts``: the real host, scripted model outcomes) whose contexts go through
the worker's ``wire.context_refs.by_reference``; its records (blocks, index, cursor, tombstones of dropped blocks,
and at the end an erase's tombstones) are read in an order a client may see: each topic in its own order, the three
topics interleaved at random (a cursor before its index, an index before its blocks). A record whose reading makes
a context available carries it in ``delivers`` (the v1 record's wire form, as the worker rendered it: the generator
checks that the Python client's assembly gives exactly it); ``erased`` marks the cursor tombstone after which the
thread has no context. Every client reads a sequence record by record and must deliver exactly these.
"""

from __future__ import annotations

import json
import random
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from om_stream.client.assembly import ContextAssembly  # noqa: E402
from om_stream.wire.codec import encode  # noqa: E402
from om_stream.wire.context import ContextRecord  # noqa: E402
from om_stream.wire.context_refs import Sent, by_reference  # noqa: E402
from om_stream.wire.context_v2 import BlockRecord, ContextCursor, ContextIndex, block_key, split_block_key  # noqa: E402
from om_stream.wire.schemas import wire_form  # noqa: E402
from tests.support.replayed_contexts import Variation, replayed_contexts, variation  # noqa: E402

CONTEXT, INDEX, BLOCKS = "om.context", "om.context.index", "om.context.blocks"
Record = tuple[str, str, BlockRecord | ContextIndex | ContextCursor | None]


def _published(v: Variation) -> tuple[str, list[Record], dict[int, ContextRecord]]:
    """Every record the worker publishes for the variation's first thread, in publication order, and the v1
    record of each context version."""
    records: list[Record] = []
    v1: dict[int, ContextRecord] = {}
    sent: Sent | None = None
    thread_id = None
    for seen in replayed_contexts(v):
        if thread_id is None:
            thread_id = seen.spec.thread_id
        if seen.spec.thread_id != thread_id:
            continue
        spec = seen.spec
        out, sent = by_reference(seen.record, pinned_message_id=spec.pinned_message_id,
                                 run_ids=[i for i in spec.message_ids if i != spec.pinned_message_id],
                                 expire_before=spec.expire_before, previous=sent)
        v1[spec.version] = seen.record
        records += [(BLOCKS, block_key(b.thread_id, b.digest), b) for b in out.blocks]
        if out.index is not None:
            records.append((INDEX, thread_id, out.index))
        records.append((CONTEXT, thread_id, out.cursor))
        records += [(BLOCKS, block_key(thread_id, d), None) for d in out.dropped]
    assert thread_id is not None
    assert sent is not None
    # the erase: the cursor, the index, the blocks of the last index
    records += [(CONTEXT, thread_id, None), (INDEX, thread_id, None)]
    records += [(BLOCKS, block_key(thread_id, d), None) for d in dict.fromkeys(sent.index.blocks)]
    return thread_id, records, v1


def _read_order(records: list[Record], rng: random.Random) -> list[Record]:
    """The records as a client reading the three topics apart sees them: each topic in order; mostly in publication
    order, but now and then a topic runs ahead of the others by a few records (a cursor before its index, an index
    before its blocks, a tombstone before the cursor it follows)."""
    queues: dict[str, list[tuple[int, Record]]] = {CONTEXT: [], INDEX: [], BLOCKS: []}
    for position, record in enumerate(records):
        queues[record[0]].append((position, record))
    out: list[Record] = []
    while any(queues.values()):
        waiting = [t for t, q in queues.items() if q]
        topic = (rng.choice(waiting) if rng.random() < 0.3 else min(waiting, key=lambda t: queues[t][0][0]))
        for _ in range(rng.choice([1, 1, 2, 3]) if rng.random() < 0.3 else 1):
            if queues[topic]:
                out.append(queues[topic].pop(0)[1])
    return out


def sequence(name: str, v: Variation, order_seed: int) -> dict[str, Any]:
    thread, records, v1 = _published(v)
    assembly = ContextAssembly()
    steps: list[dict[str, Any]] = []
    delivered = 0
    for topic, key, value in _read_order(records, random.Random(order_seed)):
        step: dict[str, Any] = {"topic": topic, "key": key,
                                "value": wire_form(value) if value is not None else None}
        if topic == CONTEXT and value is None:
            assembly.forget(key)
            step["erased"] = True
            steps.append(step)
            continue
        if isinstance(value, ContextCursor):
            outcome = assembly.on_cursor(value)
        elif topic == INDEX:
            outcome = assembly.on_index(key, value if isinstance(value, ContextIndex) else None)
        else:
            thread_id, digest = split_block_key(key)
            outcome = assembly.on_block(thread_id, digest, value.text if isinstance(value, BlockRecord) else None)
        if outcome is not None:
            assert isinstance(outcome, ContextRecord), f"{name}: a client that read everything fetched a run"
            assert encode(outcome) == encode(v1[outcome.version]), f"{name}: version {outcome.version} differs"
            step["delivers"] = wire_form(outcome)
            delivered += 1
        steps.append(step)
    assert delivered >= 3, f"{name}: only {delivered} contexts delivered"
    return {"name": name, "thread_id": thread, "records": steps}


def _pick(seed: int, **wanted: Any) -> Variation:
    """The first variation from ``seed`` on with the wanted attributes (a deterministic search)."""
    while True:
        v = variation(seed)
        if all(getattr(v, k) == value for k, value in wanted.items()):
            return replace(v, turns=min(v.turns, 12))  # a vector file a reader can open
        seed += 1


SEQUENCES = [
    ("observations-and-reflections", lambda: _pick(11, scope="thread", clear_at=None, retention_days=None), 1),
    ("dated-with-a-retention-window", lambda: _pick(40, scope="thread", dated=True, retention_days=1), 2),
    ("cleared-midway", lambda: _pick(70, scope="thread", clear_at=4), 3),
    ("resource-scope", lambda: _pick(100, scope="resource"), 4),
]


def main() -> None:
    out = {"$comment": "Written by schemas/vectors/context_v2.py. Read each sequence's records in order (topic, key, "
                       "value; value null is a tombstone); after a record with 'delivers' the client's latest "
                       "context of the thread is exactly that om.context/v1 record (wire form), and no other record "
                       "delivers one; after 'erased' the thread has none.",
           "sequences": [sequence(name, make(), seed) for name, make, seed in SEQUENCES]}
    (HERE / "context-v2.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
