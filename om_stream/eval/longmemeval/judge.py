"""The judge: an LLM that grades a hypothesis against the reference answer, by the benchmark's per-type rubric.

The rubric follows the one LongMemEval publishes with its evaluator, written here in om-stream's words:

* by default, correct when the answer contains the reference answer or is equivalent to it (reaching it through
  its intermediate steps counts; giving only part of what it requires does not);
* ``temporal-reasoning``: the same, but a count of days off by one is tolerated;
* ``knowledge-update``: an answer that also mentions the superseded value is correct when its updated value is the
  reference;
* ``single-session-preference``: the reference is a rubric of what a personalised answer does; correct when the
  answer remembers and uses the user's stated preferences correctly, without having to cover every point;
* abstention questions (ids ending in ``_abs``): correct when the answer says it cannot answer (the information
  was never given, or only related information was).

The judge replies yes or no. Its reply is read strictly: the first word decides. After a reply that is neither, the
judge is asked again for the one word (``ASKS`` asks in all); a verdict still unclear counts as incorrect, flagged.
"""

from __future__ import annotations

import re
import time

from om_stream.eval.longmemeval.dataset import Question
from om_stream.eval.longmemeval.records import Judgement, ModelUse
from om_stream.ports import ChatMessage, ChatModel, ChatRequest

__all__ = ["ASKS", "judge", "judge_prompt", "read_verdict"]

ASKS = 3

_OPENING = "You are grading an AI assistant's answer to a question about its past conversations with a user."
_CLOSING = 'Reply with one word: "yes" or "no".'
_AGAIN = 'Is the answer correct by the rule above? Reply with the single word "yes" or "no".'

_CONTAINS = ('Reply "yes" if the assistant\'s answer contains the reference answer or says something equivalent '
             "to it; an answer that reaches the reference answer by showing its intermediate steps also counts. "
             'Reply "no" if the answer is wrong, or gives only part of what the reference answer requires.')
_TEMPORAL = ("For a number of days, accept an answer that is off by one from the reference (18 days for 19 days, "
             "say): whether the first or the last day is counted is a convention, not an error.")
_UPDATED = ("The user's information changed over time and the reference answer is the latest value. If the "
            "answer mentions earlier values as well, it is still correct as long as the value it gives as the "
            "current one matches the reference.")
_PREFERENCE = ('The reference below is a rubric of what a good personalised answer does. Reply "yes" if the '
               "assistant's answer meets it: it need not cover every point of the rubric, but it must remember "
               "the user's own preferences and details correctly and make use of them. Reply \"no\" if it ignores "
               "them, gets them wrong, or could have been written for anyone.")
_ABSTAIN = ("This question cannot be answered from the conversations: what it asks was never said. The "
            "explanation below says what is missing. Reply \"yes\" if the assistant's answer recognises that it "
            "cannot answer, for instance by saying the information is missing or incomplete, or that it knows "
            "something related but not what was asked. Reply \"no\" if it answers as though it knew.")


def judge_prompt(question: Question, hypothesis: str) -> str:
    """The grading prompt for ``hypothesis``, by the rubric of the question's type."""
    if question.abstention:
        rule, label = _ABSTAIN, "Explanation"
    elif question.question_type == "single-session-preference":
        rule, label = _PREFERENCE, "Rubric"
    elif question.question_type == "temporal-reasoning":
        rule, label = f"{_CONTAINS} {_TEMPORAL}", "Reference answer"
    elif question.question_type == "knowledge-update":
        rule, label = f"{_CONTAINS} {_UPDATED}", "Reference answer"
    else:
        rule, label = _CONTAINS, "Reference answer"
    return (f"{_OPENING}\n\n{rule}\n\nQuestion: {question.question}\n{label}: {question.answer}\n"
            f"Assistant's answer: {hypothesis}\n\n{_CLOSING}")


_FIRST_WORD = re.compile(r"[a-z]+")


def read_verdict(reply: str) -> bool | None:
    """True for a reply whose first word is yes, False for no, None for anything else."""
    match = _FIRST_WORD.search(reply.lower())
    if match is None:
        return None
    word = match.group(0)
    return True if word == "yes" else False if word == "no" else None


async def judge(model: ChatModel, model_name: str, question: Question, hypothesis: str) -> Judgement:
    """Grade ``hypothesis``; a reply that is neither yes nor no is followed by a request for one word."""
    messages: tuple[ChatMessage, ...] = (ChatMessage("user", judge_prompt(question, hypothesis)),)
    began = time.perf_counter()
    use = ModelUse()
    reply = ""
    for _ in range(ASKS):
        request = ChatRequest(role="judge", model=model_name, messages=messages, temperature=0.0,
                              resource_id=question.question_id)
        response = await model.complete(request)
        use = use + ModelUse.of(response)
        reply = response.text.strip()
        verdict = read_verdict(reply)
        if verdict is not None:
            return Judgement(correct=verdict, verdict=reply[:200], judge=use, seconds=time.perf_counter() - began)
        messages = (*messages, ChatMessage("assistant", reply), ChatMessage("user", _AGAIN))
    return Judgement(correct=False, verdict=reply[:200], unclear=True, judge=use, seconds=time.perf_counter() - began)
