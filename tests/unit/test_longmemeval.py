"""The pieces of ``om-stream eval longmemeval`` that need no model: the dataset format, the haystack's clock, the
judge's rubric and verdicts, the journal a run resumes from, and the summary's figures."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from om_stream.errors import ConfigError, WireDecodeError
from om_stream.eval.longmemeval.dataset import Question, format_date, iter_questions, parse_date
from om_stream.eval.longmemeval.journal import Journal, RunIdentity
from om_stream.eval.longmemeval.judge import judge, judge_prompt, read_verdict
from om_stream.eval.longmemeval.records import Judgement, ModelUse, QuestionResult
from om_stream.eval.longmemeval.replay import TURN_SPACING, haystack_messages, question_message
from om_stream.eval.longmemeval.summary import percentile, render, summarize
from om_stream.eval.progress import Progress
from om_stream.testing import FunctionModel

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_sample.json"


def item(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "question_id": "q1", "question_type": "single-session-user", "question": "Where do I work?",
        "answer": "At the harbour office", "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["a", "b"], "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/22 (Mon) 10:00"],
        "haystack_sessions": [[{"role": "user", "content": "I work at the harbour office.", "has_answer": True},
                               {"role": "assistant", "content": "Noted."}],
                              [{"role": "user", "content": "Nice weather."}]],
        "answer_session_ids": ["a"]}
    return {**base, **changes}


def question(**changes: Any) -> Question:
    return Question.model_validate(item(**changes))


# -- the dataset ----------------------------------------------------------------------------------------------------

def test_dates_read_as_the_dataset_writes_them() -> None:
    when = parse_date("2023/05/20 (Sat) 02:21")

    assert when == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    assert format_date(when) == "2023/05/20 (Sat) 02:21"
    assert parse_date("2023-05-20T02:21:00+02:00") == datetime(2023, 5, 20, 0, 21, tzinfo=UTC)
    with pytest.raises(ValueError, match="not a LongMemEval date"):
        parse_date("May 20th")


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_the_file_is_read_item_by_item_whatever_the_chunk_size(chunk: int) -> None:
    expected = json.loads(SAMPLE.read_text())

    read = list(iter_questions(SAMPLE, chunk_chars=chunk))

    assert [q.question_id for q in read] == [e["question_id"] for e in expected]
    assert [len(q.haystack_sessions) for q in read] == [len(e["haystack_sessions"]) for e in expected]
    counted = next(q for q in read if q.question_type == "multi-session")
    assert counted.answer == "3"  # a number in the file
    assert [q.abstention for q in read].count(True) == 1


def test_a_broken_file_names_the_item(tmp_path: Path) -> None:
    good = json.dumps(item())
    truncated = tmp_path / "truncated.json"
    truncated.write_text(f"[{good}, {good[:-40]}")
    invalid = tmp_path / "invalid.json"
    invalid.write_text(json.dumps([item(), item(question_id="q2", haystack_dates=["2023/05/20 (Sat) 02:21"])]))
    not_array = tmp_path / "object.json"
    not_array.write_text(good)

    with pytest.raises(WireDecodeError, match="after item 0: invalid JSON"):
        list(iter_questions(truncated, chunk_chars=16))
    with pytest.raises(WireDecodeError, match=r"question 'q2' \(item 1\).*1 haystack_dates for 2 haystack_sessions"):
        list(iter_questions(invalid))
    with pytest.raises(WireDecodeError, match="one JSON array"):
        list(iter_questions(not_array))


def test_sessions_are_replayed_in_date_order_with_increasing_times() -> None:
    q = question(haystack_session_ids=["late", "early"],
                 haystack_dates=["2023/05/22 (Mon) 10:00", "2023/05/20 (Sat) 02:21"],
                 haystack_sessions=[[{"role": "user", "content": "second"}],
                                    [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"}]])

    sessions = haystack_messages(q)

    assert [[m.text for m in s] for s in sessions] == [["first", "ok"], ["second"]]
    first, reply = sessions[0]
    assert first.created_at == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    assert reply.created_at - first.created_at == TURN_SPACING
    assert {m.thread_id for s in sessions for m in s} == {"q1"}
    asked = question_message(q, sessions[-1][-1].created_at)
    assert (asked.created_at, asked.text, asked.role) == (datetime(2023, 5, 30, 23, 40, tzinfo=UTC),
                                                          "Where do I work?", "user")


def test_overlapping_sessions_keep_their_order_and_resource_scope_gives_each_a_thread() -> None:
    q = question(haystack_dates=["2023/05/20 (Sat) 02:21", "2023/05/20 (Sat) 02:21"],
                 question_date="2023/05/20 (Sat) 02:21")

    sessions = haystack_messages(q, "resource")
    times = [m.created_at for s in sessions for m in s]

    assert times == sorted(times) and len(set(times)) == len(times)
    assert [s[0].thread_id for s in sessions] == ["q1:a", "q1:b"]
    asked = question_message(q, times[-1], "resource")
    assert asked.created_at > times[-1] and asked.thread_id == "q1:question"
    assert asked.created_at - times[-1] < timedelta(seconds=1)


# -- the judge ------------------------------------------------------------------------------------------------------

def test_each_question_type_is_judged_by_its_own_rule() -> None:
    def prompt(**changes: Any) -> str:
        return judge_prompt(question(**changes), "hypothesis text")

    default = prompt()
    temporal = prompt(question_type="temporal-reasoning")
    update = prompt(question_type="knowledge-update")
    preference = prompt(question_type="single-session-preference")
    abstention = prompt(question_id="q1_abs", question_type="temporal-reasoning")

    assert "contains the reference answer" in default and "Reference answer: At the harbour office" in default
    assert "off by one" in temporal and "off by one" not in default
    assert "earlier values" in update and "earlier values" not in default
    assert "Rubric: At the harbour office" in preference and "preferences" in preference
    assert "cannot answer" in abstention and "Explanation: At the harbour office" in abstention
    assert "off by one" not in abstention  # abstention's rule wins over the question's type
    assert all("Assistant's answer: hypothesis text" in p for p in (default, temporal, update, preference,
                                                                     abstention))


@pytest.mark.parametrize(("reply", "verdict"), [("yes", True), ("Yes.", True), ("**YES** it matches", True),
                                                ("no", False), ("No, the answer is 12.", False),
                                                ("Yesterday's value", None), ("", None), ("The answer: yes", None)])
def test_the_first_word_of_the_judges_reply_decides(reply: str, verdict: bool | None) -> None:
    assert read_verdict(reply) is verdict


async def test_an_unclear_verdict_is_asked_again_then_counted_wrong() -> None:
    replies = iter(["It depends.", "yes"])
    model = FunctionModel(lambda request: next(replies), cost_usd=0.001)

    judged = await judge(model, "judge-model", question(), "At the harbour office.")

    assert (judged.correct, judged.unclear, judged.verdict, judged.judge.calls) == (True, False, "yes", 2)
    assert judged.judge.cost_usd == pytest.approx(0.002)
    second = model.requests[1]
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    assert second.role == "judge" and second.model == "judge-model"

    stubborn = FunctionModel(lambda request: "Hard to say.")
    unclear = await judge(stubborn, "judge-model", question(), "Maybe.")
    assert (unclear.correct, unclear.unclear, len(stubborn.requests)) == (False, True, 3)


# -- the journal ----------------------------------------------------------------------------------------------------

def result(qid: str, qtype: str, correct: bool | None, *, abstention: bool = False, reader_cost: float | None = 0.01,
           seconds: float = 1.0) -> QuestionResult:
    judged = None if correct is None else Judgement(correct=correct, verdict="yes" if correct else "no",
                                                    judge=ModelUse(calls=1, input_tokens=200, output_tokens=1,
                                                                   cost_usd=0.0001), seconds=0.1)
    return QuestionResult(
        question_id=qid, question_type=qtype, abstention=abstention, hypothesis=f"answer to {qid}",
        observer=ModelUse(calls=2, input_tokens=3000, output_tokens=400, cost_usd=0.002),
        reflector=ModelUse(), reader=ModelUse(calls=1, input_tokens=1000, output_tokens=50, cost_usd=reader_cost,
                                              unknown_cost_calls=int(reader_cost is None)),
        context_tokens=1200, observation_tokens=500, history_tokens=110_000, generation=0, replay_seconds=seconds,
        reader_seconds=seconds / 10, judgement=judged)


def test_the_journal_keeps_the_last_line_of_a_question_and_cuts_a_torn_one(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "results.jsonl")
    journal.append(result("a", "multi-session", None))
    journal.append(result("b", "multi-session", True))
    journal.append(result("a", "multi-session", False))
    with journal.path.open("a") as handle:
        handle.write('{"question_id": "c", "question_ty')  # the process died mid-write

    loaded = journal.load()

    assert sorted(loaded) == ["a", "b"]
    assert loaded["a"].judgement is not None and not loaded["a"].judgement.correct
    journal.append(result("c", "multi-session", True))
    assert sorted(journal.load()) == ["a", "b", "c"]  # the next append starts on a line of its own


def test_a_results_folder_belongs_to_one_run(tmp_path: Path) -> None:
    identity = RunIdentity(dataset="longmemeval_s.json", om_model="offline", reader_model="openai/gpt-4o",
                           judge_model="openai/gpt-4o", om_options={})
    identity.check(tmp_path)
    identity.check(tmp_path)  # the same run resumes

    other = identity.model_copy(update={"reader_model": "openai/gpt-5-mini"})
    with pytest.raises(ConfigError, match="other reader_model"):
        other.check(tmp_path)


# -- the summary ----------------------------------------------------------------------------------------------------

def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]

    assert (percentile(values, 50), percentile(values, 95), percentile([3.0], 95), percentile([], 50)) == (
        10.0, 19.0, 3.0, 0.0)


def test_the_summary_reports_micro_macro_abstention_cost_and_latency() -> None:
    results = [result("u1", "single-session-user", True), result("u2_abs", "single-session-user", False,
                                                                   abstention=True),
               result("m1", "multi-session", True), result("m2", "multi-session", True),
               result("m3", "multi-session", False), result("t1", "temporal-reasoning", True, seconds=3.0),
               result("t2", "temporal-reasoning", None)]

    summary = summarize(results, questions=8, dataset="sample.json", models={"reader": "r"})

    assert (summary["questions"], summary["judged"], summary["unjudged"]) == (8, 6, 1)
    assert summary["accuracy"]["micro"] == pytest.approx(4 / 6, abs=1e-4)
    assert summary["accuracy"]["macro"] == pytest.approx((1 / 2 + 2 / 3 + 1) / 3, abs=1e-4)
    assert summary["by_type"]["multi-session"] == {"questions": 3, "correct": 2, "accuracy": pytest.approx(0.6667)}
    assert list(summary["by_type"]) == ["single-session-user", "multi-session", "temporal-reasoning"]
    assert summary["abstention"] == {"questions": 1, "correct": 0, "accuracy": 0.0}
    tokens = summary["tokens_per_question"]
    assert (tokens["om"]["input"], tokens["reader"]["total"], tokens["history"]) == (3000, 1050, 110_000)
    cost = summary["cost_usd"]
    assert cost["answering"] == pytest.approx(6 * 0.012)
    assert cost["per_question"] == pytest.approx(0.012)
    assert cost["per_correct_answer"] == pytest.approx(6 * 0.012 / 4)
    assert cost["judge"] == pytest.approx(6 * 0.0001)
    assert summary["latency_s"]["question"]["p95"] == pytest.approx(3.3)
    assert "66.67 % micro" in render(summary)


def test_a_cost_some_call_left_unknown_is_not_reported_as_zero() -> None:
    results = [result("a", "multi-session", True), result("b", "multi-session", True, reader_cost=None)]

    cost = summarize(results, questions=2, dataset="d", models={})["cost_usd"]

    assert (cost["answering"], cost["reader"], cost["per_question"], cost["unknown_cost_calls"]) == (
        None, None, None, 1)
    assert cost["om"] == pytest.approx(0.004)
    assert "unknown per question" in render(summarize(results, questions=2, dataset="d", models={}))


def test_off_a_terminal_the_progress_bar_prints_a_line_every_twentieth() -> None:
    stream = io.StringIO()
    ticks = iter(float(t) for t in range(100))
    progress = Progress("longmemeval", 40, stream=stream, done=10, clock=lambda: next(ticks))
    progress.start()
    for _ in range(30):
        progress.advance(note="accuracy 50.0%")
    progress.close()

    lines = stream.getvalue().splitlines()
    assert lines[0] == "longmemeval [######------------------] 10/40  25%"  # resumed a quarter of the way
    assert lines[-1].startswith("longmemeval [########################] 40/40 100%")
    assert len(lines) == 16  # 10/40 is the fifth twentieth; one line for each of the fifteen after it, plus the first
    assert "eta" in lines[1] and "accuracy 50.0%" in lines[1]
