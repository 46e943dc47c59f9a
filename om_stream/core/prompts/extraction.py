"""The structured-extraction follow-up call: its prompt, the demand made again, and reading its JSON answer.

After a successful Observer/Reflector call, extractors with a schema get their values from one more call to the
same model: the exchange it just had (its system prompt left out), then a request for one JSON object whose
properties are the extractors' slugs, every one optional, each with its instructions and the prior value. The
response schema combines the extractors' schemas (pydantic's ``$defs`` hoisted to the root, where its references
point). The answer may come in a code fence; anything but a JSON object is malformed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from om_stream.core.extractors import ExtractionContext, Extractor
from om_stream.core.prompts.chat import ChatMessage, ChatRequest, ChatResponse

__all__ = ["EXTRACTION_SYSTEM", "ask_again", "build_extraction_request", "parse_json_object"]

EXTRACTION_SYSTEM = (
    "You extract structured values from a memory-keeping exchange. Answer with one JSON object and nothing else: "
    "no prose, no code fence. Its properties are the value names asked for; every property is optional. Omit a "
    "property when the conversation gives nothing for it; carry forward a prior value that is still valid.")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def build_extraction_request(wanted: Sequence[tuple[Extractor, dict[str, Any]]], context: ExtractionContext,
                             chat: ChatRequest, answer: ChatResponse, prior: Mapping[str, Any]) -> ChatRequest:
    """The follow-up call for ``wanted`` (each extractor with its JSON Schema), after ``chat`` was answered with
    ``answer``. ``prior`` is the thread's ``extracted`` metadata. The call goes to the model that answered (the
    gateway's route), so the values come from the model that read the conversation."""
    properties: dict[str, Any] = {}
    definitions: dict[str, Any] = {}
    for extractor, json_schema in wanted:
        own = dict(json_schema)
        definitions.update(own.pop("$defs", {}))
        properties[extractor.slug] = own
    combined: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if definitions:
        combined["$defs"] = definitions
    lines = ["Return the following values as one JSON object (each property optional):"]
    for extractor, _ in wanted:
        lines.append(f"- {extractor.slug}: {extractor.instructions_for(context).strip()}")
        key = extractor.storage_key() or extractor.slug
        if extractor.include_previous_extraction and prior.get(key) is not None:
            lines.append(f"  Prior value: {json.dumps(prior[key], ensure_ascii=False, default=str)}")
    history = tuple(m for m in chat.messages if m.role != "system")
    messages = (ChatMessage(role="system", content=EXTRACTION_SYSTEM), *history,
                ChatMessage(role="assistant", content=answer.text),
                ChatMessage(role="user", content="\n".join(lines)))
    gateway = answer.provider_metadata.get("gateway")
    route = gateway.get("route", "") if isinstance(gateway, dict) else ""
    return ChatRequest(role="extractor", model=str(route), messages=messages, response_schema=combined,
                       temperature=0.0, provider_options=chat.provider_options, thread_id=chat.thread_id,
                       resource_id=chat.resource_id)


def ask_again(request: ChatRequest, malformed: str, problem: str) -> ChatRequest:
    """``request`` continued with the malformed answer and the demand made explicit."""
    again = ChatMessage(role="user", content=f"That was not a valid JSON object ({problem}). Answer again "
                                             "with only the JSON object.")
    return replace(request, messages=(*request.messages, ChatMessage(role="assistant", content=malformed), again))


def parse_json_object(text: str) -> tuple[dict[str, Any] | None, str]:
    """(the object, "") or (None, what is wrong with the answer)."""
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1)
    if not body:
        return None, "empty answer"
    try:
        value = json.loads(body)
    except ValueError as exc:
        return None, f"invalid JSON: {exc}"
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object"
    return value, ""
