"""One chat model reached through litellm (any provider litellm routes to), with usage and cost on every call.

This is the transport only: which model to call, retries, fallbacks, circuit breaking and budgets are the
gateway's job (``adapters.gateway``), which wraps instances of this class.
"""

from __future__ import annotations

import logging
from typing import Any

from om_stream.adapters.offline import import_litellm
from om_stream.core.prompts.chat import ChatMessage
from om_stream.errors import ModelError
from om_stream.ports import ChatRequest, ChatResponse, Usage

__all__ = ["LiteLLMModel", "litellm_model_name", "to_litellm_messages"]

log = logging.getLogger(__name__)

# The seeds name models the Mastra way ("google/gemini-2.5-flash"); litellm's route for Google AI Studio is "gemini".
_PROVIDER_ALIASES = {"google": "gemini"}


def litellm_model_name(model: str) -> str:
    provider, sep, name = model.partition("/")
    if not sep:
        return model
    return f"{_PROVIDER_ALIASES.get(provider, provider)}/{name}"


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

    async def complete(self, request: ChatRequest) -> ChatResponse:
        litellm = import_litellm()
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_litellm_messages(request.messages),
            "timeout": request.timeout_s or self.timeout_s,
            "num_retries": 0,  # retries are the gateway's (litellm's own would multiply them)
            "max_retries": 0,
            "drop_params": True,  # e.g. gpt-5 models refuse temperature; drop what a model does not take
            **self.extra,
        }
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self._api_key:
            kwargs["api_key"] = self._api_key
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
        try:
            response = await litellm.acompletion(**kwargs)
        except Exception as exc:  # litellm raises many types; all become ModelError here, with their facts kept
            raise model_error(exc) from exc
        return _to_response(response, self.model)


def model_error(exc: Exception) -> ModelError:
    """Translate a litellm exception, keeping the HTTP status and any Retry-After the provider sent."""
    raw_status = getattr(exc, "status_code", None)
    status = raw_status if isinstance(raw_status, int) else None
    name = type(exc).__name__
    kind = ("timeout" if name in ("Timeout", "APITimeoutError") or status == 408 else
            "rate_limited" if status == 429 else
            "server_error" if status is not None and status >= 500 else
            "connection" if "Connection" in name else
            "client_error" if status is not None else name)
    return ModelError(f"{name}: {exc}"[:2000], kind=kind, status_code=status, retry_after=_retry_after(exc))


def _retry_after(exc: Exception) -> float | None:
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


def _to_response(response: Any, model: str) -> ChatResponse:
    choice = response.choices[0] if getattr(response, "choices", None) else None
    text = (choice.message.content or "") if choice is not None else ""
    usage = getattr(response, "usage", None)
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    completion_details = getattr(usage, "completion_tokens_details", None)
    hidden = getattr(response, "_hidden_params", {}) or {}
    cost = hidden.get("response_cost")
    metadata: dict[str, Any] = {}
    if hidden.get("additional_headers"):
        metadata["headers"] = {k: v for k, v in hidden["additional_headers"].items() if "cost" in k.lower()}
    return ChatResponse(
        text=text, model=getattr(response, "model", None) or model,
        usage=Usage(input_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
                    output_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
                    cached_input_tokens=int(getattr(prompt_details, "cached_tokens", 0) or 0),
                    reasoning_tokens=int(getattr(completion_details, "reasoning_tokens", 0) or 0)),
        cost_usd=float(cost) if isinstance(cost, int | float) else None,
        provider_metadata=metadata, finish_reason=getattr(choice, "finish_reason", None))
