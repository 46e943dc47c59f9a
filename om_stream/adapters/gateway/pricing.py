"""What a call cost, in USD, and who said so.

Order: a cost the provider reported (response body or headers) wins; then a per-model price from the gateway
settings (``prices``: private deployments, negotiated rates, models litellm's map does not know); then litellm's
bundled price map; else the cost is unknown (``None``), never a silent zero.
"""

from __future__ import annotations

from dataclasses import replace

from om_stream.ports import ChatResponse
from om_stream.settings import ModelPrice

__all__ = ["ModelPrice", "priced"]


def priced(response: ChatResponse, price: ModelPrice | None) -> ChatResponse:
    """``response`` with its cost settled by the rules above; ``provider_metadata['cost_source']`` says which."""
    source = response.provider_metadata.get("cost_source")
    if source == "provider" or price is None:
        return response
    metadata = {**response.provider_metadata, "cost_source": "price_override"}
    return replace(response, cost_usd=price.cost(response.usage), provider_metadata=metadata)
