package omstream

// W3C Trace Context across Kafka (https://www.w3.org/TR/trace-context/): the trace headers a Client writes on every
// record it publishes, and the span context it reads from the context records the worker publishes.
//
// Only the OpenTelemetry API is imported (go.opentelemetry.io/otel, .../propagation, .../trace): the application
// owns the SDK. Without one no span context is ever valid, so nothing is written and publishing costs one context
// lookup more.
//
//   - Writing: the trace context of the ctx passed to Publish, AskProgress, Settled, Erase, Recall and SendRecall,
//     in W3C Trace Context (traceparent, tracestate: the headers the worker reads, whatever propagator the
//     application uses), then through the propagator the application registered (otel.SetTextMapPropagator), if
//     any: it has the last word on what it writes (its own tracestate, baggage, another format's headers).
//   - Reading: always W3C Trace Context, the format the worker writes, whatever the application registered, so that
//     every client extracts the same span context from the same headers (schemas/vectors/trace-headers.json). Of
//     several headers of one name the last counts (Java's Headers.lastHeader).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Header names of W3C Trace Context on Kafka records.
const (
	TraceparentHeader = "traceparent"
	TracestateHeader  = "tracestate"
)

// HeaderCarrier adapts a record's headers to OpenTelemetry propagation: Get reads the last header of a name (names
// are exact; the last, as Java's Headers.lastHeader), Set leaves one header of the name, with the value.
type HeaderCarrier struct {
	Headers *[]kgo.RecordHeader
}

var _ propagation.TextMapCarrier = HeaderCarrier{}

// Get is the value of the last header named key ("" when there is none).
func (h HeaderCarrier) Get(key string) string {
	headers := *h.Headers
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Key == key {
			return string(headers[i].Value)
		}
	}
	return ""
}

// Set writes the header named key: it replaces every header of that name.
func (h HeaderCarrier) Set(key, value string) {
	kept := (*h.Headers)[:0]
	for _, header := range *h.Headers {
		if header.Key != key {
			kept = append(kept, header)
		}
	}
	*h.Headers = append(kept, kgo.RecordHeader{Key: key, Value: []byte(value)})
}

// Keys are the header names, in record order.
func (h HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(*h.Headers))
	for _, header := range *h.Headers {
		keys = append(keys, header.Key)
	}
	return keys
}

// RecordHeaders are the headers of a record a Client publishes: its content type and the trace context of ctx
// (nothing when ctx holds no valid span context): traceparent and tracestate, then what the registered propagator
// writes (nothing when none is registered).
func RecordHeaders(ctx context.Context) []kgo.RecordHeader {
	headers := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")}}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return headers
	}
	carrier := HeaderCarrier{Headers: &headers}
	propagation.TraceContext{}.Inject(ctx, carrier)
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	return headers
}

// SpanContextFromHeaders is the remote span context in a record's traceparent and tracestate headers; invalid (not
// IsValid) when there is none or it is malformed. An invalid tracestate is dropped and never costs the traceparent.
func SpanContextFromHeaders(headers []kgo.RecordHeader) trace.SpanContext {
	extracted := propagation.TraceContext{}.Extract(context.Background(), HeaderCarrier{Headers: &headers})
	return trace.SpanContextFromContext(extracted)
}

// DecodeContextRecord decodes an om.context/v1 record value and keeps the span context of its headers with it
// (what a Client does with every context it reads; for an agent that reads the context topic with a consumer of
// its own).
func DecodeContextRecord(value []byte, headers []kgo.RecordHeader) (*ContextRecord, error) {
	var record ContextRecord
	if err := Decode(ContextSchema, value, &record); err != nil {
		return nil, err
	}
	record.spanContext = SpanContextFromHeaders(headers)
	return &record, nil
}

// SpanContext is the span context the record was published under (the worker's span that handled the message),
// remote; invalid when its record carried none (tracing off in the worker) or it was not read by this package.
func (c *ContextRecord) SpanContext() trace.SpanContext {
	return c.spanContext
}

// TraceContext is parent with the record's span context as its remote parent: a span started from it continues the
// trace the agent's message began. parent itself when the record carried none.
func (c *ContextRecord) TraceContext(parent context.Context) context.Context {
	if !c.spanContext.IsValid() {
		return parent
	}
	return trace.ContextWithRemoteSpanContext(parent, c.spanContext)
}
