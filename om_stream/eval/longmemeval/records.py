"""What the harness keeps of each question: the lines of the results journal (``results.jsonl``).

A question is journaled twice: once answered (the hypothesis, with what OM and the reader used), once judged (the
same line with its ``judgement``). The last line of a question id wins, so a restart knows, per question, whether
it still needs everything, only its judgement, or nothing.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from om_stream.ports import ChatResponse

__all__ = ["Judgement", "ModelUse", "QuestionResult"]


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ModelUse(_Record):
    """Calls to one model (or one role) and what they used. ``cost_usd`` is None when any call's cost is unknown
    (a model missing from the price map): never a silent zero."""

    calls: int = Field(0, ge=0)
    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    cost_usd: float | None = 0.0
    unknown_cost_calls: int = Field(0, ge=0)

    @classmethod
    def of(cls, response: ChatResponse) -> ModelUse:
        return cls(calls=1, input_tokens=response.usage.input_tokens, output_tokens=response.usage.output_tokens,
                   cost_usd=response.cost_usd, unknown_cost_calls=int(response.cost_usd is None))

    def __add__(self, other: ModelUse) -> ModelUse:
        unknown = self.unknown_cost_calls + other.unknown_cost_calls
        cost = None if unknown else (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return ModelUse(calls=self.calls + other.calls, input_tokens=self.input_tokens + other.input_tokens,
                        output_tokens=self.output_tokens + other.output_tokens, cost_usd=cost,
                        unknown_cost_calls=unknown)

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Judgement(_Record):
    correct: bool
    verdict: str  # the judge's reply, as it gave it
    unclear: bool = False  # the judge said neither yes nor no, even when asked again: counted as incorrect
    judge: ModelUse
    seconds: float = Field(ge=0)


class QuestionResult(_Record):
    question_id: str
    question_type: str
    abstention: bool
    hypothesis: str
    observer: ModelUse
    reflector: ModelUse
    om_model_failures: int = Field(0, ge=0)  # failed Observer/Reflector calls (OM retried or stood in offline)
    offline_fallback_calls: int = Field(0, ge=0)  # cycles the offline model served because the model failed
    reader: ModelUse
    context_tokens: int = Field(ge=0)  # what the reader was sent of OM's context: observations + messages
    observation_tokens: int = Field(ge=0)
    history_tokens: int = Field(ge=0)  # the haystack in full: what a full-context reader would be sent
    generation: int = Field(ge=0)
    replay_seconds: float = Field(ge=0)
    reader_seconds: float = Field(ge=0)
    judgement: Judgement | None = None

    @property
    def om(self) -> ModelUse:
        return self.observer + self.reflector

    @property
    def answering(self) -> ModelUse:
        """What answering the question used: OM's models and the reader (the judge is the benchmark's cost)."""
        return self.om + self.reader
