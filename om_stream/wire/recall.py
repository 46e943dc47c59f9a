"""``om.recall.request/v1`` and ``om.recall.response/v1``: the recall tool over HTTP (``POST /v1/recall``) and over a
request/reply topic pair (``om.recall.requests`` → ``om.recall.responses``, matched by ``correlation_id``).

The envelope names the tenant and the agent's current thread (snake_case, like every other record); ``arguments``
are the tool's own, spelled as the seeds spell them (``threadId``, ``partIndex``, ...), so an agent framework can
forward its model's tool call untouched. Closed content model: unknown fields are refused.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from om_stream.core.config import RetrievalConfig
from om_stream.core.recall.params import RecallArguments, RecallScope
from om_stream.core.recall.results import RecallResult

__all__ = [
    "RECALL_REQUEST_SCHEMA",
    "RECALL_RESPONSE_SCHEMA",
    "RecallFailure",
    "RecallRequest",
    "RecallResponse",
]

RECALL_REQUEST_SCHEMA: Literal["om.recall.request/v1"] = "om.recall.request/v1"
RECALL_RESPONSE_SCHEMA: Literal["om.recall.response/v1"] = "om.recall.response/v1"


class RecallRequest(BaseModel):
    """A recall call on behalf of an agent. ``resource_id`` is the tenant: nothing of another resource is ever
    returned. ``thread_id`` is the agent's current thread (what ``threadId: "current"`` means)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.recall.request/v1")

    schema_: Literal["om.recall.request/v1"] = Field(RECALL_REQUEST_SCHEMA, alias="schema")
    correlation_id: str = Field(min_length=1, max_length=256)
    resource_id: str = Field(min_length=1, max_length=256)
    thread_id: str | None = Field(None, min_length=1, max_length=256)
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig)
    arguments: RecallArguments = Field(default_factory=RecallArguments)

    def scope(self) -> RecallScope:
        return RecallScope(resource_id=self.resource_id, current_thread_id=self.thread_id, retrieval=self.retrieval)


class RecallFailure(BaseModel):
    """Why a call was not answered: ``invalid_request`` (the agent can fix the call; ``message`` says how),
    ``unavailable`` (the store, index or embedder failed: retry later)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: Literal["invalid_request", "unavailable"]
    message: str


class RecallResponse(BaseModel):
    """Exactly one of ``result`` and ``error``."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, serialize_by_alias=True,
                              title="om.recall.response/v1")

    schema_: Literal["om.recall.response/v1"] = Field(RECALL_RESPONSE_SCHEMA, alias="schema")
    correlation_id: str = Field(min_length=1, max_length=256)
    result: RecallResult | None = None
    error: RecallFailure | None = None

    @model_validator(mode="after")
    def _one_outcome(self) -> RecallResponse:
        if (self.result is None) == (self.error is None):
            raise ValueError("a recall response carries exactly one of result and error")
        return self

    @property
    def ok(self) -> bool:
        return self.result is not None
