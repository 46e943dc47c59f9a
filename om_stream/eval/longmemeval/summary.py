"""The figures of a run, from the judged questions of its journal.

* accuracy: micro (correct over judged questions) and macro (the mean of the per-type accuracies over the
  question types present), per question type, and over the abstention questions (which also count in their type);
* tokens per question (means): OM's Observer and Reflector, the reader, the judge; the context the reader got
  beside the haystack it stood for;
* cost: answering (OM's models and the reader) per question and per correct answer; the judge apart, as the
  benchmark's own cost. A cost some call left unknown is reported as unknown (None), never as zero;
* latency: p50 and p95 of a question's time (replay and reader) and of the reader's call alone.

Every figure is over the same set of questions: the judged ones. Questions answered but not yet judged are counted
apart (``unjudged``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from om_stream.eval.longmemeval.dataset import QUESTION_TYPES
from om_stream.eval.longmemeval.records import ModelUse, QuestionResult

__all__ = ["percentile", "render", "summarize"]


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (the smallest value with at least ``pct`` % of the values at or below it)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def _rate(correct: int, questions: int) -> float | None:
    return round(correct / questions, 4) if questions else None


def _group(results: Sequence[QuestionResult]) -> dict[str, Any]:
    correct = sum(1 for r in results if r.judgement is not None and r.judgement.correct)
    return {"questions": len(results), "correct": correct, "accuracy": _rate(correct, len(results))}


def _tokens(uses: Sequence[ModelUse]) -> dict[str, float]:
    count = len(uses) or 1
    return {"calls": round(sum(u.calls for u in uses) / count, 2),
            "input": round(sum(u.input_tokens for u in uses) / count, 1),
            "output": round(sum(u.output_tokens for u in uses) / count, 1),
            "total": round(sum(u.tokens for u in uses) / count, 1)}


def _cost(uses: Sequence[ModelUse]) -> float | None:
    total = ModelUse()
    for use in uses:
        total = total + use
    return None if total.cost_usd is None else round(total.cost_usd, 8)


def _per(value: float | None, count: int) -> float | None:
    return None if value is None or not count else round(value / count, 8)


def _latency(values: Sequence[float]) -> dict[str, float]:
    return {"p50": round(percentile(values, 50), 3), "p95": round(percentile(values, 95), 3),
            "mean": round(statistics.fmean(values), 3) if values else 0.0}


def summarize(results: Sequence[QuestionResult], *, questions: int, dataset: str, models: dict[str, str]) -> dict[
        str, Any]:
    """The summary of ``results`` (a run's journal, any order), for a sample of ``questions`` questions."""
    judged = [r for r in results if r.judgement is not None]
    types = [t for t in QUESTION_TYPES if any(r.question_type == t for r in judged)]
    types += sorted({r.question_type for r in judged} - set(QUESTION_TYPES))
    by_type = {t: _group([r for r in judged if r.question_type == t]) for t in types}
    correct = sum(1 for r in judged if r.judgement is not None and r.judgement.correct)
    rates = [g["accuracy"] for g in by_type.values() if g["accuracy"] is not None]

    def uses(pick: Callable[[QuestionResult], ModelUse]) -> list[ModelUse]:
        return [pick(r) for r in judged]

    answering = _cost(uses(lambda r: r.answering))
    return {
        "benchmark": "longmemeval",
        "dataset": dataset,
        "models": models,
        "questions": questions,
        "judged": len(judged),
        "unjudged": len(results) - len(judged),
        "accuracy": {"micro": _rate(correct, len(judged)),
                     "macro": round(statistics.fmean(rates), 4) if rates else None,
                     "correct": correct,
                     "unclear_verdicts": sum(1 for r in judged if r.judgement is not None and r.judgement.unclear)},
        "by_type": by_type,
        "abstention": _group([r for r in judged if r.abstention]),
        "tokens_per_question": {
            "observer": _tokens(uses(lambda r: r.observer)),
            "reflector": _tokens(uses(lambda r: r.reflector)),
            "om": _tokens(uses(lambda r: r.om)),
            "reader": _tokens(uses(lambda r: r.reader)),
            "judge": _tokens([r.judgement.judge for r in judged if r.judgement is not None]),
            "context": round(statistics.fmean(r.context_tokens for r in judged), 1) if judged else 0.0,
            "context_max": max((r.context_tokens for r in judged), default=0),
            "history": round(statistics.fmean(r.history_tokens for r in judged), 1) if judged else 0.0,
        },
        "cost_usd": {
            "answering": answering,
            "om": _cost(uses(lambda r: r.om)),
            "reader": _cost(uses(lambda r: r.reader)),
            "judge": _cost([r.judgement.judge for r in judged if r.judgement is not None]),
            "per_question": _per(answering, len(judged)),
            "per_correct_answer": _per(answering, correct),
            "unknown_cost_calls": sum(r.answering.unknown_cost_calls for r in judged),
        },
        "latency_s": {
            "question": _latency([r.replay_seconds + r.reader_seconds for r in judged]),
            "reader": _latency([r.reader_seconds for r in judged]),
        },
        "om_model_failures": sum(r.om_model_failures for r in judged),
        "offline_fallback_calls": sum(r.offline_fallback_calls for r in judged),
    }


def _percent(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate * 100:.2f} %"


def _usd(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def render(summary: dict[str, Any]) -> str:
    """The summary as a person reads it."""
    accuracy, tokens, cost, latency = (summary["accuracy"], summary["tokens_per_question"], summary["cost_usd"],
                                       summary["latency_s"])
    lines = [f"LongMemEval ({summary['dataset']}): {summary['judged']} of {summary['questions']} questions judged"
             + (f", {summary['unjudged']} awaiting the judge" if summary["unjudged"] else ""),
             f"accuracy: {_percent(accuracy['micro'])} micro, {_percent(accuracy['macro'])} macro "
             f"({accuracy['correct']} correct)"]
    groups = [*summary["by_type"].items(), ("abstention (_abs)", summary["abstention"])]
    lines += [f"  {name:<28} {g['correct']:>4}/{g['questions']:<4} {_percent(g['accuracy'])}"
              for name, g in groups if g["questions"]]
    lines.append(f"tokens per question: OM {tokens['om']['total']:,.0f} (in {tokens['om']['input']:,.0f}, "
                 f"out {tokens['om']['output']:,.0f}), reader {tokens['reader']['total']:,.0f}, "
                 f"judge {tokens['judge']['total']:,.0f}; the reader's context {tokens['context']:,.0f} tokens "
                 f"for a history of {tokens['history']:,.0f}")
    lines.append(f"cost: {_usd(cost['per_question'])} per question, {_usd(cost['per_correct_answer'])} per correct "
                 f"answer; in all OM {_usd(cost['om'])}, reader {_usd(cost['reader'])}, and the judge "
                 f"{_usd(cost['judge'])}")
    lines.append(f"latency: p50 {latency['question']['p50']:.2f} s, p95 {latency['question']['p95']:.2f} s per "
                 f"question (reader p50 {latency['reader']['p50']:.2f} s, p95 {latency['reader']['p95']:.2f} s)")
    if summary["om_model_failures"] or summary["offline_fallback_calls"]:
        lines.append(f"OM model failures: {summary['om_model_failures']}, cycles served by the offline model: "
                     f"{summary['offline_fallback_calls']}")
    return "\n".join(lines)
