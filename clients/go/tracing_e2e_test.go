//go:build e2e

package omstream

// Trace context end to end against real Kafka and a running om-stream worker (see e2e_test.go): every record a
// Client publishes in a span (message, progress command, recall request, erase command) carries that span's
// traceparent and the trace's tracestate, read back raw from the topics; a record published outside a span carries
// none; a context record with trace headers on the context topic comes back from AwaitContext with its span context.

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func randomSpanContext(t *testing.T, state string) trace.SpanContext {
	t.Helper()
	var config trace.SpanContextConfig
	_, _ = rand.Read(config.TraceID[:])
	_, _ = rand.Read(config.SpanID[:])
	config.TraceFlags = trace.FlagsSampled
	config.Remote = true
	var err error
	if config.TraceState, err = trace.ParseTraceState(state); err != nil {
		t.Fatal(err)
	}
	return trace.NewSpanContext(config)
}

func TestE2ETraceContextTravelsOnEveryRecordPublished(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := e2eClient(ctx, t)
	defer client.Close()
	thread, resource := "go-trace-"+randomSuffix(), "r-trace-"+randomSuffix()

	// every record written to the input topics from now on, raw
	arrived, done := make(chan *kgo.Record, 1024), make(chan struct{})
	for _, topic := range []string{client.cfg.Topics.Messages, client.cfg.Topics.Commands,
		client.cfg.Topics.RecallRequests} {
		tail, err := startTail(ctx, client.cfg, topic, false, nil, func(r *kgo.Record) error {
			select {
			case arrived <- r:
			case <-done: // the test has what it wanted: a tail never blocks its own close
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer tail.close()
	}
	defer close(done) // runs before the tails close

	tracer, _ := recordingTracer(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	remote := randomSpanContext(t, "om-test=e2e")
	turn, span := tracer.Start(trace.ContextWithRemoteSpanContext(ctx, remote), "agent turn")
	message := MessageRecord{Message: Message{
		MessageID: thread + "-m0", ThreadID: thread, ResourceID: resource, Role: "user",
		CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Parts: []Part{TextPart("turn 0: " + words)},
	}}
	if _, err := client.Publish(turn, message); err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(turn, time.Minute)
	if _, err := client.AwaitContext(wait, thread, message.MessageID); err != nil {
		t.Fatal(err)
	}
	stop()
	progressID, err := client.AskProgress(turn, thread, message.MessageID, "")
	if err != nil {
		t.Fatal(err)
	}
	mode, correlation := "threads", "trace-"+randomSuffix()
	if _, err := client.SendRecall(turn, RecallRequest{CorrelationID: correlation, ResourceID: resource,
		ThreadID: &thread, Arguments: &RecallArguments{Mode: &mode}}); err != nil {
		t.Fatal(err)
	}
	receipt, err := client.Erase(turn, EraseRequest{ThreadID: thread})
	if err != nil {
		t.Fatal(err)
	}
	span.End()
	untraced := MessageRecord{Message: Message{
		MessageID: thread + "-untraced", ThreadID: thread + "-untraced", ResourceID: resource, Role: "user",
		CreatedAt: time.Now().UTC().Format(time.RFC3339Nano), Parts: []Part{TextPart("no span here")},
	}}
	if _, err := client.Publish(ctx, untraced); err != nil {
		t.Fatal(err)
	}

	// each record the client published, by what it is
	want := map[string]bool{"message": true, "progress": true, "recall": true, "erase": true, "untraced": true}
	found := map[string]*kgo.Record{}
	for len(found) < len(want) {
		var record *kgo.Record
		select {
		case record = <-arrived:
		case <-ctx.Done():
			t.Fatalf("records read back: %v of %v", found, want)
		}
		switch record.Topic {
		case client.cfg.Topics.Messages:
			var m MessageRecord
			if Decode(MessageSchema, record.Value, &m) == nil && m.MessageID == message.MessageID {
				found["message"] = record
			} else if m.MessageID == untraced.MessageID {
				found["untraced"] = record
			}
		case client.cfg.Topics.Commands:
			var c CommandRecord
			if Decode(CommandSchema, record.Value, &c) == nil && c.CommandID == progressID {
				found["progress"] = record
			} else if c.CommandID == receipt.EraseID {
				found["erase"] = record
			}
		case client.cfg.Topics.RecallRequests:
			var r RecallRequest
			if Decode(RecallRequestSchema, record.Value, &r) == nil && r.CorrelationID == correlation {
				found["recall"] = record
			}
		}
	}
	wantParent := parsedTraceparent{TraceID: remote.TraceID().String(), SpanID: span.SpanContext().SpanID().String(),
		Sampled: true}
	for what, record := range found {
		t.Run(what, func(t *testing.T) {
			if what == "untraced" {
				onlyContentType(t, record.Headers)
				return
			}
			if got := traceparentOf(t, record.Headers); got != wantParent {
				t.Errorf("traceparent %+v, want the agent's span %+v", got, wantParent)
			}
			if states := headerValues(record.Headers, TracestateHeader); len(states) != 1 || states[0] != "om-test=e2e" {
				t.Errorf("tracestate %v", states)
			}
			if types := headerValues(record.Headers, "content-type"); len(types) != 1 || types[0] != "application/json" {
				t.Errorf("content-type %v", types)
			}
		})
	}
}

func TestE2EAContextRecordKeepsItsTraceContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client := e2eClient(ctx, t)
	defer client.Close()
	thread := "go-trace-read-" + randomSuffix()

	// a context as the worker publishes it, with the trace headers of the span that handled the message
	var record ContextRecord
	if err := Decode(ContextSchema, contextRecordBytes(t), &record); err != nil {
		t.Fatal(err)
	}
	through := thread + "-m3"
	record.ThreadID, record.Version, record.ThroughMessageID, record.Messages = thread, 1, &through, []Message{}
	value, err := EncodeCanonical(ContextSchema, record)
	if err != nil {
		t.Fatal(err)
	}
	worker := randomSpanContext(t, "om=w1")
	headers := []kgo.RecordHeader{{Key: "content-type", Value: []byte("application/json")},
		{Key: "om_version", Value: []byte("1")}, {Key: "om_through_message_id", Value: []byte(through)},
		{Key: TraceparentHeader, Value: []byte("00-" + worker.TraceID().String() + "-" + worker.SpanID().String() + "-01")},
		{Key: TracestateHeader, Value: []byte("om=w1")}}
	producer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(env(t, "OM_KAFKA_BOOTSTRAP"), ",")...),
		kgo.RecordPartitioner(Partitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: client.cfg.Topics.Context, Key: []byte(thread),
		Value: value, Headers: headers}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	got, err := client.AwaitContext(ctx, thread, through)
	if err != nil {
		t.Fatal(err)
	}
	sc := got.SpanContext()
	if sc.TraceID() != worker.TraceID() || sc.SpanID() != worker.SpanID() || !sc.IsRemote() || !sc.IsSampled() ||
		sc.TraceState().String() != "om=w1" {
		t.Fatalf("span context %v, want the worker's %v", sc, worker)
	}
	tracer, recorder := recordingTracer(t, sdktrace.ParentBased(sdktrace.AlwaysSample()))
	_, span := tracer.Start(got.TraceContext(ctx), "agent reads its context")
	span.End()
	if consumer := recorder.Ended()[0]; consumer.Parent().SpanID() != worker.SpanID() ||
		consumer.SpanContext().TraceID() != worker.TraceID() {
		t.Fatalf("the agent's span %v is not a child of the worker's %v", consumer.SpanContext(), worker)
	}
}
