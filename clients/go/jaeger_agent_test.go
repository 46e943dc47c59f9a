//go:build e2e && jaeger

package omstream

// A Go agent whose traces go to a real Jaeger, run by clients/test_clients_tracing.py against a worker that traces
// into the same Jaeger (go test -tags e2e,jaeger -run JaegerAgent): the agent publishes a message under a span of its
// own, waits for its context, and starts a consumer span from the context's trace (ContextRecord.TraceContext). Its
// own SDK (the OTLP/HTTP exporter) sends its spans to OM_OTLP_ENDPOINT; it writes the trace's id to
// OM_TRACE_REPORT, and the Python side reads the trace back from Jaeger's API and checks the whole tree.

import (
	"context"
	"encoding/json"
	"os"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.37.0"
)

func TestJaegerAgentTrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(env(t, "OM_OTLP_ENDPOINT")+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(env(t, "OM_AGENT_SERVICE")))),
		sdktrace.WithBatcher(exporter, sdktrace.WithBatchTimeout(100*time.Millisecond)))
	defer func() { _ = provider.Shutdown(context.Background()) }()
	tracer := provider.Tracer("agent")
	client := e2eClient(ctx, t)
	defer client.Close()

	thread := "go-jaeger-" + randomSuffix()
	message := MessageRecord{Message: Message{
		MessageID: thread + "-m0", ThreadID: thread, ResourceID: env(t, "OM_TRACE_RESOURCE"), Role: "user",
		CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Parts: []Part{TextPart(env(t, "OM_TRACE_TEXT"))},
	}}
	turnCtx, turn := tracer.Start(ctx, "agent turn")
	if _, err := client.Publish(turnCtx, message); err != nil {
		t.Fatal(err)
	}
	turn.End()
	record, err := client.AwaitContext(ctx, thread, message.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	if worker := record.SpanContext(); worker.TraceID() != turn.SpanContext().TraceID() {
		t.Fatalf("the context came under %v, not in the agent's trace %v", worker, turn.SpanContext())
	}
	_, consumer := tracer.Start(record.TraceContext(ctx), "agent reads context")
	consumer.End()
	if err := provider.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}
	report, _ := json.Marshal(map[string]string{"trace_id": turn.SpanContext().TraceID().String(), "thread": thread,
		"message_id": message.MessageID, "consumer_span_id": consumer.SpanContext().SpanID().String()})
	if err := os.WriteFile(env(t, "OM_TRACE_REPORT"), report, 0o600); err != nil {
		t.Fatal(err)
	}
}
