"""The offline Reflector: an observation log condensed to the size its compression level asks for, keeping what
matters, in the Observer's format (so the Reflector's parser reads it like a real model's answer).

* **The level's budget** (:func:`level_budget`): under the task's target (the prompt's "must be under N tokens"),
  and at most a share of the input that shrinks at each level of the ladder (level 0: 75 %, 1: 60 %, 2: 45 %,
  3: 30 %, 4: 20 %), not below a small floor, and always smaller than the input. Tokens are counted with the
  counter the model is given (the project's). The levels' "keep 8/10 … 2/10 of the detail" is about facts, which
  survive much longer than words: details and older minor lines go first.
* **Reading**: the log is a list of entries (a top-level line and the detail lines indented under it) in
  conversation sections (``<thread id>`` in resource scope) and days. Out comes one ``Date:`` header per day and
  section; entries that say the same thing are merged into the newest, with the highest mark; from level 1 a fact
  that a later correction replaces ("moved from X to Y") ranks as ordinary detail.
* **Ranks**, lowest first: folded summaries, 🟢, 🟡 and unmarked lines, bracketed notes, 🔴 and ✅, the 🔴 lines
  that stay true (the user's preferences, standing instructions, facts about themselves), and above all what the
  user asked to keep: requests to remember, and corrections of something said before.
* **The level's form**: older entries (all but the newest share) lose their details from level 1 and long lines
  are cut down, low-priority ones first; from level 2 older 🔴 lines keep only their high-priority sentences
  ("We run Cassandra 4.1. Is that a problem?" keeps the first) and repeated calls of one tool become one line; at
  levels 3 and 4 they are also written telegraphically, and a day's older low-priority entries fold into one
  "also discussed" line naming their topics.
* **Fitting**: until the budget holds, details go (low rank first, oldest first), then low-priority entries
  (oldest first, the newest few last), then 🔴/✅ lines are cut to their high-priority sentences, written
  telegraphically (articles and fillers out, every name, number and date kept) and dropped, passing facts before
  lasting ones and oldest first; what the user asked to keep goes last, and the last entry standing is cut rather
  than dropped. Before any 🔴 line goes, a request to remember loses what came with it: its other sentences, and
  text pasted after it that the line runs on without a capital ("… my locker code is 7555. component,requests,…",
  a table that was on lines of its own), which would otherwise outlive every other request.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from om_stream.adapters.offline_observer import cut
from om_stream.adapters.offline_signals import HIGH, MINOR, read_sentence, sentences
from om_stream.core.prompts.tasks import ReflectorTask

__all__ = ["LEVEL_SHARES", "MIN_BUDGET", "level_budget", "reflect"]

CountText = Callable[[str], int]

LEVEL_SHARES = (0.75, 0.6, 0.45, 0.3, 0.2)
MIN_BUDGET = 200  # a reflection this small still holds the facts of a short conversation, whatever the share says
_RECENT_SHARES = (1.0, 0.5, 0.4, 0.35, 0.25)  # the newest entries, kept in more detail
# characters a line keeps at each level: (older low rank, recent low rank, older high rank, recent high rank)
_LINE_CHARS: tuple[tuple[int | None, int | None, int | None, int | None], ...] = (
    (None, None, None, None), (200, None, None, None), (140, 240, 240, None), (120, 160, 200, None),
    (100, 120, 160, 240))
RECENT_PROTECTED = 0.15  # share of the budget for the newest entries, whatever their rank
_FOLD, _MINOR, _PLAIN, _NOTE, _HIGH, _DURABLE, _REMEMBER = range(7)
_HIGH_RANKS = (_HIGH, _DURABLE)

_HEADER = re.compile(r"^Date:\s*(.+?)\s*$")
_HEADER_DAY = re.compile(r"([A-Za-z]{3,9})\.?\s+(\d{1,2}),?\s+(\d{4})")
_THREAD_OPEN = re.compile(r"^<thread\b[^>]*>$")
_GROUP_TAG = re.compile(r"^</?observation-group\b[^>]*>$")
_PREFIX = re.compile(r"^(?:[-*•]\s+)?(?:[🔴🟡🟢✅]\s*)*(?:\((\d{1,2}:\d{2})\)\s*)?")
_TELEGRAPH_DROP = frozenset(
    ["the", "a", "an", "is", "are", "was", "were", "be", "been", "being", "am", "that", "which", "who", "so",
     "very", "really", "just", "also", "then", "there", "it", "its", "this", "these", "those", "and", "way",
     "quite", "actually", "basically", "currently", "please", "some", "any"])
_FROM_TO = re.compile(r"\bfrom ([A-Z0-9][\w.,:-]*(?: [A-Z0-9][\w.,:-]*)?) to\b")
_GONE = re.compile(r"\b([A-Z][a-z]+(?: [A-Z][a-z]+)?) (?:left|quit|has left|no longer)\b")
_SAID = re.compile(r"^(User [a-z ]{2,40}?): (.+)$")
_TOOL = re.compile(r"^Assistant called ([\w.:-]+)")
_TRAILING_DATES = re.compile(r"(?:\s*\((?:meaning|estimated)[^()]*\))+$")
# a sentence end the splitter (``sentences``) passes over because the next word is not capitalised: text pasted
# after a request on lines of its own (a table, a log) is written on the request's line and reads as its sentence
_GLUED_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[^\sA-Z])")
_ABBREVIATION = re.compile(r"^(?:[a-z]\.)+[a-z]?\.?$|^(?:etc|vs|approx|incl|cf|ca)\.$", re.IGNORECASE)
_NORMAL = re.compile(r"[^0-9a-z]+")
_TOPIC = re.compile(r"[A-Za-z][A-Za-z0-9+#-]{2,}")
_STOP = frozenset(
    ["the", "and", "for", "are", "but", "not", "you", "your", "with", "this", "that", "these", "those", "from",
     "have", "has", "had", "was", "were", "will", "would", "could", "should", "can", "may", "might", "must", "shall",
     "been", "being", "into", "onto", "about", "above", "below", "over", "under", "again", "then", "than", "once",
     "here", "there", "when", "where", "why", "how", "all", "any", "both", "each", "few", "more", "most", "other",
     "some", "such", "only", "own", "same", "too", "very", "just", "also", "what", "which", "who", "whom", "whose",
     "its", "it's", "our", "ours", "their", "theirs", "they", "them", "his", "her", "him", "she", "he", "we", "us",
     "i'm", "i've", "i'd", "i'll", "we're", "we've", "let", "let's", "please", "thanks", "thank", "okay", "yes",
     "user", "assistant", "stated", "asked", "requested", "replied", "called", "returned", "discussed", "remember",
     "told", "said", "says", "like", "want", "need", "make", "made", "get", "got", "does", "did", "doing", "done",
     "one", "two", "three", "new", "now", "per", "via", "still", "already", "really", "much", "many", "lot", "lots",
     "thing", "things", "way", "wants", "item", "items"])


def level_budget(level: int, target_tokens: int, input_tokens: int) -> int:
    """The most tokens a reflection at ``level`` may have: under ``target_tokens``, at most the level's share of
    ``input_tokens`` (not below ``MIN_BUDGET``), and under ``input_tokens``."""
    share = LEVEL_SHARES[min(max(level, 0), len(LEVEL_SHARES) - 1)]
    wanted = max(MIN_BUDGET, math.ceil(share * input_tokens))
    return max(1, min(target_tokens - 1, wanted, input_tokens - 1))


@dataclass
class _Entry:
    position: int
    section: str | None
    day: str | None
    line: str
    details: list[str] = field(default_factory=list)
    rank: int = _PLAIN
    kept: bool = True

    @property
    def content(self) -> str:
        return self.line[_PREFIX.match(self.line).end():]  # type: ignore[union-attr]  # the pattern always matches

    @property
    def clock(self) -> str | None:
        return _PREFIX.match(self.line).group(1)  # type: ignore[union-attr]


def _day_key(text: str) -> str:
    found = _HEADER_DAY.search(text)
    if not found:
        return f"Date: {' '.join(text.split())}"
    return f"Date: {found.group(1)[:3].capitalize()} {int(found.group(2))}, {found.group(3)}"


def _rank(line: str, content: str) -> int:
    head = line[:16]
    if "🟢" in head:
        return _MINOR
    if content.startswith("[") or line.lstrip("*-• ").startswith("["):
        return _NOTE
    said = [read_sentence(s) for s in sentences(content)]
    if "user" in content[:48].lower() and any(u.remember or u.update for u in said):
        return _REMEMBER  # asked to keep, or a correction of something said before
    if "🔴" not in head and "✅" not in head:
        return _PLAIN
    return _DURABLE if any(u.durable for u in said) else _HIGH


def _read(log: str) -> list[_Entry]:
    entries: list[_Entry] = []
    section: str | None = None
    day: str | None = None
    for raw in log.splitlines():
        stripped = raw.strip()
        if not stripped or _GROUP_TAG.match(stripped):
            continue
        if _THREAD_OPEN.match(stripped):
            section, day = stripped, None
            continue
        if stripped == "</thread>":
            section, day = None, None
            continue
        header = _HEADER.match(stripped)
        if header:
            day = _day_key(header.group(1))
            continue
        last = entries[-1] if entries else None
        if raw[:1] in (" ", "\t") and last is not None and last.section == section and last.day == day:
            last.details.append(raw.rstrip())
            continue
        entry = _Entry(position=len(entries), section=section, day=day, line=stripped)
        entry.rank = _rank(stripped, entry.content)
        entries.append(entry)
    return entries


def _superseded_values(content: str) -> list[str]:
    found = [m.group(1) for m in _FROM_TO.finditer(content)]
    found += [m.group(1) for m in _GONE.finditer(content)]
    return [v.rstrip(".,;") for v in found if v.rstrip(".,;")]


def _drop_superseded(entries: list[_Entry]) -> None:
    """From level 1: a 🔴 line that a later correction replaces ("moved from Dublin to Marseille", "Ana left the
    company") falls to the rank of ordinary detail, so it goes before the facts that still hold."""
    for index, entry in enumerate(entries):
        if entry.rank != _REMEMBER:
            continue
        for value in _superseded_values(entry.content):
            pattern = re.compile(rf"(?<![\w.-]){re.escape(value)}(?![\w-]|\.\d)", re.IGNORECASE)
            for older in entries[:index]:
                if older.rank in _HIGH_RANKS and older.section == entry.section and pattern.search(older.content):
                    older.rank = _PLAIN


def _merge_duplicates(entries: list[_Entry]) -> list[_Entry]:
    """Entries saying the same thing (marks and times aside) become the newest of them, with the highest rank and
    every distinct detail."""
    newest: dict[tuple[str | None, str], _Entry] = {}
    for entry in entries:
        key = (entry.section, _NORMAL.sub(" ", entry.content.lower()).strip())
        earlier = newest.get(key)
        if earlier is not None and key[1]:
            earlier.kept = False
            entry.rank = max(entry.rank, earlier.rank)
            if entry.rank in _HIGH_RANKS and "🔴" not in entry.line[:16] and "✅" not in entry.line[:16]:
                entry.line = entry.line.replace("🟡", "🔴", 1).replace("🟢", "🔴", 1)
            entry.details = list(dict.fromkeys([*earlier.details, *entry.details]))
        newest[key] = entry
    return [e for e in entries if e.kept]


def _shorten(entry: _Entry, limit: int | None) -> None:
    if limit is None or len(entry.content) <= limit:
        return
    dates = _TRAILING_DATES.search(entry.content)
    tail = dates.group(0) if dates else ""
    body = entry.content[:len(entry.content) - len(tail)]
    prefix = entry.line[:len(entry.line) - len(entry.content)]
    entry.line = prefix + cut(body, max(20, limit - len(tail))) + tail


def _distil(entry: _Entry) -> bool:
    """A 🔴 line down to its high-priority sentences ("We run Cassandra 4.1. Is that a problem?" keeps the first);
    False when every sentence is worth keeping."""
    dates = _TRAILING_DATES.search(entry.content)
    tail = dates.group(0) if dates else ""
    body = entry.content[:len(entry.content) - len(tail)]
    said = _SAID.match(body)
    verb, body = (said.group(1), said.group(2)) if said else (None, body)
    units = [read_sentence(s) for s in sentences(body)]
    # a request to remember keeps what was asked (not the pasted text that came with it), else the 🔴 sentences
    asked = [u for u in units if u.remember or u.update] if entry.rank == _REMEMBER else []
    kept = asked or [u for u in units if u.mark == HIGH]
    if not kept or len(kept) == len(units):
        return False
    if verb is not None and "remember" not in verb and not kept[0].question:
        verb = "User stated"
    prefix = entry.line[:len(entry.line) - len(entry.content)]
    entry.line = prefix + (f"{verb}: " if verb else "") + " ".join(u.text for u in kept) + tail
    return True


def _glued_pieces(text: str) -> list[str]:
    """``text`` split where a sentence ends before an uncapitalised word ("… code is 7555. component,requests"),
    not after an abbreviation ("3 p.m. tomorrow", "e.g. the")."""
    pieces: list[str] = []
    start = 0
    for end in _GLUED_END.finditer(text):
        word = text[start:end.start()].rsplit(None, 1)[-1] if text[start:end.start()].strip() else ""
        if _ABBREVIATION.match(word.rstrip("\"')]")):
            continue
        pieces.append(text[start:end.start()])
        start = end.end()
    pieces.append(text[start:])
    return [p for p in pieces if p.strip()]


def _asked_only(entry: _Entry) -> bool:
    """A request to remember down to what was asked: its asked sentences, each without the text glued after it
    (``_glued_pieces``), which ``_distil`` cannot tell from the request. False when nothing follows the ask."""
    dates = _TRAILING_DATES.search(entry.content)
    tail = dates.group(0) if dates else ""
    body = entry.content[:len(entry.content) - len(tail)]
    said = _SAID.match(body)
    verb, body = (said.group(1), said.group(2)) if said else (None, body)
    units = sentences(body)
    asked = [u for u in units if read_sentence(u).remember or read_sentence(u).update] or units[:1]
    kept: list[str] = []
    for unit in asked:
        pieces = _glued_pieces(unit)
        cues = [i for i, piece in enumerate(pieces) if read_sentence(piece).remember or read_sentence(piece).update]
        kept.append(" ".join(pieces[:(cues[-1] if cues else 0) + 1]))
    shorter = " ".join(kept)
    if len(shorter) >= len(" ".join(units)):
        return False
    prefix = entry.line[:len(entry.line) - len(entry.content)]
    entry.line = prefix + (f"{verb}: " if verb else "") + shorter + tail
    return True


def _telegraph(entry: _Entry) -> bool:
    """A 🔴 line in telegraphic style: articles, auxiliaries and fillers out, every name, number, date and
    negation kept ("Our launch deadline is 2026-03-14 and I must present to the board" → "Our launch deadline
    2026-03-14 I must present to board"). False when there is nothing to leave out."""
    content = entry.content
    said = _SAID.match(content)
    verb, body = (said.group(1), said.group(2)) if said else (None, content)
    words = body.split()
    kept: list[str] = []
    for word in words:
        core = word.strip(".,;:!?()\"'").lower()
        if core in _TELEGRAPH_DROP and kept:
            tail = word[len(word.rstrip(".,;:!?")):]
            if tail and not kept[-1].endswith(tuple(".,;:!?")):
                kept[-1] += tail  # a dropped word keeps the sentence's punctuation
            continue
        kept.append(word)
    if len(kept) == len(words):
        return False
    prefix = entry.line[:len(entry.line) - len(content)]
    entry.line = prefix + (f"{verb}: " if verb else "") + " ".join(kept)
    return True


def _topics(entries: list[_Entry], limit: int = 6) -> list[str]:
    counts: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for entry in entries:
        for word in _TOPIC.findall(" ".join([entry.content, *entry.details])):
            lowered = word.lower()
            if lowered in _STOP:
                continue
            counts[lowered] += 1
            shown.setdefault(lowered, word)
    order = {w: i for i, w in enumerate(shown)}
    return [shown[w] for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], order[kv[0]]))[:limit]]


