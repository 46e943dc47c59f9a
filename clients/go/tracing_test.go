package omstream

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Trace context across Kafka without a broker: the headers a Client writes for the span of the ctx it is given (a
// real SDK tracer provider, its spans recorded in memory), the span context it reads from a context record's
// headers, and the shared vector of header sets every client must read alike.

func recordingTracer(t *testing.T, sampler sdktrace.Sampler) (trace.Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	recorder := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler), sdktrace.WithSpanProcessor(recorder))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	return provider.Tracer("agent"), recorder
}

// headerValues are the values of every header named key, in record order.
func headerValues(headers []kgo.RecordHeader, key string) []string {
	var values []string
	for _, h := range headers {
		if h.Key == key {
			values = append(values, string(h.Value))
		}
	}
	return values
}

var traceparentFormat = regexp.MustCompile(`^00-([0-9a-f]{32})-([0-9a-f]{16})-0([0-3])$`)

type parsedTraceparent struct {
	TraceID, SpanID string
	Sampled         bool
}

// traceparentOf takes the record's one traceparent header apart (and checks it is the format of version 00).
func traceparentOf(t *testing.T, headers []kgo.RecordHeader) parsedTraceparent {
	t.Helper()
	values := headerValues(headers, TraceparentHeader)
	if len(values) != 1 {
		t.Fatalf("%d traceparent headers in %v", len(values), headers)
	}
	match := traceparentFormat.FindStringSubmatch(values[0])
	if match == nil {
		t.Fatalf("traceparent %q is not of version 00", values[0])
	}
	flags, _ := strconv.Atoi(match[3])
	return parsedTraceparent{TraceID: match[1], SpanID: match[2], Sampled: flags&1 == 1}
}

func onlyContentType(t *testing.T, headers []kgo.RecordHeader) {
	t.Helper()
	if len(headers) != 1 || headers[0].Key != "content-type" || string(headers[0].Value) != "application/json" {
		t.Fatalf("headers %v: want only the content type", headers)
	}
}

func TestRecordHeadersCarryTheSpansTraceIDSpanIDAndSampledFlag(t *testing.T) {
	for _, c := range []struct {
		sampler sdktrace.Sampler
		sampled bool
	}{{sdktrace.AlwaysSample(), true}, {sdktrace.NeverSample(), false}} {
		tracer, recorder := recordingTracer(t, c.sampler)
		ctx, span := tracer.Start(context.Background(), "agent turn")
		headers := RecordHeaders(ctx)
		span.End()
		sc := span.SpanContext()
		got := traceparentOf(t, headers)
		want := parsedTraceparent{TraceID: sc.TraceID().String(), SpanID: sc.SpanID().String(), Sampled: c.sampled}
		if got != want {
			t.Fatalf("traceparent %+v, the span's %+v", got, want)
		}
		if ended := recorder.Ended(); c.sampled && (len(ended) != 1 || ended[0].SpanContext().SpanID() != sc.SpanID()) {
			t.Fatalf("the recorded span is not the one in the headers: %v", ended)
		}
		if len(headerValues(headers, TracestateHeader)) != 0 || len(headerValues(headers, "content-type")) != 1 {
			t.Fatalf("headers %v: the content type once and no tracestate (the span has none)", headers)
		}
	}
}

func TestRecordHeadersPassTheTracestateOfTheTraceOn(t *testing.T) {
	tracer, recorder := recordingTracer(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	state, err := trace.ParseTraceState("congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: mustTraceID(t, "4bf92f3577b34da6a3ce929d0e0e4736"),
		SpanID: mustSpanID(t, "00f067aa0ba902b7"), TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true})
	ctx, span := tracer.Start(trace.ContextWithRemoteSpanContext(context.Background(), remote), "agent turn")
	headers := RecordHeaders(ctx)
	span.End()
	got := traceparentOf(t, headers)
	if got.TraceID != remote.TraceID().String() || got.SpanID != span.SpanContext().SpanID().String() ||
		got.SpanID == remote.SpanID().String() || !got.Sampled {
		t.Fatalf("traceparent %+v: the child span of %v", got, remote)
	}
	if states := headerValues(headers, TracestateHeader); len(states) != 1 ||
		states[0] != "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7" {
		t.Fatalf("tracestate %v", states)
	}
	if parent := recorder.Ended()[0].Parent(); parent.SpanID() != remote.SpanID() || !parent.IsRemote() {
		t.Fatalf("the agent's span's parent %v", parent)
	}
}

func TestRecordHeadersCarryNoTraceWithoutASpan(t *testing.T) {
	onlyContentType(t, RecordHeaders(context.Background()))
	// a tracer of the API with no SDK registered: its spans are not valid, so nothing travels
	ctx, span := otel.Tracer("no sdk").Start(context.Background(), "agent turn")
	defer span.End()
	onlyContentType(t, RecordHeaders(ctx))
	// a span of an SDK that ended in another ctx leaves this one without a trace
	tracer, _ := recordingTracer(t, sdktrace.AlwaysSample())
	_, other := tracer.Start(context.Background(), "elsewhere")
	other.End()
	onlyContentType(t, RecordHeaders(context.Background()))
}

