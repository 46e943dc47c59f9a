"""The LongMemEval run: every question replayed through OM, answered by the reader, graded by the judge.

1. The dataset is read once through, to validate every question before any model is paid, and to know the
   sample (``limit``: the first questions of the file, so a sample is the same on every run).
2. The results folder is checked (``journal``): a folder holds one run's results, and a question it already
   holds is not asked again: a judged one is skipped, an answered one is only judged.
3. The questions still to do are read again one at a time and run ``concurrency`` at a time. Each is journaled
   as soon as it is answered, and again once judged; ``hypotheses.jsonl`` is rewritten at each answer.
4. At the end the summary is written from the journal.

A question that fails (a model that stays unavailable through the gateway's retries, say) is reported and left
out of the journal's judged set, so the next run asks it again; the others go on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from om_stream import OMConfig
from om_stream.errors import OMError, WireDecodeError
from om_stream.eval.longmemeval.dataset import Question, iter_questions
from om_stream.eval.longmemeval.journal import Journal, RunIdentity, write_hypotheses, write_json
from om_stream.eval.longmemeval.judge import judge
from om_stream.eval.longmemeval.reader import ask_reader
from om_stream.eval.longmemeval.records import QuestionResult
from om_stream.eval.longmemeval.replay import recollect
from om_stream.eval.longmemeval.summary import summarize
from om_stream.eval.progress import Progress
from om_stream.ports import ChatModel

__all__ = ["EvalModels", "Failure", "LongMemEvalRun", "Outcome", "run_longmemeval"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalModels:
    """Who does what: OM's models (None: the offline model), the reader and the judge, with their names."""

    om: ChatModel | None
    om_label: str
    reader: ChatModel
    reader_model: str
    judge: ChatModel
    judge_model: str


@dataclass(frozen=True)
class LongMemEvalRun:
    dataset: Path
    out: Path
    options: OMConfig
    models: EvalModels
    concurrency: int = 4
    limit: int | None = None
    progress: TextIO | None = None  # where the progress bar goes (None: no progress bar)


@dataclass(frozen=True)
class Failure:
    question_id: str
    stage: str  # "answer" (replay or reader) or "judge"
    error: str


@dataclass
class Outcome:
    summary: dict[str, Any]
    folder: Path
    failures: list[Failure] = field(default_factory=list)


def _sample(path: Path, limit: int | None) -> Iterator[Question]:
    for index, question in enumerate(iter_questions(path)):
        if limit is not None and index >= limit:
            return
        yield question


def _catalogue(path: Path, limit: int | None) -> list[tuple[str, str]]:
    """The ids and types of the sample, in file order; every question validated, ids unique."""
    seen: list[tuple[str, str]] = []
    ids: set[str] = set()
    for question in _sample(path, limit):
        if question.question_id in ids:
            raise WireDecodeError("invalid_longmemeval", f"{path}: question id {question.question_id!r} twice")
        ids.add(question.question_id)
        seen.append((question.question_id, question.question_type))
    return seen


