"""How the Observer and Reflector models are named: strings, ModelByInputTokens, ModelWithRetries fallback lists.

Pure data and the routing rules of the seeds. Calling a model is the gateway's job (adapters).
"""

from __future__ import annotations

import math
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

__all__ = [
    "DEFAULT_MODEL",
    "ModelByInputTokens",
    "ModelSettings",
    "ModelSpec",
    "ModelWithRetries",
    "is_default_selection",
    "model_name",
    "provider_of",
]

DEFAULT_MODEL = "google/gemini-2.5-flash"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, alias_generator=to_camel)


class ModelSettings(_Frozen):
    temperature: float | None = Field(None, ge=0, le=2)
    max_output_tokens: int | None = Field(None, gt=0)


class ModelWithRetries(_Frozen):
    """One entry of an ordered fallback list: tried ``max_retries + 1`` times before the next entry."""

    model: str
    max_retries: int = Field(0, ge=0, le=10)
    enabled: bool = True
    model_settings: ModelSettings | None = None
    provider_options: dict[str, Any] | None = None
    headers: dict[str, str] | None = None


class ModelByInputTokens(_Frozen):
    """Picks the model of the smallest ``up_to`` threshold that covers the call's input tokens."""

    up_to: dict[int, str]

    @field_validator("up_to", mode="before")
    @classmethod
    def _keys_are_token_counts(cls, value: object) -> object:
        if not isinstance(value, dict) or not value:
            raise ValueError("upTo needs at least one threshold")
        parsed: dict[int, str] = {}
        for key, model in value.items():
            try:
                number = float(key)
            except (TypeError, ValueError):
                raise ValueError(f"upTo threshold {key!r} is not a number") from None
            if not math.isfinite(number) or number <= 0 or number != int(number):
                raise ValueError(f"upTo threshold {key!r} must be a positive whole number of tokens")
            if not isinstance(model, str) or not model.strip():
                raise ValueError(f"upTo model for {key!r} must be a model name")
            parsed[int(number)] = model
        return dict(sorted(parsed.items()))

    def thresholds(self) -> list[int]:
        return sorted(self.up_to)

    def resolve(self, input_tokens: int) -> str:
        """The model for ``input_tokens``; ``ValueError`` above the largest threshold (the cycle fails)."""
        for threshold in self.thresholds():
            if input_tokens <= threshold:
                return self.up_to[threshold]
        raise ValueError(f"input of {input_tokens} tokens exceeds the largest ModelByInputTokens threshold "
                         f"({self.thresholds()[-1]})")


ModelSpec: TypeAlias = str | ModelByInputTokens | list[ModelWithRetries]


def is_default_selection(spec: ModelSpec | None) -> bool:
    """The seeds give ``maxOutputTokens: 100000`` only to the default selection: unset, "default", or by-tokens."""
    return spec is None or spec == "default" or isinstance(spec, ModelByInputTokens)


def model_name(spec: ModelSpec | None) -> str:
    """A representative name (for logs, 'auto' TTLs and compression levels): the first enabled entry."""
    if spec is None or spec == "default":
        return DEFAULT_MODEL
    if isinstance(spec, str):
        return spec
    if isinstance(spec, ModelByInputTokens):
        return spec.up_to[spec.thresholds()[0]]
    return next(entry.model for entry in spec if entry.enabled)


def provider_of(model: str | None) -> str:
    """``openai`` for ``openai/gpt-5-mini``; bare names are classified by their family."""
    if not model:
        return ""
    if "/" in model:
        return model.split("/", 1)[0].lower()
    lowered = model.lower()
    for prefix, provider in (("gpt", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
                             ("claude", "anthropic"), ("gemini", "google"), ("grok", "xai"),
                             ("deepseek", "deepseek")):
        if lowered.startswith(prefix):
            return provider
    return ""
