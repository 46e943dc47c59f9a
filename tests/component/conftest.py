"""Component-test fixtures: ``srv``, the scripted provider of ``tests.support.scripted_provider`` on loopback (a
module that needs another script defines its own ``srv``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from om_stream.testing.fake_openai import FakeOpenAI
from tests.support.scripted_provider import answer


@pytest.fixture
def srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=answer) as server:
        yield server
