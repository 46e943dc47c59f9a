"""What a sentence says, for the offline model: whether it asks to be remembered, states a fact about the user or
their world, a preference, an intention, a date, a number or a version; and so which priority mark it earns.

The offline Observer marks its lines with it, and the offline Reflector ranks the lines of any log with it (a log
may have been written by a real model). Patterns are compiled once and matched against lower-cased text; nothing
here knows a particular conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

__all__ = [
    "HIGH",
    "LOW",
    "MINOR",
    "Mark",
    "Sentence",
    "confirms_success",
    "read_sentence",
    "sentences",
    "states_personal_fact",
]

Mark = Literal["🔴", "🟡", "🟢"]
HIGH: Mark = "🔴"
LOW: Mark = "🟡"
MINOR: Mark = "🟢"

_SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9…])|\n+")
_BULLET = re.compile(r"^\s*(?:[-*•]|\d{1,2}[.)])\s+")

# a sentence that asks the assistant to keep something (not a question about what it kept: see ``read_sentence``)
_REMEMBER = re.compile(
    r"\b(?:remember|keep (?:that|this|it|these|those) in mind|keep in mind|bear (?:that |this |it )?in mind|"
    r"don'?t forget|do not forget|never forget|make a note|take (?:a )?note|note (?:that|this|down|it)|"
    r"for (?:future reference|later)|memori[sz]e|remind me (?:to|that|on|at|about|every|before|when))\b")
# a knowledge update: what the user says replaces something said before
_UPDATE = re.compile(
    r"\b(?:change of plans?|(?:changed|moved|switched|upgraded|downgraded|migrated|went|changing|moving|switching) "
    r"(?:\w+ ){0,3}?from\b|(?:changed|switched|moved) to|no longer|not any ?more|"
    r"left the (?:company|team|job)|(?:my|our) new (?:\w+ ){0,2}(?:is|are|will)|instead of|replaced|"
    r"(?:is|are) now\b|now (?:live|work|use|run|prefer|own)s?\b|from now on|correction|actually,)")
_PREFERENCE = re.compile(
    r"\b(?:i|we) (?:really |usually |always |generally |mostly |much )?(?:prefer|like|love|enjoy|hate|dislike|"
    r"avoid|would rather|can'?t stand|don'?t like|do not like)\b|\b(?:i|we)'d (?:rather|prefer|like)\b|"
    r"\bprefer(?:s|red|ence|ably)?\b|\bfavou?rite\b|\brather than\b|\binstead of\b|"
    r"\bwants? (?:the|a|an|it|them|our|my|his|her|their|more|less|only|no|every)\b|"
    r"\bplease (?:always|never|use|keep|write|answer|reply|avoid|don'?t|do not|stick)\b|"
    r"\b(?:always|never|only) (?:use|write|answer|reply|suggest|recommend|give|send|include|mention|show)\b|"
    r"\b(?:vegetarian|vegan|allergic|allergy|intolerant|gluten|kosher|halal)\b")
_PERSONAL = re.compile(
    r"\b(?:my name|call me|i am|i'm|im|i was|i've been|i have|i've got|i live|i lived|i work|i worked|i run|"
    r"i lead|i manage|i own|i moved|i grew up|i studied|i teach|i use|i used|we run|we use|we used|we have|"
    r"we're|we are|we've|we own|we moved|we switched|we migrated|we already|i already|we still|i still|"
    r"we no longer|i no longer|we don'?t|i don'?t|we never|i never)\b|"
    r"\b(?:my|our) (?:\w+(?:'s)? ){0,3}(?:is|are|was|were|has|have|had|lives|works|runs|uses|wants|likes|loves|"
    r"changes|starts|ends|moved|called|named|doesn'?t|does not|won'?t)\b|"
    r"\b(?:birthday|anniversary|wedding|pregnant|married|divorced|retired|graduated|my (?:wife|husband|partner|"
    r"son|daughter|kids?|children|mother|father|mom|dad|sister|brother|friend|manager|boss|team|company))\b|"
    # the third person a model's observation lines use: "User is allergic to …", "User's daughter …"
    r"\buser(?:'s| is| was| has| had| lives| lived| works| worked| prefers| likes| loves| wants| owns| runs| uses| "
    r"needs| moved| switched| already| no longer| never| always)\b")
_INTENT = re.compile(
    r"\b(?:i|we) (?:will|shall|am going to|are going to|plan to|planned to|intend to|have to|must|need to|"
    r"want to|hope to|expect to|decided to)\b|\b(?:i|we)'ll\b|\blet'?s (?:start|launch|ship|move|plan|meet|"
    r"schedule|begin|switch|migrate|use|go with|keep)\b|\bdeadline\b|\bdue (?:on|by|date)\b|\bscheduled\b|"
    r"\blaunch(?:es|ing)? (?:on|in|by)\b")
_DATE_DIGITS = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}(?:/\d{2,4})?\b|\b\d{1,2}:\d{2}\b|\b\d{1,2} ?(?:am|pm)\b")
_DATE_PERIOD = re.compile(r"\b(?:next|last|this|every|each) (?:week|month|year|day|morning|evening|night)\b")
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_DATE_MONTH = re.compile(rf"\b{_MONTH}\.? \d{{1,2}}\b|\b\d{{1,2}}(?:st|nd|rd|th)? (?:of )?{_MONTH}\b|\bin {_MONTH}\b")
_INSTRUCTION = re.compile(
    r"^(?:(?:yes|ok|okay|and|also|so|then|from now on|going forward|in future|in the future)[, ]+)*"
    r"(?:always|never|keep|avoid|stop|quote|stick to|make sure|only use|use only|"
    r"(?:don'?t|do not) (?:use|write|answer|reply|suggest|send|include|mention|give|call|add|translate))\b")
# a capitalised word inside a sentence (not its first word, not after a colon): a name, a place, a product
_NAMED = re.compile(r"(?<=[a-z0-9,;)] )[A-Z][A-Za-z0-9]+")
_NUMBER = re.compile(r"\d")
_TOKEN = re.compile(r"[a-z0-9']+")
# a request to remember phrased as a question ("Can you remember that …?"), unlike "Do you remember …?"
_ASKS_TO_NOTE = re.compile(
    r"^(?:can|could|would|will) you (?:please )?(?:remember|note|keep|make a note|memori[sz]e)\b")
# the words each pattern needs, at least one of them: a sentence without any is not searched
_FIRST_PERSON_WORDS = frozenset(
    ["i", "i'm", "im", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "we", "we're", "we've", "we'd", "we'll",
     "our", "ours", "us"])
_REMEMBER_WORDS = frozenset(["remember", "mind", "forget", "note", "memorize", "memorise", "reference", "remind",
                            "later"])
_UPDATE_WORDS = frozenset(["change", "changed", "moved", "switched", "upgraded", "downgraded", "migrated", "went",
                           "changing", "moving", "switching", "longer", "more", "anymore", "left", "new", "instead",
                           "replaced", "now", "correction", "actually"])
_PREFERENCE_WORDS = frozenset(
    ["prefer", "prefers", "preferred", "preference", "preferably", "like", "love", "enjoy", "hate", "dislike", "avoid",
     "rather", "stand", "favorite", "favourite", "instead", "want", "wants", "please", "always", "never", "only",
     "vegetarian", "vegan", "allergic", "allergy", "intolerant", "gluten", "kosher", "halal", "i'd", "we'd"])
_PERSONAL_WORDS = _FIRST_PERSON_WORDS | frozenset(
    ["birthday", "anniversary", "wedding", "pregnant", "married", "divorced", "retired", "graduated", "user",
     "user's"])
_INTENT_WORDS = frozenset(["i", "we", "i'll", "we'll", "let's", "lets", "deadline", "due", "scheduled", "launch",
                           "launches", "launching"])
_DAY_WORDS = frozenset(  # each of these names a day by itself
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "mondays", "tuesdays",
     "wednesdays", "thursdays", "fridays", "saturdays", "sundays", "tomorrow", "tonight", "yesterday", "weekend",
     "weekends"])
_PERIOD_WORDS = frozenset(["week", "month", "year", "day", "morning", "evening", "night"])
_MONTH_WORDS = frozenset(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november",
     "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"])
_VERSION = re.compile(r"\b(?:v|version |release )?\d+\.\d+(?:\.\d+)*\b")
_QUESTION_START = re.compile(
    r"^(?:what|how|why|when|where|which|who|whom|whose|is|are|was|were|do|does|did|can|could|would|should|will|"
    r"shall|may(?! \d)|might|have|has|had|am)\b")
_REQUEST_START = re.compile(
    r"^(?:please|pls|kindly|can you|could you|would you|will you|let'?s|let us|help|draft|write|search|find|look|"
    r"check|show|list|explain|summari[sz]e|give|tell|make|create|add|fix|compute|calculate|estimate|compare|"
    r"suggest|recommend|plan|prepare|review|translate|send|book|schedule|remind|set|update|delete|remove|run|"
    r"generate|build|design|describe|outline|rewrite|edit|sketch|propose)\b")
_FILLER = re.compile(
    r"^(?:ok(?:ay)?|k|nice|great|good|cool|perfect|sure|yes|yeah|yep|no|nope|thanks?(?: you)?(?: so much)?|"
    r"thx|got it|sounds good|awesome|alright|all right|fine|hi|hello|hey|hi there|good morning|good evening|"
    r"right|indeed|wow|lol|hmm+|ah|oh|understood|noted|excellent|amazing|super|of course|just so you know|"
    r"makes sense|agreed|go on|let me think|fair enough)"
    r"(?:[ ,]+(?:thanks|thank you|then|so|there|again))?[\s.!,:;)-]*$")
_CONFIRMED = re.compile(
    r"\b(?:(?:that|it|this) (?:worked|works|fixed it|did it|did the trick|solved it)|works (?:now|perfectly|great)|"
    r"(?:problem|issue) (?:is )?(?:solved|fixed|resolved|gone)|all set|that'?s (?:fixed|done|solved))\b")


@dataclass(frozen=True)
class Sentence:
    """One sentence (or list item) of a message and what it says."""

    text: str
    question: bool
    request: bool
    remember: bool
    preference: bool
    personal: bool
    intent: bool
    date: bool
    number: bool
    version: bool
    first_person: bool
    filler: bool
    instruction: bool = False
    named: bool = False
    update: bool = False

    @property
    def mark(self) -> Mark:
        """🔴 for what must not be lost: a request to remember, a preference or standing instruction, a fact about
        the user or their world (first-person, or naming someone or something), an intention with a date or a
        number, a first-person statement with a date, number or version. 🟡 for questions and the rest."""
        if self.filler:
            return MINOR
        if self.remember or self.preference or self.instruction or self.update:
            return HIGH
        if self.question:
            return LOW  # a question is not a fact and does not tell its answer
        if self.personal or (self.intent and (self.date or self.number)) \
                or (self.first_person and (self.date or self.number or self.version)) \
                or (self.named and not self.request):
            return HIGH
        return LOW

    @property
    def durable(self) -> bool:
        """Still true later: a preference, a standing instruction, a fact about the user and their world (in the
        first person, with a date, a number or a version), a plan or a deadline with its date."""
        return not self.question and (self.preference or self.instruction or self.personal or self.remember
                                      or self.update or (self.intent and self.date)
                                      or (self.first_person and (self.date or self.number or self.version)))

    @property
    def weight(self) -> int:
        """How much the sentence is worth keeping when a long message is cut down."""
        if self.filler:
            return 0
        return (6 * (self.remember or self.update) + 4 * (self.preference or self.instruction) + 4 * self.personal
                + 3 * self.intent + 3 * self.date + 2 * self.version + 2 * self.number + self.named
                + (not self.question and self.first_person) + 1)


def sentences(text: str) -> list[str]:
    """The sentences and list items of ``text``, whitespace collapsed, bullets removed."""
    out: list[str] = []
    for piece in _SENTENCE_END.split(text):
        flat = " ".join(_BULLET.sub("", piece).split())
        if flat:
            out.append(flat)
    return out


def _words(lowered: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(lowered))


def _found(pattern: re.Pattern[str], text: str, words: frozenset[str], triggers: frozenset[str]) -> bool:
    """A pattern is searched only when one of the words it needs is there: most sentences need no search."""
    return not words.isdisjoint(triggers) and pattern.search(text) is not None


def _names_date(lowered: str, words: frozenset[str], digits: bool) -> bool:
    return (not words.isdisjoint(_DAY_WORDS)
            or (digits and _DATE_DIGITS.search(lowered) is not None)
            or (not words.isdisjoint(_PERIOD_WORDS) and _DATE_PERIOD.search(lowered) is not None)
            or (not words.isdisjoint(_MONTH_WORDS) and _DATE_MONTH.search(lowered) is not None))


@lru_cache(maxsize=16_384)
def read_sentence(text: str) -> Sentence:
    """Memoised: the Reflector reads the same observation lines at every generation."""
    lowered = text.lower()
    words = _words(lowered)
    end = text.rstrip()[-1:]
    question = end == "?" or (end not in (".", "!") and _QUESTION_START.match(lowered) is not None)
    digits = _NUMBER.search(text) is not None
    return Sentence(
        text=text, question=question, request=_REQUEST_START.match(lowered) is not None,
        remember=_found(_REMEMBER, lowered, words, _REMEMBER_WORDS) and (
            not question or _QUESTION_START.match(lowered) is None or _ASKS_TO_NOTE.match(lowered) is not None),
        preference=_found(_PREFERENCE, lowered, words, _PREFERENCE_WORDS),
        personal=_found(_PERSONAL, lowered, words, _PERSONAL_WORDS),
        intent=_found(_INTENT, lowered, words, _INTENT_WORDS),
        date=_names_date(lowered, words, digits),
        number=digits, version=digits and "." in text and _VERSION.search(lowered) is not None,
        first_person=not words.isdisjoint(_FIRST_PERSON_WORDS), filler=_FILLER.match(lowered) is not None,
        instruction=_INSTRUCTION.match(lowered) is not None,
        named=text[1:] != text[1:].lower() and _NAMED.search(text) is not None,
        update=not question and _found(_UPDATE, lowered, words, _UPDATE_WORDS))


def confirms_success(text: str) -> bool:
    """The user says that what the assistant proposed worked."""
    return bool(_CONFIRMED.search(text.lower()))


def states_personal_fact(text: str) -> bool:
    """High priority: some sentence of ``text`` states a fact about the user or their world, a preference or a
    standing instruction, an intention with a date or a number, or asks the assistant to remember something."""
    return any(read_sentence(s).mark == HIGH for s in sentences(text))