def _merge_tool_calls(entries: list[_Entry]) -> list[_Entry]:
    """From level 2: a run of calls to one tool (same section and day) becomes its newest call, with a count."""
    out: list[_Entry] = []
    run: list[_Entry] = []

    def flush() -> None:
        if len(run) > 1:
            newest = run[-1]
            newest.details = []
            newest.line += f" (and {len(run) - 1} earlier calls)"
            out.append(newest)
        else:
            out.extend(run)
        run.clear()

    for entry in entries:
        tool = _TOOL.match(entry.content) if entry.rank <= _PLAIN else None
        if tool and run and (_TOOL.match(run[-1].content).group(1),  # type: ignore[union-attr]
                             run[-1].section, run[-1].day) == (tool.group(1), entry.section, entry.day):
            run.append(entry)
            continue
        flush()
        if tool:
            run.append(entry)
        else:
            out.append(entry)
    flush()
    return out


def _fold(entries: list[_Entry], older: set[int]) -> list[_Entry]:
    """From level 3: each day's older low-priority entries become one line naming their topics."""
    groups: dict[tuple[str | None, str | None], list[_Entry]] = {}
    for entry in entries:
        if entry.position in older and entry.rank in (_MINOR, _PLAIN, _FOLD):
            groups.setdefault((entry.section, entry.day), []).append(entry)
    out = list(entries)
    for folded in groups.values():
        if len(folded) < 2:
            continue
        words = _topics(folded)
        if not words:
            continue
        first = folded[0]
        clock = next((e.clock for e in folded if e.clock), None)
        when = f" ({clock})" if clock else ""
        summary = _Entry(position=first.position, section=first.section, day=first.day,
                         line=f"* {MINOR}{when} Also discussed: {', '.join(words)}.", rank=_FOLD)
        if len(summary.line) >= sum(len(e.line) + sum(len(d) for d in e.details) for e in folded):
            continue  # a few short lines say it more cheaply themselves
        gone = {id(e) for e in folded}
        out = [summary if e is first else e for e in out if id(e) not in gone or e is first]
    return out


