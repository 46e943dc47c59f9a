"""Which models may serve a call, in order: the routing rules of the seeds turned into a list of route entries.

* a ``provider/model`` string (``"default"`` is the seeds' default model) → one entry, retried
  ``default_retries`` times;
* ``ModelByInputTokens`` → the model of the smallest threshold covering the call's input tokens; above the largest
  threshold the call fails with ``ModelUnavailable(kind="input_too_large")`` (the cycle fails, the worker lives on);
* a ``ModelWithRetries`` list → its enabled entries in order, each with its own ``maxRetries``, ``modelSettings``,
  ``providerOptions`` and ``headers``.

Also where an API base and key come from: the gateway settings (by model, then by provider), else the provider's
usual environment variables (``OPENAI_API_BASE`` / ``OPENAI_BASE_URL``; keys are left to litellm, which reads
``OPENAI_API_KEY``, ``GEMINI_API_KEY``, ...). Pure apart from reading the environment it is given.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from om_stream.adapters.litellm_model import litellm_model_name, litellm_provider
from om_stream.core.model_spec import DEFAULT_MODEL, ModelByInputTokens, ModelSettings, ModelSpec
from om_stream.errors import ModelUnavailable
from om_stream.ports import ChatRequest

__all__ = ["RouteEntry", "api_base_for", "apply_entry", "lookup", "resolve_route"]


@dataclass(frozen=True)
class RouteEntry:
    """One model the gateway may try for a call, and how many times."""

    model: str  # as configured (``google/gemini-2.5-flash``)
    max_retries: int
    settings: ModelSettings | None = None
    provider_options: Mapping[str, Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    tier: int | None = None  # the ModelByInputTokens threshold that chose it

    @property
    def litellm_name(self) -> str:
        return litellm_model_name(self.model)


def _concrete(model: str) -> str:
    return DEFAULT_MODEL if model == "default" else model


def resolve_route(spec: ModelSpec, input_tokens: Callable[[], int], *, default_retries: int) -> tuple[RouteEntry, ...]:
    """The entries to try, in order. ``input_tokens`` is only called for ``ModelByInputTokens``."""
    if isinstance(spec, str):
        return (RouteEntry(_concrete(spec), default_retries),)
    if isinstance(spec, ModelByInputTokens):
        tokens = input_tokens()
        try:
            model = spec.resolve(tokens)
        except ValueError as exc:
            raise ModelUnavailable(f"ModelByInputTokens: {exc}", kind="input_too_large") from None
        tier = next(t for t in spec.thresholds() if tokens <= t)
        return (RouteEntry(_concrete(model), default_retries, tier=tier),)
    entries = tuple(RouteEntry(_concrete(e.model), e.max_retries, e.model_settings, e.provider_options,
                               dict(e.headers or {})) for e in spec if e.enabled)
    if not entries:
        raise ModelUnavailable("the fallback list has no enabled entry", kind="no_model")
    return entries


def apply_entry(request: ChatRequest, entry: RouteEntry) -> ChatRequest:
    """The request as this entry sends it: its model settings, provider options and headers over the role's."""
    changes: dict[str, Any] = {"model": entry.model}
    if entry.settings is not None:
        if entry.settings.temperature is not None:
            changes["temperature"] = entry.settings.temperature
        if entry.settings.max_output_tokens is not None:
            changes["max_output_tokens"] = entry.settings.max_output_tokens
    if entry.provider_options is not None:
        changes["provider_options"] = {**request.provider_options, **entry.provider_options}
    if entry.headers:
        changes["headers"] = {**request.headers, **entry.headers}
    return replace(request, **changes)


def lookup(table: Mapping[str, Any], model: str) -> Any:
    """A per-model setting: by the configured name, the litellm name, the provider, then ``"*"`` (any model);
    ``None`` if absent."""
    for key in (model, litellm_model_name(model), litellm_provider(model), model.split("/", 1)[0], "*"):
        if key and key in table:
            return table[key]
    return None


def api_base_for(model: str, configured: Mapping[str, str], environ: Mapping[str, str]) -> str | None:
    """The API base of ``model``: from the settings, else ``<PROVIDER>_API_BASE`` / ``<PROVIDER>_BASE_URL``."""
    found = lookup(configured, model)
    if found:
        return str(found)
    provider = (litellm_provider(model) or "openai").upper()
    names = [provider]
    original = model.split("/", 1)[0].upper() if "/" in model else ""
    if original and original != provider:
        names.append(original)
    for name in names:
        for variable in (f"{name}_API_BASE", f"{name}_BASE_URL"):
            if environ.get(variable):
                return environ[variable]
    return None
