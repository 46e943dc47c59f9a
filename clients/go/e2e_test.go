//go:build e2e

package omstream

// End to end against real Kafka and a running om-stream worker, started by clients/test_clients_e2e.py, which
// passes the broker and the topic names in the environment (the worker's own OM_KAFKA_* variables).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func env(t *testing.T, name string) string {
	t.Helper()
	value := os.Getenv(name)
	if value == "" {
		t.Fatalf("%s is not set: run this suite through clients/test_clients_e2e.py", name)
	}
	return value
}

const words = "we agreed to move the launch to friday because the staging cluster needs a new partition plan"

func e2eClient(ctx context.Context, t *testing.T) *Client {
	t.Helper()
	client, err := New(ctx, e2eConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// e2eConfig is the Config of the worker the suite runs against (its topic names).
func e2eConfig(t *testing.T) Config {
	t.Helper()
	return Config{
		Brokers: strings.Split(env(t, "OM_KAFKA_BOOTSTRAP"), ","),
		Topics: Topics{Messages: env(t, "OM_KAFKA_TOPIC_MESSAGES"), Commands: env(t, "OM_KAFKA_TOPIC_COMMANDS"),
			Events: env(t, "OM_KAFKA_TOPIC_EVENTS"), Context: env(t, "OM_KAFKA_TOPIC_CONTEXT"),
			ContextIndex: env(t, "OM_KAFKA_TOPIC_CONTEXT_INDEX"), ContextBlocks: env(t, "OM_KAFKA_TOPIC_CONTEXT_BLOCKS"),
			RecallRequests:  env(t, "OM_KAFKA_TOPIC_RECALL_REQUESTS"),
			RecallResponses: env(t, "OM_KAFKA_TOPIC_RECALL_RESPONSES")},
	}
}

func randomSuffix() string {
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	return hex.EncodeToString(suffix)
}

func TestE2EConversationContextEventsAndRecall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	partitions, err := strconv.Atoi(env(t, "OM_KAFKA_PARTITIONS"))
	if err != nil {
		t.Fatal(err)
	}
	client := e2eClient(ctx, t)
	defer client.Close()
	thread := "go-e2e-" + randomSuffix() + "-ü😀"
	events, err := client.Events(ctx, thread, false)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()

	var last string
	for index := 0; index < 10; index++ {
		role := "user"
		if index%2 == 1 {
			role = "assistant"
		}
		message := MessageRecord{Message: Message{
			MessageID: fmt.Sprintf("%s-m%d", thread, index), ThreadID: thread, ResourceID: "r1", Role: role,
			CreatedAt: time.Date(2026, 3, 1, 9, 0, 30*index, 0, time.UTC).Format(time.RFC3339),
			Parts:     []Part{TextPart(fmt.Sprintf("turn %d: %s", index, words))},
		}}
		sent, err := client.Publish(ctx, message)
		if err != nil {
			t.Fatal(err)
		}
		if int(sent.Partition) != PartitionFor(thread, partitions) {
			t.Fatalf("published to partition %d, murmur2 says %d", sent.Partition, PartitionFor(thread, partitions))
		}
		last = sent.MessageID
		if role == "user" {
			wait, stop := context.WithTimeout(ctx, time.Minute)
			context, err := client.AwaitContext(wait, thread, sent.MessageID)
			stop()
			if err != nil {
				t.Fatal(err)
			}
			if context.ThroughMessageID == nil || *context.ThroughMessageID != sent.MessageID {
				t.Fatalf("context through %v, want %s", context.ThroughMessageID, sent.MessageID)
			}
		}
	}
	wait, stop := context.WithTimeout(ctx, time.Minute)
	final, err := client.AwaitContext(wait, thread, last)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if *final.ThroughMessageID != last || !strings.HasPrefix(final.Observations, "<observations>") {
		t.Fatalf("final context through %s, observations %.40q", *final.ThroughMessageID, final.Observations)
	}

	ids := map[string]bool{}
	for done := false; !done; {
		next, stop := context.WithTimeout(ctx, time.Minute)
		event, err := events.Next(next)
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if event.Subject != thread || event.SpecVersion != "1.0" || event.ID == "" || ids[event.ID] ||
			!strings.HasPrefix(event.Source, "om-stream/") || event.Headers["content-type"] != "application/json" ||
			int(event.Partition) != PartitionFor(thread, partitions) {
			t.Fatalf("bad envelope: %+v", event)
		}
		ids[event.ID] = true
		switch data := event.Data.(type) {
		case *ObservationEndEvent:
			done = data.ThreadID == thread
		case *ActivationEvent:
			done = data.ThreadID == thread
		}
	}

	call, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	mode, current, limit, partIndex := "threads", "current", int64(3), int64(1)
	threads, err := client.Recall(call, "r1", RecallArguments{Mode: &mode}, RecallOptions{ThreadID: &thread})
	if err != nil {
		t.Fatal(err)
	}
	if threads.Result == nil || threads.Result.Mode != "threads" || !strings.Contains(*threads.Result.Threads, thread) {
		t.Fatalf("threads: %+v", threads)
	}
	page, err := client.Recall(call, "r1", RecallArguments{ThreadID: &current, Limit: &limit}, RecallOptions{ThreadID: &thread})
	if err != nil {
		t.Fatal(err)
	}
	if page.Result == nil || page.Result.Mode != "messages" || !strings.Contains(*page.Result.Messages, "turn 0") {
		t.Fatalf("messages: %+v", page)
	}
	refused, err := client.Recall(call, "r1", RecallArguments{PartIndex: &partIndex}, RecallOptions{ThreadID: &thread})
	if err != nil {
		t.Fatal(err)
	}
	if refused.Error == nil || refused.Error.Code != "invalid_request" {
		t.Fatalf("refused: %+v", refused)
	}

	short, stopShort := context.WithTimeout(ctx, 500*time.Millisecond)
	defer stopShort()
	if _, err := client.AwaitContext(short, thread, "never-sent"); err == nil || !strings.Contains(err.Error(), "never-sent") {
		t.Fatalf("a wait for a message never sent must time out, got %v", err)
	}
}
