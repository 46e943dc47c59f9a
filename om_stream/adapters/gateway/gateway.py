"""The model gateway: every Observer / Reflector / extractor call, routed to a litellm model and kept within bounds.

For each call (``complete``), in order:

1. **route**: the role's model spec (from the bound OM configuration, or the routes given to the gateway; a
   request naming a model uses that model) becomes route entries (``routing``); ``ModelByInputTokens`` counts
   the prompt's tokens and fails the call cleanly above its largest threshold;
2. **budget**: the resource's token budget reserves the prompt's tokens, or refuses the call (``BudgetExceeded``);
3. **try entries in order**: an entry whose circuit is open is skipped; each attempt waits for a slot of the
   model's bulkhead, runs with the per-call timeout, and on a transient failure is retried after a backoff with
   jitter (or the provider's Retry-After) up to the entry's ``maxRetries``; a non-transient failure moves on to the
   next entry at once. An answer the model did not complete (finish reason ``content_filter``, ``other``,
   ``unknown``, ``error``) is a failed attempt too, retried the same way (kind ``incomplete``), although it says
   nothing against the model's health: its circuit stays closed;
4. **settle**: the cost is settled (provider-reported, price override, litellm's map, else unknown) and the budget
   charged with what the call used.

The whole of it runs under one deadline (``deadline_s``): nothing the gateway does makes its caller wait longer.
Every failure is a ``ModelError``; the caller (``runtime.cycles``) turns it into a failed cycle.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import random
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from pydantic import SecretStr

from om_stream.adapters.gateway.budget import Reservation, TokenBudget
from om_stream.adapters.gateway.pricing import priced
from om_stream.adapters.gateway.resilience import (
    Bulkhead,
    CircuitBreaker,
    RetryPolicy,
    incomplete_reason,
    is_transient,
)
from om_stream.adapters.gateway.routing import RouteEntry, api_base_for, apply_entry, lookup, resolve_route
from om_stream.adapters.litellm_model import (
    LiteLLMModel,
    litellm_model_name,
    litellm_provider,
    supports_attachments,
)
from om_stream.adapters.offline import import_litellm
from om_stream.core.config import ResolvedConfig
from om_stream.core.error_text import cut_error
from om_stream.core.model_spec import DEFAULT_MODEL, ModelSpec
from om_stream.errors import ModelError, ModelUnavailable
from om_stream.ports import (
    AttachmentAwareModel,
    ChatModel,
    ChatRequest,
    ChatResponse,
    ConfigRoutedModel,
    RetryingModel,
    Usage,
)
from om_stream.settings import GatewaySettings, MemorySettings

__all__ = ["CallObserver", "CallRecord", "GatewaySettings", "GatewayStats", "ModelGateway", "build_gateway",
           "gateway_for_cli"]

log = logging.getLogger(__name__)
Role = Literal["observer", "reflector", "extractor"]
_ROLES: tuple[Role, ...] = ("observer", "reflector", "extractor")


@dataclass
class GatewayStats:
    calls: int = 0  # complete() calls
    attempts: int = 0  # model calls made
    successes: int = 0
    failures: int = 0  # failed attempts
    retries: int = 0  # attempts after the first of a call (same entry again, or the next entry)
    unavailable: int = 0  # complete() calls that failed
    circuit_skips: int = 0
    budget_refusals: int = 0
    deadline_exceeded: int = 0
    input_too_large: int = 0  # calls over a route's largest tier, and attempts a provider refused as too long
    cost_usd: float = 0.0
    unknown_cost_calls: int = 0


@dataclass(frozen=True)
class CallRecord:
    """One attempt, for call observers (metrics): which model, how it ended, how long it took."""

    role: str
    model: str
    ok: bool
    seconds: float
    attempt: int
    entry: int
    usage: Usage | None = None
    cost_usd: float | None = None
    error_kind: str | None = None
    resource_id: str | None = None
    response_model: str | None = None  # the model the provider says answered (its own name for it)
    finish_reason: str | None = None


CallObserver = Callable[[CallRecord], None]


@dataclass
class _Shared:
    """State every view of one gateway shares: transports, circuits, bulkheads, budget, counters."""

    settings: GatewaySettings
    count_text: Callable[[str], int] | None
    clock: Callable[[], float]
    sleep: Callable[[float], Any]
    rand: Callable[[], float]
    environ: Mapping[str, str]
    budget: TokenBudget
    policy: RetryPolicy
    observers: list[CallObserver]
    stats: GatewayStats = field(default_factory=GatewayStats)
    transports: dict[tuple[str, str | None], ChatModel] = field(default_factory=dict)
    breakers: dict[str, CircuitBreaker] = field(default_factory=dict)
    bulkheads: dict[str, Bulkhead] = field(default_factory=dict)


def _routes(routes: ModelSpec | Mapping[str, ModelSpec] | None) -> dict[str, ModelSpec] | None:
    if routes is None:
        return None
    if isinstance(routes, Mapping):
        unknown = set(routes) - set(_ROLES)
        if unknown:
            raise ValueError(f"routes: unknown roles {sorted(unknown)}; use observer, reflector, extractor")
        return dict(routes)
    return dict.fromkeys(_ROLES, routes)


class ModelGateway(ConfigRoutedModel, AttachmentAwareModel, RetryingModel):
    """Implements ``ports.ChatModel`` over litellm with routing, fallbacks, retries, circuit breakers, bulkheads,
    budgets, deadlines and cost; and the capabilities ``ports.ConfigRoutedModel`` and
    ``ports.AttachmentAwareModel``.

    ``routes``: one model spec for every role, or a spec per role (``observer``, ``reflector``; ``extractor``
    defaults to the observer's). Without routes the gateway routes as the OM configuration it is bound to says
    (``bind_config``; ``runtime.cycles.CycleRunner`` binds it), and to the default model until then.
    """

    def __init__(self, settings: GatewaySettings | None = None, *,
                 routes: ModelSpec | Mapping[str, ModelSpec] | None = None,
                 count_text: Callable[[str], int] | None = None, observers: Iterable[CallObserver] = (),
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], Any] = asyncio.sleep,
                 rand: Callable[[], float] = random.random, environ: Mapping[str, str] | None = None) -> None:
        settings = settings or GatewaySettings()
        self._shared = _Shared(
            settings=settings, count_text=count_text, clock=clock, sleep=sleep, rand=rand,
            environ=dict(os.environ if environ is None else environ),
            budget=TokenBudget(settings.budget_tokens, settings.budget_window_s, dict(settings.budget_overrides)),
            policy=RetryPolicy(settings.backoff_initial_s, settings.backoff_max_s, settings.backoff_jitter,
                               settings.retry_after_max_s),
            observers=list(observers))
        self._routes = _routes(routes)
        import_litellm()  # seconds of import here, not inside the first call's timeout

    def __repr__(self) -> str:
        return f"ModelGateway(routes={self._routes!r})"

    # -- views and introspection ---------------------------------------------------------------------------------

    def bind_config(self, config: ResolvedConfig) -> ModelGateway:
        """A view of this gateway (same circuits, budgets and counters) routing each role as ``config`` says,
        unless routes were given explicitly (e.g. ``om-stream replay --model``), which win."""
        if self._routes is not None:
            return self
        view = copy.copy(self)
        view._routes = {"observer": config.observer_model, "reflector": config.reflector_model,
                        "extractor": config.observer_model}
        return view

    @property
    def settings(self) -> GatewaySettings:
        return self._shared.settings

    @property
    def stats(self) -> GatewayStats:
        return self._shared.stats

    @property
    def observers(self) -> list[CallObserver]:
        """Called after every attempt with a ``CallRecord`` (metrics); exceptions are logged, never raised."""
        return self._shared.observers

    @property
    def retry_count(self) -> int:
        """Attempts made after the first of a call, over the gateway's life (the replay report's ``retries``)."""
        return self._shared.stats.retries

    @property
    def failure_count(self) -> int:
        return self._shared.stats.failures

    @property
    def budget(self) -> TokenBudget:
        return self._shared.budget

    def breaker(self, model: str) -> CircuitBreaker:
        """The circuit breaker of ``model`` (configured or litellm name)."""
        return self._breaker(litellm_model_name(model))

    def route_for(self, request: ChatRequest) -> ModelSpec:
        """The spec serving ``request``: the model it names (e.g. an extraction follow-up to the model that just
        answered), else its role's route (the extractor's defaults to the observer's), else the default model."""
        if request.model:
            return request.model
        routes = self._routes or {}
        return routes.get(request.role) or routes.get("observer") or DEFAULT_MODEL

    def accepts_attachments(self, request: ChatRequest) -> bool:
        """``observeAttachments: 'auto'``: whether the model that would serve ``request`` (its first route entry)
        takes images, per litellm's registry; a model the registry does not know gets them."""
        try:
            entries = resolve_route(self.route_for(request), lambda: self._input_tokens(request), default_retries=0)
        except ModelError:
            return True
        capable = supports_attachments(entries[0].model)
        return capable is not False

    # -- the call ------------------------------------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> ChatResponse:
        shared = self._shared
        stats = shared.stats
        stats.calls += 1
        limit = shared.settings.deadline_s
        deadline = shared.clock() + limit
        try:
            async with asyncio.timeout(limit):
                return await self._serve(request, deadline)
        except TimeoutError:
            stats.unavailable += 1
            stats.deadline_exceeded += 1
            raise ModelUnavailable(f"no model answered within the gateway deadline of {limit:g} s",
                                   kind="deadline") from None
        except ModelError as exc:
            stats.unavailable += 1
            if exc.kind == "deadline":
                stats.deadline_exceeded += 1
            raise

    async def _serve(self, request: ChatRequest, deadline: float) -> ChatResponse:
        shared = self._shared
        tokens: list[int] = []

        def input_tokens() -> int:
            if not tokens:
                tokens.append(self._input_tokens(request))
            return tokens[0]

        try:
            entries = resolve_route(self.route_for(request), input_tokens,
                                    default_retries=shared.settings.max_retries)
        except ModelError as exc:
            if exc.kind == "input_too_large":
                shared.stats.input_too_large += 1
            raise
        reservation: Reservation | None = None
        if shared.budget.enabled:
            try:
                reservation = shared.budget.reserve(request.resource_id or "", input_tokens(), shared.clock())
            except ModelError:
                shared.stats.budget_refusals += 1
                raise
        spent: list[int] = []  # tokens of answers that came back but were not usable (paid all the same)
        try:
            response = await self._try_entries(request, entries, deadline, spent)
        except BaseException:
            TokenBudget.settle(reservation, sum(spent))
            raise
        TokenBudget.settle(reservation, sum(spent) + response.usage.input_tokens + response.usage.output_tokens)
        return response

    async def _try_entries(self, request: ChatRequest, entries: tuple[RouteEntry, ...], deadline: float,
                           spent: list[int]) -> ChatResponse:
        shared = self._shared
        stats = shared.stats
        last: ModelError | None = None
        skipped: list[str] = []
        made = 0
        for index, entry in enumerate(entries):
            transport = self._transport(entry.model)
            name = litellm_model_name(entry.model)
            breaker = self._breaker(name)
            for retry in range(entry.max_retries + 1):
                if not breaker.allow(shared.clock()):
                    if retry == 0:
                        stats.circuit_skips += 1
                        skipped.append(entry.model)
                    break
                remaining = deadline - shared.clock()
                if remaining <= 0:
                    breaker.release()
                    raise ModelUnavailable(_give_up(last, "the gateway deadline passed"), kind="deadline")
                if made:
                    stats.retries += 1
                made += 1
                try:
                    response = await self._attempt(request, entry, index, made, transport, name, remaining)
                except ModelError as exc:
                    if exc.kind == "deadline":  # no slot before the deadline: not the model's fault
                        breaker.release()
                        raise
                    last = exc
                    if exc.kind == "input_too_large":  # the provider refused the input's length
                        stats.input_too_large += 1
                    if isinstance(exc, _IncompleteAnswer):
                        spent.append(exc.tokens)
                        breaker.success()  # the model answered: nothing against its health
                    elif is_transient(exc):
                        breaker.failure(shared.clock())
                    else:
                        breaker.release()
                        break
                    if retry == entry.max_retries or breaker.state == "open":
                        break
                    delay = shared.policy.delay(retry, exc.retry_after, shared.rand)
                    if shared.clock() + delay >= deadline:
                        break  # no time left to wait here; a later entry may still answer at once
                    await shared.sleep(delay)
                    continue
                except BaseException:  # cancelled (the deadline, or the caller): a half-open probe is freed
                    breaker.release()
                    raise
                breaker.success()
                return response
        if last is None:
            raise ModelUnavailable(f"the circuit of every configured model is open ({', '.join(skipped)})",
                                   kind="circuit_open")
        raise ModelUnavailable(_give_up(last, f"{made} attempt(s) over {len(entries)} model(s) failed"),
                               kind=last.kind, status_code=last.status_code, retry_after=last.retry_after)

    async def _attempt(self, request: ChatRequest, entry: RouteEntry, index: int, attempt: int,
                       transport: ChatModel, name: str, remaining: float) -> ChatResponse:
        shared = self._shared
        stats = shared.stats
        timeout = min(request.timeout_s or shared.settings.timeout_s, shared.settings.timeout_s, remaining)
        sent = replace(apply_entry(request, entry), timeout_s=timeout)
        bulkhead = self._bulkhead(name)
        began = shared.clock()
        try:
            await bulkhead.acquire(remaining)
        except TimeoutError:
            raise ModelUnavailable(f"{entry.model}: all {bulkhead.limit} call slots stayed busy until the "
                                   f"deadline", kind="deadline") from None
        stats.attempts += 1
        try:
            left = max(0.001, remaining - (shared.clock() - began))
            response = await asyncio.wait_for(transport.complete(replace(sent, timeout_s=min(timeout, left))),
                                              min(timeout, left))
        except TimeoutError:
            error = ModelError(f"{entry.model}: no answer within {min(timeout, left):.3g} s", kind="timeout")
            self._failed(request, entry, index, attempt, began, error)
            raise error from None
        except ModelError as exc:
            self._failed(request, entry, index, attempt, began, exc)
            raise
        finally:
            bulkhead.release()
        response = priced(response, lookup(shared.settings.prices, entry.model))
        reason = incomplete_reason(response)
        if reason is not None:
            incomplete = _IncompleteAnswer(entry.model, reason, response.usage)
            self._paid(response)
            self._failed(request, entry, index, attempt, began, incomplete, usage=response.usage,
                         cost_usd=response.cost_usd)
            raise incomplete
        provider_model = response.model
        gateway = {"route": entry.model, "provider_model": provider_model, "entry": index, "attempts": attempt}
        if entry.tier is not None:
            gateway["tier"] = entry.tier
        response = replace(response, model=entry.model,
                           provider_metadata={**response.provider_metadata, "gateway": gateway})
        stats.successes += 1
        self._paid(response)
        self._notify(CallRecord(role=request.role, model=entry.model, ok=True, seconds=shared.clock() - began,
                                attempt=attempt, entry=index, usage=response.usage, cost_usd=response.cost_usd,
                                resource_id=request.resource_id, response_model=provider_model or None,
                                finish_reason=response.finish_reason))
        return response

    # -- helpers -------------------------------------------------------------------------------------------------

    def _failed(self, request: ChatRequest, entry: RouteEntry, index: int, attempt: int, began: float,
                error: ModelError, *, usage: Usage | None = None, cost_usd: float | None = None) -> None:
        self._shared.stats.failures += 1
        log.info("model call to %s failed (%s): %s", entry.model, error.kind, str(error)[:300])
        self._notify(CallRecord(role=request.role, model=entry.model, ok=False,
                                seconds=self._shared.clock() - began, attempt=attempt, entry=index, usage=usage,
                                cost_usd=cost_usd, error_kind=error.kind, resource_id=request.resource_id))

    def _paid(self, response: ChatResponse) -> None:
        stats = self._shared.stats
        if response.cost_usd is None:
            stats.unknown_cost_calls += 1
        else:
            stats.cost_usd += response.cost_usd

    def _notify(self, record: CallRecord) -> None:
        for observer in self._shared.observers:
            try:
                observer(record)
            except Exception:  # a metrics hook must never fail a model call
                log.exception("gateway call observer failed")

    def _input_tokens(self, request: ChatRequest) -> int:
        shared = self._shared
        if shared.count_text is None:
            from om_stream.adapters.tiktoken_counter import TiktokenCounter

            shared.count_text = TiktokenCounter().count
        return sum(shared.count_text(m.content) for m in request.messages)

    def _transport(self, model: str) -> ChatModel:
        shared = self._shared
        settings = shared.settings
        base = api_base_for(model, settings.api_bases, shared.environ)
        key = (litellm_model_name(model), base)
        transport = shared.transports.get(key)
        if transport is None:
            secret = lookup(settings.api_keys, model)
            api_key = secret.get_secret_value() if isinstance(secret, SecretStr) else None
            if api_key is None and base is not None:
                provider = (litellm_provider(model) or "openai").upper()
                if not shared.environ.get(f"{provider}_API_KEY"):
                    api_key = "no-key"  # a local OpenAI-compatible server needs none, but the client wants one
            transport = LiteLLMModel(model, api_base=base, api_key=api_key, timeout_s=settings.timeout_s)
            shared.transports[key] = transport
        return transport

    def _breaker(self, name: str) -> CircuitBreaker:
        shared = self._shared
        breaker = shared.breakers.get(name)
        if breaker is None:
            breaker = shared.breakers[name] = CircuitBreaker(shared.settings.breaker_failures,
                                                             shared.settings.breaker_cooldown_s)
        return breaker

    def _bulkhead(self, name: str) -> Bulkhead:
        shared = self._shared
        bulkhead = shared.bulkheads.get(name)
        if bulkhead is None:
            bulkhead = shared.bulkheads[name] = Bulkhead(shared.settings.max_concurrency)
        return bulkhead