// vendorPropagator is another format's propagator, which also writes a tracestate of its own.
type vendorPropagator struct{}

func (vendorPropagator) Inject(ctx context.Context, carrier propagation.TextMapCarrier) {
	carrier.Set("x-vendor-trace", trace.SpanContextFromContext(ctx).TraceID().String())
	carrier.Set(TracestateHeader, "vendor=1")
}

func (vendorPropagator) Extract(ctx context.Context, _ propagation.TextMapCarrier) context.Context {
	return ctx
}

func (vendorPropagator) Fields() []string { return []string{"x-vendor-trace", TracestateHeader} }

func TestRecordHeadersCarryTheTraceparentWhateverTheRegisteredPropagatorWrites(t *testing.T) {
	otel.SetTextMapPropagator(vendorPropagator{})
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	tracer, _ := recordingTracer(t, sdktrace.AlwaysSample())
	ctx, span := tracer.Start(context.Background(), "agent turn")
	defer span.End()
	headers := RecordHeaders(ctx)
	sc := span.SpanContext()
	if got := traceparentOf(t, headers); got.TraceID != sc.TraceID().String() || got.SpanID != sc.SpanID().String() {
		t.Fatalf("traceparent %+v, the span %v", got, sc)
	}
	if vendor := headerValues(headers, "x-vendor-trace"); len(vendor) != 1 || vendor[0] != sc.TraceID().String() {
		t.Fatalf("the registered propagator's header %v", vendor)
	}
	if states := headerValues(headers, TracestateHeader); len(states) != 1 || states[0] != "vendor=1" {
		t.Fatalf("tracestate %v: the registered propagator has the last word", states)
	}
	// without a span the propagator is not asked (this one would write a header of an invalid trace)
	onlyContentType(t, RecordHeaders(context.Background()))
}

func TestRecordHeadersAreWrittenByTheRegisteredPropagator(t *testing.T) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{},
		propagation.Baggage{}))
	t.Cleanup(func() { otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator()) })
	member, err := baggage.NewMember("tenant", "acme")
	if err != nil {
		t.Fatal(err)
	}
	bag, err := baggage.New(member)
	if err != nil {
		t.Fatal(err)
	}
	tracer, _ := recordingTracer(t, sdktrace.AlwaysSample())
	ctx, span := tracer.Start(baggage.ContextWithBaggage(context.Background(), bag), "agent turn")
	defer span.End()
	headers := RecordHeaders(ctx)
	if traceparentOf(t, headers).SpanID != span.SpanContext().SpanID().String() {
		t.Fatal("traceparent is not the span's")
	}
	if values := headerValues(headers, "baggage"); len(values) != 1 || values[0] != "tenant=acme" {
		t.Fatalf("baggage %v: the registered propagator writes it", values)
	}
}

// What a Client writes, it reads back the same, for many span contexts and tracestates.
func TestTraceHeadersRoundTrip(t *testing.T) {
	random := rand.New(rand.NewSource(11))
	for i := 0; i < 500; i++ {
		var config trace.SpanContextConfig
		random.Read(config.TraceID[:])
		random.Read(config.SpanID[:])
		config.TraceFlags = trace.TraceFlags(random.Intn(2))
		if i%3 == 0 {
			state, err := trace.ParseTraceState(fmt.Sprintf("k%d=v%d,other=x", i, random.Intn(1000)))
			if err != nil {
				t.Fatal(err)
			}
			config.TraceState = state
		}
		sent := trace.NewSpanContext(config)
		if !sent.IsValid() {
			continue // an all-zero id, which no tracer makes
		}
		read := SpanContextFromHeaders(RecordHeaders(trace.ContextWithSpanContext(context.Background(), sent)))
		if read.TraceID() != sent.TraceID() || read.SpanID() != sent.SpanID() ||
			read.IsSampled() != sent.IsSampled() || read.TraceState().String() != sent.TraceState().String() ||
			!read.IsRemote() {
			t.Fatalf("sent %v, read %v", sent, read)
		}
	}
}

type traceVector struct {
	Name    string      `json:"name"`
	Headers [][2]string `json:"headers"`
	Expect  *struct {
		TraceID    string `json:"trace_id"`
		SpanID     string `json:"span_id"`
		Sampled    bool   `json:"sampled"`
		Tracestate string `json:"tracestate"`
	} `json:"expect"`
}

