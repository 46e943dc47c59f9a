"""The fake OpenAI server, exercised through real litellm calls: what the model gateway will see from providers."""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from om_stream.adapters.offline import import_litellm
from om_stream.testing.fake_openai import (
    ErrorReply,
    FailurePlan,
    FakeOpenAI,
    MalformedReply,
    RecordedRequest,
    Reply,
    Response,
    Usage,
    embedding_vector,
)

MESSAGES = [{"role": "system", "content": "You are the Observer."},
            {"role": "user", "content": "The user said: my cat is called Miso."}]


@pytest.fixture(scope="module")
def litellm() -> ModuleType:
    return import_litellm()


@pytest.fixture
def srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def _complete(litellm: ModuleType, srv: FakeOpenAI, model: str = "openai/gpt-5-mini", **kwargs: Any) -> Any:
    kwargs.setdefault("num_retries", 0)
    return litellm.completion(model=model, messages=MESSAGES, api_base=srv.base_url, api_key="test", **kwargs)


def test_a_scripted_reply_arrives_with_its_usage_details(litellm: ModuleType, srv: FakeOpenAI) -> None:
    srv.enqueue(Reply("observed: cat Miso", usage=Usage(1000, 500, cached_tokens=200, reasoning_tokens=100)))

    response = _complete(litellm, srv)

    assert response.choices[0].message.content == "observed: cat Miso"
    assert response.choices[0].finish_reason == "stop"
    assert response.model == "gpt-5-mini"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.total_tokens) == (
        1000, 500, 1500)
    assert response.usage.prompt_tokens_details.cached_tokens == 200
    assert response.usage.completion_tokens_details.reasoning_tokens == 100
    # cached input is billed at the cached rate: 800 * 0.25/M + 200 * 0.025/M + 500 * 2/M
    assert response._hidden_params["response_cost"] == pytest.approx(0.001205)


def test_litellm_prices_gpt5_mini_from_the_reported_usage(litellm: ModuleType, srv: FakeOpenAI) -> None:
    srv.enqueue(Reply("observed", usage=Usage(1000, 500)))

    response = _complete(litellm, srv)

    assert response._hidden_params["response_cost"] == pytest.approx(0.00125)
    assert litellm.completion_cost(completion_response=response) == pytest.approx(0.00125)


async def test_async_completion(litellm: ModuleType, srv: FakeOpenAI) -> None:
    srv.enqueue(Reply("async observed", usage=Usage(12, 3)))

    response = await litellm.acompletion(model="openai/gpt-5-mini", messages=MESSAGES, api_base=srv.base_url,
                                         api_key="test", num_retries=0)

    assert response.choices[0].message.content == "async observed"
    assert response.usage.total_tokens == 15


async def test_streaming_delivers_the_content_and_a_final_usage_chunk(litellm: ModuleType, srv: FakeOpenAI) -> None:
    srv.enqueue(Reply("a streamed observation log", usage=Usage(1000, 500, cached_tokens=3)))

    stream = await litellm.acompletion(model="openai/gpt-5-mini", messages=MESSAGES, api_base=srv.base_url,
                                       api_key="test", num_retries=0, stream=True,
                                       stream_options={"include_usage": True})
    chunks = [chunk async for chunk in stream]

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "a streamed observation log"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1
    usage = chunks[-1].usage
    assert (usage.prompt_tokens, usage.completion_tokens) == (1000, 500)
    assert usage.prompt_tokens_details.cached_tokens == 3
    built = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    assert built.choices[0].message.content == "a streamed observation log"
    assert built.usage.total_tokens == 1500



async def test_concurrent_calls_are_all_recorded_once(litellm: ModuleType, srv: FakeOpenAI) -> None:
    srv.default = lambda request: Reply(f"seen {request.index}", delay=0.05)

    replies = await asyncio.gather(*(
        litellm.acompletion(model="openai/gpt-5-mini", messages=MESSAGES, api_base=srv.base_url, api_key="test",
                            num_retries=0)
        for _ in range(10)))

    assert sorted(r.index for r in srv.requests) == list(range(10))
    assert sorted(r.choices[0].message.content for r in replies) == sorted(f"seen {i}" for i in range(10))

def test_429_surfaces_as_rate_limit_error_with_retry_after(litellm: ModuleType, srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply.rate_limit(retry_after=7))

    with pytest.raises(litellm.RateLimitError) as caught:
        _complete(litellm, srv, max_retries=0)

    assert caught.value.status_code == 429
    assert caught.value.litellm_response_headers["retry-after"] == "7"
    assert caught.value.response.headers["retry-after"] == "7"
    assert len(srv.requests) == 1  # num_retries=0: neither litellm nor the openai SDK retried


