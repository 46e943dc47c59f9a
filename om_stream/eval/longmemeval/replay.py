"""One question's haystack through Observational Memory, on the haystack's own clock, then the question itself.

Each question gets its own ``Memory`` (SQLite in memory, a manual clock), so questions share nothing and can run
side by side. Sessions are replayed in date order. A session's messages start at the session's date and follow
each other ``TURN_SPACING`` apart (the dataset dates sessions, not messages); within a session the messages come
as fast as an agent would send them, and the background cycles a session started finish before the next session
begins (days usually pass in between). The question is then the user's next message, at the question date, and the
context OM publishes for it is what the reader gets: exactly what an agent would send its model.

Thread scope (the default) keeps the whole haystack in one thread. In resource scope (``scope: resource`` in the
options) every session is a thread of the same resource and the question opens a thread of its own, so the reader
sees what OM remembers across conversations.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from om_stream import ContextRecord, Memory, Message, OMConfig, TextPart
from om_stream.eval.longmemeval.dataset import Question
from om_stream.eval.longmemeval.records import ModelUse
from om_stream.ports import ChatModel
from om_stream.runtime.clock import ManualClock
from om_stream.runtime.cycles import RoleStats

__all__ = ["TURN_SPACING", "Recollection", "haystack_messages", "question_message", "recollect"]

TURN_SPACING = timedelta(seconds=30)
_MIN_STEP = timedelta(milliseconds=1)


@dataclass(frozen=True)
class Recollection:
    """What OM made of one question's haystack."""

    context: ContextRecord  # the context published for the question
    observer: ModelUse
    reflector: ModelUse
    model_failures: int
    offline_fallback_calls: int
    history_tokens: int  # every haystack message, counted as OM counts them
    seconds: float


def _thread(question: Question, session_id: str, scope: str) -> str:
    return question.question_id if scope == "thread" else f"{question.question_id}:{session_id}"


def haystack_messages(question: Question, scope: str = "thread") -> list[list[Message]]:
    """The haystack as messages, one list per session in date order, with strictly increasing times."""
    sessions: list[list[Message]] = []
    last: datetime | None = None
    for index, session in enumerate(question.sessions()):
        thread = _thread(question, session.session_id, scope)
        messages: list[Message] = []
        for turn_index, turn in enumerate(session.turns):
            when = session.date + turn_index * TURN_SPACING
            if last is not None and when <= last:
                when = last + _MIN_STEP  # sessions dated closer together than their length: keep the order
            last = when
            messages.append(Message(message_id=f"s{index}:{turn_index}", thread_id=thread,
                                    resource_id=question.question_id, role=turn.role, created_at=when,
                                    parts=(TextPart(text=turn.content),)))
        sessions.append(messages)
    return sessions


def question_message(question: Question, after: datetime | None, scope: str = "thread") -> Message:
    """The question as the user's next message: at the question date (after the haystack's last message)."""
    when = question.question_date
    if after is not None and when <= after:
        when = after + _MIN_STEP
    return Message(message_id="question", thread_id=_thread(question, "question", scope),
                   resource_id=question.question_id, role="user", created_at=when,
                   parts=(TextPart(text=question.question),))


def _use(stats: RoleStats) -> ModelUse:
    return ModelUse(calls=stats.calls + stats.extraction_calls, input_tokens=stats.input_tokens,
                    output_tokens=stats.output_tokens,
                    cost_usd=None if stats.unknown_cost_calls else stats.cost_usd,
                    unknown_cost_calls=stats.unknown_cost_calls)


async def recollect(question: Question, options: OMConfig, model: ChatModel | None) -> Recollection:
    """Replay ``question``'s haystack through a fresh ``Memory`` (``model``: OM's models; None: the offline model)
    and return the context it publishes for the question."""
    began = time.perf_counter()
    scope = options.resolve().scope
    sessions = haystack_messages(question, scope)
    first = next((s[0] for s in sessions if s), None)
    clock = ManualClock(first.created_at_ms if first else 0)
    async with Memory(options, model=model, clock=clock) as om:
        history = 0
        last: datetime | None = None
        for session in sessions:
            for message in session:
                await om.advance_to(message.created_at_ms)
                await om.add_message(message)
                history += om.accountant.message_tokens(message)
                last = message.created_at
            await om.settle()
        asked = question_message(question, last, scope)
        await om.advance_to(asked.created_at_ms)
        context = await om.add_message(asked)
        assert context is not None  # add_message waits for the context that includes the question
        observer, reflector = om.stats.observer, om.stats.reflector
        fallback = observer.offline_calls + reflector.offline_calls if om.model is not om.offline else 0
        return Recollection(context=context, observer=_use(observer), reflector=_use(reflector),
                            model_failures=observer.failures + reflector.failures, offline_fallback_calls=fallback,
                            history_tokens=history, seconds=time.perf_counter() - began)
