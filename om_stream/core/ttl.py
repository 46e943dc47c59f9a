"""``activateAfterIdle: "auto"``: idle time after which the actor's provider has dropped its prompt cache anyway.

Activating buffered observations changes the prompt prefix; doing it once the provider's cache has expired costs
nothing extra. Durations follow the providers' documented cache lifetimes (reference §2a.5). For an OpenAI actor
the retention it asked for on its own calls (``prompt_cache_retention`` on its messages) decides first, then the
model's name.
"""

from __future__ import annotations

import re
from typing import Literal

from om_stream.core.messages import Message, PromptCacheRetention
from om_stream.core.model_spec import provider_of

__all__ = ["actor_cache_retention", "resolve_idle_ms"]

MINUTE = 60_000
HOUR = 60 * MINUTE
_OPENAI_SHORT_CACHE = re.compile(r"^(gpt-4.*|gpt-5|gpt-5-.*|gpt-5\.[1-4](-.*)?)$")
_OPENAI_RETENTION = {"24h": HOUR, "in_memory": 5 * MINUTE}


def auto_ttl_ms(actor_model: str | None, prompt_cache_retention: PromptCacheRetention | None = None) -> int:
    provider = provider_of(actor_model)
    name = (actor_model or "").split("/", 1)[-1].lower()
    if provider == "openai" or "openai" in provider:
        if prompt_cache_retention is not None:
            return _OPENAI_RETENTION[prompt_cache_retention]
        return 5 * MINUTE if _OPENAI_SHORT_CACHE.match(name) else HOUR
    if provider in ("google", "gemini", "vertex_ai"):
        return 24 * HOUR
    if provider == "deepseek":
        return HOUR
    if provider == "groq":
        return 2 * HOUR
    return 5 * MINUTE  # anthropic, xai, openrouter and unknown providers


def resolve_idle_ms(setting: int | Literal["auto"] | None, actor_model: str | None,
                    prompt_cache_retention: PromptCacheRetention | None = None) -> int | None:
    """Milliseconds of idleness that force activation, or ``None`` when idle activation is off."""
    if setting is None:
        return None
    if setting == "auto":
        return auto_ttl_ms(actor_model, prompt_cache_retention)
    return int(setting)


def actor_cache_retention(message: Message, last: PromptCacheRetention | None) -> PromptCacheRetention | None:
    """The actor's prompt-cache retention once ``message`` has arrived. The retention belongs to the actor's call,
    as its model does: a message that names either gives the call's settings (a model without a retention is the
    provider's default), and one that names neither keeps ``last``."""
    if message.model is None and message.prompt_cache_retention is None:
        return last
    return message.prompt_cache_retention