def test_server_errors_surface_as_litellm_errors(litellm: ModuleType, srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply.server_error(), ErrorReply.bad_request("context too long", param="messages"))

    with pytest.raises(litellm.InternalServerError) as server_error:
        _complete(litellm, srv)
    with pytest.raises(litellm.BadRequestError) as bad_request:
        _complete(litellm, srv)

    assert server_error.value.status_code == 500
    assert bad_request.value.status_code == 400
    assert "context too long" in str(bad_request.value)


def test_a_slow_server_surfaces_as_litellm_timeout(litellm: ModuleType) -> None:
    srv = FakeOpenAI().start()
    srv.enqueue(Reply("too late", delay=30))
    started = time.monotonic()
    with pytest.raises(litellm.Timeout):
        _complete(litellm, srv, timeout=0.3)
    assert time.monotonic() - started < 5

    started = time.monotonic()
    srv.stop()  # wakes the handler still sleeping on the abandoned request
    assert time.monotonic() - started < 2


def test_malformed_json_surfaces_as_an_internal_server_error(litellm: ModuleType, srv: FakeOpenAI) -> None:
    srv.enqueue(MalformedReply())

    with pytest.raises(litellm.InternalServerError):
        _complete(litellm, srv)


def test_empty_and_degenerate_replies(litellm: ModuleType, srv: FakeOpenAI) -> None:
    srv.enqueue(Reply.empty(), Reply.degenerate("loop. ", repeats=50))

    empty = _complete(litellm, srv)
    degenerate = _complete(litellm, srv)

    assert empty.choices[0].message.content == ""
    assert empty.usage.completion_tokens == 0
    assert degenerate.choices[0].message.content == "loop. " * 50
    assert degenerate.choices[0].finish_reason == "length"


def test_recorded_requests_carry_prompt_model_and_parameters(litellm: ModuleType, srv: FakeOpenAI) -> None:
    _complete(litellm, srv, model="openai/gpt-4o-mini", temperature=0.2, max_tokens=64,
              extra_headers={"X-Om-Thread": "thread-1"})

    [request] = srv.requests
    assert request.path == "/v1/chat/completions"
    assert request.model == "gpt-4o-mini"
    assert request.messages == MESSAGES
    assert "my cat is called Miso" in request.prompt_text
    assert request.body["temperature"] == 0.2
    assert request.body["max_tokens"] == 64
    assert request.headers["authorization"] == "Bearer test"
    assert request.headers["x-om-thread"] == "thread-1"


def test_rules_match_by_prompt_text_and_model_before_the_default(litellm: ModuleType, srv: FakeOpenAI) -> None:
    def echo_model(request: RecordedRequest) -> Response:
        return Reply(f"default for {request.model}")

    srv.default = echo_model
    srv.add_rule(Reply("about cats"), contains="Miso", model="gpt-4o-mini", times=2)
    srv.enqueue(Reply("first in line"))

    answers = [_complete(litellm, srv, model=m).choices[0].message.content
               for m in ("openai/gpt-5-mini", "openai/gpt-4o-mini", "openai/gpt-4o-mini", "openai/gpt-4o-mini")]

    assert answers == ["first in line", "about cats", "about cats", "default for gpt-4o-mini"]
    assert srv.pending == 0


def _outcomes(litellm: ModuleType, plan: FailurePlan, calls: int) -> list[str]:
    outcomes = []
    with FakeOpenAI(failures=plan) as srv:
        for _ in range(calls):
            try:
                outcomes.append(_complete(litellm, srv).choices[0].message.content)
            except litellm.RateLimitError:
                outcomes.append("429")
            except litellm.InternalServerError:
                outcomes.append("500")
    return outcomes


def test_a_failure_plan_is_reproducible_for_its_seed(litellm: ModuleType) -> None:
    plan = FailurePlan(rate=0.3, seed=7, kinds=("429", "500", "empty"))

    first = _outcomes(litellm, plan, 20)

    assert first == _outcomes(litellm, plan, 20)
    assert first == [{None: "ok", "empty": ""}.get(plan.fault_for(i), plan.fault_for(i)) for i in range(20)]
    assert {"ok", "429", "500"} <= set(first)
    assert first != _outcomes(litellm, FailurePlan(rate=0.3, seed=8, kinds=("429", "500", "empty")), 20)
    failed = sum(FailurePlan(rate=0.3, seed=7).fault_for(i) is not None for i in range(2000))
    assert 500 < failed < 700


