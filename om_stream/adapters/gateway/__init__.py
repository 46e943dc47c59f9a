"""The model gateway: which model serves an Observer/Reflector/extractor call, and how failures are handled.

    gateway      ModelGateway (the ChatModel the runtime uses), GatewaySettings, gateway_for_cli
    routing      model specs → ordered route entries; API bases and keys
    resilience   transient errors, unfinished answers, retry backoff, circuit breakers, bulkheads
    budget       per-resource token budgets over a sliding window
    pricing      what a call cost, and who said so

Everything below this package reaches models through ``adapters.litellm_model`` only.
"""

from om_stream.adapters.gateway.budget import TokenBudget
from om_stream.adapters.gateway.gateway import (
    CallObserver,
    CallRecord,
    GatewaySettings,
    GatewayStats,
    ModelGateway,
    build_gateway,
    gateway_for_cli,
)
from om_stream.adapters.gateway.pricing import ModelPrice
from om_stream.adapters.gateway.resilience import CircuitBreaker, RetryPolicy, is_transient
from om_stream.adapters.gateway.routing import RouteEntry, resolve_route

__all__ = [
    "CallObserver",
    "CallRecord",
    "CircuitBreaker",
    "GatewaySettings",
    "GatewayStats",
    "ModelGateway",
    "ModelPrice",
    "RetryPolicy",
    "RouteEntry",
    "TokenBudget",
    "build_gateway",
    "gateway_for_cli",
    "is_transient",
    "resolve_route",
]