func TestTheSharedTraceHeaderVectors(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(vectors, "trace-headers.json"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct{ Cases []traceVector }
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	found, none := 0, 0
	for _, v := range file.Cases {
		headers := make([]kgo.RecordHeader, 0, len(v.Headers))
		for _, h := range v.Headers {
			headers = append(headers, kgo.RecordHeader{Key: h[0], Value: []byte(h[1])})
		}
		sc := SpanContextFromHeaders(headers)
		if v.Expect == nil {
			none++
			if sc.IsValid() {
				t.Errorf("%s: read %v, want none", v.Name, sc)
			}
			continue
		}
		found++
		if !sc.IsValid() || !sc.IsRemote() || sc.TraceID().String() != v.Expect.TraceID ||
			sc.SpanID().String() != v.Expect.SpanID || sc.IsSampled() != v.Expect.Sampled ||
			sc.TraceState().String() != v.Expect.Tracestate {
			t.Errorf("%s: read %v (tracestate %q), want %+v", v.Name, sc, sc.TraceState().String(), *v.Expect)
		}
	}
	if found < 15 || none < 10 {
		t.Fatalf("too few vectors: %d with a span context, %d without", found, none)
	}
}

// contextRecordBytes is a valid om.context/v1 record of thread-1 (the shared vector's canonical bytes).
func contextRecordBytes(t *testing.T) []byte {
	t.Helper()
	return read(t, filepath.Join("valid", "context-full.canonical.json"))
}

var workerHeaders = []kgo.RecordHeader{
	{Key: "content-type", Value: []byte("application/json")}, {Key: "om_version", Value: []byte("7")},
	{Key: "traceparent", Value: []byte("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")},
	{Key: "tracestate", Value: []byte("om=w1,rojo=00f067aa0ba902b7")},
}

func TestAContextReadWithTraceHeadersContinuesTheTrace(t *testing.T) {
	client := &Client{view: newContextView()}
	value := contextRecordBytes(t)
	if err := client.onContext(&kgo.Record{Key: []byte("thread-1"), Value: value, Headers: workerHeaders}); err != nil {
		t.Fatal(err)
	}
	var plain ContextRecord
	if err := Decode(ContextSchema, value, &plain); err != nil {
		t.Fatal(err)
	}
	record := client.LatestContext(plain.ThreadID)
	if record == nil {
		t.Fatal("the client kept no context")
	}
	sc := record.SpanContext()
	if sc.TraceID().String() != "0af7651916cd43dd8448eb211c80319c" || sc.SpanID().String() != "b7ad6b7169203331" ||
		!sc.IsRemote() || !sc.IsSampled() || sc.TraceState().Get("om") != "w1" {
		t.Fatalf("span context %v", sc)
	}
	tracer, recorder := recordingTracer(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	_, span := tracer.Start(record.TraceContext(context.Background()), "agent reads its context")
	span.End()
	consumer := recorder.Ended()[0]
	if consumer.SpanContext().TraceID() != sc.TraceID() || consumer.Parent().SpanID() != sc.SpanID() ||
		!consumer.Parent().IsRemote() || consumer.SpanContext().TraceState().String() != "om=w1,rojo=00f067aa0ba902b7" {
		t.Fatalf("the agent's span %v, parent %v", consumer.SpanContext(), consumer.Parent())
	}
	// the span context is never on the wire: the record writes the bytes it was read from
	if again, err := EncodeCanonical(ContextSchema, record); err != nil || string(again) != string(value) {
		t.Fatalf("re-encoded %s (%v)", again, err)
	}
}

func TestAContextWithoutTraceHeadersHasNone(t *testing.T) {
	record, err := DecodeContextRecord(contextRecordBytes(t), workerHeaders[:2])
	if err != nil {
		t.Fatal(err)
	}
	if record.SpanContext().IsValid() {
		t.Fatalf("span context %v", record.SpanContext())
	}
	type key struct{}
	parent := context.WithValue(context.Background(), key{}, 1)
	if record.TraceContext(parent) != parent {
		t.Fatal("the trace context of a record without one is not the parent given")
	}
	if _, err := DecodeContextRecord([]byte(`{"schema":"om.context/v1"}`), workerHeaders); err == nil {
		t.Fatal("an invalid context record was decoded")
	}
}

func TestHeaderCarrierReadsTheLastHeaderOfANameAndSetLeavesOne(t *testing.T) {
	headers := []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "c", Value: []byte("0")},
		{Key: "a", Value: []byte("2")}}
	carrier := HeaderCarrier{Headers: &headers}
	if carrier.Get("a") != "2" || carrier.Get("A") != "" || strings.Join(carrier.Keys(), ",") != "a,c,a" {
		t.Fatalf("headers %v", headers)
	}
	carrier.Set("a", "3")
	carrier.Set("b", "4")
	if carrier.Get("a") != "3" || carrier.Get("b") != "4" || strings.Join(carrier.Keys(), ",") != "c,a,b" {
		t.Fatalf("headers %v", headers)
	}
}

func mustTraceID(t *testing.T, hex string) trace.TraceID {
	t.Helper()
	id, err := trace.TraceIDFromHex(hex)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustSpanID(t *testing.T, hex string) trace.SpanID {
	t.Helper()
	id, err := trace.SpanIDFromHex(hex)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
