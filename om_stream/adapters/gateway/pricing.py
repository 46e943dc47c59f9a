"""What a call cost, in USD, and who said so.

Order: a cost the provider reported (response body or headers) wins; then a per-model price from the gateway
settings (``prices``: private deployments, negotiated rates, models litellm's map does not know); then litellm's
bundled price map; else the cost is unknown (``None``), never a silent zero.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import BaseModel, ConfigDict, Field

from om_stream.ports import ChatResponse, Usage

__all__ = ["ModelPrice", "priced"]


class ModelPrice(BaseModel):
    """USD per million tokens. Cached input defaults to the input price; reasoning tokens are output tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)
    cached_input_per_million: float | None = Field(None, ge=0)

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_input_tokens, usage.input_tokens)
        cached_rate = self.input_per_million if self.cached_input_per_million is None \
            else self.cached_input_per_million
        return ((usage.input_tokens - cached) * self.input_per_million + cached * cached_rate
                + usage.output_tokens * self.output_per_million) / 1_000_000


def priced(response: ChatResponse, price: ModelPrice | None) -> ChatResponse:
    """``response`` with its cost settled by the rules above; ``provider_metadata['cost_source']`` says which."""
    source = response.provider_metadata.get("cost_source")
    if source == "provider" or price is None:
        return response
    metadata = {**response.provider_metadata, "cost_source": "price_override"}
    return replace(response, cost_usd=price.cost(response.usage), provider_metadata=metadata)
