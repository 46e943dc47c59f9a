"""Observational Memory configuration: every option of the seeds, their forms, defaults and errors.

``OMConfig`` is what users write (Python snake_case, or the seeds' camelCase as aliases, in YAML/JSON/env);
``OMConfig.resolve()`` turns it into ``ResolvedConfig``: absolute token numbers and final model choices, which is
all the state machine reads. Every documented error is raised here as ``ConfigError`` naming the option
(``observation.blockAfter``) in the seeds' spelling.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)
from pydantic.alias_generators import to_camel

from om_stream.core.durations import IdleSetting, parse_idle
from om_stream.core.extractors import (
    WORKING_MEMORY_SLUG,
    Extractor,
    WorkingMemoryExtractor,
    validate_extractors,
)
from om_stream.core.model_spec import DEFAULT_MODEL, ModelSettings, ModelSpec, is_default_selection
from om_stream.core.retention import MAX_RETENTION_DAYS, window_ms
from om_stream.errors import ConfigError

__all__ = [
    "OMConfig",
    "ObservationConfig",
    "ObserveHooks",
    "ReflectionConfig",
    "ResolvedConfig",
    "RetrievalConfig",
    "resolve_options",
]

DEFAULT_MESSAGE_TOKENS = 30_000
DEFAULT_OBSERVATION_TOKENS = 40_000
DEFAULT_BUFFER_TOKENS = 0.2
DEFAULT_BUFFER_ACTIVATION = 0.8
DEFAULT_BLOCK_AFTER = 1.2
DEFAULT_REFLECTION_BUFFER_ACTIVATION = 0.5
DEFAULT_REFLECTION_BLOCK_AFTER = 1.2
DEFAULT_MAX_TOKENS_PER_BATCH = 10_000
DEFAULT_PREVIOUS_OBSERVER_TOKENS = 2_000
DEFAULT_MAX_OUTPUT_TOKENS = 100_000
OBSERVER_DEFAULT_PROVIDER_OPTIONS: dict[str, Any] = {"google": {"thinkingConfig": {"thinkingBudget": 215}}}
REFLECTOR_DEFAULT_PROVIDER_OPTIONS: dict[str, Any] = {"google": {"thinkingConfig": {"thinkingBudget": 1024}}}


class _Options(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, alias_generator=to_camel,
                              arbitrary_types_allowed=True)


@dataclass(frozen=True)
class ObserveHooks:
    """Lifecycle hooks called for every observation/reflection cycle (manual, turn-sync and async-buffer).

    Start hooks receive ``HookContext``; end hooks also get usage, cost, provider metadata and ``error``. Exceptions
    raised by hooks are caught and logged and never fail the cycle (the gateway calls them).
    """

    on_observation_start: Callable[..., Any] | None = None
    on_observation_end: Callable[..., Any] | None = None
    on_reflection_start: Callable[..., Any] | None = None
    on_reflection_end: Callable[..., Any] | None = None


class RetrievalConfig(_Options):
    vector: bool = False
    scope: Literal["thread", "resource"] = "resource"
    instructions: str | None = None


class ObservationConfig(_Options):
    model: ModelSpec | None = None
    instruction: str | None = None
    thread_title: bool = False
    extract: tuple[Extractor, ...] = ()
    manage_working_memory: bool = False
    observe_attachments: Literal["auto"] | bool | tuple[str, ...] = True
    message_tokens: int = Field(DEFAULT_MESSAGE_TOKENS, gt=0)
    max_tokens_per_batch: int = Field(DEFAULT_MAX_TOKENS_PER_BATCH, gt=0)
    model_settings: ModelSettings | None = None
    provider_options: dict[str, Any] | None = None
    buffer_tokens: float | Literal[False] | None = None
    buffer_on_idle: bool = False
    buffer_activation: float | None = None
    activate_after_idle: IdleSetting = None
    activate_on_provider_change: bool | None = None
    block_after: float | None = None
    previous_observer_tokens: float | Literal[False] = float(DEFAULT_PREVIOUS_OBSERVER_TOKENS)
    continuation_hints: bool = True

    @field_validator("activate_after_idle", mode="before")
    @classmethod
    def _idle(cls, value: object) -> IdleSetting:
        return parse_idle(value, "observation.activateAfterIdle")

    @field_validator("buffer_tokens", mode="before")
    @classmethod
    def _buffer_tokens_form(cls, value: object) -> object:
        if value is True:
            raise ValueError("observation.bufferTokens: true is not a size; use a ratio, a token count or false")
        return value

    @field_validator("buffer_tokens", "previous_observer_tokens", mode="wrap")
    @classmethod
    def _number_is_not_false(cls, value: object, handler: ValidatorFunctionWrapHandler) -> object:
        # 0 == False in Python, and the union would read 0 as false: `bufferTokens: 0` must be refused, not turn
        # buffering off, and `previousObserverTokens: 0` (omit previous observations) is not false (no truncation)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        return handler(value)

    @field_validator("extract", mode="before")
    @classmethod
    def _extract_list(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value

    @field_validator("observe_attachments", mode="before")
    @classmethod
    def _mime_list(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value


class ReflectionConfig(_Options):
    model: ModelSpec | None = None
    instruction: str | None = None
    extract: tuple[Extractor, ...] = ()
    observation_tokens: int = Field(DEFAULT_OBSERVATION_TOKENS, gt=0)
    model_settings: ModelSettings | None = None
    provider_options: dict[str, Any] | None = None
    buffer_activation: float | None = None
    activate_after_idle: IdleSetting = None
    activate_on_provider_change: bool = False
    block_after: float | None = None
    continuation_hints: bool = True

    @field_validator("activate_after_idle", mode="before")
    @classmethod
    def _idle(cls, value: object) -> IdleSetting:
        return parse_idle(value, "reflection.activateAfterIdle")

    @field_validator("extract", mode="before")
    @classmethod
    def _extract_list(cls, value: object) -> object:
        return tuple(value) if isinstance(value, list) else value


class OMConfig(_Options):
    """The ``observationalMemory`` option of the seeds (``true``, ``false`` or this object)."""

    enabled: bool = True
    model: ModelSpec | None = None
    scope: Literal["thread", "resource"] = "thread"
    activate_after_idle: IdleSetting = None
    activate_on_provider_change: bool = False
    share_token_budget: bool = False
    temporal_markers: bool = False
    retrieval: bool | RetrievalConfig = False
    hooks: ObserveHooks | None = Field(None, exclude=True)
    obscure_thread_ids: bool | None = None
    token_encoding: Literal["o200k_base", "cl100k_base", "p50k_base"] = "o200k_base"
    observation: ObservationConfig = ObservationConfig()
    reflection: ReflectionConfig = ReflectionConfig()

    @field_validator("activate_after_idle", mode="before")
    @classmethod
    def _idle(cls, value: object) -> IdleSetting:
        return parse_idle(value, "activateAfterIdle")

    @classmethod
    def parse(cls, value: bool | Mapping[str, Any] | OMConfig | None) -> OMConfig:
        """Accept the option's three forms and translate validation failures into ``ConfigError``."""
        if isinstance(value, OMConfig):
            return value
        if value is None or value is True:
            return cls()
        if value is False:
            return cls(enabled=False)
        try:
            config = cls.model_validate(dict(value))
        except ValidationError as exc:
            raise _config_error(exc) from None
        config.resolve()
        return config

    def resolve(self) -> ResolvedConfig:
        return resolve_options(self)


