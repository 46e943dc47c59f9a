"""A model given to the in-process ``Memory`` by name (``Memory(model="openai/gpt-5-mini")``), as the options take
one: the name becomes the options' ``model`` (the Observer's and the Reflector's), and the model gateway routes
each role as the options then say, as a worker's does. Anything else given as ``model`` is refused at construction
with what to pass, instead of failing inside the first cycle."""

from __future__ import annotations

from om_stream.adapters.gateway.gateway import build_gateway
from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.errors import ConfigError
from om_stream.ports import ChatModel

__all__ = ["named_model_options", "serving_model"]

_WHAT_TO_PASS = ("give a model name as the options take one (e.g. 'openai/gpt-5-mini') or a ChatModel (an object "
                 "with 'async def complete(request)', such as om_stream.testing.FunctionModel)")


def named_model_options(options: OMConfig, model: object) -> OMConfig:
    """``options`` with ``model`` as their model when it is a name; unchanged for a ``ChatModel`` or ``None``.
    Raises ``ConfigError`` for anything else, and for a name the options' own rules refuse (a model named in the
    options too, or beside ``observation.model`` / ``reflection.model``)."""
    if model is None or isinstance(model, ChatModel):
        return options
    if not isinstance(model, str):
        raise ConfigError("model", f"Memory(model=...) got a {type(model).__name__}: {_WHAT_TO_PASS}")
    name = model.strip()
    if not name:
        raise ConfigError("model", f"Memory(model=...) got an empty name: {_WHAT_TO_PASS}")
    if options.model is not None and options.model != name:
        raise ConfigError("model", f"Memory(model={name!r}) and the options' model {options.model!r} name two "
                                   "models: name it in one place")
    named = options.model_copy(update={"model": name})
    named.resolve()  # the options' rules: a top-level model beside observation.model or reflection.model is refused
    return named


def serving_model(model: object, config: ResolvedConfig) -> ChatModel | None:
    """The model the cycles call: the ``ChatModel`` given, a gateway routing as ``config`` says when a name was
    given (its API base and key come from the provider's usual environment variables, as for ``om-stream replay
    --model``), or ``None`` (the offline model serves)."""
    if isinstance(model, str):
        return build_gateway(config)
    return model if isinstance(model, ChatModel) else None
