"""The reader: the model that answers a question with OM's context, as the user's agent would.

It is sent one system message of its own (the task, and the date the question is asked on), then OM's context as
an agent sends it (``ContextRecord.to_chat_messages``: OM's system blocks, the continuation reminder, the messages
not yet observed, and the question last). Nothing of the haystack reaches it except through OM.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from om_stream import ContextRecord
from om_stream.eval.longmemeval.dataset import Question, format_date
from om_stream.eval.longmemeval.records import ModelUse
from om_stream.ports import ChatMessage, ChatModel, ChatRequest

__all__ = ["Answer", "ask_reader", "reader_messages"]

_TASK = ("You are the user's assistant. You have talked with this user many times before; what you remember of "
         "those conversations follows. Answer the user's latest message from that memory, briefly and directly. "
         "When a question is about time (how long ago, how many days between, which came first), work it out "
         "from the dates in your memory and today's date. If your memory does not hold what is asked, say that "
         "you do not know rather than guess.\n\nToday is {date}.")


@dataclass(frozen=True)
class Answer:
    text: str
    use: ModelUse
    seconds: float


def reader_messages(question: Question, context: ContextRecord) -> tuple[ChatMessage, ...]:
    """The reader's prompt: its task and today's date, then OM's context for the question."""
    out = [ChatMessage("system", _TASK.format(date=format_date(question.question_date)))]
    for message in context.to_chat_messages():
        role = message["role"]
        # LongMemEval has no tool turns; a tool result would reach the reader as the assistant's own words
        out.append(ChatMessage(role if role in ("system", "user") else "assistant", str(message["content"])))
    return tuple(out)


async def ask_reader(model: ChatModel, model_name: str, question: Question, context: ContextRecord) -> Answer:
    request = ChatRequest(role="reader", model=model_name, messages=reader_messages(question, context),
                          temperature=0.0, resource_id=question.question_id, thread_id=context.thread_id)
    began = time.perf_counter()
    response = await model.complete(request)
    return Answer(response.text.strip(), ModelUse.of(response), time.perf_counter() - began)
