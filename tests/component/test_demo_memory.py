"""``om-stream demo`` end to end: after the sample conversation, the context the agent would send still holds
every fact the user asked to keep, and its observation log names each day once."""

from __future__ import annotations

import io
import re

from om_stream.replay.conversation import load_turns
from om_stream.replay.demo import run_demo, sample_conversation
from om_stream.wire.context import ContextRecord

# What the user of the sample conversation asked to keep (or stated as a standing fact about their setup), and
# the words any faithful memory of it holds.
ASKED_TO_KEEP = {
    "Our launch deadline is 2026-03-14 and I present the architecture to the board on March 10. Please keep that "
    "in mind.": ("2026-03-14", "March 10"),
    "Ok. Remember that our on-call rotation changes every Monday at 09:00 Berlin time.":
        ("on-call rotation", "Monday", "09:00", "Berlin"),
    "We already run Cassandra 4.1 in production. Is that a problem?": ("Cassandra 4.1",),
    "I prefer short answers with bullet points. And Python examples please, our team doesn't write Java.":
        ("short answers", "bullet points"),
    "Yes, keep customer quotes in the original language.": ("customer quotes", "original language"),
}


async def _final_context() -> ContextRecord:
    result = await run_demo(io.StringIO())
    assert result.memory is not None
    context = await result.memory.context("demo-thread")
    assert context is not None
    return context


def test_the_facts_are_the_sample_conversations_own() -> None:
    said = {m.text for t in load_turns(sample_conversation()) for m in t.messages if m.role == "user"}
    assert set(ASKED_TO_KEEP) <= said


async def test_the_final_context_keeps_every_fact_the_user_asked_to_keep() -> None:
    context = await _final_context()
    assert context.generation >= 1, "the demo is meant to show a reflection"
    held = "\n".join([context.observations, *(m.text for m in context.messages)])
    for statement, needles in ASKED_TO_KEEP.items():
        for needle in needles:
            assert needle in held, f"lost {needle!r} of {statement!r}:\n{context.observations}"


async def test_the_final_context_names_each_day_once() -> None:
    context = await _final_context()
    headers = re.findall(r"^Date: ([A-Z][a-z]{2} \d{1,2}, \d{4})", context.observations, re.MULTILINE)
    assert headers and len(headers) == len(set(headers)), context.observations


async def test_the_shared_thread_s_observations_say_who_said_what() -> None:
    out = io.StringIO()
    await run_demo(out)
    shown = out.getvalue().split("Who said what")[1]
    observed = [line for line in shown.splitlines() if "│" in line]
    for needle in ("Ana stated: Our March invoice", "Ben stated: I own the account",
                   "billing-agent replied: I found the duplicate", "Ana asked: Can you send the corrected invoice",
                   "support-agent replied: Done: corrected invoice INV-0342"):
        assert any(needle in line for line in observed), f"{needle!r} not in:\n{shown}"
    assert not any(" User " in line or "Assistant:" in line for line in observed)
