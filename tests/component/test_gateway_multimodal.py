"""observeAttachments through the gateway and litellm: which images and files reach the Observer model as content
parts, and that their placeholders always stay in the transcript."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from om_stream.adapters.gateway import GatewaySettings, ModelGateway
from om_stream.core.messages import FilePart, ImagePart, Message, TextPart
from om_stream.runtime.embedded import ManualClock, Memory
from om_stream.testing.fake_openai import FakeOpenAI, Reply, Usage

OBSERVED = "<observations>\nDate: Jan 5, 2026\n* 🔴 (09:00) User shared a screenshot and a contract.\n</observations>"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@pytest.fixture
def srv() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(default=lambda _r: Reply(OBSERVED, usage=Usage(1000, 500))) as server:
        yield server


async def observe(srv: FakeOpenAI, model: str, policy: Any) -> list[dict[str, Any]]:
    """The content parts of the Observer request's history message."""
    message = Message(message_id="m1", thread_id="t1", resource_id="r1", role="user",
                      created_at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
                      parts=(TextPart(text="Here is the error and the contract."),
                             ImagePart(data=PNG, mime_type="image/png", filename="screenshot.png"),
                             FilePart(data="JVBERi0xLjQK", mime_type="application/pdf", filename="contract.pdf")))
    gateway = ModelGateway(GatewaySettings(api_bases={"*": srv.base_url}, api_keys={"*": "test"}, timeout_s=2,
                                           deadline_s=5, max_retries=0))
    async with Memory({"model": model, "observation": {"observeAttachments": policy}}, model=gateway,
                      clock=ManualClock(0)) as om:
        await om.add_message(message)
        await om.observe("t1", "r1", force=True)
        await om.settle()
    (request,) = srv.requests
    history = request.messages[-1]
    assert "[Image #1: screenshot.png]" in request.prompt_text  # placeholders stay, whatever the policy
    content = history["content"]
    return [p for p in content if p.get("type") != "text"] if isinstance(content, list) else []


def kinds(parts: list[dict[str, Any]]) -> list[str]:
    return [p["type"] for p in parts]


async def test_auto_forwards_to_a_vision_model(srv: FakeOpenAI) -> None:
    parts = await observe(srv, "openai/gpt-5-mini", "auto")

    assert kinds(parts) == ["image_url", "file"]
    assert parts[0]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    assert parts[1]["file"]["filename"] == "contract.pdf"


async def test_auto_keeps_attachments_from_a_text_only_model(srv: FakeOpenAI) -> None:
    assert await observe(srv, "openai/o3-mini", "auto") == []  # litellm's registry: no vision


async def test_auto_forwards_when_the_registry_does_not_know_the_model(srv: FakeOpenAI) -> None:
    assert kinds(await observe(srv, "openai/my-private-model", "auto")) == ["image_url", "file"]


async def test_true_forwards_even_to_a_text_only_model(srv: FakeOpenAI) -> None:
    assert kinds(await observe(srv, "openai/o3-mini", True)) == ["image_url", "file"]


async def test_false_forwards_nothing(srv: FakeOpenAI) -> None:
    assert await observe(srv, "openai/gpt-5-mini", False) == []


async def test_a_mime_allowlist_is_case_insensitive_with_wildcards(srv: FakeOpenAI) -> None:
    assert kinds(await observe(srv, "openai/gpt-5-mini", ["IMAGE/*"])) == ["image_url"]
