"""``om-stream eval longmemeval``, end to end and offline: a small dataset in LongMemEval's own format
(``tests/fixtures/longmemeval_sample.json``), OM's models, the reader and the judge all reached through litellm on the
fake OpenAI server. The reader answers and the judge grades from a script, so every figure of the summary is known."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from om_stream.cli import main
from om_stream.eval.longmemeval.dataset import format_date, iter_questions
from om_stream.testing.fake_openai import ErrorReply, FakeOpenAI, RecordedRequest, Reply, Response, Usage
from tests.support.scripted_provider import answer as om_answer

SAMPLE = Path(__file__).resolve().parents[1] / "fixtures" / "longmemeval_sample.json"
QUESTIONS = list(iter_questions(SAMPLE))
OM_MODEL, READER, JUDGE = "gpt-5-mini", "gpt-4o", "gpt-4o-mini"
# what the reader answers, and whether the judge accepts it
SCRIPT = {
    "lme-ssu-01": ("You graduated in Business Administration.", True),
    "lme-ssa-01": ("I suggested Colmar.", True),
    "lme-pref-01": ("How about a vegetarian shakshuka in your new cast-iron skillet?", True),
    "lme-ms-01": ("You play two instruments: the guitar and the piano.", False),
    "lme-tr-01": ("11 days passed.", True),
    "lme-ku-01": ("You moved from Lyon to Porto, so Porto.", True),
    "lme-ssu-02_abs": ("Your cat is called Biscuit.", False),
}
BY_QUESTION = {q.question: q.question_id for q in QUESTIONS}
# litellm's price map (the pinned version), USD per token: in, out
PRICES = {OM_MODEL: (0.25e-6, 2e-6), READER: (2.5e-6, 10e-6), JUDGE: (0.15e-6, 0.6e-6)}
USAGE = {OM_MODEL: Usage(1000, 500), READER: Usage(1000, 500), JUDGE: Usage(300, 1)}


def cost(model: str, calls: int) -> float:
    (price_in, price_out), usage = PRICES[model], USAGE[model]
    return calls * (usage.prompt_tokens * price_in + usage.completion_tokens * price_out)


def respond(request: RecordedRequest) -> Response:
    if request.model == READER:
        asked = request.messages[-1]["content"]
        return Reply(SCRIPT[BY_QUESTION[asked]][0], usage=USAGE[READER])
    if request.model == JUDGE:
        graded = next(ok for text, ok in SCRIPT.values() if f"Assistant's answer: {text}\n" in request.prompt_text)
        return Reply("yes" if graded else "no", usage=USAGE[JUDGE])
    return om_answer(request)  # the Observer and the Reflector: 1000 tokens in, 500 out


@pytest.fixture
def srv() -> Any:
    with FakeOpenAI(default=respond) as server:
        yield server


def run(srv: FakeOpenAI, out: Path, *extra: str) -> int:
    return main(["eval", "longmemeval", str(SAMPLE), "--out", str(out), "--model", f"openai/{OM_MODEL}",
                 "--reader-model", f"openai/{READER}", "--judge-model", f"openai/{JUDGE}",
                 "--api-base", srv.base_url, "--message-tokens", "120", "--observation-tokens", "400", *extra])


def calls(srv: FakeOpenAI, model: str) -> list[RecordedRequest]:
    return [r for r in srv.requests if r.model == model]


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_harness_replays_answers_judges_and_summarises(srv: FakeOpenAI, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"

    assert run(srv, out, "--concurrency", "3") == 0

    # the official evaluator's input, in the dataset's order
    assert lines(out / "hypotheses.jsonl") == [{"question_id": q.question_id,
                                                "hypothesis": SCRIPT[q.question_id][0]} for q in QUESTIONS]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["questions"], summary["judged"], summary["accuracy"]["correct"]) == (7, 7, 5)
    assert summary["accuracy"]["micro"] == pytest.approx(5 / 7, abs=1e-4)
    # single-session-user 1 of 2 (its abstention question failed), multi-session 0 of 1, the other four 1 of 1
    assert summary["accuracy"]["macro"] == pytest.approx(4.5 / 6, abs=1e-4)
    assert summary["by_type"]["single-session-user"] == {"questions": 2, "correct": 1, "accuracy": 0.5}
    assert summary["abstention"] == {"questions": 1, "correct": 0, "accuracy": 0.0}

    # the reader got OM's context, not the haystack: the Alsace session was observed, so its words are gone
    readers = {BY_QUESTION[r.messages[-1]["content"]]: r for r in calls(srv, READER)}
    assert sorted(readers) == sorted(SCRIPT)
    alsace = readers["lme-ssa-01"].prompt_text
    assert "User stated their name is Ada." in alsace and "<observations>" in alsace
    assert "Colmar" not in alsace
    for q in QUESTIONS:
        assert f"Today is {format_date(q.question_date)}." in readers[q.question_id].messages[0]["content"]
    # ... and OM saw the haystack on its own dates
    assert any("Jun 11, 2023" in r.prompt_text for r in calls(srv, OM_MODEL))

    # each question type graded by its own rule
    prompts = {qid: next(r.prompt_text for r in calls(srv, JUDGE) if f"Assistant's answer: {text}\n" in r.prompt_text)
               for qid, (text, _) in SCRIPT.items()}
    assert "off by one" in prompts["lme-tr-01"] and "off by one" not in prompts["lme-ssu-01"]
    assert "earlier values" in prompts["lme-ku-01"]
    assert "Rubric: The user would prefer vegetarian dishes" in prompts["lme-pref-01"]
    assert "cannot answer" in prompts["lme-ssu-02_abs"] and "Explanation:" in prompts["lme-ssu-02_abs"]

    tokens, spent = summary["tokens_per_question"], summary["cost_usd"]
    om_calls = len(calls(srv, OM_MODEL))
    assert (tokens["reader"]["input"], tokens["reader"]["output"], tokens["judge"]["input"]) == (1000, 500, 300)
    assert tokens["om"]["total"] == pytest.approx(om_calls * 1500 / 7, abs=0.1)
    assert tokens["context"] < tokens["history"]
    assert spent["om"] == pytest.approx(cost(OM_MODEL, om_calls))
    assert spent["reader"] == pytest.approx(cost(READER, 7))
    assert spent["judge"] == pytest.approx(cost(JUDGE, 7))
    answering = cost(OM_MODEL, om_calls) + cost(READER, 7)
    assert spent["per_question"] == pytest.approx(answering / 7, abs=1e-6)
    assert spent["per_correct_answer"] == pytest.approx(answering / 5, abs=1e-6)
    latency = summary["latency_s"]
    assert 0 < latency["reader"]["p50"] <= latency["reader"]["p95"] <= latency["question"]["p95"]

    printed = capsys.readouterr()
    assert "71.43 % micro, 75.00 % macro" in printed.out
    assert printed.err.splitlines()[-1].startswith("longmemeval [########################] 7/7 100%")


def test_an_interrupted_run_resumes_where_it_stopped(srv: FakeOpenAI, tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert run(srv, out, "--limit", "3", "--no-progress") == 0
    first = json.loads((out / "summary.json").read_text())
    assert (first["questions"], first["judged"]) == (3, 3)
    srv.reset()

    assert run(srv, out, "--no-progress") == 0

    asked = sorted(BY_QUESTION[r.messages[-1]["content"]] for r in calls(srv, READER))
    assert asked == sorted(q.question_id for q in QUESTIONS[3:])  # the sample's three were not asked again
    assert len(calls(srv, JUDGE)) == 4
    assert [h["question_id"] for h in lines(out / "hypotheses.jsonl")] == [q.question_id for q in QUESTIONS]
    assert json.loads((out / "summary.json").read_text())["judged"] == 7


def test_a_question_the_judge_fails_on_is_only_judged_on_the_next_run(srv: FakeOpenAI, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    srv.add_rule(ErrorReply.bad_request("the judge refuses"), model=JUDGE, contains="Assistant's answer: 11 days")

    assert run(srv, out, "--no-progress") == 1

    assert "question lme-tr-01 failed (judge)" in capsys.readouterr().err
    assert "lme-tr-01" in {h["question_id"] for h in lines(out / "hypotheses.jsonl")}  # answered all the same
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["judged"], summary["unjudged"]) == (6, 1)
    srv.reset()

    assert run(srv, out, "--no-progress") == 0

    assert [r.model for r in srv.requests] == [JUDGE]  # no replay, no reader: only the missing judgement
    assert json.loads((out / "summary.json").read_text())["accuracy"]["correct"] == 5


def test_a_results_folder_of_another_run_is_refused(srv: FakeOpenAI, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "results"
    assert run(srv, out, "--limit", "1", "--no-progress") == 0
    srv.reset()

    assert run(srv, out, "--limit", "1", "--no-progress", "--reader-model", "openai/gpt-4.1") == 2

    assert "other reader_model" in capsys.readouterr().err
    assert srv.requests == []


def test_a_missing_dataset_is_an_error_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "longmemeval", str(tmp_path / "longmemeval_s.json"), "--model", "offline"]) == 2
    assert "no dataset file at" in capsys.readouterr().err


def test_questions_run_side_by_side_with_the_offline_model_as_om(srv: FakeOpenAI, tmp_path: Path) -> None:
    srv.add_rule(Reply("I do not know.", usage=USAGE[READER], delay=2.0), model=READER)
    srv.add_rule(Reply("no", usage=USAGE[JUDGE]), model=JUDGE)
    out = tmp_path / "results"

    assert main(["eval", "longmemeval", str(SAMPLE), "--out", str(out), "--model", "offline", "--limit", "3",
                 "--concurrency", "3", "--reader-model", f"openai/{READER}", "--judge-model", f"openai/{JUDGE}",
                 "--api-base", srv.base_url, "--message-tokens", "120", "--no-progress"]) == 0

    readers = calls(srv, READER)
    assert len(readers) == 3 and not calls(srv, OM_MODEL)
    arrivals = sorted(r.received_at for r in readers)
    assert arrivals[-1] - arrivals[0] < 2.0  # one after the other, they would be 2 s apart at least
    # the offline model observed the haystack: its notes are in the reader's context
    assert all("<observations>" in r.prompt_text for r in readers)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["models"]["om"] == "offline"
    assert summary["tokens_per_question"]["om"]["input"] > 0 and summary["cost_usd"]["om"] == 0.0
