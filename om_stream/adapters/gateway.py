"""The model gateway: which model serves an Observer/Reflector/extractor call, and how failures are handled."""

from __future__ import annotations

import os

from om_stream.adapters.litellm_model import LiteLLMModel
from om_stream.ports import ChatModel

__all__ = ["gateway_for_cli"]


def gateway_for_cli(model: str, api_base: str | None) -> ChatModel:
    """A single litellm model for ``om-stream replay --model`` / ``demo --model``; the API base can also come from
    the provider's usual environment variable (e.g. ``OPENAI_API_BASE``)."""
    provider = model.split("/", 1)[0].upper() if "/" in model else "OPENAI"
    base = api_base or os.environ.get(f"{provider}_API_BASE") or os.environ.get(f"{provider}_BASE_URL")
    return LiteLLMModel(model, api_base=base)