# pydantic names the member of a union it tried (``model.str``, ``model.ModelByInputTokens.upTo``): not an option
_UNION_TAGS = frozenset({"str", "bool", "int", "float", "dict", "list", "tuple", "none", "ModelByInputTokens",
                         "RetrievalConfig"})


def _is_tag(part: str) -> bool:
    return part in _UNION_TAGS or "[" in part or part.startswith("function-")


def _camel_path(loc: tuple[int | str, ...]) -> str:
    return ".".join(to_camel(p) if isinstance(p, str) else str(p) for p in loc
                    if not (isinstance(p, str) and _is_tag(p)))


def _config_error(exc: ValidationError) -> ConfigError:
    errors = exc.errors()
    # a union reports one error per member: our own validators' messages, else the deepest error, say the most
    first = next((e for e in errors if e["type"] == "value_error"), max(errors, key=lambda e: len(e["loc"])))
    message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
    field = _camel_path(tuple(first["loc"]))
    if ":" in message and message.split(":", 1)[0].replace(".", "").isalnum():
        field, message = message.split(":", 1)
    return ConfigError(field or "observationalMemory", message.strip())


@dataclass(frozen=True)
class ResolvedConfig:
    """Absolute numbers and final choices. ``buffer_tokens is None`` means async buffering is off."""

    enabled: bool
    scope: Literal["thread", "resource"]
    message_tokens: int
    buffer_tokens: int | None
    buffer_activation: float | None  # ratio of the window removed on activation
    retention_floor: int  # message tokens kept after activation (0 without buffering)
    block_after: int | None
    observation_tokens: int
    reflection_buffer_activation: float | None
    reflection_block_after: int | None
    share_token_budget: bool
    observation_idle: int | Literal["auto"] | None
    reflection_idle: int | Literal["auto"] | None
    observation_provider_change: bool
    reflection_provider_change: bool
    temporal_markers: bool
    buffer_on_idle: bool
    max_tokens_per_batch: int
    previous_observer_tokens: int | None
    obscure_thread_ids: bool
    thread_title: bool
    observation_hints: bool
    reflection_hints: bool
    observer_model: ModelSpec
    reflector_model: ModelSpec
    observer_settings: ModelSettings
    reflector_settings: ModelSettings
    observer_provider_options: dict[str, Any]
    reflector_provider_options: dict[str, Any]
    observation_extractors: tuple[Extractor, ...]
    reflection_extractors: tuple[Extractor, ...]
    observe_attachments: Literal["auto"] | bool | tuple[str, ...]
    observation_instruction: str | None
    reflection_instruction: str | None
    retrieval: RetrievalConfig | None
    token_encoding: str
    options: OMConfig
    # Not an observationalMemory option: the deployment's retention window (``OM_LIFECYCLE_RETENTION_DAYS``, or
    # ``Memory(retention_days=)``), set by the runtime (``with_retention``) and narrowed per record by an override
    # (``core.expiry``). The options are the seeds' and travel with configurations agents may supply; a promise
    # to delete personal data belongs to the operator, who sets it once for the deployment.
    retention_ms: int | None = None

    @property
    def async_buffering(self) -> bool:
        return self.buffer_tokens is not None

    @property
    def message_limit(self) -> int:
        """The most unobserved message tokens a context may hold: blockAfter, or the threshold without buffering."""
        return self.block_after if self.block_after is not None else self.message_tokens

    @property
    def observation_limit(self) -> int:
        """The most observation-log tokens a context may hold: reflection.blockAfter, or the reflection threshold
        without background reflection (the engine's bound, whatever the Reflector does)."""
        return self.reflection_block_after if self.reflection_block_after is not None else self.observation_tokens

    def message_threshold(self, observation_tokens: int) -> int:
        """Observation threshold; with ``shareTokenBudget`` messages may use what observations leave free."""
        if not self.share_token_budget:
            return self.message_tokens
        total = self.message_tokens + self.observation_tokens
        return max(total - observation_tokens, self.message_tokens)

    def with_retention(self, days: int | None) -> ResolvedConfig:
        """The same configuration with a retention window of ``days`` days (None: keep forever)."""
        if days is not None and (isinstance(days, bool) or not 0 < days <= MAX_RETENTION_DAYS):
            raise ConfigError("retentionDays", f"must be a whole number of days from 1 to {MAX_RETENTION_DAYS}, "
                                               f"got {days!r}")
        return replace(self, retention_ms=window_ms(days))

    def with_overrides(self, message_tokens: int | None, observation_tokens: int | None) -> ResolvedConfig:
        """Per-record thresholds (``om.commands`` config override), validated like the options themselves."""
        if message_tokens is None and observation_tokens is None:
            return self
        # model_copy does not validate: refuse here what the options themselves refuse (gt=0), rather than
        # ignoring a 0 or accepting a negative threshold
        for field, value in (("observation.messageTokens", message_tokens),
                             ("reflection.observationTokens", observation_tokens)):
            if value is not None and (isinstance(value, bool) or value <= 0):
                raise ConfigError(field, f"override must be a positive token count, got {value!r}")
        observation = self.options.observation.model_copy(update={
            "message_tokens": self.options.observation.message_tokens if message_tokens is None else message_tokens})
        reflection = self.options.reflection.model_copy(update={
            "observation_tokens": (self.options.reflection.observation_tokens if observation_tokens is None
                                   else observation_tokens)})
        resolved = resolve_options(self.options.model_copy(update={"observation": observation,
                                                                   "reflection": reflection}))
        return replace(resolved, retention_ms=self.retention_ms)


