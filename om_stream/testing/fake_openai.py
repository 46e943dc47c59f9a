"""A scriptable OpenAI-compatible HTTP server on 127.0.0.1, for exercising real litellm calls without a provider.

It owns the loopback socket, the script of answers and the record of requests. It never reaches beyond loopback
and depends on the standard library only, so users' own tests can ship with it::

    with FakeOpenAI() as srv:
        srv.enqueue(Reply("observed", usage=Usage(1000, 500)), ErrorReply.rate_limit(retry_after=2))
        litellm.completion(model="openai/gpt-5-mini", api_base=srv.base_url, api_key="test", messages=[...])
        assert srv.requests[0].model == "gpt-5-mini"  # litellm strips the provider prefix

Endpoints: ``POST /v1/chat/completions`` (JSON, or SSE when ``stream`` is true, with a final usage chunk when
``stream_options.include_usage`` is true) and ``POST /v1/embeddings`` (deterministic unit vectors derived from a
hash of each input). Anything else gets an OpenAI-style 404.

How the answer to a call is chosen:

1. the first scripted rule, in the order added, whose endpoint and filters match; a rule added by :meth:`enqueue`
   matches any call to its endpoint, once;
2. else, for chat completions, the :class:`FailurePlan` (if any) for the index of this call among those that got
   this far;
3. else the default responder (a callable given the :class:`RecordedRequest`); by default :class:`Reply` ``"ok"``.

Any answer may carry a ``delay``: the server sleeps that long before replying (to provoke client timeouts). Sleeps
end early when the server stops.

What a long run needs: ``keep_requests`` bounds the record of requests to the newest ones (their count goes on), and
``on_answer`` is told of every answer once its delay ran out, with whether the client was still there to read it (an
answer written after the client gave up is still an answer a provider bills).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import math
import random
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal, TypeAlias

__all__ = [
    "AnswerListener",
    "DefaultResponder",
    "Endpoint",
    "ErrorReply",
    "FailurePlan",
    "FakeOpenAI",
    "FaultKind",
    "MalformedReply",
    "RecordedRequest",
    "Reply",
    "Response",
    "Usage",
    "embedding_vector",
    "estimate_tokens",
]

logger = logging.getLogger(__name__)

Endpoint: TypeAlias = Literal["chat", "embeddings"]
FaultKind: TypeAlias = Literal["429", "500", "503", "timeout", "malformed", "empty"]
_PATHS: dict[str, Endpoint] = {"/v1/chat/completions": "chat", "/v1/embeddings": "embeddings"}
_STREAM_PIECE_CHARS = 8


def estimate_tokens(text: str) -> int:
    """A rough token count (4 characters a token), used when a reply does not state its usage."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class Usage:
    """Token usage reported in a reply. As with OpenAI, ``completion_tokens`` includes the reasoning tokens."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The OpenAI ``usage`` object; the details objects appear only when their count is set."""
        out: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        if self.cached_tokens is not None:
            out["prompt_tokens_details"] = {"cached_tokens": self.cached_tokens}
        if self.reasoning_tokens is not None:
            out["completion_tokens_details"] = {"reasoning_tokens": self.reasoning_tokens}
        return out


