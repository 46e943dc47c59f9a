"""``activateAfterIdle: "auto"``: idle time after which the actor's provider has dropped its prompt cache anyway.

Activating buffered observations changes the prompt prefix; doing it once the provider's cache has expired costs
nothing extra. Durations follow the providers' documented cache lifetimes (reference §2a.5).
"""

from __future__ import annotations

import re
from typing import Literal

from om_stream.core.model_spec import provider_of

__all__ = ["resolve_idle_ms"]

MINUTE = 60_000
HOUR = 60 * MINUTE
_OPENAI_SHORT_CACHE = re.compile(r"^(gpt-4.*|gpt-5|gpt-5-.*|gpt-5\.[1-4](-.*)?)$")


def auto_ttl_ms(actor_model: str | None) -> int:
    provider = provider_of(actor_model)
    name = (actor_model or "").split("/", 1)[-1].lower()
    if provider == "openai" or "openai" in provider:
        return 5 * MINUTE if _OPENAI_SHORT_CACHE.match(name) else HOUR
    if provider in ("google", "gemini", "vertex_ai"):
        return 24 * HOUR
    if provider == "deepseek":
        return HOUR
    if provider == "groq":
        return 2 * HOUR
    return 5 * MINUTE  # anthropic, xai, openrouter and unknown providers


def resolve_idle_ms(setting: int | Literal["auto"] | None, actor_model: str | None) -> int | None:
    """Milliseconds of idleness that force activation, or ``None`` when idle activation is off."""
    if setting is None:
        return None
    if setting == "auto":
        return auto_ttl_ms(actor_model)
    return int(setting)