def _ratio_or_absolute(value: float, base: int) -> int:
    return round(value * base) if 0 < value < 1 else int(value)


def _multiplier_or_absolute(value: float, base: int, field: str) -> int:
    if value < 1:
        raise ConfigError(field, f"{value} is below its threshold; use a multiplier >= 1 (e.g. 1.2) or an "
                                 f"absolute token count >= 100")
    absolute = round(value * base) if value < 100 else int(value)
    if absolute < base:
        raise ConfigError(field, f"resolves to {absolute} tokens, below the threshold it guards ({base})")
    return absolute


def _resolve_models(config: OMConfig) -> tuple[ModelSpec | None, ModelSpec | None]:
    """The user's choice for (Observer, Reflector) before defaults: ``None`` or "default" mean the default model."""
    top, obs, refl = config.model, config.observation.model, config.reflection.model
    if top is not None and obs is not None:
        raise ConfigError("model", "cannot be used together with observation.model; set one or the other")
    if top is not None and refl is not None:
        raise ConfigError("model", "cannot be used together with reflection.model; set one or the other")
    for field, spec in (("model", top), ("observation.model", obs), ("reflection.model", refl)):
        if isinstance(spec, str) and not spec.strip():
            raise ConfigError(field, "model name is empty")
        if isinstance(spec, list) and not any(entry.enabled for entry in spec):
            raise ConfigError(field, "a fallback list needs at least one enabled entry")

    def pick(*candidates: ModelSpec | None) -> ModelSpec | None:
        return next((spec for spec in candidates if spec is not None), None)

    return pick(top, obs, refl), pick(top, refl, obs)