def _apply_form(entries: list[_Entry], level: int) -> list[_Entry]:
    level = min(max(level, 0), len(LEVEL_SHARES) - 1)
    if level >= 2:
        entries = _merge_tool_calls(entries)
    recent_from = len(entries) - math.ceil(len(entries) * _RECENT_SHARES[level])
    older = {e.position for e in entries[:recent_from]}
    if level >= 3:
        entries = _fold(entries, older)
    old_low, recent_low, old_high, recent_high = _LINE_CHARS[level]
    for entry in entries:
        is_old = entry.position in older
        if level >= 2 and is_old and entry.rank in (*_HIGH_RANKS, _REMEMBER):
            _distil(entry)
            if level >= 3:
                _telegraph(entry)
        if entry.rank in (_NOTE, _REMEMBER, _FOLD):
            pass
        elif entry.rank in _HIGH_RANKS:
            _shorten(entry, old_high if is_old else recent_high)
        else:
            _shorten(entry, old_low if is_old else recent_low)
        if level == 0 or (not is_old and level <= 2):
            continue
        keep_important = level <= 1 or (level == 3 and not is_old)
        entry.details = [d for d in entry.details if keep_important and ("✅" in d or "🔴" in d)]
    return entries


def _render(entries: list[_Entry]) -> str:
    sections: dict[str | None, dict[str | None, list[_Entry]]] = {}
    for entry in entries:
        if entry.kept:
            sections.setdefault(entry.section, {}).setdefault(entry.day, []).append(entry)
    lines: list[str] = []
    for section, days in sections.items():
        if section is not None:
            lines.append(section)
        for day, kept in days.items():
            if day is not None:
                lines.append(day)
            for entry in sorted(kept, key=lambda e: e.position):
                lines.append(entry.line)
                lines.extend(entry.details)
        if section is not None:
            lines.append("</thread>")
    return "\n".join(lines)


