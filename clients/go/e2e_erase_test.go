//go:build e2e

package omstream

// Erasure end to end against real Kafka and a running om-stream worker (see e2e_test.go).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// converse publishes a short conversation on threadID of resourceID and waits for the context that includes its
// last message; it returns the message ids.
func converse(ctx context.Context, t *testing.T, client *Client, threadID, resourceID string, turns int) []string {
	t.Helper()
	var ids []string
	for index := 0; index < turns; index++ {
		role := "user"
		if index%2 == 1 {
			role = "assistant"
		}
		sent, err := client.Publish(ctx, MessageRecord{Message: Message{
			MessageID: fmt.Sprintf("%s-m%d", threadID, index), ThreadID: threadID, ResourceID: resourceID, Role: role,
			CreatedAt: time.Date(2026, 3, 1, 9, 0, 30*index, 0, time.UTC).Format(time.RFC3339),
			Parts:     []Part{TextPart(fmt.Sprintf("turn %d: %s", index, words))},
		}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, sent.MessageID)
	}
	wait, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	if _, err := client.AwaitContext(wait, threadID, ids[len(ids)-1]); err != nil {
		t.Fatal(err)
	}
	return ids
}

// tombstonesOf reads the worker's context topic from its beginning until each thread has a tombstone; it returns
// every value read for each thread, in order (nil: a tombstone).
func tombstonesOf(ctx context.Context, t *testing.T, threads ...string) map[string][][]byte {
	t.Helper()
	reader, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(env(t, "OM_KAFKA_BOOTSTRAP"), ",")...),
		kgo.ConsumeTopics(env(t, "OM_KAFKA_TOPIC_CONTEXT")), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	seen := map[string][][]byte{}
	for _, thread := range threads {
		seen[thread] = nil
	}
	tombstoned := func() bool {
		for _, values := range seen {
			found := false
			for _, v := range values {
				found = found || v == nil
			}
			if !found {
				return false
			}
		}
		return true
	}
	wait, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	for !tombstoned() {
		fetches := reader.PollFetches(wait)
		if wait.Err() != nil {
			t.Fatalf("no tombstone on the context topic for every one of %v: %d, %d, ... values read", threads,
				len(seen[threads[0]]), len(seen[threads[len(threads)-1]]))
		}
		fetches.EachRecord(func(record *kgo.Record) {
			if values, watched := seen[string(record.Key)]; watched {
				seen[string(record.Key)] = append(values, record.Value)
			}
		})
	}
	return seen
}

func checkReceipt(t *testing.T, receipt *ErasedEvent, scope string, found bool) {
	t.Helper()
	raw, _ := json.Marshal(receipt)
	if _, err := Validate("data-om-erased/v1", raw); err != nil {
		t.Fatalf("receipt: %v", err)
	}
	parts := int64(1)
	if scope == "resource" {
		partitions, _ := strconv.Atoi(env(t, "OM_KAFKA_PARTITIONS"))
		parts = int64(partitions)
	}
	r := receipt.Removed
	total := r.Messages + r.Observations + r.Generations + r.Threads + r.CycleResults + r.RecallPoints +
		r.StateRecords + r.Contexts
	if receipt.Scope != scope || receipt.Found != found || !receipt.Verified || receipt.Parts != parts ||
		(total > 0) != found {
		t.Fatalf("receipt %s", raw)
	}
}

func absent(ctx context.Context, t *testing.T, client *Client, threadID, messageID string) {
	t.Helper()
	if context := client.LatestContext(threadID); context != nil {
		t.Fatalf("the erased thread %s still has a context (version %d)", threadID, context.Version)
	}
	short, stop := context.WithTimeout(ctx, 700*time.Millisecond)
	defer stop()
	if _, err := client.AwaitContext(short, threadID, messageID); err == nil {
		t.Fatalf("AwaitContext returned a context of the erased thread %s", threadID)
	}
}

