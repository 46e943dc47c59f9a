"""A model given to the in-process ``Memory`` as the options name one (``Memory(model="openai/gpt-5-mini")``, a
``ModelByInputTokens``, a fallback list): it becomes the options' ``model`` (the Observer's and the Reflector's),
and the model gateway routes each role as the options then say, as a worker's does. Anything else given as
``model`` is refused at construction with what to pass, instead of failing inside the first cycle."""

from __future__ import annotations

from collections.abc import Iterable

from om_stream.adapters.gateway.gateway import CallObserver, build_gateway
from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.core.model_spec import ModelByInputTokens
from om_stream.errors import ConfigError
from om_stream.ports import ChatModel

__all__ = ["named_model_options", "serving_model"]

_WHAT_TO_PASS = ("give a model as the options name one (e.g. 'openai/gpt-5-mini', a ModelByInputTokens or a "
                 "fallback list) or a ChatModel (an object with 'async def complete(request)', such as "
                 "om_stream.testing.FunctionModel)")


def _named(model: object) -> bool:
    return isinstance(model, str | ModelByInputTokens | dict | list | tuple)


def named_model_options(options: OMConfig, model: object) -> OMConfig:
    """``options`` with ``model`` as their model when it names one; unchanged for a ``ChatModel`` or ``None``.
    Raises ``ConfigError`` for anything else, and for a model the options' own rules refuse (another model named in
    the options, or one beside ``observation.model`` / ``reflection.model``)."""
    if model is None or isinstance(model, ChatModel):
        return options
    if not _named(model):
        raise ConfigError("model", f"Memory(model=...) got a {type(model).__name__}: {_WHAT_TO_PASS}")
    if isinstance(model, str) and not model.strip():
        raise ConfigError("model", f"Memory(model=...) got an empty name: {_WHAT_TO_PASS}")
    # read as the options read it, so a malformed selector is refused with the options' own words
    spec = OMConfig.parse({"model": model.strip() if isinstance(model, str) else model}).model
    if options.model is not None and options.model != spec:
        raise ConfigError("model", f"Memory(model=...) and the options' model {options.model!r} name two models: "
                                   "name it in one place")
    named = options.model_copy(update={"model": spec})
    named.resolve()  # the options' rules: a top-level model beside observation.model or reflection.model is refused
    return named


def serving_model(model: object, config: ResolvedConfig,
                  observers: Iterable[CallObserver] = ()) -> ChatModel | None:
    """The model the cycles call: the ``ChatModel`` given, a gateway routing as ``config`` says when a model was
    named (API bases and keys from the providers' usual environment variables, as for ``om-stream replay
    --model``), or ``None`` (the offline model serves). ``observers`` see each of the gateway's attempts."""
    if isinstance(model, ChatModel):
        return model
    return build_gateway(config, observers=observers) if _named(model) else None