class _IncompleteAnswer(ModelError):
    """An answer that came back unfinished; ``tokens`` is what it used (charged to the budget all the same)."""

    def __init__(self, model: str, reason: str, usage: Usage) -> None:
        super().__init__(f"{model}: the answer is incomplete (finish reason {reason!r})", kind="incomplete")
        self.reason = reason
        self.tokens = usage.input_tokens + usage.output_tokens


def _give_up(last: ModelError | None, summary: str) -> str:
    return cut_error(f"{summary}; last error: {last}") if last is not None else summary


def gateway_for_cli(model: str, api_base: str | None = None, *,
                    settings: GatewaySettings | None = None) -> ModelGateway:
    """The gateway of ``om-stream replay --model`` / ``demo --model``: ``model`` serves every role; the API base is
    ``api_base``, else the provider's usual environment variable (``OPENAI_API_BASE``, ``OPENAI_BASE_URL``, ...)."""
    settings = settings or GatewaySettings()
    if api_base:
        bases = {**settings.api_bases, model: api_base}
        settings = settings.model_copy(update={"api_bases": bases})
    return ModelGateway(settings, routes=model)


def build_gateway(config: ResolvedConfig, memory: MemorySettings | None = None, *,
                  settings: GatewaySettings | None = None, observers: Iterable[CallObserver] = ()) -> ModelGateway:
    """The worker's gateway: routes from the OM configuration; ``OM_MEMORY_API_BASE`` / ``OM_MEMORY_API_KEY`` (if
    set) apply to every model that has no entry of its own in ``settings``; ``observers`` see every attempt."""
    settings = settings or GatewaySettings()
    if memory is not None and memory.api_base:
        settings = settings.model_copy(update={"api_bases": {"*": memory.api_base, **settings.api_bases}})
    if memory is not None and memory.api_key is not None:
        settings = settings.model_copy(update={"api_keys": {"*": memory.api_key, **settings.api_keys}})
    return ModelGateway(settings, observers=observers).bind_config(config)