class _Fit:
    """The entries and an estimate of their rendered size (a sum of line counts, which the joined text does not
    exceed with a BPE or a characters-based counter), shrunk step by step."""

    def __init__(self, entries: list[_Entry], count: CountText) -> None:
        self.entries = entries
        self._count = count
        self._groups: Counter[tuple[str | None, str | None]] = Counter((e.section, e.day) for e in entries)
        self._sections: Counter[str | None] = Counter(e.section for e in entries)
        self.left = len(entries)
        self.total = sum(self.entry_cost(e) for e in entries)
        self.total += sum(self.cost(day) for _, day in self._groups if day is not None)
        self.total += sum(self.cost(s) + self.cost("</thread>") for s in self._sections if s is not None)

    def cost(self, line: str) -> int:
        return self._count(line) + 1

    def entry_cost(self, entry: _Entry) -> int:
        return self.cost(entry.line) + sum(self.cost(d) for d in entry.details)

    def drop_details(self, entry: _Entry, important: bool) -> bool:
        keep = [] if important else [d for d in entry.details if "✅" in d or "🔴" in d]
        if len(keep) == len(entry.details):
            return False
        self.total -= sum(self.cost(d) for d in entry.details) - sum(self.cost(d) for d in keep)
        entry.details = keep
        return True

    def rewrite(self, entry: _Entry, how: Callable[[_Entry], bool]) -> bool:
        """Rewrite a kept entry's line in place with ``how`` (``_distil``, ``_telegraph``)."""
        if not entry.kept:
            return False
        before = self.cost(entry.line)
        if not how(entry):
            return False
        self.total -= before - self.cost(entry.line)
        return True

    def drop(self, entry: _Entry) -> bool:
        if not entry.kept or self.left <= 1:
            return False  # the last entry standing is cut, not dropped
        entry.kept = False
        self.left -= 1
        self.total -= self.entry_cost(entry)
        group = (entry.section, entry.day)
        self._groups[group] -= 1
        if self._groups[group] == 0 and entry.day is not None:
            self.total -= self.cost(entry.day)
        self._sections[entry.section] -= 1
        if self._sections[entry.section] == 0 and entry.section is not None:
            self.total -= self.cost(entry.section) + self.cost("</thread>")
        return True


