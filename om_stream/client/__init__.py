"""The Python client of om-stream: publish messages, read the context back, follow events, call recall.

    async with OMClient("localhost:9092") as om:
        sent = await om.publish(MessageRecord(...))
        context = await om.await_context(sent_thread_id, sent.message_id, timeout=30)

Everything here speaks the wire contract (``schemas/``) over Kafka; nothing here runs om-stream itself.
"""

from om_stream.client.client import ClientTopics, OMClient, Published
from om_stream.client.events import EventEnvelope, EventStream
from om_stream.client.partitioning import partition_for

__all__ = ["ClientTopics", "EventEnvelope", "EventStream", "OMClient", "Published", "partition_for"]
