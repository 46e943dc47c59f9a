"""Extractors: values OM extracts during observation or reflection (``observation.extract``/``reflection.extract``).

Without a schema an extractor is *inline*: the Observer/Reflector writes ``<slug>value</slug>`` in its answer.
With a schema (a JSON Schema dict or a pydantic model class) it is *structured*: the gateway makes a follow-up
structured-output call. Built-in values (current-task, suggested-response, thread-title) use the same slugs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from om_stream.core.messages import Message

__all__ = [
    "BUILT_IN_SLUGS",
    "RESERVED_SLUGS",
    "WORKING_MEMORY_SLUG",
    "ExtractionContext",
    "Extractor",
    "WorkingMemoryExtractor",
    "prior_values",
    "slugify",
    "validate_extractors",
]

BUILT_IN_SLUGS = frozenset({"current-task", "suggested-response", "thread-title"})
RESERVED_SLUGS = frozenset({
    "observations", "observation", "extracted-values", "thread", "message", "messages", "conversation", "history",
    "system", "user", "assistant", "tool", "observation-group", "system-reminder",
}) | BUILT_IN_SLUGS
WORKING_MEMORY_SLUG = "working-memory"
_SLUG = re.compile(r"^[a-z][a-z0-9-]*[a-z0-9]$|^[a-z]$")


def slugify(name: str) -> str:
    """Lower-case; letters and digits kept; quotes dropped; any other run of characters becomes one hyphen."""
    lowered = name.strip().lower().replace("'", "").replace('"', "").replace("’", "")
    slug = re.sub(r"[^a-z0-9]+", "-", lowered).strip("-")
    if not _SLUG.match(slug):
        raise ValueError(f"extractor name {name!r} gives slug {slug!r}, which must start with a letter and end "
                         f"with a letter or digit")
    return slug


@dataclass(frozen=True)
class ExtractionContext:
    """What a dynamic ``instructions``/``schema`` function or ``on_extracted`` hook receives.

    * ``previous``/``current``: the value stored before this cycle and the one it extracted (``on_extracted``);
    * ``raw_observations``: what this cycle wrote (the new observations, or the reflection);
    * ``observed_messages``: the messages this observation read, oldest first (in resource scope, the thread's
      own); none for a reflection;
    * ``active_observations``: the observation log the cycle worked from: the active log an observation's new
      observations are appended to, or the log a reflection condenses.
    """

    source: str  # "observation" | "reflection"
    thread_id: str | None
    resource_id: str | None
    previous: Any = None
    current: Any = None
    raw_observations: str = ""
    observed_messages: tuple[Message, ...] = ()
    active_observations: str = ""


@dataclass(frozen=True)
class Extractor:
    """A value to extract. ``slug`` derives from ``name``; it names the XML tag and the metadata key."""

    name: str
    instructions: str | Callable[[ExtractionContext], str]
    schema: Mapping[str, Any] | type | Callable[[ExtractionContext], Any] | None = None
    include_previous_extraction: bool = True
    metadata_key_path: str | bool = "extracted."
    on_extracted: Callable[[ExtractionContext], Any] | None = None
    slug: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "slug", slugify(self.name))
        if self.metadata_key_path is True:
            raise ValueError(f"extractor {self.name!r}: metadataKeyPath must be a dotted path or false")

    @property
    def inline(self) -> bool:
        return self.schema is None

    def metadata_path(self) -> str | None:
        """Dotted key under the thread's OM metadata; ``None`` when persistence is off."""
        if self.metadata_key_path is False:
            return None
        path = str(self.metadata_key_path)
        return f"{path}{self.slug}" if path.endswith(".") else path

    def storage_key(self) -> str | None:
        """The key under the thread's ``extracted`` metadata: the ``metadataKeyPath`` without its ``extracted.``
        namespace (``extracted.<slug>`` by default → ``<slug>``); ``None`` when the value is not persisted."""
        path = self.metadata_path()
        return None if path is None else path.removeprefix("extracted.")

    def instructions_for(self, context: ExtractionContext) -> str:
        return self.instructions(context) if callable(self.instructions) else self.instructions


def prior_values(extractors: Iterable[Extractor], extracted: Mapping[str, Any]) -> dict[str, Any]:
    """Prior values of the extractors that show them, by slug (the tag the model reads), read from the thread's
    ``extracted`` metadata at their storage key."""
    prior: dict[str, Any] = {}
    for extractor in extractors:
        key = extractor.storage_key()
        if extractor.include_previous_extraction and key is not None and extracted.get(key) is not None:
            prior[extractor.slug] = extracted[key]
    return prior


def WorkingMemoryExtractor(template: str | None = None, schema: Mapping[str, Any] | None = None) -> Extractor:
    """The extractor ``observation.manageWorkingMemory`` adds: keeps the thread's working memory up to date."""
    base = ("Maintain the user's working memory: return the complete updated working memory when the new messages "
            "change it, or nothing when they do not. Keep every still-valid fact already in it.")
    if template:
        base += f"\nFollow this template:\n{template}"
    return Extractor(name=WORKING_MEMORY_SLUG, instructions=base, schema=schema,
                     include_previous_extraction=False, metadata_key_path=False)


def validate_extractors(extractors: Iterable[Extractor], field_name: str) -> tuple[Extractor, ...]:
    """Refuse reserved slugs and duplicates (after slug generation). Errors name the field."""
    seen: set[str] = set()
    result = []
    for extractor in extractors:
        if not isinstance(extractor, Extractor):
            raise ValueError(f"{field_name}: expected Extractor objects, got {type(extractor).__name__}")
        if extractor.slug in RESERVED_SLUGS:
            raise ValueError(f"{field_name}: extractor {extractor.name!r} uses the reserved slug {extractor.slug!r}")
        if extractor.slug in seen:
            raise ValueError(f"{field_name}: two extractors share the slug {extractor.slug!r}")
        seen.add(extractor.slug)
        result.append(extractor)
    return tuple(result)
