"""Facts a conversation shape plants in the user's messages, and how to tell that a context still holds one.

A planted fact is a sentence the user says (a request to remember something, a personal detail, a number, a
version, a date, a preference, or a knowledge update that replaces an earlier fact) and its *needles*: the exact
words any faithful record of it keeps (a name, a city, ``18,500``, ``4.1``, ``2027-05-19``). A fact is retained by
a context when every needle appears in it, as a whole token (``4.1`` is not found in ``14.12``), case-insensitive.
The values are drawn so that no two facts of a conversation share one, and the filler text
(``om_stream.replay.prose``) never writes such values.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

__all__ = ["FACT_KINDS", "FactDraw", "FactKind", "PlantedFact", "Statement", "mentions"]

FactKind = Literal["remember", "personal", "number", "version", "date", "preference", "update"]
FACT_KINDS: tuple[FactKind, ...] = ("remember", "personal", "number", "version", "date", "preference")


@dataclass(frozen=True)
class Statement:
    text: str
    needles: tuple[str, ...]


@dataclass(frozen=True)
class PlantedFact:
    """A fact the user stated at ``turn``. ``superseded_at``: the turn of the knowledge update that replaced it
    (the update is a fact of its own, of kind ``update``)."""

    turn: int
    kind: FactKind
    statement: str
    needles: tuple[str, ...]
    superseded_at: int | None = None

    @property
    def asked_to_keep(self) -> bool:
        """The user asked to remember it, or corrected an earlier fact with it: forgetting it is a defect any
        user notices."""
        return self.kind in ("remember", "update")

    @property
    def current(self) -> bool:
        return self.superseded_at is None

    def found_in(self, text: str) -> bool:
        return all(mentions(text, needle) for needle in self.needles)


@lru_cache(maxsize=4096)
def _needle_pattern(needle: str) -> re.Pattern[str]:
    words = r"\s+".join(re.escape(word) for word in needle.split())
    # a whole token: no letter or digit around it, and not one piece of a longer number (4.1 in 4.1.2 or 14.1)
    return re.compile(rf"(?<![\w])(?<!\d[.:,/-]){words}(?![\w])(?![.:,/-]\d)", re.IGNORECASE)


def mentions(text: str, needle: str) -> bool:
    return _needle_pattern(needle).search(text) is not None


_FIRST = ("Ingrid", "Tomasz", "Amara", "Kenji", "Lucia", "Oskar", "Priya", "Mateus", "Yara", "Henrik", "Dmitri",
          "Nadia", "Rafael", "Elena", "Kwame", "Sigrid", "Farah", "Bruno", "Leilani", "Aurelio")
_LAST = ("Okafor", "Lindqvist", "Moreau", "Takahashi", "Brandt", "Castillo", "Novak", "Haddad", "Petrov", "Silva",
         "Oyelaran", "Van der Berg", "Ishikawa", "Fonseca", "Kowalczyk")
_CITIES = ("Lisbon", "Berlin", "Osaka", "Nairobi", "Montreal", "Krakow", "Valencia", "Tallinn", "Porto", "Dublin",
           "Seoul", "Lyon", "Reykjavik", "Cordoba", "Auckland", "Gdansk", "Marseille", "Quito")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
_PRODUCTS = ("Cassandra", "PostgreSQL", "Kafka", "Redis", "Elasticsearch", "Nginx", "Kubernetes", "Spark",
             "Terraform", "RabbitMQ", "ClickHouse", "MariaDB")
_JOBS = ("data engineer", "paediatric nurse", "structural engineer", "product designer", "history teacher",
         "sound technician", "veterinary surgeon", "tax adviser")
_PREFERENCES = (("tabs", "spaces"), ("green tea", "coffee"), ("aisle seats", "window seats"),
                ("metric units", "imperial units"), ("dark mode", "light mode"), ("morning meetings", "late calls"),
                ("short emails", "long memos"), ("trains", "short flights"), ("paper notebooks", "note apps"))
_LANGUAGES = ("Portuguese", "German", "Japanese", "Spanish", "Swedish", "Italian")
_PETS = ("Biscuit", "Juniper", "Miso", "Pepperoni", "Tofu", "Marzipan")
_HOSTS = ("amber-heron", "quiet-lynx", "copper-finch", "misty-otter", "brave-walrus", "silent-crane")


class FactDraw:
    """Draws fact statements for one conversation; a value (name, city, number, ...) is never used twice."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self._used: set[str] = set()
        self._subjects: set[object] = set()

    def _one(self, pool: Sequence[str]) -> str:
        free = [v for v in pool if v not in self._used]
        value = self.rng.choice(free) if free else f"{self.rng.choice(pool)}-{len(self._used)}"
        self._used.add(value)
        return value

    def _fresh(self, make: Callable[[], str]) -> str:
        while True:
            value = make()
            if value not in self._used:
                self._used.add(value)
                return value

    def _day(self) -> str:
        return self._fresh(lambda: f"{self.rng.choice(_MONTHS)} {self.rng.randint(1, 28)}")

    def _iso(self) -> str:
        return self._fresh(lambda: f"{self.rng.randint(2027, 2029)}-{self.rng.randint(1, 12):02d}-"
                                   f"{self.rng.randint(1, 28):02d}")

    def _amount(self) -> str:
        return self._fresh(lambda: f"{self.rng.randint(11, 98)},{self.rng.randrange(0, 1000, 50):03d}")

    def _version(self) -> str:
        return self._fresh(lambda: f"{self.rng.randint(1, 9)}.{self.rng.randint(0, 19)}")

    def _digits(self, prefix: str = "") -> str:
        return self._fresh(lambda: f"{prefix}{self.rng.randint(1000, 9999)}")

    def statement(self, kind: FactKind) -> tuple[FactKind, Statement]:
        """A fact of ``kind`` about a subject not yet used in this conversation (a user has one name and one
        passport; several preferences or products are fine), or of another kind when ``kind`` has none left."""
        for candidate in (kind, *FACT_KINDS):
            free = [(say, once) for say, once in _SUBJECTS[candidate] if not (once and say in self._subjects)]
            if free:
                say, _once = self.rng.choice(free)
                self._subjects.add(say)
                return candidate, say(self)
        raise ValueError("no fact subject left")

    def update(self) -> tuple[FactKind, Statement, Statement] | None:
        """A fact (and its kind), and the later statement that replaces it: only the new value must be kept.
        None once every update subject is used."""
        free = [say for say in _UPDATES if say not in self._subjects]
        if not free:
            return None
        say = self.rng.choice(free)
        self._subjects.add(say)
        return say(self)

    # -- subjects (one method each; ``_SUBJECTS`` and ``_UPDATES`` list them) -----------------------------------

    def _on_call(self) -> Statement:
        day, city = self._one(_WEEKDAYS), self._one(_CITIES)
        clock = f"{self.rng.choice((7, 8, 9, 10, 16, 17)):02d}:{self.rng.choice((5, 10, 20, 40, 45, 50)):02d}"
        return Statement(f"Remember that our on-call rotation changes every {day} at {clock} {city} time.",
                         (day, clock, city))

    def _employee_number(self) -> Statement:
        code = self._digits("EMP-")
        return Statement(f"Please remember that my employee number is {code}.", (code,))

    def _cousin_arrives(self) -> Statement:
        name, day = self._one(_FIRST), self._day()
        return Statement(f"Don't forget that my cousin {name} lands on {day} and I'm picking them up.",
                         (name, day))

    def _staging_cluster(self) -> Statement:
        host = self._one(_HOSTS)
        return Statement(f"Keep in mind that the staging cluster is called {host}.", (host,))

    def _locker_code(self) -> Statement:
        code = self._digits()
        return Statement(f"Please note this for later: my locker code is {code}.", (code,))

    def _name_and_work(self) -> Statement:
        first, last, city, job = self._one(_FIRST), self._one(_LAST), self._one(_CITIES), self._one(_JOBS)
        return Statement(f"My name is {first} {last} and I work as a {job} in {city}.", (f"{first} {last}", city))

    def _pet(self) -> Statement:
        pet = self._one(_PETS)
        return Statement(f"We have a dog called {pet} who is afraid of thunder.", (pet,))

    def _cloud_budget(self) -> Statement:
        amount = self._amount()
        return Statement(f"Our monthly cloud budget is capped at {amount} euros.", (amount,))

    def _warehouse(self) -> Statement:
        amount, city = self._amount(), self._one(_CITIES)
        return Statement(f"The warehouse in {city} holds at most {amount} pallets.", (amount, city))

    def _commute(self) -> Statement:
        distance = self._fresh(lambda: f"{self.rng.randint(12, 95)} kilometres")
        return Statement(f"My commute is {distance} each way.", (distance,))

    def _production_version(self) -> Statement:
        product, version = self._one(_PRODUCTS), self._version()
        return Statement(f"We already run {product} {version} in production.", (product, version))

    def _app_version(self) -> Statement:
        version = self._fresh(lambda: f"{self.rng.randint(2, 9)}.{self.rng.randint(0, 20)}.{self.rng.randint(0, 9)}")
        return Statement(f"The mobile app we ship is on version {version}.", (version,))

    def _passport(self) -> Statement:
        day = self._iso()
        return Statement(f"My passport expires on {day}, so plan trips before then.", (day,))

    def _audit(self) -> Statement:
        day = self._day()
        return Statement(f"The external audit is scheduled for {day}.", (day,))

    def _lease(self) -> Statement:
        day = self._iso()
        return Statement(f"The lease on our office ends on {day}.", (day,))

    def _prefers(self) -> Statement:
        liked, other = self._pair()
        return Statement(f"I prefer {liked} over {other}.", (liked,))

    def _summary_language(self) -> Statement:
        language = self._one(_LANGUAGES)
        return Statement(f"I prefer summaries written in {language}, please.", (language,))

    def _pair(self) -> tuple[str, str]:
        free = [p for p in _PREFERENCES if p[0] not in self._used]
        liked, other = self.rng.choice(free or list(_PREFERENCES))
        self._used.add(liked)
        return liked, other

    def _launch_moves(self) -> tuple[FactKind, Statement, Statement]:
        before, after = self._day(), self._day()
        return ("date", Statement(f"Our product launch date is {before}.", (before,)),
                Statement(f"Change of plan: the launch moved from {before} to {after}.", (after,)))

    def _moves_home(self) -> tuple[FactKind, Statement, Statement]:
        before, after = self._one(_CITIES), self._one(_CITIES)
        return ("personal", Statement(f"I live in {before} these days.", (before,)),
                Statement(f"I moved from {before} to {after} last month, so I live in {after} now.", (after,)))

    def _new_manager(self) -> tuple[FactKind, Statement, Statement]:
        before, after = self._one(_FIRST), self._one(_FIRST)
        return ("personal", Statement(f"My manager is {before}.", (before,)),
                Statement(f"{before} left the company; my new manager is {after}.", (after,)))

    def _upgrade(self) -> tuple[FactKind, Statement, Statement]:
        product, before, after = self._one(_PRODUCTS), self._version(), self._version()
        return ("version", Statement(f"We run {product} {before} for the event pipeline.", (product, before)),
                Statement(f"We upgraded {product} from {before} to {after} this week.", (product, after)))


# (subject, said at most once per conversation) by kind
_SUBJECTS: dict[FactKind, tuple[tuple[Callable[[FactDraw], Statement], bool], ...]] = {
    "remember": ((FactDraw._on_call, True), (FactDraw._employee_number, True), (FactDraw._cousin_arrives, True),
                 (FactDraw._staging_cluster, True), (FactDraw._locker_code, True)),
    "personal": ((FactDraw._name_and_work, True), (FactDraw._pet, True)),
    "number": ((FactDraw._cloud_budget, True), (FactDraw._warehouse, False), (FactDraw._commute, True)),
    "version": ((FactDraw._production_version, False), (FactDraw._app_version, True)),
    "date": ((FactDraw._passport, True), (FactDraw._audit, True), (FactDraw._lease, True)),
    "preference": ((FactDraw._prefers, False), (FactDraw._summary_language, True)),
    "update": (),
}
_UPDATES: tuple[Callable[[FactDraw], tuple[FactKind, Statement, Statement]], ...] = (
    FactDraw._launch_moves, FactDraw._moves_home, FactDraw._new_manager, FactDraw._upgrade)
