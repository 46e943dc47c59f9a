"""The two baselines of ``bench/e2e.py``, each run as its own process (``python bench/pipelines.py KIND``).

* ``aiokafka``: a bare consume → produce loop (the ceiling of Python on Kafka);
* ``faust``: a bare Faust agent that decodes each record and forwards it (the ceiling of the chosen framework),
  with the same producer linger and batching-free settings om-stream starts from.
Both read ``BENCH_BOOTSTRAP``, ``BENCH_IN``, ``BENCH_OUT`` and ``BENCH_GROUP`` from the environment.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any


async def aiokafka_loop() -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    bootstrap, source, sink = os.environ["BENCH_BOOTSTRAP"], os.environ["BENCH_IN"], os.environ["BENCH_OUT"]
    consumer = AIOKafkaConsumer(source, bootstrap_servers=bootstrap, group_id=os.environ["BENCH_GROUP"],
                                auto_offset_reset="earliest", session_timeout_ms=6000)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await consumer.start()
    await producer.start()
    try:
        while True:
            batch = await consumer.getmany(timeout_ms=1000)
            for records in batch.values():
                for record in records:
                    value = json.loads(record.value)
                    await producer.send(sink, json.dumps(value).encode(), key=record.key)
    finally:
        await producer.stop()
        await consumer.stop()


def faust_app() -> Any:
    import faust

    raw: dict[str, Any] = {"key_type": bytes, "value_type": bytes, "key_serializer": "raw", "value_serializer": "raw"}
    app = faust.App(os.environ["BENCH_GROUP"], broker=f"kafka://{os.environ['BENCH_BOOTSTRAP']}", store="memory://",
                    datadir=os.environ.get("BENCH_DATA_DIR", "."),
                    topic_partitions=int(os.environ.get("BENCH_PARTITIONS", "4")), topic_replication_factor=1,
                    broker_session_timeout=6.0, broker_rebalance_timeout=6.0, producer_linger=0.005,
                    web_enabled=False, web_bind="127.0.0.1", web_port=int(os.environ.get("BENCH_WEB_PORT", "0")),
                    key_serializer="raw", value_serializer="raw")
    source = app.topic(os.environ["BENCH_IN"], **raw)
    sink = app.topic(os.environ["BENCH_OUT"], **raw)

    @app.agent(source, concurrency=1)
    async def forward(stream: Any) -> None:
        async for key, value in stream.items():
            decoded = json.loads(value)
            await sink.send(key=key, value=json.dumps(decoded).encode())

    return app


if __name__ == "__main__":
    if sys.argv[1] == "aiokafka":
        asyncio.run(aiokafka_loop())
    else:
        from faust.worker import Worker

        Worker(faust_app(), loglevel="WARNING", quiet=True, redirect_stdouts=False).execute_from_commandline()