class _Run:
    def __init__(self, plan: LongMemEvalRun, catalogue: list[tuple[str, str]]) -> None:
        self.plan = plan
        self.order = [qid for qid, _ in catalogue]
        self.journal = Journal(plan.out / "results.jsonl")
        self.results: dict[str, QuestionResult] = {}
        self.failures: list[Failure] = []
        self.progress: Progress | None = None

    def _judged(self) -> list[QuestionResult]:
        return [r for qid in self.order if (r := self.results.get(qid)) is not None and r.judgement is not None]

    def _note(self) -> str:
        judged = self._judged()
        correct = sum(1 for r in judged if r.judgement is not None and r.judgement.correct)
        return f"accuracy {correct / len(judged) * 100:.1f}%" if judged else ""

    def _record(self, result: QuestionResult) -> None:
        self.journal.append(result)
        self.results[result.question_id] = result

    async def question(self, question: Question) -> None:
        plan, models = self.plan, self.plan.models
        stage = "answer"
        try:
            result = self.results.get(question.question_id)
            if result is None:
                recollection = await recollect(question, plan.options, models.om)
                answer = await ask_reader(models.reader, models.reader_model, question, recollection.context)
                context = recollection.context
                result = QuestionResult(
                    question_id=question.question_id, question_type=question.question_type,
                    abstention=question.abstention, hypothesis=answer.text, observer=recollection.observer,
                    reflector=recollection.reflector, om_model_failures=recollection.model_failures,
                    offline_fallback_calls=recollection.offline_fallback_calls, reader=answer.use,
                    context_tokens=context.tokens.messages + context.tokens.observations,
                    observation_tokens=context.tokens.observations, history_tokens=recollection.history_tokens,
                    generation=context.generation, replay_seconds=recollection.seconds,
                    reader_seconds=answer.seconds)
                self._record(result)
                write_hypotheses(plan.out / "hypotheses.jsonl",
                                 [r for qid in self.order if (r := self.results.get(qid)) is not None])
            stage = "judge"
            judgement = await judge(models.judge, models.judge_model, question, result.hypothesis)
            self._record(result.model_copy(update={"judgement": judgement}))
        except OMError as exc:
            log.warning("question %s failed at %s: %s", question.question_id, stage, exc)
            self.failures.append(Failure(question.question_id, stage, str(exc)[:500]))
            self._advance(failed=True)
            return
        self._advance()

    def _advance(self, *, failed: bool = False) -> None:
        if self.progress is not None:
            self.progress.advance(failed=failed, note=self._note())


async def run_longmemeval(plan: LongMemEvalRun) -> Outcome:
    """Run (or resume) the benchmark described by ``plan``; returns the summary (also in ``plan.out``)."""
    catalogue = await asyncio.to_thread(_catalogue, plan.dataset, plan.limit)
    plan.out.mkdir(parents=True, exist_ok=True)
    models = plan.models
    identity = RunIdentity(dataset=plan.dataset.name, om_model=models.om_label, reader_model=models.reader_model,
                           judge_model=models.judge_model,
                           om_options=plan.options.model_dump(mode="json", exclude_defaults=True))
    identity.check(plan.out)
    run = _Run(plan, catalogue)
    run.results = run.journal.load()
    wanted = set(run.order)
    todo = {qid for qid in run.order if (r := run.results.get(qid)) is None or r.judgement is None}
    if plan.progress is not None:
        run.progress = Progress("longmemeval", len(run.order), done=len(run.order) - len(todo),
                                stream=plan.progress)
        run.progress.note = run._note()
        run.progress.start()
    slots = asyncio.Semaphore(max(1, plan.concurrency))

    async def one(question: Question) -> None:
        try:
            await run.question(question)
        finally:
            slots.release()

    try:
        if todo:
            questions = _sample(plan.dataset, plan.limit)
            async with asyncio.TaskGroup() as group:
                # read ahead by one question only: LongMemEval_M's questions are megabytes each
                while (question := await asyncio.to_thread(next, questions, None)) is not None:
                    if question.question_id not in todo:
                        continue
                    await slots.acquire()
                    group.create_task(one(question), name=f"longmemeval-{question.question_id}")
    finally:
        if run.progress is not None:
            run.progress.close()
        done = [r for qid in run.order if (r := run.results.get(qid)) is not None]
        write_hypotheses(plan.out / "hypotheses.jsonl", done)
        summary = summarize([r for r in run.results.values() if r.question_id in wanted], questions=len(run.order),
                            dataset=plan.dataset.name,
                            models={"om": models.om_label, "reader": models.reader_model,
                                    "judge": models.judge_model})
        write_json(plan.out / "summary.json", summary)
    return Outcome(summary=summary, folder=plan.out, failures=run.failures)
