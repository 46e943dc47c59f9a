"""Model-call metrics, fed by the hooks the model layer already calls: never by code inside the gateway.

* :class:`ModelCallMetrics` is a gateway ``CallObserver``: the gateway calls it after every attempt with a
  ``CallRecord`` (read as a :class:`ModelAttempt`), which becomes the OpenTelemetry GenAI histograms (duration,
  token usage), the attempt outcome, retries, cost (or a call of unknown cost: never a silent zero) and cached
  input tokens. Circuit state is read from the gateway's breakers when Prometheus scrapes, so it is never stale.
* :class:`MeteredModel` gives a model that is not behind the gateway (the offline model, a user's ``ChatModel``)
  the same records, so offline calls show up in the same series with ``gen_ai_request_model="offline"``.
* :class:`CycleMetrics` is a ``CycleRunner`` observer for what only a whole cycle knows: calls a token budget
  refused before any attempt, and cycles the offline model served because every configured model failed.
* :func:`embedding_call` records an embedder call (``om_role="embedder"``, operation ``embeddings``).

Labels carry the model, provider, role and error kind only: never a thread or resource id. This package imports
neither ``adapters`` nor ``runtime``: what it reads of their records is declared here as protocols
(:class:`ModelAttempt`, :class:`CycleEnd`), and whoever builds a gateway or a cycle runner hands it these feeds.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from om_stream.errors import ModelError
from om_stream.observability.metrics import Metrics
from om_stream.observability.tracing import exemplar
from om_stream.ports import AttachmentAwareModel, ChatModel, ConfigRoutedModel

if TYPE_CHECKING:
    from om_stream.core.config import ResolvedConfig
    from om_stream.ports import ChatRequest, ChatResponse, Usage

__all__ = ["CycleEnd", "CycleMetrics", "MeteredModel", "ModelAttempt", "ModelCallMetrics", "embedding_call",
           "operation_name", "provider_name"]

log = logging.getLogger(__name__)

# litellm provider prefixes → OpenTelemetry ``gen_ai.provider.name`` well-known values
_PROVIDERS = {"gemini": "gcp.gemini", "vertex_ai": "gcp.vertex_ai", "vertex_ai_beta": "gcp.vertex_ai",
              "bedrock": "aws.bedrock", "azure": "azure.ai.openai", "azure_ai": "azure.ai.inference",
              "mistral": "mistral_ai", "xai": "x_ai", "watsonx": "ibm.watsonx.ai"}
_CIRCUIT = {"closed": 0.0, "half_open": 1.0, "open": 2.0}


def provider_name(model: str) -> str:
    """``gen_ai_provider_name`` of a ``provider/model`` string (``offline`` for the offline model)."""
    if model == "offline":
        return "offline"
    prefix, sep, _ = model.partition("/")
    if not sep:
        return "openai" if model.startswith(("gpt-", "o1", "o3", "o4")) else "unknown"
    return _PROVIDERS.get(prefix, prefix)


def operation_name(role: str) -> str:
    """``gen_ai_operation_name``: the well-known ``chat`` for Observer/Reflector/extractor, ``embeddings``."""
    return "embeddings" if role == "embedder" else "chat"


class _Breakers(Protocol):
    def breaker(self, model: str) -> Any: ...


# What the metrics read of other layers' records, declared here rather than imported: the gateway's ``CallRecord``
# and the cycle runner's hook context have these attributes, and this package depends on neither adapters nor
# runtime (tests/unit/test_layers.py).

class ModelAttempt(Protocol):
    """One attempt at a model call, as the metrics read it (the gateway's ``CallRecord`` is one)."""

    @property
    def role(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def seconds(self) -> float: ...
    @property
    def attempt(self) -> int: ...
    @property
    def usage(self) -> Usage | None: ...
    @property
    def cost_usd(self) -> float | None: ...
    @property
    def error_kind(self) -> str | None: ...
    @property
    def response_model(self) -> str | None: ...
    @property
    def finish_reason(self) -> str | None: ...


class CycleEnd(Protocol):
    """A cycle hook's context, as the metrics read it (the cycle runner's ``CycleHookContext`` is one)."""

    @property
    def phase(self) -> str: ...
    @property
    def operation(self) -> str: ...
    @property
    def error_kind(self) -> str | None: ...
    @property
    def offline(self) -> bool: ...


@dataclass(frozen=True)
class _Attempt:
    """What :class:`MeteredModel` reports: the only attempt of a call no gateway made."""

    role: str
    model: str
    ok: bool
    seconds: float
    attempt: int = 1
    usage: Usage | None = None
    cost_usd: float | None = None
    error_kind: str | None = None
    response_model: str | None = None
    finish_reason: str | None = None


class ModelCallMetrics:
    """A gateway ``CallObserver`` (give it to the gateway at construction), and what ``MeteredModel`` reports to.

    ``breakers`` (the gateway, given here or with :meth:`watch_breakers` once it is built) lets
    ``om_model_circuit_state`` read each model's breaker at scrape time."""

    def __init__(self, metrics: Metrics, breakers: _Breakers | None = None) -> None:
        self.metrics = metrics
        self.breakers = breakers
        self._watched: set[str] = set()

    def watch_breakers(self, breakers: _Breakers) -> None:
        self.breakers = breakers

    def __call__(self, record: ModelAttempt) -> None:
        metrics = self.metrics
        model, role = record.model, record.role
        common = (operation_name(role), provider_name(model), model, role)
        # the exemplar: the trace of the cycle this call belongs to (the observer runs within it), when sampled
        metrics.model_duration.labels(*common, record.error_kind or "").observe(max(0.0, record.seconds),
                                                                                exemplar=exemplar())
        metrics.model_calls.labels(model, role, "ok" if record.ok else "error").inc()
        if record.attempt > 1:  # every attempt after a call's first: the same model again, or the next fallback
            metrics.model_retries.labels(model, role).inc()
        if record.ok or record.usage is not None:  # a failed attempt with usage got an (unfinished) answer: paid
            usage = record.usage
            if usage is not None:
                metrics.model_tokens.labels(*common, "input").observe(usage.input_tokens)
                metrics.model_tokens.labels(*common, "output").observe(usage.output_tokens)
                metrics.model_cached_tokens.labels(model, role).inc(min(usage.cached_input_tokens,
                                                                        usage.input_tokens))
            if record.cost_usd is None:
                metrics.model_cost_unknown.labels(model, role).inc()
            else:
                metrics.model_cost.labels(model, role).inc(max(0.0, record.cost_usd))
        self._watch_circuit(model)

    def _watch_circuit(self, model: str) -> None:
        if self.breakers is None or model in self._watched:
            return
        self._watched.add(model)
        breakers = self.breakers

        def state() -> float:
            return _CIRCUIT.get(str(breakers.breaker(model).state), 0.0)

        self.metrics.model_circuit_state.labels(model).set_function(state)


class MeteredModel(ConfigRoutedModel, AttachmentAwareModel):
    """Wraps a ``ChatModel`` that is not behind the gateway and reports each call as the gateway does. It declares
    the wrapped model's capabilities (a model that declares neither is served as the cycle runner serves it
    unwrapped); every other attribute is the wrapped model's."""

    def __init__(self, model: ChatModel, observer: Callable[[ModelAttempt], None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.model = model
        self.observer = observer
        self.clock = clock

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def bind_config(self, config: ResolvedConfig) -> ChatModel:
        """The wrapped model bound to ``config``, still metered; itself when the wrapped model does not route by
        configuration."""
        if isinstance(self.model, ConfigRoutedModel):
            return MeteredModel(self.model.bind_config(config), self.observer, self.clock)
        return self

    def accepts_attachments(self, request: ChatRequest) -> bool:
        """The wrapped model's answer; a model that does not say gets the attachments."""
        return self.model.accepts_attachments(request) if isinstance(self.model, AttachmentAwareModel) else True

    async def complete(self, request: ChatRequest) -> ChatResponse:
        began = self.clock()
        fallback = request.model or "unknown"
        try:
            response = await self.model.complete(request)
        except ModelError as exc:
            self._notify(_Attempt(role=request.role, model=fallback, ok=False, seconds=self.clock() - began,
                                  error_kind=exc.kind or type(exc).__name__))
            raise
        self._notify(_Attempt(role=request.role, model=response.model or fallback, ok=True,
                              seconds=self.clock() - began, usage=response.usage, cost_usd=response.cost_usd,
                              response_model=response.model or None, finish_reason=response.finish_reason))
        return response

    def _notify(self, record: ModelAttempt) -> None:
        try:
            self.observer(record)
        except Exception:  # a metrics hook must never fail a model call
            log.exception("model call observer failed")


class CycleMetrics:
    """A ``CycleRunner`` observer: ``CycleRunner(..., observers=[CycleMetrics(metrics)])``."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics

    def __call__(self, context: CycleEnd) -> None:
        if context.phase != "end":
            return
        role = "observer" if context.operation == "observation" else "reflector"
        if context.error_kind == "budget_exceeded":
            self.metrics.model_budget_rejections.labels(role).inc()
        if context.offline:
            self.metrics.model_offline_fallbacks.labels(role).inc()


def embedding_call(metrics: Metrics, model: str, seconds: float, *, input_tokens: int | None = None,
                   cost_usd: float | None = None, error_kind: str | None = None) -> None:
    """Record one embedder call (the recall indexer's and the recall tool's)."""
    common = ("embeddings", provider_name(model), model, "embedder")
    metrics.model_duration.labels(*common, error_kind or "").observe(max(0.0, seconds))
    metrics.model_calls.labels(model, "embedder", "error" if error_kind else "ok").inc()
    if error_kind:
        return
    if input_tokens is not None:
        metrics.model_tokens.labels(*common, "input").observe(input_tokens)
    if cost_usd is None:
        metrics.model_cost_unknown.labels(model, "embedder").inc()
    else:
        metrics.model_cost.labels(model, "embedder").inc(max(0.0, cost_usd))