func TestE2EEraseAThread(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	client := e2eClient(ctx, t)
	defer client.Close()
	resource := "go-erase-" + randomSuffix()
	erased, kept := resource+"-thread-é", resource+"-kept"
	ids := converse(ctx, t, client, erased, resource, 4)
	converse(ctx, t, client, kept, resource, 2)

	receipt, err := client.Erase(ctx, EraseRequest{ThreadID: erased})
	if err != nil {
		t.Fatal(err)
	}
	checkReceipt(t, receipt, "thread", true)
	if receipt.ThreadID == nil || *receipt.ThreadID != erased || receipt.ResourceID == nil ||
		*receipt.ResourceID != resource || receipt.Removed.Messages != 4 || receipt.Removed.StateRecords != 1 ||
		receipt.Removed.Contexts != 1 {
		t.Fatalf("receipt %+v", receipt)
	}
	values := tombstonesOf(ctx, t, erased)[erased]
	if values[len(values)-1] != nil {
		t.Fatal("a context of the erased thread follows its tombstone")
	}
	absent(ctx, t, client, erased, ids[3])
	if context := client.LatestContext(kept); context == nil {
		t.Fatal("the other thread of the resource lost its context")
	}

	// the same thread id again: a fresh conversation, nothing of the erased one in its context
	fresh, err := client.Publish(ctx, MessageRecord{Message: Message{MessageID: erased + "-again", ThreadID: erased,
		ResourceID: resource, Role: "user", CreatedAt: "2026-03-02T09:00:00Z", Parts: []Part{TextPart("hello again")}}})
	if err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(ctx, time.Minute)
	defer stop()
	context, err := client.AwaitContext(wait, erased, fresh.MessageID)
	if err != nil {
		t.Fatal(err)
	}
	if len(context.Messages) != 1 || context.Messages[0].MessageID != fresh.MessageID ||
		strings.Contains(context.Observations, "turn 0") {
		t.Fatalf("the fresh conversation's context holds %d messages, observations %.60q", len(context.Messages),
			context.Observations)
	}
	current, limit := "current", int64(10)
	page, err := client.Recall(wait, resource, RecallArguments{ThreadID: &current, Limit: &limit},
		RecallOptions{ThreadID: &erased})
	if err != nil {
		t.Fatal(err)
	}
	if page.Result == nil || page.Result.Messages == nil || !strings.Contains(*page.Result.Messages, "hello again") ||
		strings.Contains(*page.Result.Messages, "turn 0") {
		t.Fatalf("recall after the erase: %+v", page)
	}
}

func TestE2EEraseAResource(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	client := e2eClient(ctx, t)
	defer client.Close()
	partitions, _ := strconv.Atoi(env(t, "OM_KAFKA_PARTITIONS"))
	resource := "go-res-" + randomSuffix()
	other := resource + "-other"
	// a thread on every partition (the erase has a part on each), and one more
	var threads []string
	homes := map[int]bool{}
	for i := 0; len(homes) < partitions; i++ {
		if thread := fmt.Sprintf("%s-t%d", resource, i); !homes[PartitionFor(thread, partitions)] {
			homes[PartitionFor(thread, partitions)] = true
			threads = append(threads, thread)
		}
	}
	threads = append(threads, resource+"-more")
	for _, thread := range threads {
		converse(ctx, t, client, thread, resource, 2)
	}
	converse(ctx, t, client, other+"-t", other, 2)
	mode := "threads"
	listed := func(resourceID string) string {
		call, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop()
		answer, err := client.Recall(call, resourceID, RecallArguments{Mode: &mode}, RecallOptions{})
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(answer)
		return string(raw)
	}
	before := listed(resource)
	for _, thread := range threads {
		if !strings.Contains(before, thread) {
			t.Fatalf("recall does not list %s before the erase: %s", thread, before)
		}
	}

	receipt, err := client.Erase(ctx, EraseRequest{ResourceID: resource})
	if err != nil {
		t.Fatal(err)
	}
	checkReceipt(t, receipt, "resource", true)
	if receipt.ThreadID != nil || receipt.ResourceID == nil || *receipt.ResourceID != resource ||
		receipt.Removed.Messages != int64(2*len(threads)) || receipt.Removed.StateRecords != int64(len(threads)) ||
		receipt.Removed.Contexts != int64(len(threads)) {
		t.Fatalf("receipt %+v", receipt)
	}
	log := tombstonesOf(ctx, t, threads...)
	after := listed(resource)
	for _, thread := range threads {
		if values := log[thread]; values[len(values)-1] != nil {
			t.Fatalf("a context of the erased thread %s follows its tombstone", thread)
		}
		absent(ctx, t, client, thread, thread+"-m1")
		if strings.Contains(after, thread) {
			t.Fatalf("recall still lists %s: %s", thread, after)
		}
	}
	if client.LatestContext(other+"-t") == nil || !strings.Contains(listed(other), other+"-t") {
		t.Fatal("another resource's thread was touched")
	}
}

func TestE2EEraseWhatIsNotKnown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	client := e2eClient(ctx, t)
	defer client.Close()
	unknown := "go-nobody-" + randomSuffix()
	thread, err := client.Erase(ctx, EraseRequest{ThreadID: unknown})
	if err != nil {
		t.Fatal(err)
	}
	checkReceipt(t, thread, "thread", false)
	resource, err := client.Erase(ctx, EraseRequest{ResourceID: unknown})
	if err != nil {
		t.Fatal(err)
	}
	checkReceipt(t, resource, "resource", false)

	quick, stop := context.WithTimeout(ctx, time.Millisecond)
	defer stop()
	if _, err := client.Erase(quick, EraseRequest{ThreadID: unknown}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an erase bounded by an expired context must fail, got %v", err)
	}
}
