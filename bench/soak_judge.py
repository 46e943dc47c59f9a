"""What ``bench/soak.py`` judges a long run by, kept apart from the processes it drives (and unit-tested).

* **The model's answers** (:func:`observer_answer`, :func:`reflector_answer`): the soak's provider is the local fake
  OpenAI server, answering like an Observer that writes one line per user message, copying its marker ``[t12#4]``,
  and a Reflector that folds the markers of a log into ranges (``[t12#0-88]``: every even index from 0 to 88) and
  keeps one extra line for each marker it saw more than once. A reflection thus always compresses, and neither hides
  a lost message (a gap in the ranges) nor a duplicated one (the extra line).
* **The contexts** (:class:`ContextJudge`): read as they arrive, never all kept. Per thread: the newest context (the
  one an agent keeps), how far it covers the thread's messages (who waits for it is woken), the version regressions
  (a version lower than one published before, unless it is that version's very context sent again after a crash),
  and versions published with two contents. At the end, per thread, each user message must appear exactly once in
  the newest context, observed (singly or in a range) or still raw: ``lost`` counts those seen nowhere,
  ``duplicated`` the extra appearances.
* **The provider's bill** (:class:`ProviderLedger`): every successful chat answer the fake server gave, by request
  identity. Two calls are *the same request* when their model and their messages (the whole prompt, byte for byte)
  are equal: what a provider would be asked, and bill, twice. An answer counts once the server has computed it, even
  if its client had stopped waiting (a provider bills that too). ``paid_twice`` sums, over identities answered more
  than once, the answers after the first; those whose identity had an earlier answer delivered late (the fake
  server's "timeout" fault: the client gave up and the gateway asked again), whichever of the two was heard first,
  are told apart from the rest.
* **Figures**: nearest-rank percentiles and least-squares slopes.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from om_stream.testing.fake_openai import RecordedRequest, Reply, Response, Usage

MARKER = re.compile(r"\[(t\d+)#(\d+)(?:-(\d+))?\]")
VERSIONS_KEPT = 512  # versions remembered per thread (a republication after a crash is of the newest few)
_HISTORY = "## New message history to observe"
_LOG_START, _LOG_END = "## Observations to reflect on", "## Your task"


def markers(text: str) -> list[tuple[str, int]]:
    """Every (thread, user message index) the text names, a range ``[t1#0-8]`` naming each even index in it."""
    found = []
    for thread, first, last in MARKER.findall(text):
        start = int(first)
        found.extend((thread, index) for index in range(start, int(last or first) + 1, 2))
    return found


def observer_answer(request: RecordedRequest) -> Response:
    """The fake Observer: one line per user message of the history to observe (its marker copied), else one line
    about the assistant."""
    messages = request.messages
    history = str(messages[-1].get("content", "")) if messages else ""
    section = history.split(_HISTORY, 1)[1] if _HISTORY in history else history
    lines = [f"* 🔴 (09:00) User set the budget and the review date [{thread}#{index}]"
             for thread, index in markers(section)]
    body = "\n".join(lines) or "* 🟡 (09:00) The assistant acknowledged the plan."
    return Reply(f"<observations>\nDate: Mar 1, 2026\n{body}\n</observations>", usage=Usage(400, 20 * len(lines) + 10))


def reflector_answer(request: RecordedRequest) -> Response:
    """The fake Reflector: the log's markers as ranges, plus one line per extra appearance of a marker."""
    text = "\n".join(str(m.get("content", "")) for m in request.messages)
    log = text.split(_LOG_START, 1)[1].split(_LOG_END, 1)[0] if _LOG_START in text else text
    counts: dict[tuple[str, int], int] = {}
    for marker in markers(log):
        counts[marker] = counts.get(marker, 0) + 1
    lines = [f"* 🔴 (09:00) User set budgets and review dates {span}" for span in ranges(counts)]
    lines += [f"* 🔴 (09:00) User repeated [{thread}#{index}]" for (thread, index), n in sorted(counts.items())
              for _ in range(n - 1)]
    body = "\n".join(lines) or "* 🟡 (09:00) Nothing to keep."
    return Reply(f"<observations>\nDate: Mar 1, 2026\n{body}\n</observations>", usage=Usage(800, 10 * len(lines) + 10))


def ranges(counts: dict[tuple[str, int], int]) -> list[str]:
    """The markers as maximal runs of even indices per thread: ``[t1#0-8]``, or ``[t1#12]`` for a run of one."""
    spans = []
    for thread in sorted({t for t, _ in counts}):
        indices = sorted(i for t, i in counts if t == thread)
        start = previous = indices[0]
        for index in [*indices[1:], None]:
            if index is not None and index == previous + 2:
                previous = index
                continue
            spans.append(f"[{thread}#{start}]" if start == previous else f"[{thread}#{start}-{previous}]")
            if index is not None:
                start = previous = index
    return spans


def answer(request: RecordedRequest) -> Response:
    """The fake provider's default answer: a Reflector's when asked to reflect, else an Observer's."""
    text = "\n".join(str(m.get("content", "")) for m in request.messages)
    return reflector_answer(request) if _LOG_START in text else observer_answer(request)


# -- the contexts ----------------------------------------------------------------------------------------------------


@dataclass
class _Thread:
    newest: int = -1
    final: dict[str, Any] | None = None
    through: int = -1
    versions: OrderedDict[int, bytes] = field(default_factory=OrderedDict)
    regressions: int = 0
    two_contents: int = 0
    waiter: tuple[int, asyncio.Future[None]] | None = None


class ContextJudge:
    """Contexts as they arrive (:meth:`seen`), agents waiting for theirs (:meth:`wait`), and the verdict."""

    def __init__(self) -> None:
        self.threads: dict[str, _Thread] = {}
        self.contexts = 0

    def seen(self, thread_id: str, value: bytes) -> None:
        context = json.loads(value)
        digest = hashlib.blake2b(value, digest_size=16).digest()
        state = self.threads.setdefault(thread_id, _Thread())
        self.contexts += 1
        version = int(context["version"])
        first = state.versions.get(version)
        if first is None:
            state.versions[version] = digest
            while len(state.versions) > VERSIONS_KEPT:
                state.versions.popitem(last=False)
        elif first != digest:
            state.two_contents += 1
        if version < state.newest and first != digest:
            state.regressions += 1
        if version >= state.newest:
            state.newest, state.final = version, context
        through = context.get("through_message_id") or ""
        if "-m" in through:
            state.through = max(state.through, int(through.rsplit("-m", 1)[1]))
        waiter = state.waiter
        if waiter is not None and state.through >= waiter[0] and not waiter[1].done():
            waiter[1].set_result(None)

    async def wait(self, thread_id: str, index: int, timeout: float) -> None:
        """Until a context of the thread covers its message ``index``; TimeoutError after ``timeout`` seconds."""
        state = self.threads.setdefault(thread_id, _Thread())
        if state.through >= index:
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        state.waiter = (index, future)
        try:
            await asyncio.wait_for(future, timeout)
        finally:
            state.waiter = None

    def verdict(self, sent: dict[str, int]) -> dict[str, int]:
        """``sent``: messages published per thread (user messages at the even indices below it)."""
        lost = duplicated = 0
        for thread, count in sent.items():
            state = self.threads.get(thread)
            final = state.final if state is not None else None
            text = "" if final is None else final["observations"] + "\n" + "\n".join(
                part.get("text", "") for message in final["messages"] for part in message.get("parts", []))
            seen: dict[int, int] = {}
            for owner, index in markers(text):
                if owner == thread:
                    seen[index] = seen.get(index, 0) + 1
            lost += sum(1 for index in range(0, count, 2) if seen.get(index, 0) == 0)
            duplicated += sum(n - 1 for n in seen.values() if n > 1)
        return {"lost": lost, "duplicated": duplicated,
                "regressed_threads": sum(1 for s in self.threads.values() if s.regressions),
                "two_contents_threads": sum(1 for s in self.threads.values() if s.two_contents)}


# -- the provider's bill ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Duplicate:
    first_at: float
    again_at: float
    after_timeout: bool
    thread: str


class ProviderLedger:
    """Told of every answer of the fake server (``FakeOpenAI(on_answer=ledger.heard)``, from its threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: dict[bytes, list[tuple[float, bool]]] = {}
        self.answers = 0
        self.duplicates: list[Duplicate] = []

    def heard(self, request: RecordedRequest, response: Response, delivered: bool) -> None:
        if request.path != "/v1/chat/completions" or not isinstance(response, Reply):
            return
        identity = hashlib.blake2b(json.dumps([request.model, request.messages], sort_keys=True).encode(),
                                   digest_size=16).digest()
        late = response.delay > 0 or not delivered  # the client had stopped waiting
        with self._lock:
            self.answers += 1
            earlier = self._answers.setdefault(identity, [])
            if earlier:
                thread = next(iter(markers(request.prompt_text)), ("?", 0))[0]
                # the late answer is often heard last: the gateway gave up on it, asked again and was answered
                # at once, while the first request's answer was still being delayed
                self.duplicates.append(Duplicate(earlier[0][0], request.received_at,
                                                 response.delay > 0 or any(was_late for _, was_late in earlier),
                                                 thread))
            earlier.append((request.received_at, late))

    def reset(self) -> None:
        with self._lock:
            self._answers.clear()
            self.answers = 0
            self.duplicates = []

    def summary(self) -> dict[str, int]:
        with self._lock:
            after_timeout = sum(1 for d in self.duplicates if d.after_timeout)
            return {"model_answers": self.answers, "paid_twice": len(self.duplicates),
                    "paid_twice_after_timeout": after_timeout,
                    "paid_twice_other": len(self.duplicates) - after_timeout}


# -- figures ---------------------------------------------------------------------------------------------------------


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest rank; 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(len(ordered) * share) - 1))]


def slope(points: Iterable[tuple[float, float]]) -> float:
    """Least-squares slope of y over x; 0 for fewer than two distinct x."""
    pairs = list(points)
    if len(pairs) < 2:
        return 0.0
    mean_x = sum(x for x, _ in pairs) / len(pairs)
    mean_y = sum(y for _, y in pairs) / len(pairs)
    spread = sum((x - mean_x) ** 2 for x, _ in pairs)
    if spread == 0:
        return 0.0
    return sum((x - mean_x) * (y - mean_y) for x, y in pairs) / spread
