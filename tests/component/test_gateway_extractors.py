"""Schema (structured) extractors: the follow-up structured-output call after a successful Observer/Reflector call,
through the embedded runner, the gateway, litellm and the fake OpenAI server."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from om_stream.adapters.gateway import GatewaySettings, ModelGateway
from om_stream.adapters.sqlite_store import SqliteContentStore
from om_stream.core.config import OMConfig
from om_stream.core.events import OMEvent
from om_stream.core.extractors import ExtractionContext, Extractor, WorkingMemoryExtractor
from om_stream.core.messages import Message, TextPart
from om_stream.runtime.clock import ManualClock
from om_stream.runtime.embedded import Memory
from om_stream.testing.fake_openai import ErrorReply, FakeOpenAI, RecordedRequest, Reply, Usage
from tests.support.scripted_provider import START

EXTRACTION = "You extract structured values"
PROFILE = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
           "additionalProperties": False}


class Pet(BaseModel):
    name: str
    species: str | None = None


def extracted(srv: FakeOpenAI, value: Any, times: int | None = None) -> None:
    body = value if isinstance(value, str) else json.dumps(value)
    srv.add_rule(Reply(body, usage=Usage(300, 40)), contains=EXTRACTION, times=times)


def extraction_requests(srv: FakeOpenAI) -> list[RecordedRequest]:
    return [r for r in srv.requests if EXTRACTION in r.prompt_text]


class Run:
    def __init__(self) -> None:
        self.events: list[OMEvent] = []
        self.memory: Memory | None = None

    def ends(self) -> list[Any]:
        return [e for e in self.events if e.event_type in ("data-om-observation-end", "data-om-buffering-end")]


async def run(srv: FakeOpenAI, extract: list[Extractor], *, cycles: int = 1, reflect: bool = False,
              where: str = "observation") -> Run:
    result = Run()
    options = OMConfig.parse({"model": "openai/gpt-5-mini"})
    group = options.observation if where == "observation" else options.reflection
    group = group.model_copy(update={"extract": tuple(extract)})
    options = options.model_copy(update={where: group})
    gateway = ModelGateway(GatewaySettings(api_bases={"*": srv.base_url}, api_keys={"*": "test"}, timeout_s=2,
                                           deadline_s=5, max_retries=0))
    async with Memory(options, model=gateway, clock=ManualClock(0), store=SqliteContentStore(":memory:"),
                      on_event=lambda e, _i: result.events.append(e)) as om:
        result.memory = om
        for cycle in range(cycles):
            await om.add_message(Message(message_id=f"m{cycle}", thread_id="t1", resource_id="r1", role="user",
                                         created_at=START + timedelta(minutes=cycle),
                                         parts=(TextPart(text="I'm Ada from Lisbon; my cat Miso is a tabby."),)))
            await om.observe("t1", "r1", force=True)
            await om.settle()
        if reflect:
            await om.reflect("t1", "r1")
            await om.settle()
    return result


async def metadata(run_: Run) -> dict[str, Any]:
    assert run_.memory is not None
    return dict((await run_.memory.store.get_thread_metadata("t1")).extracted)


async def test_a_json_schema_extractor_gets_a_structured_follow_up_call_and_is_persisted(srv: FakeOpenAI) -> None:
    extracted(srv, {"user-profile": {"name": "Ada", "city": "Lisbon"}})

    result = await run(srv, [Extractor(name="User profile", instructions="Stable facts about the user.",
                                       schema=PROFILE)])

    (request,) = extraction_requests(srv)
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"] == {"user-profile": PROFILE}
    assert "required" not in schema  # every value is optional
    assert request.model == "gpt-5-mini"  # the model that just answered
    assert request.messages[-2]["role"] == "assistant" and "User stated" in request.messages[-2]["content"]
    assert "user-profile: Stable facts about the user." in request.prompt_text
    (end,) = result.ends()
    assert end.extracted_values == {"user-profile": {"name": "Ada", "city": "Lisbon"}}
    assert await metadata(result) == {"user-profile": {"name": "Ada", "city": "Lisbon"}}


async def test_a_pydantic_model_schema_is_validated_and_stored_as_json(srv: FakeOpenAI) -> None:
    extracted(srv, {"pet": {"name": "Miso", "species": "cat"}})

    result = await run(srv, [Extractor(name="Pet", instructions="The user's pet.", schema=Pet)])

    schema = extraction_requests(srv)[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["pet"]["properties"]["name"] == {"title": "Name", "type": "string"}
    assert await metadata(result) == {"pet": {"name": "Miso", "species": "cat"}}


async def test_a_value_that_breaks_its_schema_fails_alone(srv: FakeOpenAI) -> None:
    extracted(srv, {"pet": {"species": "cat"}, "user-profile": {"name": "Ada"}})

    result = await run(srv, [Extractor(name="Pet", instructions="The pet.", schema=Pet),
                             Extractor(name="User profile", instructions="Facts.", schema=PROFILE)])

    (end,) = result.ends()
    assert end.extracted_values == {"user-profile": {"name": "Ada"}}
    assert [f.slug for f in end.extraction_failures] == ["pet"]
    assert "does not match the schema" in end.extraction_failures[0].error


async def test_a_json_schema_violation_is_a_failure(srv: FakeOpenAI) -> None:
    extracted(srv, {"user-profile": {"name": 42}})

    result = await run(srv, [Extractor(name="User profile", instructions="Facts.", schema=PROFILE)])

    (end,) = result.ends()
    assert end.extracted_values is None
    assert "name: 42 is not of type 'string'" in end.extraction_failures[0].error


async def test_a_malformed_answer_is_asked_for_once_more(srv: FakeOpenAI) -> None:
    extracted(srv, "Sure! Here is the profile: {name: Ada", times=1)
    extracted(srv, "```json\n{\"user-profile\": {\"name\": \"Ada\"}}\n```", times=1)

    result = await run(srv, [Extractor(name="User profile", instructions="Facts.", schema=PROFILE)])

    first, second = extraction_requests(srv)
    assert second.messages[-1]["content"].startswith("That was not a valid JSON object")
    (end,) = result.ends()
    assert end.extracted_values == {"user-profile": {"name": "Ada"}}
    assert first.body["response_format"]["type"] == "json_schema"


async def test_two_malformed_answers_fail_every_structured_extractor_but_keep_the_observation(
        srv: FakeOpenAI) -> None:
    extracted(srv, "not json")

    result = await run(srv, [Extractor(name="Pet", instructions="The pet.", schema=Pet),
                             Extractor(name="User profile", instructions="Facts.", schema=PROFILE)])

    assert len(extraction_requests(srv)) == 2
    (end,) = result.ends()
    assert end.observations and "Ada" in end.observations
    assert sorted(f.slug for f in end.extraction_failures) == ["pet", "user-profile"]


async def test_a_failed_extraction_call_is_reported_per_extractor(srv: FakeOpenAI) -> None:
    srv.add_rule(ErrorReply.server_error(), contains=EXTRACTION)

    result = await run(srv, [Extractor(name="Pet", instructions="The pet.", schema=Pet)])

    (end,) = result.ends()
    assert end.extraction_failures[0].slug == "pet"
    assert "extraction call failed" in end.extraction_failures[0].error


async def test_the_previous_extraction_is_shown_unless_turned_off(srv: FakeOpenAI) -> None:
    extracted(srv, {"user-profile": {"name": "Ada"}, "mood": {"name": "calm"}})

    await run(srv, [Extractor(name="User profile", instructions="Facts.", schema=PROFILE),
                    Extractor(name="Mood", instructions="Mood now.", schema=PROFILE,
                              include_previous_extraction=False)], cycles=2)

    first, second = extraction_requests(srv)
    assert "Prior value" not in first.prompt_text
    assert 'Prior value: {"name": "Ada"}' in second.prompt_text
    assert second.prompt_text.count("Prior value") == 1  # not the mood's


async def test_on_extracted_replaces_the_value_and_its_exception_is_a_recorded_failure(srv: FakeOpenAI) -> None:
    extracted(srv, {"user-profile": {"name": "ada"}, "pet": {"name": "Miso"}})
    seen: list[ExtractionContext] = []

    def capitalise(context: ExtractionContext) -> Any:
        seen.append(context)
        return {"name": context.current["name"].title()}

    def explode(_context: ExtractionContext) -> Any:
        raise ValueError("cannot store pets")

    result = await run(srv, [Extractor(name="User profile", instructions="Facts.", schema=PROFILE,
                                       on_extracted=capitalise),
                             Extractor(name="Pet", instructions="The pet.", schema=Pet, on_extracted=explode)])

    (end,) = result.ends()
    assert end.extracted_values == {"user-profile": {"name": "Ada"}}
    assert [(f.slug, "cannot store pets" in f.error) for f in end.extraction_failures] == [("pet", True)]
    assert seen[0].source == "observation" and seen[0].thread_id == "t1" and seen[0].resource_id == "r1"
    assert "User stated" in seen[0].raw_observations


async def test_async_on_extracted_is_awaited(srv: FakeOpenAI) -> None:
    extracted(srv, {"pet": {"name": "Miso"}})

    async def enrich(context: ExtractionContext) -> Any:
        return {**context.current, "species": "cat"}

    result = await run(srv, [Extractor(name="Pet", instructions="The pet.", schema=Pet, on_extracted=enrich)])

    assert await metadata(result) == {"pet": {"name": "Miso", "species": "cat"}}


async def test_metadata_key_path_names_where_the_value_is_kept_or_that_it_is_not(srv: FakeOpenAI) -> None:
    extracted(srv, {"user-profile": {"name": "Ada"}, "pet": {"name": "Miso"}})
    kept: list[Any] = []

    result = await run(srv, [
        Extractor(name="User profile", instructions="Facts.", schema=PROFILE, metadata_key_path="extracted.who"),
        Extractor(name="Pet", instructions="The pet.", schema=Pet, metadata_key_path=False,
                  on_extracted=lambda c: kept.append(c.current))])

    assert await metadata(result) == {"who": {"name": "Ada"}}
    assert kept == [{"name": "Miso"}]


async def test_a_dynamic_schema_may_skip_a_cycle(srv: FakeOpenAI) -> None:
    result = await run(srv, [Extractor(name="Pet", instructions="The pet.", schema=lambda _context: None)])

    assert extraction_requests(srv) == []
    (end,) = result.ends()
    assert end.extraction_failures is None


async def test_the_working_memory_extractor_with_a_schema_takes_the_structured_path(srv: FakeOpenAI) -> None:
    extracted(srv, {"working-memory": {"name": "Ada", "city": "Lisbon"}})
    updates: list[Any] = []
    extractor = replace(WorkingMemoryExtractor(schema=PROFILE), on_extracted=lambda c: updates.append(c.current))

    result = await run(srv, [extractor])

    (request,) = extraction_requests(srv)
    assert "working-memory" in request.body["response_format"]["json_schema"]["schema"]["properties"]
    assert updates == [{"name": "Ada", "city": "Lisbon"}]
    assert await metadata(result) == {}  # not duplicated under the OM metadata


async def test_reflection_extractors_run_after_the_reflection(srv: FakeOpenAI) -> None:
    extracted(srv, {"summary": {"name": "Ada"}})

    result = await run(srv, [Extractor(name="Summary", instructions="Who.", schema=PROFILE)], reflect=True,
                       where="reflection")

    (request,) = extraction_requests(srv)
    assert "Observations to reflect on" in request.prompt_text
    ends = [e for e in result.events if e.event_type == "data-om-observation-end"
            and e.operation_type == "reflection"]
    assert ends and ends[0].extracted_values == {"summary": {"name": "Ada"}}


async def test_an_invalid_schema_is_a_failure_not_a_crash(srv: FakeOpenAI) -> None:
    result = await run(srv, [Extractor(name="Pet", instructions="The pet.", schema={"type": "no-such-type"})])

    (end,) = result.ends()
    assert end.extraction_failures[0].slug == "pet"
    assert "invalid schema" in end.extraction_failures[0].error
