"""One chat model reached through litellm (any provider litellm routes to), with usage and cost on every call.

This is the transport only: which model to call, retries, fallbacks, circuit breaking and budgets are the
gateway's job (``adapters.gateway``), which wraps instances of this class. What it owns:

* naming: the seeds' ``google/...`` is litellm's ``gemini/...`` route;
* messages: text, and attachments as litellm content parts (``image_url`` / ``file``);
* ``providerOptions`` (the AI SDK's shape, keyed by provider) become litellm arguments, only for the provider
  that serves the call: Google's ``thinkingConfig.thinkingBudget`` is litellm's ``thinking``; other options are
  passed on with snake_case names (``reasoningEffort`` → ``reasoning_effort``);
* usage (input, output, cached input, reasoning tokens) and cost: a cost the provider reports (``usage.cost`` in
  the body, or a ``*-cost`` response header) wins over litellm's price map; a model the map does not know has an
  unknown cost (``None``), never a silent zero;
* the finish reason: OpenAI's vocabulary, as litellm maps it, but the provider's own word where litellm's mapping
  would pass an unfinished answer off as ``stop`` (``other``, ``unknown``, ``error``);
* every litellm exception becomes a ``ModelError`` with its kind, HTTP status and Retry-After.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from om_stream.adapters.offline import import_litellm
from om_stream.core.error_text import cut_error
from om_stream.core.prompts.chat import ChatMessage
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest, ChatResponse, Usage

__all__ = [
    "LiteLLMModel",
    "litellm_model_name",
    "litellm_provider",
    "model_error",
    "provider_kwargs",
    "supports_attachments",
    "to_litellm_messages",
]

log = logging.getLogger(__name__)

# The seeds name models the Mastra way ("google/gemini-2.5-flash"); litellm's route for Google AI Studio is "gemini".
_PROVIDER_ALIASES = {"google": "gemini"}
# providerOptions keys (AI SDK provider names) that apply to each litellm provider
_OPTION_KEYS = {
    "gemini": ("google", "gemini"),
    "vertex_ai": ("google", "vertex", "vertex_ai"),
    "vertex_ai_beta": ("google", "vertex", "vertex_ai"),
    "azure": ("openai", "azure"),
    "openai": ("openai",),
    "text-completion-openai": ("openai",),
}
# how a failure about credentials reads (litellm raises some before any request is sent, as a 500 of its own)
_CREDENTIALS = re.compile(r"api[ _-]?key|credential|authenticat|unauthori[sz]ed|permission denied", re.IGNORECASE)
# how providers word a refusal of an input longer than the model's context window (OpenAI's code, and the messages of
# OpenAI, Anthropic, Gemini and vLLM-style servers): the input must get smaller, another try as is fails the same way
_CONTEXT_LENGTH = re.compile(
    r"context_length_exceeded|maximum context length|context window|context length|prompt is too long|"
    r"input tokens exceed|too many (?:input )?tokens|input is too long|exceeds the maximum number of tokens",
    re.IGNORECASE)
# provider finish reasons litellm reports as "stop" although the answer did not end; and the names some providers
# give to "unknown"
_UNFINISHED_BEHIND_STOP = frozenset({"other", "unknown", "error"})
_UNSPECIFIED_FINISH = {"finish_reason_unspecified": "unknown", "unspecified": "unknown"}
# response headers a provider or gateway uses to report what a call cost, in USD
_COST_HEADERS = ("x-litellm-response-cost", "x-openrouter-cost", "x-request-cost", "x-response-cost", "x-cost")


def litellm_model_name(model: str) -> str:
    provider, sep, name = model.partition("/")
    if not sep:
        return model
    return f"{_PROVIDER_ALIASES.get(provider, provider)}/{name}"


def litellm_provider(model: str) -> str:
    """The litellm provider of a model name (``openai`` for a bare ``gpt-5-mini``); '' if litellm cannot tell."""
    name = litellm_model_name(model)
    if "/" in name:
        return name.split("/", 1)[0]
    litellm = import_litellm()
    try:
        return str(litellm.get_llm_provider(name)[1])
    except litellm.BadRequestError:  # a name litellm cannot place
        return ""


def to_litellm_messages(messages: tuple[ChatMessage, ...]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for message in messages:
        if not message.attachments:
            out.append({"role": message.role, "content": message.content})
            continue
        parts: list[dict[str, Any]] = [{"type": "text", "text": message.content}]
        for attachment in message.attachments:
            url = attachment.url or f"data:{attachment.mime_type};base64,{attachment.data or ''}"
            if attachment.kind == "image":
                parts.append({"type": "image_url", "image_url": {"url": url}})
            else:
                parts.append({"type": "file", "file": {"file_data": url, "filename": attachment.filename or "file"}})
        out.append({"role": message.role, "content": parts})
    return out


def supports_attachments(model: str) -> bool | None:
    """Whether litellm's model registry says the model takes images; ``None`` when it has no data on it."""
    litellm = import_litellm()
    try:
        info = litellm.get_model_info(litellm_model_name(model))
    except (litellm.exceptions.ModelNotMappedError, litellm.BadRequestError, ValueError, KeyError):
        return None  # the registry does not know the model
    value = info.get("supports_vision")
    return value if isinstance(value, bool) else None


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def _snake_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {_snake(str(k)): _snake_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_snake_keys(v) for v in value]
    return value


