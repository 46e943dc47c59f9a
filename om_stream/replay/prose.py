"""Seeded filler text for the conversation shapes: sentences, paragraphs, pasted documents and tool results.

The filler never names a person, a place, a product, a month or a weekday, never writes a date, a version or a
number with a thousands separator, and never writes a four-digit number: those forms are kept for the facts a shape
plants (``om_stream.replay.facts``), so that finding a fact's words in a context means the fact survived. Every
function takes the shape's ``random.Random`` and is deterministic for it.
"""

from __future__ import annotations

import json
import random

__all__ = ["code_listing", "document", "filler_number", "paragraph", "question", "sentence", "short_reply",
           "tool_result"]

_SUBJECTS = ("the rollout", "our nightly job", "the billing export", "this approach", "the second option",
             "the retry policy", "my draft", "the onboarding checklist", "the vendor's proposal", "the new layout",
             "that workaround", "the cache", "the review board", "the migration plan", "this estimate",
             "the dashboard", "the reading list", "the shopping list", "the garden plan", "the itinerary",
             "the recipe", "the training schedule", "the lease agreement", "the insurance claim")
_VERBS = ("depends on", "breaks", "simplifies", "slows down", "replaces", "duplicates", "hides", "explains",
          "contradicts", "improves", "requires", "postpones", "complicates", "summarises", "protects", "exposes",
          "measures", "ignores", "anticipates", "reorganises")
_OBJECTS = ("the overnight batch", "every second request", "a handful of edge cases", "the weekly report",
            "the approval step", "our error budget", "the storage costs", "the paperwork", "the longer route",
            "most of the backlog", "the fallback path", "the reconciliation", "the cleanup task",
            "the customer survey", "the grocery budget", "the kitchen renovation", "the seating chart",
            "the packing list", "the release notes", "the permission model", "the test fixtures")
_TAILS = ("without much extra effort", "as far as I can tell", "unless we change the defaults",
          "which nobody expected", "once the queue drains", "during the busiest hour", "for the time being",
          "if the numbers hold up", "after the next review", "in a surprisingly subtle way",
          "so we should double-check it", "and that worries me a little", "more than the last attempt did",
          "before anyone notices", "at least on paper")
_OPENERS = ("Honestly,", "In practice", "So far", "On the other hand,", "Interestingly,", "To be fair,",
            "As it turns out,", "Looking back,", "Frankly,", "In short,")
_QUESTIONS = ("What would you change first?", "Does that sound reasonable?", "Can you sketch the steps?",
              "Which option is cheaper in the long run?", "Am I missing something obvious?",
              "How would you test this?", "Could you rewrite it more concisely?", "What are the risks here?",
              "Is there a simpler way?", "Should I wait or go ahead?")
_SHORT = ("ok", "thanks!", "got it", "makes sense", "hmm, not sure", "yes please", "nice", "go on",
          "sounds good", "wait, why?", "perfect", "let me think", "agreed", "not quite", "try again?")
_IDENTS = ("record", "batch", "window", "cursor", "payload", "retries", "offset", "bucket", "ledger", "token",
           "entry", "slot", "quota", "backlog", "snapshot")
_LEVELS = ("INFO", "INFO", "INFO", "WARN", "DEBUG", "ERROR")
_COMPONENTS = ("scheduler", "ingest", "billing", "search", "notifier", "exporter", "auth", "gateway")


def filler_number(rng: random.Random) -> int:
    """A number in filler text: five or six digits (four-digit numbers belong to planted facts)."""
    return rng.randint(10_000, 999_999)


def sentence(rng: random.Random, clauses: int = 1) -> str:
    parts = [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"]
    for _ in range(clauses - 1):
        parts.append(f"{rng.choice(('and', 'but', 'while', 'because', 'so'))} {rng.choice(_SUBJECTS)} "
                     f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)}")
    if rng.random() < 0.5:
        parts.append(rng.choice(_TAILS))
    text = " ".join(parts)
    if rng.random() < 0.25:
        text = f"{rng.choice(_OPENERS)} {text}"
    return text[0].upper() + text[1:] + "."


