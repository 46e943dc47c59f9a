"""The worker's tracing: the OpenTelemetry SDK set up from the standard ``OTEL_*`` variables, and what a span may say.

**On or off.** Tracing is on when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set
(and ``OTEL_SDK_DISABLED`` is not ``true``, and ``OTEL_TRACES_EXPORTER`` is not ``none``). Off, the tracer is the
API's no-op tracer and the hot paths skip their span work altogether (``Tracing.enabled``), so a worker that does
not trace pays a branch per record. On, the SDK reads everything else itself, as it does in any service: the
service name and resource attributes (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``; ``om-stream`` when no
name is given), the sampler (``OTEL_TRACES_SAMPLER`` and ``_ARG``; parent-based always-on by default), the
exporter's endpoint, headers and timeout, and the batch processor (``OTEL_BSP_*``).

**Protocol.** ``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` (else ``OTEL_EXPORTER_OTLP_PROTOCOL``) picks the exporter:
``http/protobuf`` (the default) or ``grpc`` (the ``otlp-grpc`` extra: ``pip install 'om-stream[otlp-grpc]'``; its
endpoint is the collector's gRPC port, 4317, and an ``http://`` endpoint means no TLS). Any other value, or ``grpc``
without its package, stops the worker at start with a ``ConfigError`` that names the variable: an exporter the
operator did not ask for would send every span to a port that does not speak it.

**Privacy.** No span carries message text, a prompt or an observation unless ``OM_TRACING_CONTENT=true``
(``content_attributes``). Thread and resource ids follow the metrics' rule (no label names one): they are left out,
or, with ``OM_TRACING_IDS=hashed``, given as a keyed digest (``subject_attributes``), which lets an operator find
one conversation's traces from an id they already hold without the traces naming it.

**Exemplars.** The publish-to-context latency and the model-call durations carry the trace of a sampled span as
their exemplar (``exemplar``); ``/metrics`` serves them to a scraper that asks for OpenMetrics (Prometheus does).

The provider is the worker's own (never installed as the process's global one: importing or building this changes
nothing around it); the spans' parents travel by the current context (``contextvars``) as usual. An application
that runs the embedded ``Memory`` hands it its own provider instead (``from_provider``), under the same rules.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased
from opentelemetry.trace import NoOpTracer, Tracer, get_current_span
from opentelemetry.trace import TracerProvider as ApiTracerProvider
from opentelemetry.util.types import AttributeValue

from om_stream.errors import ConfigError
from om_stream.observability.otlp_http import HttpSpanExporter
from om_stream.settings import TracingSettings

__all__ = ["CONTENT_LIMIT", "PROTOCOLS", "Tracing", "exemplar", "otlp_exporter", "otlp_protocol", "tracing_enabled"]

log = logging.getLogger(__name__)
CONTENT_LIMIT = 4096  # characters of content an opted-in span attribute keeps (a whole conversation would not fit)
_INSTRUMENTATION = "om_stream"
PROTOCOLS = ("http/protobuf", "grpc")  # the OTLP transports the worker exports spans over


def exemplar(context: Context | None = None) -> dict[str, str] | None:
    """A histogram sample's exemplar: the trace of the span in ``context`` (the current one by default) when that
    span is sampled, so that a latency bucket links to a trace that shows where the time went; None otherwise."""
    span = get_current_span(context).get_span_context()
    if not span.is_valid or not span.trace_flags.sampled:
        return None
    return {"trace_id": f"{span.trace_id:032x}", "span_id": f"{span.span_id:016x}"}


def tracing_enabled(environ: Mapping[str, str]) -> bool:
    """Whether the standard variables ask for traces: an OTLP endpoint, and the SDK not disabled."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
                or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip())


def otlp_protocol(environ: Mapping[str, str]) -> tuple[str, str]:
    """The OTLP protocol the standard variables ask for, and the variable that asked (the traces' own first)."""
    for variable in ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        if environ.get(variable, "").strip():
            return environ[variable].strip().lower(), variable
    return "http/protobuf", "OTEL_EXPORTER_OTLP_PROTOCOL"