def _concrete(spec: ModelSpec | None) -> ModelSpec:
    return DEFAULT_MODEL if spec is None or spec == "default" else spec


def _model_settings(user: ModelSettings | None, spec: ModelSpec | None, temperature: float) -> ModelSettings:
    base = ModelSettings(temperature=temperature,
                         max_output_tokens=DEFAULT_MAX_OUTPUT_TOKENS if is_default_selection(spec) else None)
    if user is None:
        return base
    return base.model_copy(update={k: v for k, v in user.model_dump().items() if v is not None})


def resolve_options(config: OMConfig) -> ResolvedConfig:
    obs, refl = config.observation, config.reflection
    resource = config.scope == "resource"
    explicit_async = [name for name, value in (("observation.bufferTokens", obs.buffer_tokens),
                                               ("observation.bufferActivation", obs.buffer_activation),
                                               ("observation.blockAfter", obs.block_after),
                                               ("reflection.bufferActivation", refl.buffer_activation),
                                               ("reflection.blockAfter", refl.block_after))
                      if value is not None and value is not False]
    if resource and explicit_async:
        raise ConfigError(explicit_async[0], "async buffering is not supported with scope 'resource' (it is "
                                             "disabled there automatically); remove this option")
    buffering = obs.buffer_tokens is not False and not resource
    if config.share_token_budget and buffering:
        raise ConfigError("shareTokenBudget", "is not compatible with async buffering yet; set "
                                              "observation.bufferTokens: false")
    if not buffering and not resource:
        for name in explicit_async:
            if name != "observation.bufferTokens":
                raise ConfigError(name, "has no effect when observation.bufferTokens is false (async buffering off)")

    message_tokens = obs.message_tokens
    buffer_tokens: int | None = None
    ratio: float | None = None
    floor = 0
    block_after: int | None = None
    refl_ratio: float | None = None
    refl_block: int | None = None
    if buffering:
        raw_buffer = DEFAULT_BUFFER_TOKENS if obs.buffer_tokens is None else float(obs.buffer_tokens)
        if raw_buffer <= 0:
            raise ConfigError("observation.bufferTokens", f"must be > 0, got {raw_buffer}")
        buffer_tokens = _ratio_or_absolute(raw_buffer, message_tokens)
        if buffer_tokens >= message_tokens:
            raise ConfigError("observation.bufferTokens", f"resolves to {buffer_tokens} tokens, which must be "
                                                          f"below observation.messageTokens ({message_tokens})")
        activation = DEFAULT_BUFFER_ACTIVATION if obs.buffer_activation is None else obs.buffer_activation
        if activation <= 0:
            raise ConfigError("observation.bufferActivation", f"must be > 0, got {activation}")
        if 1 < activation < 1000:
            raise ConfigError("observation.bufferActivation", f"{activation} is neither a ratio in (0, 1] nor a "
                                                              f"token count >= 1000 to retain")
        if activation >= 1000 and activation >= message_tokens:
            raise ConfigError("observation.bufferActivation", f"retains {int(activation)} tokens, which must be "
                                                              f"below observation.messageTokens ({message_tokens})")
        ratio = activation if activation <= 1 else min(1.0, max(0.0, 1 - activation / message_tokens))
        floor = round(message_tokens * (1 - ratio))
        block_after = _multiplier_or_absolute(DEFAULT_BLOCK_AFTER if obs.block_after is None else obs.block_after,
                                              message_tokens, "observation.blockAfter")
        refl_ratio = (DEFAULT_REFLECTION_BUFFER_ACTIVATION if refl.buffer_activation is None
                      else refl.buffer_activation)
        if not 0 < refl_ratio <= 1:
            raise ConfigError("reflection.bufferActivation", f"must be a ratio in (0, 1], got {refl_ratio}")
        refl_block = _multiplier_or_absolute(
            DEFAULT_REFLECTION_BLOCK_AFTER if refl.block_after is None else refl.block_after,
            refl.observation_tokens, "reflection.blockAfter")

    previous: int | None
    if obs.previous_observer_tokens is False:
        previous = None
    else:
        value = float(obs.previous_observer_tokens)
        if not math.isfinite(value) or value < 0:
            raise ConfigError("observation.previousObserverTokens", f"must be a finite number >= 0 or false, "
                                                                    f"got {obs.previous_observer_tokens}")
        previous = int(value)

    observer_choice, reflector_choice = _resolve_models(config)
    try:
        obs_extractors = validate_extractors(obs.extract, "observation.extract")
        refl_extractors = validate_extractors(refl.extract, "reflection.extract")
    except ValueError as exc:
        field, _, message = str(exc).partition(": ")
        raise ConfigError(field, message) from None
    if obs.manage_working_memory and all(e.slug != WORKING_MEMORY_SLUG for e in obs_extractors):
        obs_extractors = (*obs_extractors, WorkingMemoryExtractor())

    if isinstance(obs.observe_attachments, tuple) and any(not m.strip() for m in obs.observe_attachments):
        raise ConfigError("observation.observeAttachments", "mime types in the allowlist must not be empty")

    obs_idle = config.activate_after_idle if obs.activate_after_idle is None else obs.activate_after_idle
    retrieval = (RetrievalConfig() if config.retrieval is True else
                 None if config.retrieval is False else config.retrieval)
    return ResolvedConfig(
        enabled=config.enabled,
        scope=config.scope,
        message_tokens=message_tokens,
        buffer_tokens=buffer_tokens,
        buffer_activation=ratio,
        retention_floor=floor,
        block_after=block_after,
        observation_tokens=refl.observation_tokens,
        reflection_buffer_activation=refl_ratio,
        reflection_block_after=refl_block,
        share_token_budget=config.share_token_budget,
        observation_idle=None if obs_idle is False else obs_idle,
        # reflections do not inherit the top-level idle / provider-change settings (the seeds)
        reflection_idle=None if refl.activate_after_idle is False else refl.activate_after_idle,
        observation_provider_change=(config.activate_on_provider_change if obs.activate_on_provider_change is None
                                     else obs.activate_on_provider_change),
        reflection_provider_change=refl.activate_on_provider_change,
        temporal_markers=config.temporal_markers,
        buffer_on_idle=obs.buffer_on_idle and buffering,
        max_tokens_per_batch=obs.max_tokens_per_batch,
        previous_observer_tokens=previous,
        obscure_thread_ids=resource if config.obscure_thread_ids is None else config.obscure_thread_ids,
        thread_title=obs.thread_title,
        observation_hints=obs.continuation_hints,
        reflection_hints=refl.continuation_hints,
        observer_model=_concrete(observer_choice),
        reflector_model=_concrete(reflector_choice),
        observer_settings=_model_settings(obs.model_settings, observer_choice, 0.3),
        reflector_settings=_model_settings(refl.model_settings, reflector_choice, 0.0),
        observer_provider_options=dict(obs.provider_options if obs.provider_options is not None
                                       else OBSERVER_DEFAULT_PROVIDER_OPTIONS),
        reflector_provider_options=dict(refl.provider_options if refl.provider_options is not None
                                        else REFLECTOR_DEFAULT_PROVIDER_OPTIONS),
        observation_extractors=obs_extractors,
        reflection_extractors=refl_extractors,
        observe_attachments=obs.observe_attachments,
        observation_instruction=obs.instruction,
        reflection_instruction=refl.instruction,
        retrieval=retrieval,
        token_encoding=config.token_encoding,
        options=config,
    )

