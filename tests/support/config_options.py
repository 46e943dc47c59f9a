"""Helpers for the configuration tests: parse, resolve, expect a refusal, build nested options."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic.alias_generators import to_snake

from om_stream.core.config import OMConfig, ResolvedConfig
from om_stream.core.extractors import Extractor
from om_stream.errors import ConfigError

PROFILE = Extractor(name="User profile", instructions="Stable facts about the user.")
TOPICS = Extractor(name="Topics", instructions="Topics discussed.")
NO_BUFFERING = {"observation": {"bufferTokens": False}}


def resolve(options: Any) -> ResolvedConfig:
    return OMConfig.parse(options).resolve()


def refused(options: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        OMConfig.parse(options)
    return info.value


def at(field: str, value: Any) -> dict[str, Any]:
    """``{"observation": {"model": value}}`` for ``at("observation.model", value)``."""
    head, _, rest = field.partition(".")
    return {head: at(rest, value) if rest else value}


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def snake(options: dict[str, Any]) -> dict[str, Any]:
    """The same options in Python spelling (values of free-form maps such as providerOptions are left alone)."""
    return {to_snake(k): (snake(v) if isinstance(v, dict) and k not in ("providerOptions", "upTo") else v)
            for k, v in options.items()}
