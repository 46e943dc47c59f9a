"""The Python client of om-stream: publish messages, read the context back, follow events, call recall.

    from om_stream import TextPart
    from om_stream.client import MessageRecord, OMClient

    async with OMClient("localhost:9092") as om:
        sent = await om.publish(MessageRecord(..., parts=(TextPart(text="Hi"),)))
        # a thread several people or agents write to: say who wrote each message
        await om.publish(MessageRecord(..., author=Author(id="user-42", name="Ana", kind="human")))
        context = await om.await_context(thread_id, sent.message_id, timeout=30)

Everything here speaks the wire contract (``schemas/``) over Kafka; nothing here runs om-stream itself, and nothing
here reads the server's settings: the topic names and the Kafka options (``security_protocol``, ``sasl_*``, ...)
are the client's own arguments. ``tests/unit/test_public_api.py`` pins ``__all__``.
"""

from om_stream.client.client import ClientTopics, OMClient, Published
from om_stream.client.events import EventEnvelope, EventStream
from om_stream.client.messages_api import MessagesApi
from om_stream.client.partitioning import partition_for
from om_stream.core.messages import Author
from om_stream.wire.context import ContextRecord
from om_stream.wire.messages import MessageRecord
from om_stream.wire.recall import RecallRequest, RecallResponse

__all__ = [
    "Author",
    "ClientTopics",
    "ContextRecord",
    "EventEnvelope",
    "EventStream",
    "MessageRecord",
    "MessagesApi",
    "OMClient",
    "Published",
    "RecallRequest",
    "RecallResponse",
    "partition_for",
]
