"""The worker's in-process cache of messages and segment texts, bounded by an estimate of the memory they hold.

Rendering a context after every message reads the thread's unobserved messages and its observation texts; the cache
keeps what this process wrote or read a moment ago, so that Cassandra is not asked again. Its bound
(``worker.content_cache_mb``) is a bound on memory only if its estimate of an entry is: :func:`footprint` is checked
against tracemalloc in ``tests/unit/test_content_cache.py`` (an hour-long soak found the former estimate,
``tokens * 4 + 256``, 3.3 times too low for short messages, so a 256 MB bound let the cache hold about 850 MB).
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from om_stream.core.messages import Message
from om_stream.wire.codec import MAX_DEPTH

__all__ = ["ContentCache", "footprint"]


class ContentCache:
    """Messages and segment texts by id, least recently used first out, bounded by an estimate of the memory they
    hold (:func:`footprint`)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[str, tuple[Message | str, int]] = OrderedDict()
        self._bytes = 0
        self.evictions = 0  # how many times ``evict`` ran: what was read before may have left the store since

    def put(self, key: str, value: Message | str) -> None:
        old = self._items.pop(key, None)
        if old is not None:
            self._bytes -= old[1]
        size = footprint(value) + sys.getsizeof(key) + _ENTRY_BYTES
        self._items[key] = (value, size)
        self._bytes += size
        while self._bytes > self.max_bytes and self._items:
            _, (_, dropped) = self._items.popitem(last=False)
            self._bytes -= dropped

    @property
    def size_bytes(self) -> int:
        """The estimated size of what the cache holds (at most ``max_bytes``)."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key: str) -> Message | str | None:
        item = self._items.get(key)
        if item is None:
            return None
        self._items.move_to_end(key)
        return item[0]

    def evict(self, doomed: Callable[[str, Message | str], bool]) -> int:
        """Drop every entry ``doomed(key, value)`` says; how many. A scan: for erasures, which are rare."""
        self.evictions += 1
        keys = [key for key, (value, _) in self._items.items() if doomed(key, value)]
        for key in keys:
            self._bytes -= self._items.pop(key)[1]
        return len(keys)


# what the cache holds for an entry besides its key and value: the ordered dict's node and the (value, size) pair
_ENTRY_BYTES = 160
# what a message and each of its parts hold besides their strings and containers (the models, the date, the part
# tuple), measured with tracemalloc on CPython 3.11 and pydantic 2 (tests/unit/test_content_cache.py checks the
# estimate against the real thing)
_MESSAGE_BYTES = 1_430
_MODEL_BYTES = 320
_NON_ASCII_STR = 72  # a non-ASCII str's header
_JSON_PER_VALUE = 14  # what a value adds to a message's JSON besides its text: its key, quotes and separators


def footprint(value: Message | str) -> int:
    """An estimate of the memory ``value`` holds while cached, within about a fifth of what tracemalloc measures.

    A message counts its fields and the compact JSON that the v1 context writer caches on it
    (``Message.compact_json``); on the v2 wire that JSON may never be made, so the estimate errs high there, never
    low. CPython stores a string at the width of its widest character, so one emoji makes the whole JSON four bytes
    a character, and a non-ASCII string that is encoded (as a message is, into its JSON) keeps its UTF-8 form too.

    Paid on every message the worker takes in, so the walk takes plain strings and scalars by their exact type first,
    loops without generators, and reads the fields from the model's ``__dict__``."""
    if isinstance(value, str):
        return _str_bytes(value)
    strings: list[str] = []
    held = _MESSAGE_BYTES + _fields_held(value, strings, 0) - _MODEL_BYTES  # not its caches
    chars = sum(map(len, strings)) + _JSON_PER_VALUE * len(strings)
    if all(map(str.isascii, strings)):
        return held + _EMPTY_STR + chars
    return held + _EMPTY_STR + max(map(_width, strings)) * chars + sum(
        len(text.encode("utf-8", "replace")) for text in strings)


def _fields_held(model: BaseModel, strings: list[str], depth: int) -> int:
    """What a model's fields hold, plus what the model itself does (``_MODEL_BYTES``)."""
    names = _FIELDS.get(type(model))
    if names is None:
        names = _FIELDS[type(model)] = tuple(type(model).model_fields)
    values = model.__dict__
    held = _MODEL_BYTES
    for name in names:
        held += _held(values[name], strings, depth)
    return held


def _held(value: Any, strings: list[str], depth: int = 0) -> int:
    """What ``value`` holds (its strings, containers and nested models); its strings are added to ``strings``. Any
    value the wire lets into a message (JSON's types, models, and whatever subclass a caller put in metadata)."""
    kind = type(value)
    if kind is str:
        strings.append(value)
        return sys.getsizeof(value) if value.isascii() else _str_bytes(value)
    if depth > MAX_DEPTH:  # deeper than the wire lets in: nothing cached comes here
        return 0
    if kind in _SCALARS:
        strings.append("0000")  # a number, boolean or date in the JSON (held by the message's fixed part)
        return 0
    if isinstance(value, str):  # a subclass (an enum's value)
        strings.append(value)
        return _str_bytes(value)
    if isinstance(value, BaseModel):
        return _fields_held(value, strings, depth + 1)
    if isinstance(value, dict):
        held = sys.getsizeof(value)
        for key, item in value.items():
            held += _held(key, strings, depth + 1) + _held(item, strings, depth + 1)
        return held
    if isinstance(value, (list, tuple)):
        held = sys.getsizeof(value)
        for item in value:
            held += _held(item, strings, depth + 1)
        return held
    strings.append("0000")
    return 0


_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {}  # a model class's field names, in order
_SCALARS = frozenset({type(None), bool, int, float, datetime})
_EMPTY_STR = sys.getsizeof("")


def _str_bytes(text: str) -> int:
    """The size of ``text`` without the UTF-8 form CPython may have cached on it (counted as the JSON's)."""
    return sys.getsizeof(text) if text.isascii() else _NON_ASCII_STR + _width(text) * (len(text) + 1)


def _width(text: str) -> int:
    """Bytes a character of ``text`` takes in CPython: 1, 2 or 4, by its widest character."""
    widest = ord(max(text)) if text else 0
    return 1 if widest < 0x100 else 2 if widest < 0x10000 else 4