def provider_kwargs(model: str, provider_options: Mapping[str, Any]) -> dict[str, Any]:
    """litellm arguments for the ``providerOptions`` that apply to ``model``'s provider (the others are ignored:
    the Observer's default Google thinking budget must not reach an OpenAI model)."""
    provider = litellm_provider(model)
    keys = _OPTION_KEYS.get(provider, (provider,))
    merged: dict[str, Any] = {}
    for key in keys:
        options = provider_options.get(key)
        if isinstance(options, Mapping):
            merged.update(options)
    kwargs: dict[str, Any] = {}
    for name, value in merged.items():
        if name == "thinkingConfig" and isinstance(value, Mapping):
            budget = value.get("thinkingBudget")
            if isinstance(budget, int) and not isinstance(budget, bool):
                kwargs["thinking"] = {"type": "enabled" if budget > 0 else "disabled", "budget_tokens": budget}
            level = value.get("thinkingLevel")
            if isinstance(level, str):
                kwargs["reasoning_effort"] = level
        elif name == "textVerbosity":
            kwargs["verbosity"] = value
        else:
            kwargs[_snake(name)] = _snake_keys(value)
    return kwargs


class LiteLLMModel:
    """Implements ``ports.ChatModel`` for one litellm model name."""

    def __init__(self, model: str, *, api_base: str | None = None, api_key: str | None = None,
                 timeout_s: float = 120.0, headers: dict[str, str] | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        self.model = litellm_model_name(model)
        self.api_base = api_base
        self._api_key = api_key
        self.timeout_s = timeout_s
        self.headers = dict(headers or {})
        self.extra = dict(extra or {})

    def __repr__(self) -> str:
        return f"LiteLLMModel({self.model!r}, api_base={self.api_base!r})"

    def arguments(self, request: ChatRequest) -> dict[str, Any]:
        """The keyword arguments of the ``litellm.acompletion`` call for ``request`` (no secret in the repr)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_litellm_messages(request.messages),
            "timeout": request.timeout_s or self.timeout_s,
            "num_retries": 0,  # retries are the gateway's (litellm's own would multiply them)
            "max_retries": 0,
            "drop_params": True,  # e.g. gpt-5 models refuse temperature; drop what a model does not take
            **provider_kwargs(self.model, request.provider_options),
            **self.extra,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_output_tokens is not None:
            kwargs["max_tokens"] = request.max_output_tokens
        headers = {**self.headers, **request.headers}
        if headers:
            kwargs["extra_headers"] = headers
        if request.response_schema is not None:
            kwargs["response_format"] = {"type": "json_schema",
                                         "json_schema": {"name": "extraction", "schema": request.response_schema}}
        return kwargs

    async def complete(self, request: ChatRequest) -> ChatResponse:
        litellm = import_litellm()
        kwargs = self.arguments(request)
        if self._api_key:
            kwargs["api_key"] = self._api_key
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as exc:  # litellm raises many types; all become ModelError here, with their facts kept
            raise model_error(exc) from exc
        return _to_response(response, self.model)


def model_error(exc: BaseException) -> ModelError:
    """Translate a litellm exception, keeping the HTTP status and any Retry-After the provider sent.

    Some of litellm's 500s are its own, not the provider's, and their status is dropped: an answer litellm
    validated and refused (``JSONSchemaValidationError`` and its parent; kind ``response_validation``), and a local
    failure about credentials that no HTTP answer came with (kind ``auth``, as for such a failure without any
    status). Neither is worth another try. A refusal of an input longer than the model's context window (OpenAI's
    ``400 context_length_exceeded``, and other providers' wording of it) is ``input_too_large``, as a route's own
    overflow is."""
    litellm = import_litellm()
    raw_status = getattr(exc, "status_code", None)
    status = raw_status if isinstance(raw_status, int) and not isinstance(raw_status, bool) else None
    name = type(exc).__name__
    answered = getattr(exc, "litellm_response_headers", None) is not None  # the provider's HTTP answer was seen
    local = status is None or (status >= 500 and not answered)
    if isinstance(exc, litellm.exceptions.APIResponseValidationError):
        kind, status = "response_validation", None
    elif isinstance(exc, litellm.exceptions.ContextWindowExceededError) or (
            status in (400, 413) and _CONTEXT_LENGTH.search(f"{exc} {getattr(exc, 'body', '')}")):
        # as a route's own overflow (``ModelByInputTokens``): not a client error to report and forget
        kind = "input_too_large"
    elif local and _CREDENTIALS.search(str(exc)):
        kind, status = "auth", None
    else:
        kind = ("timeout" if name in ("Timeout", "APITimeoutError", "TimeoutError") or status == 408 else
                "rate_limited" if status == 429 else
                "server_error" if status is not None and status >= 500 else
                "connection" if "Connection" in name else
                "client_error" if status is not None else name)
    where = f" (HTTP {status})" if status is not None else ""
    return ModelError(cut_error(f"{name}{where}: {exc}"), kind=kind, status_code=status, retry_after=_retry_after(exc))


def _retry_after(exc: BaseException) -> float | None:
    for holder in (getattr(exc, "litellm_response_headers", None), getattr(getattr(exc, "response", None),
                                                                          "headers", None)):
        if holder is None:
            continue
        try:
            value = holder.get("retry-after")
        except AttributeError:
            continue
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                return None
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _provider_cost(usage: Any, headers: Mapping[str, Any]) -> tuple[float | None, str | None]:
    """A cost the provider itself reported: ``usage.cost`` (OpenRouter and gateways) or a cost header."""
    reported = _number(getattr(usage, "cost", None))
    if reported is not None:
        return reported, "usage.cost"
    lowered = {str(k).lower(): v for k, v in headers.items()}
    for name in _COST_HEADERS:
        value = _number(lowered.get(name))
        if value is not None:
            return value, name
    return None, None


def _to_response(response: Any, model: str) -> ChatResponse:
    choice = response.choices[0] if getattr(response, "choices", None) else None
    text = (choice.message.content or "") if choice is not None else ""
    usage = getattr(response, "usage", None)
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    hidden = getattr(response, "_hidden_params", {}) or {}
    headers = hidden.get("headers") or {}
    metadata: dict[str, Any] = {"provider": hidden.get("custom_llm_provider")}
    cost_headers = {k: v for k, v in headers.items() if "cost" in str(k).lower()}
    if cost_headers:
        metadata["headers"] = cost_headers
    cost, reported_by = _provider_cost(usage, headers)
    if cost is not None:
        metadata["cost_source"] = "provider"
        metadata["cost_reported_by"] = reported_by
    else:
        mapped = _number(hidden.get("response_cost"))
        cost = mapped
        metadata["cost_source"] = "price_map" if mapped is not None else None
    native = _native_finish_reason(choice)
    if native is not None:
        metadata["native_finish_reason"] = native
    return ChatResponse(
        text=text, model=getattr(response, "model", None) or model,
        usage=Usage(input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                    output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                    cached_input_tokens=int(getattr(prompt_details, "cached_tokens", 0) or 0),
                    reasoning_tokens=int(getattr(completion_details, "reasoning_tokens", 0) or 0)),
        cost_usd=cost, provider_metadata=metadata, finish_reason=_finish_reason(choice, native))


def _native_finish_reason(choice: Any) -> str | None:
    """The provider's own finish reason, which litellm keeps aside when it maps it to OpenAI's vocabulary."""
    fields = getattr(choice, "provider_specific_fields", None)
    native = fields.get("native_finish_reason") if isinstance(fields, Mapping) else None
    return native if isinstance(native, str) else None


def _finish_reason(choice: Any, native: str | None) -> str | None:
    """OpenAI's finish reason, as litellm maps it, except where the mapping hides an unfinished answer: litellm
    turns every reason it does not know ("other", "unknown", OpenRouter's "error", Gemini's unspecified reason)
    into "stop"; the provider's word is kept instead, so the gateway can tell the answer was cut short."""
    mapped = getattr(choice, "finish_reason", None) if choice is not None else None
    if native is not None and mapped == "stop":
        word = native.strip().lower().replace("-", "_")
        word = _UNSPECIFIED_FINISH.get(word, word)
        if word in _UNFINISHED_BEHIND_STOP:
            return word
    return mapped if isinstance(mapped, str) else None