@dataclass(frozen=True)
class Reply:
    """A successful answer. Without ``usage``, token counts are estimated from the prompt and the content.

    On the embeddings endpoint only ``usage.prompt_tokens`` and ``delay`` are used.
    """

    content: str = "ok"
    usage: Usage | None = None
    finish_reason: str = "stop"
    delay: float = 0.0

    @classmethod
    def empty(cls, usage: Usage | None = None) -> Reply:
        """A successful answer whose content is the empty string."""
        return cls("", usage=usage)

    @classmethod
    def degenerate(cls, phrase: str = "I will keep observing. ", repeats: int = 200,
                   usage: Usage | None = None) -> Reply:
        """A runaway answer repeating one phrase until the output limit, as models in a loop produce."""
        return cls(phrase * repeats, usage=usage, finish_reason="length")


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error with an OpenAI-style body ``{"error": {message, type, param, code}}``."""

    status: int
    message: str
    type: str
    code: str | None = None
    param: str | None = None
    retry_after: float | None = None
    delay: float = 0.0

    @classmethod
    def rate_limit(cls, retry_after: float | None = 1.0) -> ErrorReply:
        """429, with a ``Retry-After`` header in seconds unless ``retry_after`` is None."""
        return cls(429, "Rate limit reached for requests.", "requests", "rate_limit_exceeded",
                   retry_after=retry_after)

    @classmethod
    def server_error(cls, status: int = 500) -> ErrorReply:
        """A 5xx error, as a provider's outage or overload looks."""
        return cls(status, "The server had an error while processing your request.", "server_error")

    @classmethod
    def bad_request(cls, message: str = "Invalid request.", param: str | None = None) -> ErrorReply:
        """400 ``invalid_request_error``, the error a malformed or over-long request gets."""
        return cls(400, message, "invalid_request_error", param=param)

    def to_json(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class MalformedReply:
    """A body that is not valid JSON (sent as the only SSE event when the request streams)."""

    body: str = '{"id": "chatcmpl-broken", "object": "chat.completion", "choices": [{'
    status: int = 200
    delay: float = 0.0


Response: TypeAlias = Reply | ErrorReply | MalformedReply


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    index: int
    """Arrival order across all endpoints, from 0."""
    path: str
    headers: Mapping[str, str]
    """Header names in lower case."""
    body: Mapping[str, Any]
    """The parsed JSON body; empty when the body was not a JSON object."""
    received_at: float
    """Epoch seconds."""

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @property
    def messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def prompt_text(self) -> str:
        """The text of every message (chat) or every input (embeddings), joined by newlines."""
        if "messages" not in self.body:
            return "\n".join(_embedding_inputs(self.body))
        parts: list[str] = []
        for message in self.messages:
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):  # multimodal parts: keep the text ones
                parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
        return "\n".join(parts)


DefaultResponder: TypeAlias = Callable[[RecordedRequest], Response]
AnswerListener: TypeAlias = Callable[[RecordedRequest, Response, bool], None]


@dataclass(frozen=True)
class FailurePlan:
    """Fail a fraction of calls, reproducibly: call ``n``'s fate depends only on ``seed`` and ``n``.

    Kinds: ``"429"`` (with ``retry_after``), ``"500"``, ``"503"``, ``"timeout"`` (the default answer, delayed by
    ``timeout_delay`` seconds), ``"malformed"`` (invalid JSON), ``"empty"`` (empty content).
    """

    rate: float
    seed: int = 0
    kinds: tuple[FaultKind, ...] = ("429", "500", "timeout")
    timeout_delay: float = 30.0
    retry_after: float | None = 1.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"rate must be within [0, 1], got {self.rate}")
        if not self.kinds:
            raise ValueError("kinds must name at least one fault")

    def fault_for(self, call_index: int) -> FaultKind | None:
        """The fault injected into call ``call_index`` (from 0), or None when it succeeds."""
        rng = random.Random(f"{self.seed}:{call_index}")  # str seeds hash with sha512: stable across processes
        if rng.random() >= self.rate:
            return None
        return rng.choice(self.kinds)

    def response(self, kind: FaultKind, normal: Response) -> Response:
        """The answer for ``kind``, given the answer the call would otherwise get."""
        if kind == "429":
            return ErrorReply.rate_limit(self.retry_after)
        if kind in ("500", "503"):
            return ErrorReply.server_error(int(kind))
        if kind == "timeout":
            return dataclasses.replace(normal, delay=self.timeout_delay)
        if kind == "malformed":
            return MalformedReply()
        return Reply.empty()


@dataclass
class _Rule:
    response: Response
    endpoint: Endpoint
    contains: str | None
    model: str | None
    remaining: int | None

    def matches(self, endpoint: Endpoint, request: RecordedRequest) -> bool:
        return (endpoint == self.endpoint
                and (self.model is None or request.model == self.model)
                and (self.contains is None or self.contains in request.prompt_text))


def _default_responder(request: RecordedRequest) -> Response:
    return Reply()


@dataclass
class _Script:
    keep: int | None = None
    rules: list[_Rule] = field(default_factory=list)
    requests: deque[RecordedRequest] = field(init=False)
    received: int = 0
    plan_calls: int = 0

    def __post_init__(self) -> None:
        self.requests = deque(maxlen=self.keep)


