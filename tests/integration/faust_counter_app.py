"""A tiny Faust app with a changelog-backed table, run as a real worker process by test_faust_recovery.py.

Configured from the environment: COUNTER_BROKER (bootstrap), COUNTER_APP_ID (unique per test), COUNTER_IN/OUT, and
COUNTER_READY_FILE: written (with the worker's pid) once the worker has finished starting, i.e. its table recovery
is complete and Faust has resumed the flow of events to the agent. Input sent before that point may be lost by
Faust itself (see test_faust_recovery.py), so the test sends its input only once this file exists.
"""

from __future__ import annotations

import os
from pathlib import Path

import faust


def create_app() -> faust.App:
    app = faust.App(
        os.environ["COUNTER_APP_ID"],
        broker=f"kafka://{os.environ['COUNTER_BROKER']}",
        store="memory://",
        datadir=os.environ.get("COUNTER_DATA_DIR", "."),
        topic_partitions=2,
        topic_replication_factor=1,
        broker_session_timeout=6.0,
        broker_rebalance_timeout=6.0,
        producer_linger=0.005,
        web_enabled=False,
    )
    raw = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
    source = app.topic(os.environ["COUNTER_IN"], partitions=2, **raw)
    sink = app.topic(os.environ["COUNTER_OUT"], partitions=1, **raw)
    counts = app.Table("counts", default=int, partitions=2)

    @app.agent(source, concurrency=1)
    async def count(stream: faust.StreamT[bytes]) -> None:
        async for raw_key, _value in stream.items():
            key = raw_key.decode()
            counts[key] += 1
            await sink.send(key=raw_key, value=f"{key}={counts[key]}".encode())

    ready_file = os.environ.get("COUNTER_READY_FILE")
    if ready_file:
        @app.task
        async def announce_ready() -> None:
            # Faust starts app tasks after the table recovery has completed; the recovery resumes the flow (and
            # clears the agents' buffers) before it sets "completed", so from here on nothing fetched is discarded
            Path(ready_file).write_text(str(os.getpid()))

    return app


app = create_app()