def otlp_exporter(environ: Mapping[str, str]) -> SpanExporter:
    """The OTLP exporter of the protocol the standard variables name (the exporter reads its endpoint, headers,
    timeout and TLS settings from the process environment itself)."""
    protocol, variable = otlp_protocol(environ)
    if protocol == "http/protobuf":
        return HttpSpanExporter()  # the SDK's, with a leaner encoder
    if protocol != "grpc":
        raise ConfigError(variable, f"{environ[variable]!r} is not a protocol om-stream exports spans over "
                                    f"(one of {', '.join(PROTOCOLS)}; http/json is not supported)")
    try:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
    except ImportError as exc:  # the optional extra is not installed (the container image leaves it out)
        raise ConfigError(variable, "grpc needs the package opentelemetry-exporter-otlp-proto-grpc "
                                    "(pip install 'om-stream[otlp-grpc]'), which is not installed; unset it to "
                                    "export over http/protobuf") from exc
    return GrpcSpanExporter()


@dataclass(frozen=True)
class Tracing:
    """The tracer the worker's parts start spans on, and the rules of what they may put in them."""

    tracer: Tracer = field(default_factory=NoOpTracer)
    enabled: bool = False
    content: bool = False  # OM_TRACING_CONTENT
    hashed_ids: bool = False  # OM_TRACING_IDS=hashed
    id_key: bytes = b""
    provider: TracerProvider | None = None  # the SDK's, when on
    # the sampler decides a span with a parent as the parent was decided (the SDK's parent-based samplers, its
    # default): a record whose trace was sampled out upstream needs no span of its own to stay sampled out
    follows_parent: bool = False

    @classmethod
    def off(cls) -> Tracing:
        return cls()

    @classmethod
    def from_environment(cls, settings: TracingSettings, environ: Mapping[str, str]) -> Tracing:
        """The SDK as the ``OTEL_*`` variables say (the SDK reads them from the process environment itself);
        ``off()`` when they ask for no traces."""
        if not tracing_enabled(environ):
            return cls.off().with_rules(settings)
        resource = Resource.create()
        if not environ.get("OTEL_SERVICE_NAME") and "service.name=" not in environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
            resource = resource.merge(Resource({SERVICE_NAME: "om-stream"}))
        exporter = otlp_exporter(environ)  # before the provider: a refused protocol leaves nothing to shut down
        provider = TracerProvider(resource=resource)  # the sampler: OTEL_TRACES_SAMPLER(_ARG)
        provider.add_span_processor(BatchSpanProcessor(exporter))
        log.info("tracing on: spans to %s over %s", environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                 or environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"), otlp_protocol(environ)[0])
        return cls(tracer=provider.get_tracer(_INSTRUMENTATION), enabled=True, provider=provider,
                   follows_parent=isinstance(provider.sampler, ParentBased)).with_rules(settings)

    @classmethod
    def from_provider(cls, provider: ApiTracerProvider, settings: TracingSettings | None = None) -> Tracing:
        """Spans on an application's own provider (the embedded runner in a traced application), under the same
        rules as a worker's: no content unless ``settings.content``, ids only as ``settings.ids`` says (the
        defaults: neither). The provider stays the application's: ``shutdown()`` leaves it running."""
        return cls(tracer=provider.get_tracer(_INSTRUMENTATION), enabled=True).with_rules(settings or TracingSettings())

    def with_rules(self, settings: TracingSettings) -> Tracing:
        return Tracing(self.tracer, self.enabled, settings.content, settings.ids == "hashed",
                       settings.id_key.get_secret_value().encode() if settings.id_key is not None else b"",
                       self.provider, self.follows_parent)

    def subject_attributes(self, *, thread_id: str | None = None,
                           resource_id: str | None = None) -> dict[str, AttributeValue]:
        """The ids of a span's conversation, as the rule says: none, or their keyed digests."""
        if not self.hashed_ids:
            return {}
        attributes: dict[str, AttributeValue] = {}
        if thread_id:
            attributes["om.thread.hash"] = self.digest(thread_id)
        if resource_id:
            attributes["om.resource.hash"] = self.digest(resource_id)
        return attributes

    def digest(self, value: str) -> str:
        """HMAC-SHA256 of ``value`` under ``id_key`` (hex, 32 characters: enough to tell conversations apart)."""
        return hmac.new(self.id_key, value.encode(), hashlib.sha256).hexdigest()[:32]

    def content_attributes(self, name: str, text: str | None) -> dict[str, AttributeValue]:
        """``{name: text}`` (cut to ``CONTENT_LIMIT``) only when the operator opted into content in spans."""
        if not self.content or text is None:
            return {}
        return {name: text[:CONTENT_LIMIT]}

    def shutdown(self) -> None:
        """Export what is still buffered (a worker stopping); a SIGKILLed worker loses its last batch of spans."""
        if self.provider is not None:
            self.provider.shutdown()