def _protected(entries: list[_Entry], budget: int, fit: _Fit) -> set[int]:
    """The newest entries worth ``RECENT_PROTECTED`` of the budget: low-priority ones among them outlive older
    🔴 lines being dropped, so the memory still says what was being discussed last."""
    kept: set[int] = set()
    spent = 0
    for entry in reversed(entries):
        spent += fit.entry_cost(entry)
        if spent > budget * RECENT_PROTECTED:
            break
        kept.add(entry.position)
    return kept


def _steps(fit: _Fit, budget: int) -> Iterator[bool]:
    """The reductions, least valuable first; each yields whether it changed something."""
    by_value = sorted(fit.entries, key=lambda e: (e.rank, e.position))
    protected = _protected(fit.entries, budget, fit)
    for important in (False, True):
        for entry in by_value:
            yield fit.drop_details(entry, important)
    for entry in by_value:
        if entry.rank <= _NOTE and entry.position not in protected:
            yield fit.drop(entry)
    high = [e for e in by_value if e.rank in _HIGH_RANKS]
    remember = [e for e in by_value if e.rank == _REMEMBER]
    for entry in [*high, *remember]:
        yield fit.rewrite(entry, _distil)
    for entry in remember:
        yield fit.rewrite(entry, _asked_only)
    for entry in by_value:
        if entry.rank <= _NOTE:
            yield fit.drop(entry)
    for entry in high:
        yield fit.rewrite(entry, _telegraph)
    for entry in high:
        yield fit.drop(entry)
    for entry in remember:
        yield fit.rewrite(entry, _telegraph)
    for entry in remember:
        yield fit.drop(entry)


