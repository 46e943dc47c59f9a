package omstream

// The shared om.context/v2 vectors (../../schemas/vectors/context-v2.json), as tests/contract/
// test_context_v2_vectors.py runs them for the Python client: reading each sequence's records in the order given
// (the three topics interleaved, a cursor before its index or blocks), the client delivers exactly the
// om.context/v1 contexts the vectors say, at the records they say, and nothing else; after an erase's tombstone the
// thread has none.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

type v2Step struct {
	Topic    string          `json:"topic"`
	Key      string          `json:"key"`
	Value    json.RawMessage `json:"value"`
	Delivers json.RawMessage `json:"delivers"`
	Erased   bool            `json:"erased"`
}

type v2Sequence struct {
	Name     string   `json:"name"`
	ThreadID string   `json:"thread_id"`
	Records  []v2Step `json:"records"`
}

func readV2Sequences(t *testing.T) []v2Sequence {
	t.Helper()
	var file struct {
		Sequences []v2Sequence `json:"sequences"`
	}
	if err := json.Unmarshal(read(t, "context-v2.json"), &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Sequences) < 4 {
		t.Fatalf("only %d sequences", len(file.Sequences))
	}
	return file.Sequences
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

func canonicalOf(t *testing.T, name string, raw json.RawMessage) []byte {
	t.Helper()
	value, err := Validate(name, raw)
	if err != nil {
		t.Fatalf("the vector's %s does not validate: %v", name, err)
	}
	normal, err := Normalize(name, value)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Canonicalize(normal)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cursorTraceparent is the traceparent the test gives the record of each cursor version: a context assembled from a
// cursor carries its record's trace context, as a v1 record's does.
func cursorTraceparent(version int64) string {
	return fmt.Sprintf("00-%032x-%016x-01", version+1, version+1)
}

// Fed through the Client's own record handlers (decoding, key splitting, the view's erasure rules included), not
// only the assembly: what a Client reading the three topics would hold, each context with its cursor's trace.
func TestTheClientDeliversWhatTheV2VectorsSay(t *testing.T) {
	for _, sequence := range readV2Sequences(t) {
		t.Run(sequence.Name, func(t *testing.T) {
			// references already "followed": the handlers run without Kafka
			client := &Client{cfg: Config{Topics: DefaultTopics()}, view: newContextView(), references: []*tail{}}
			delivered := 0
			erased := false
			for i, step := range sequence.Records {
				before := client.LatestContext(sequence.ThreadID)
				record := &kgo.Record{Topic: step.Topic, Key: []byte(step.Key)}
				if !isNull(step.Value) {
					record.Value = step.Value
					if step.Topic == "om.context" {
						var cursor struct{ Version int64 }
						_ = json.Unmarshal(step.Value, &cursor)
						record.Headers = []kgo.RecordHeader{{Key: TraceparentHeader,
							Value: []byte(cursorTraceparent(cursor.Version))}}
					}
				}
				var err error
				switch step.Topic {
				case "om.context":
					err = client.onContext(record)
				case "om.context.index":
					err = client.onIndex(record)
				case "om.context.blocks":
					err = client.onBlock(record)
				default:
					t.Fatalf("step %d: unknown topic %s", i, step.Topic)
				}
				if err != nil {
					t.Fatalf("step %d (%s %s): %v", i, step.Topic, step.Key, err)
				}
				after := client.LatestContext(sequence.ThreadID)
				switch {
				case step.Erased:
					if after != nil {
						t.Fatalf("step %d: a context is held after the erase's tombstone", i)
					}
					erased = true
				case !isNull(step.Delivers):
					if after == nil || after == before {
						t.Fatalf("step %d (%s %s): no context delivered", i, step.Topic, step.Key)
					}
					got, err := EncodeCanonical(ContextSchema, after)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := Validate(ContextSchema, got); err != nil {
						t.Fatalf("step %d: the assembled context is not om.context/v1: %v", i, err)
					}
					if want := canonicalOf(t, ContextSchema, step.Delivers); !bytes.Equal(got, want) {
						t.Fatalf("step %d: the assembled context differs\n got: %s\nwant: %s", i, got, want)
					}
					if span := after.SpanContext(); !span.IsValid() ||
						"00-"+span.TraceID().String()+"-"+span.SpanID().String()+"-01" != cursorTraceparent(after.Version) {
						t.Fatalf("step %d: version %d carries the trace %v, not its cursor's", i, after.Version, span)
					}
					delivered++
				default:
					if after != before {
						t.Fatalf("step %d (%s %s): delivered a context the vectors do not", i, step.Topic, step.Key)
					}
				}
			}
			if delivered < 3 || !erased {
				t.Fatalf("%d contexts delivered, erased %v", delivered, erased)
			}
		})
	}
}

// The assembly alone, step by step, as the Python contract test drives ContextAssembly: a record that delivers
// nothing returns nothing, never a run to fetch (the sequences hold every record).
func TestTheAssemblyReturnsNothingButTheV2VectorsDeliveries(t *testing.T) {
	for _, sequence := range readV2Sequences(t) {
		t.Run(sequence.Name, func(t *testing.T) {
			assembly := newContextAssembly(threadsHeld)
			for i, step := range sequence.Records {
				var got *ContextRecord
				var wanted *ContextCursor
				switch {
				case step.Topic == "om.context" && isNull(step.Value):
					assembly.forget(step.Key)
					continue
				case step.Topic == "om.context":
					var cursor ContextCursor
					if err := Decode(ContextCursorSchema, step.Value, &cursor); err != nil {
						t.Fatal(err)
					}
					got, wanted = assembly.onCursor(&cursor, SpanContextFromHeaders(nil))
				case step.Topic == "om.context.index":
					var index *ContextIndex
					if !isNull(step.Value) {
						index = new(ContextIndex)
						if err := Decode(ContextIndexSchema, step.Value, index); err != nil {
							t.Fatal(err)
						}
					}
					got, wanted = assembly.onIndex(step.Key, index)
				default:
					var text *string
					if !isNull(step.Value) {
						var block ContextBlock
						if err := Decode(ContextBlockSchema, step.Value, &block); err != nil {
							t.Fatal(err)
						}
						text = &block.Text
					}
					got, wanted = assembly.onBlock(step.Key[:len(step.Key)-23], step.Key[len(step.Key)-22:], text)
				}
				if wanted != nil {
					t.Fatalf("step %d: a client that read every record asked for a run", i)
				}
				if isNull(step.Delivers) != (got == nil) {
					t.Fatalf("step %d (%s %s): delivered %v, the vectors say %v", i, step.Topic, step.Key,
						got != nil, !isNull(step.Delivers))
				}
			}
		})
	}
}