def test_a_failure_plan_timeout_delays_the_default_answer(litellm: ModuleType) -> None:
    plan = FailurePlan(rate=1.0, kinds=("timeout",), timeout_delay=0.5)
    with FakeOpenAI(failures=plan) as srv:
        with pytest.raises(litellm.Timeout):
            _complete(litellm, srv, timeout=0.1)
        assert _complete(litellm, srv, timeout=5).choices[0].message.content == "ok"


def test_every_answer_is_reported_once_its_delay_ran_out_with_whether_its_client_read_it(litellm: ModuleType) -> None:
    answers: list[tuple[int, str, bool]] = []
    lock = threading.Lock()

    def heard(request: RecordedRequest, response: Response, delivered: bool) -> None:
        with lock:
            answers.append((request.index, type(response).__name__, delivered))

    with FakeOpenAI(on_answer=heard) as srv:
        srv.enqueue(ErrorReply.server_error(), Reply("late", delay=1.0))
        with pytest.raises(litellm.InternalServerError):
            _complete(litellm, srv)
        with pytest.raises(litellm.Timeout):
            _complete(litellm, srv, timeout=0.2)
        assert _complete(litellm, srv).choices[0].message.content == "ok"
        deadline = time.monotonic() + 10
        while len(answers) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
    by_index = {index: (kind, delivered) for index, kind, delivered in answers}
    assert len(answers) == 3 and by_index[0] == ("ErrorReply", True) and by_index[2] == ("Reply", True)
    assert by_index[1][0] == "Reply"  # the late answer is reported: a provider bills it whoever reads it


def test_a_bounded_record_keeps_the_newest_requests_and_counts_them_all(litellm: ModuleType) -> None:
    with FakeOpenAI(keep_requests=3) as srv:
        for n in range(7):
            _complete(litellm, srv, user=f"caller-{n}")
        assert srv.received == 7
        assert [r.index for r in srv.requests] == [4, 5, 6]
        assert [r.body["user"] for r in srv.requests] == ["caller-4", "caller-5", "caller-6"]
        srv.reset()
        assert srv.requests == [] and srv.received == 0
        _complete(litellm, srv)
        assert [r.index for r in srv.requests] == [0]


def test_embeddings_are_deterministic_unit_vectors_with_usage(litellm: ModuleType) -> None:
    with FakeOpenAI(embedding_dimension=16) as srv:
        first = litellm.embedding(model="openai/text-embedding-3-small", input=["cat Miso", "dog Rex"],
                                  api_base=srv.base_url, api_key="test")
        again = litellm.embedding(model="openai/text-embedding-3-small", input=["cat Miso"],
                                  api_base=srv.base_url, api_key="test")

    vectors = [item["embedding"] for item in first.data]
    assert [len(v) for v in vectors] == [16, 16]
    assert vectors[0] == again.data[0]["embedding"] == pytest.approx(embedding_vector("cat Miso", 16))
    assert vectors[0] != vectors[1]
    assert math.fsum(x * x for x in vectors[0]) == pytest.approx(1.0)
    assert first.usage.prompt_tokens > 0
    assert srv.requests[0].path == "/v1/embeddings"
    assert srv.requests[0].prompt_text == "cat Miso\ndog Rex"


def test_scripted_embedding_errors_and_base64_encoding(srv: FakeOpenAI) -> None:
    srv.enqueue(ErrorReply.rate_limit(retry_after=None), endpoint="embeddings")
    request = {"model": "text-embedding-3-small", "input": "x", "encoding_format": "base64", "dimensions": 4}

    with pytest.raises(urllib.error.HTTPError) as caught:
        _post(srv, "/embeddings", request)
    body = _post(srv, "/embeddings", request)

    assert caught.value.code == 429
    assert "retry-after" not in {k.lower() for k in caught.value.headers}
    assert json.loads(caught.value.read())["error"]["code"] == "rate_limit_exceeded"
    assert isinstance(body["data"][0]["embedding"], str)  # 4 float32 values, base64-encoded


def test_unknown_paths_and_non_json_bodies_get_openai_errors(srv: FakeOpenAI) -> None:
    with pytest.raises(urllib.error.HTTPError) as unknown:
        _post(srv, "/responses", {})
    with pytest.raises(urllib.error.HTTPError) as not_json:
        _post(srv, "/chat/completions", b"not json")

    assert unknown.value.code == 404
    assert not_json.value.code == 400
    assert json.loads(not_json.value.read())["error"]["type"] == "invalid_request_error"


def _post(srv: FakeOpenAI, path: str, body: dict[str, Any] | bytes) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(srv.base_url + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as response:
        return json.loads(response.read())
