"""Model capabilities are declared Protocols (``ports.ConfigRoutedModel``, ``ports.AttachmentAwareModel``), and the
cycle runner acts on them: it binds a model that routes by configuration, and a model that refuses attachments
gets none."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from om_stream.adapters.gateway.gateway import ModelGateway
from om_stream.adapters.memory_store import InMemoryContentStore
from om_stream.adapters.offline_model import OfflineModel
from om_stream.core.commands import RequestObservation
from om_stream.core.config import ResolvedConfig
from om_stream.core.messages import ImagePart, Message, TextPart
from om_stream.observability.model_metrics import MeteredModel
from om_stream.ports import AttachmentAwareModel, ChatModel, ChatRequest, ChatResponse, ConfigRoutedModel
from om_stream.runtime.cycles import CycleRunner
from tests.support.config_options import resolve

OBSERVED = "<observations>\nDate: Jan 5, 2026\n* 🔴 (09:00) User shared a screenshot.\n</observations>"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="


@dataclass
class TextOnlyModel:
    """A model that declares both capabilities: it reads no attachments, and binding names the configuration."""

    bound_to: ResolvedConfig | None = None
    requests: list[ChatRequest] = field(default_factory=list)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        return ChatResponse(text=OBSERVED, model="text-only")

    def bind_config(self, config: ResolvedConfig) -> TextOnlyModel:
        return TextOnlyModel(bound_to=config, requests=self.requests)

    def accepts_attachments(self, request: ChatRequest) -> bool:
        return False


def _count(text: str) -> int:
    return len(text.split())


def test_the_gateway_declares_both_capabilities() -> None:
    assert issubclass(ModelGateway, ConfigRoutedModel)
    assert issubclass(ModelGateway, AttachmentAwareModel)


def test_the_offline_model_declares_neither() -> None:
    offline = OfflineModel(_count)
    assert not isinstance(offline, ConfigRoutedModel)
    assert not isinstance(offline, AttachmentAwareModel)


def test_a_metered_model_declares_the_wrapped_models_capabilities_and_stays_metered_when_bound() -> None:
    config = resolve(True)
    metered = MeteredModel(TextOnlyModel(), lambda _record: None)
    bound = metered.bind_config(config)
    assert isinstance(bound, MeteredModel) and isinstance(bound.model, TextOnlyModel)
    assert bound.model.bound_to is config
    assert metered.accepts_attachments(ChatRequest(role="observer", model="", messages=())) is False


def test_a_metered_model_around_one_that_declares_nothing_binds_to_itself_and_takes_attachments() -> None:
    metered = MeteredModel(OfflineModel(_count), lambda _record: None)
    assert metered.bind_config(resolve(True)) is metered
    assert metered.accepts_attachments(ChatRequest(role="observer", model="", messages=())) is True


def _runner(model: ChatModel, config: ResolvedConfig, store: InMemoryContentStore) -> CycleRunner:
    return CycleRunner(store=store, model=model, offline=OfflineModel(_count), config=config, count_text=_count)


def test_the_runner_binds_a_model_that_routes_by_configuration() -> None:
    config = resolve(True)
    runner = _runner(TextOnlyModel(), config, InMemoryContentStore())
    assert isinstance(runner.model, TextOnlyModel) and runner.model.bound_to is config
    plain = OfflineModel(_count)
    assert _runner(plain, config, InMemoryContentStore()).model is plain


async def test_the_runner_drops_attachments_for_a_model_that_refuses_them() -> None:
    store = InMemoryContentStore()
    await store.put_message("t1", Message(
        message_id="m1", thread_id="t1", resource_id="r1", role="user",
        created_at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
        parts=(TextPart(text="See this."), ImagePart(data=PNG, filename="shot.png"))), seq=1, tokens=5)
    model = TextOnlyModel()
    runner = _runner(model, resolve({"observation": {"observeAttachments": "auto"}}), store)
    result = await runner.run(RequestObservation(
        record_key="t1", request_id="obs-1#1", cycle_id="obs-1", attempt=1, kind="sync", trigger="turn-sync",
        resource_id="r1", thread_ids=("t1",), message_ids=("m1",), message_tokens=5, previous_segment_ids=(),
        buffered_segment_ids=(), prior_current_task=None, prior_suggested_response=None, prior_thread_title=None,
        want_hints=True, use_offline_model=False, deadline_at=0))
    assert result.ok and runner.stats.observer.calls == 1
    (request,) = model.requests
    assert all(m.attachments == () for m in request.messages)
    assert "[Image #1: shot.png]" in "\n".join(m.content for m in request.messages)