class FakeOpenAI:
    """The server. Start it with ``with FakeOpenAI() as srv:`` or :meth:`start` / :meth:`stop`; thread-safe.

    ``default``, ``failures`` and ``on_answer`` may be reassigned while it runs. ``keep_requests``: how many of the
    newest requests :attr:`requests` keeps (None: all); ``on_answer(request, response, delivered)`` is called from
    the handler thread after each answer (``delivered``: written before the client went away).
    """

    def __init__(self, *, default: DefaultResponder = _default_responder, failures: FailurePlan | None = None,
                 embedding_dimension: int = 8, keep_requests: int | None = None,
                 on_answer: AnswerListener | None = None) -> None:
        if keep_requests is not None and keep_requests < 0:
            raise ValueError("keep_requests must be at least 0, or None")
        self.default = default
        self.failures = failures
        self.embedding_dimension = embedding_dimension
        self.on_answer = on_answer
        self._keep = keep_requests
        self._lock = threading.Lock()
        self._script = _Script(keep_requests)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> FakeOpenAI:
        """Bind a free port on 127.0.0.1 and serve from a daemon thread."""
        if self._server is not None or self._stopping.is_set():
            raise RuntimeError("FakeOpenAI can be started once")
        self._server = _Server(self)
        server = self._server
        # a short poll interval keeps stop() fast; the loop only checks a flag
        self._thread = threading.Thread(target=lambda: server.serve_forever(poll_interval=0.02), name="fake-openai",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, wake any delayed answers (their clients get no reply) and release the port."""
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeOpenAI is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``, the ``api_base`` for litellm (or ``base_url`` for the openai SDK)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # scripting

    def enqueue(self, *responses: Response, endpoint: Endpoint = "chat") -> None:
        """Answer the next calls to ``endpoint`` with these responses, one each, in order."""
        with self._lock:
            self._script.rules.extend(_Rule(r, endpoint, None, None, 1) for r in responses)

    def add_rule(self, response: Response, *, contains: str | None = None, model: str | None = None,
                 endpoint: Endpoint = "chat", times: int | None = None) -> None:
        """Answer calls whose prompt text contains ``contains`` and whose model is ``model`` (as received, without
        litellm's provider prefix) with ``response``, ``times`` times (None: for ever)."""
        if times is not None and times < 1:
            raise ValueError("times must be at least 1, or None")
        with self._lock:
            self._script.rules.append(_Rule(response, endpoint, contains, model, times))

    @property
    def pending(self) -> int:
        """How many scripted answers with a finite ``times`` are still unused."""
        with self._lock:
            return sum(r.remaining or 0 for r in self._script.rules)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received (the newest ``keep_requests``), in arrival order."""
        with self._lock:
            return list(self._script.requests)

    @property
    def received(self) -> int:
        """How many requests arrived, whether or not they are still kept."""
        with self._lock:
            return self._script.received

    def reset(self) -> None:
        """Forget the script, the recorded requests and the failure plan's call count."""
        with self._lock:
            self._script = _Script(self._keep)

    # serving (called from handler threads)

    def _receive(self, path: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> RecordedRequest:
        with self._lock:
            request = RecordedRequest(self._script.received, path, headers, body, time.time())
            self._script.received += 1
            self._script.requests.append(request)
            return request

    def _choose(self, endpoint: Endpoint, request: RecordedRequest) -> Response:
        fault: FaultKind | None = None
        with self._lock:
            rules = self._script.rules
            for i, rule in enumerate(rules):
                if rule.matches(endpoint, request):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining == 0:
                            del rules[i]
                    return rule.response
            plan = self.failures
            if endpoint == "chat" and plan is not None:
                fault = plan.fault_for(self._script.plan_calls)
                self._script.plan_calls += 1
        try:
            normal = self.default(request) if endpoint == "chat" else Reply()
        except Exception as exc:  # a bug in the test's responder: show it to the client rather than hang up
            logger.exception("fake-openai default responder failed")
            return ErrorReply(500, f"default responder raised {exc!r}", "server_error")
        return normal if fault is None or plan is None else plan.response(fault, normal)

    def _pause(self, seconds: float) -> bool:
        """Sleep; False if the server stopped meanwhile."""
        return seconds <= 0 or not self._stopping.wait(seconds)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeOpenAI) -> None:
        self.fake = fake
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"  # one request per connection: a streamed body simply ends at close

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        path = self.path.split("?", 1)[0]
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            parsed = None
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        request = fake._receive(path, {k.lower(): v for k, v in self.headers.items()}, body)
        endpoint = _PATHS.get(path)
        response: Response
        if endpoint is None:
            response = ErrorReply(404, f"Unknown request URL: POST {path}.", "invalid_request_error",
                                  "unknown_url")
        elif not isinstance(parsed, dict):
            response = ErrorReply.bad_request("The request body is not a JSON object.")
        else:
            response = fake._choose(endpoint, request)
        if not fake._pause(response.delay):
            return
        delivered = True
        try:
            self._answer(endpoint, request, response)
        except (BrokenPipeError, ConnectionResetError):
            delivered = False
            logger.debug("fake-openai client went away before request %d was answered", request.index)
        listener = fake.on_answer
        if listener is not None:
            listener(request, response, delivered)

    def _answer(self, endpoint: Endpoint | None, request: RecordedRequest, response: Response) -> None:
        streaming = endpoint == "chat" and request.body.get("stream") is True
        if isinstance(response, ErrorReply):
            headers = {} if response.retry_after is None else {"Retry-After": f"{response.retry_after:g}"}
            self._send(response.status, json.dumps(response.to_json()), headers)
        elif isinstance(response, MalformedReply):
            if streaming:
                self._send_events(response.status, [response.body, "[DONE]"])
            else:
                self._send(response.status, response.body)
        elif endpoint == "embeddings":
            self._send(200, json.dumps(_embeddings(request, response, self.server.fake.embedding_dimension)))
        elif streaming:
            self._send_events(200, [json.dumps(c) for c in _chunks(request, response)] + ["[DONE]"])
        else:
            self._send(200, json.dumps(_completion(request, response)))

    def _send(self, status: int, text: str, headers: Mapping[str, str] | None = None) -> None:
        data = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_events(self, status: int, events: Sequence[str]) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        for event in events:
            self.wfile.write(f"data: {event}\n\n".encode())
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("fake-openai " + format, *args)


# response bodies


def _usage(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    usage = reply.usage or Usage(estimate_tokens(request.prompt_text), estimate_tokens(reply.content))
    return usage.to_json()


def _envelope(request: RecordedRequest, kind: str) -> dict[str, Any]:
    return {"id": f"chatcmpl-fake{request.index}", "object": kind, "created": int(request.received_at),
            "model": request.model}


def _completion(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    message = {"role": "assistant", "content": reply.content}
    return {**_envelope(request, "chat.completion"),
            "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason, "logprobs": None}],
            "usage": _usage(request, reply)}


def _chunks(request: RecordedRequest, reply: Reply) -> list[dict[str, Any]]:
    envelope = _envelope(request, "chat.completion.chunk")

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        return {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    text = reply.content
    pieces = [text[i:i + _STREAM_PIECE_CHARS] for i in range(0, len(text), _STREAM_PIECE_CHARS)]
    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": piece}) for piece in pieces]
    chunks.append(chunk({}, reply.finish_reason))
    options = request.body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        chunks.append({**envelope, "choices": [], "usage": _usage(request, reply)})
    return chunks


def _embedding_inputs(body: Mapping[str, Any]) -> list[str]:
    raw = body.get("input", [])
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and raw and all(isinstance(x, int) for x in raw):  # one pre-tokenised input
        return [json.dumps(raw)]
    if isinstance(raw, list):
        return [x if isinstance(x, str) else json.dumps(x) for x in raw]
    return []


def embedding_vector(text: str, dimension: int) -> list[float]:
    """The unit vector the server returns for ``text``: a pure function of the text and the dimension."""
    stream = b"".join(hashlib.sha256(f"{block}:{text}".encode()).digest() for block in range((dimension + 7) // 8))
    raw = [v / 2**31 - 1.0 for v in struct.unpack(f"<{dimension}I", stream[:4 * dimension])]
    norm = math.sqrt(sum(v * v for v in raw)) or 1.0
    return [v / norm for v in raw]


def _embeddings(request: RecordedRequest, reply: Reply, default_dimension: int) -> dict[str, Any]:
    requested = request.body.get("dimensions")
    dimension = requested if isinstance(requested, int) and requested > 0 else default_dimension
    as_base64 = request.body.get("encoding_format") == "base64"
    texts = _embedding_inputs(request.body)
    data: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        vector = embedding_vector(text, dimension)
        encoded: list[float] | str = (base64.b64encode(struct.pack(f"<{dimension}f", *vector)).decode()
                                      if as_base64 else vector)
        data.append({"object": "embedding", "index": i, "embedding": encoded})
    tokens = reply.usage.prompt_tokens if reply.usage else sum(estimate_tokens(t) for t in texts)
    return {"object": "list", "data": data, "model": request.model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