def paragraph(rng: random.Random, tokens: int) -> str:
    """Sentences adding up to about ``tokens`` tokens (about 10 tokens per clause)."""
    out: list[str] = []
    size = 0
    while size < max(1, tokens):
        clauses = rng.choice((1, 1, 2, 3))
        out.append(sentence(rng, clauses))
        size += 10 * clauses
    return " ".join(out)


def question(rng: random.Random) -> str:
    return rng.choice(_QUESTIONS)


def short_reply(rng: random.Random) -> str:
    return rng.choice(_SHORT)


def code_listing(rng: random.Random, lines: int) -> str:
    body = [f"def handle_{rng.choice(_IDENTS)}({rng.choice(_IDENTS)}, {rng.choice(_IDENTS)}):"]
    while len(body) < max(2, lines):
        name, other = rng.choice(_IDENTS), rng.choice(_IDENTS)
        body.append(rng.choice((
            f"    {name} = {other}.get('{rng.choice(_IDENTS)}', {rng.randint(10, 99)})",
            f"    if {name} > {other}:",
            f"        {name} -= {rng.randint(10, 99)}",
            f"    for item in {other}:",
            f"        {name}.append(item * {rng.randint(10, 99)})",
            f"    log.debug('{name} %s', {other})",
            f"    return {name}",
        )))
    return "\n".join(body)


def _log_lines(rng: random.Random, lines: int) -> list[str]:
    out = []
    second = rng.randint(0, 50_000)
    for _ in range(lines):
        second += rng.randint(1, 40)
        out.append(f"t+{second}s {rng.choice(_LEVELS)} {rng.choice(_COMPONENTS)}: {rng.choice(_SUBJECTS)} "
                   f"{rng.choice(_VERBS)} {rng.choice(_OBJECTS)} id={filler_number(rng)}")
    return out


def document(rng: random.Random, tokens: int) -> str:
    """A pasted document of about ``tokens`` tokens: notes, a design text, a log excerpt, a table or code."""
    kind = rng.choice(("notes", "design", "log", "table", "code"))
    if kind == "log":
        return "\n".join(_log_lines(rng, max(3, tokens // 22)))
    if kind == "table":
        rows = ["component,requests,errors,p95_ms,owner_team"]
        rows += [f"{rng.choice(_COMPONENTS)},{filler_number(rng)},{rng.randint(10, 999)},{rng.randint(10, 999)},"
                 f"{rng.choice(_IDENTS)}" for _ in range(max(3, tokens // 14))]
        return "\n".join(rows)
    if kind == "code":
        return code_listing(rng, max(4, tokens // 9))
    sections: list[str] = []
    size = 0
    number = 1
    while size < tokens:
        heading = f"## {number}. {rng.choice(_SUBJECTS).capitalize()}"
        chunk = rng.randint(60, 220)
        body = paragraph(rng, chunk)
        if kind == "notes":
            body = "\n".join(f"- {sentence(rng)}" for _ in range(max(2, chunk // 16)))
        sections.append(f"{heading}\n\n{body}")
        size += chunk + 6
        number += 1
    return "\n\n".join(sections)


def tool_result(rng: random.Random, tool: str, tokens: int) -> str:
    """What a tool returned, about ``tokens`` tokens: JSON records, a log excerpt, search hits or file text."""
    if tool in ("query_orders", "list_tickets", "fetch_metrics"):
        rows = [{"id": filler_number(rng), "status": rng.choice(("open", "closed", "pending", "failed")),
                 "component": rng.choice(_COMPONENTS), "score": round(rng.uniform(10, 99), 2),
                 "note": sentence(rng)} for _ in range(max(1, tokens // 42))]
        return json.dumps({"rows": rows, "total": len(rows), "page": 1})
    if tool == "tail_logs":
        return "\n".join(_log_lines(rng, max(2, tokens // 22)))
    if tool == "web_search":
        hits = [{"title": sentence(rng).rstrip("."), "url": f"https://example.org/{rng.choice(_IDENTS)}/"
                 f"{filler_number(rng)}", "snippet": paragraph(rng, 40)} for _ in range(max(1, tokens // 70))]
        return json.dumps({"results": hits})
    return document(rng, tokens)