def _shrink(fit: _Fit, steps: Iterator[bool], fits: Callable[[], bool]) -> bool:
    """Take reductions until ``fits()``; False when none is left."""
    while not fits():
        for changed in steps:
            if changed:
                break
        else:
            return False
    return True


def _cut_to(text: str, budget: int, count: CountText) -> str:
    """The longest prefix of ``text`` within ``budget`` tokens, ended with an ellipsis; without one when even a
    single character and the ellipsis are too many (never empty)."""
    mark = "…" if count(text[:1] + "…") <= budget else ""
    low, high = 1, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if count(text[:middle].rstrip() + mark) <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low].rstrip() + mark


def condense(observations: str, level: int, budget: int, count: CountText) -> str:
    """``observations`` in the form of ``level``, made to fit ``budget`` tokens as the module describes."""
    entries = _merge_duplicates(_read(observations))
    if level >= 1:
        _drop_superseded(entries)
    entries = _apply_form(entries, level)
    if not entries:
        return _cut_to(observations.strip(), budget, count) if observations.strip() else ""
    fit = _Fit(entries, count)
    steps = _steps(fit, budget)
    _shrink(fit, steps, lambda: fit.total <= budget)  # by the estimate first: cheap
    rendered = [_render(fit.entries)]

    def fits() -> bool:
        rendered[0] = _render(fit.entries)
        return count(rendered[0]) <= budget

    if not _shrink(fit, steps, fits):
        return _cut_to(rendered[0], budget, count)
    return rendered[0]


def reflect(task: ReflectorTask, count: CountText) -> str:
    """The Reflector's answer to ``task``: the condensed log in an ``<observations>`` block."""
    log = task.observations.strip()
    tokens = count(log)
    budget = level_budget(task.level, task.target_tokens, tokens)
    body = condense(log, task.level, budget, count) if tokens > 1 else log
    return f"<observations>\n{body}\n</observations>"
