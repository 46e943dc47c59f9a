package omstream

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// Erasure without Kafka: the command the client publishes (and its key), and what the client's view of contexts
// does with tombstones and receipts, whichever of the two topics is read first.

var requestedAt = time.Date(2026, 3, 1, 9, 0, 0, 250_000_000, time.UTC)

func TestTheEraseCommandOfAThreadIsKeyedByTheThread(t *testing.T) {
	command, err := NewEraseCommand(EraseRequest{ThreadID: "thread-1", ResourceID: "user-1"}, "erase-1", requestedAt)
	if err != nil {
		t.Fatal(err)
	}
	if command.Command != "erase" || *command.Scope != "thread" || command.ThreadID != "thread-1" ||
		*command.ResourceID != "user-1" || CommandKey(command) != "thread-1" {
		t.Fatalf("command %+v, key %q", command, CommandKey(command))
	}
	got, _ := EncodeCanonical(CommandSchema, command)
	want := `{"command":"erase","command_id":"erase-1","requested_at":"2026-03-01T09:00:00.250000Z",` +
		`"resource_id":"user-1","schema":"om.command/v1","scope":"thread","thread_id":"thread-1"}`
	if string(got) != want {
		t.Fatalf("bytes\n got %s\nwant %s", got, want)
	}
	alone, err := NewEraseCommand(EraseRequest{ThreadID: "thread-1"}, "erase-3", requestedAt)
	if err != nil || alone.ResourceID != nil || *alone.Scope != "thread" {
		t.Fatalf("%+v %v", alone, err)
	}
}

func TestTheEraseCommandOfAResourceLeavesTheThreadOutAndIsKeyedByTheResource(t *testing.T) {
	command, err := NewEraseCommand(EraseRequest{ResourceID: "user-1"}, "erase-2", requestedAt)
	if err != nil {
		t.Fatal(err)
	}
	if *command.Scope != "resource" || CommandKey(command) != "user-1" {
		t.Fatalf("command %+v, key %q", command, CommandKey(command))
	}
	got, _ := EncodeCanonical(CommandSchema, command)
	if strings.Contains(string(got), "thread_id") {
		t.Fatalf("a resource erase names no thread: %s", got)
	}
	for _, partitions := range []int{1, 3, 12} {
		if PartitionFor(CommandKey(command), partitions) != PartitionFor("user-1", partitions) {
			t.Fatal("a resource erase is partitioned by its resource")
		}
	}
}

// The shared vectors, with the time the command was requested, are what the client writes.
func TestTheEraseCommandWritesTheBytesOfTheSharedVectors(t *testing.T) {
	for _, c := range []struct {
		vector  string
		request EraseRequest
		id      string
	}{
		{"command-erase-resource", EraseRequest{ResourceID: "user-1"}, "erase-2"},
		{"command-erase-thread", EraseRequest{ThreadID: "thread-1", ResourceID: "user-1"}, "erase-1"},
	} {
		var vector CommandRecord
		if err := Decode(CommandSchema, read(t, "valid/"+c.vector+".json"), &vector); err != nil {
			t.Fatal(err)
		}
		at := requestedAt.Format(time.RFC3339Nano)
		vector.RequestedAt = &at
		want, _ := EncodeCanonical(CommandSchema, vector)
		command, err := NewEraseCommand(c.request, c.id, requestedAt)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := EncodeCanonical(CommandSchema, command)
		if string(got) != string(want) {
			t.Fatalf("%s:\n got %s\nwant %s", c.vector, got, want)
		}
	}
}

func TestAnEraseThatNamesNothingOrABadIDIsRefused(t *testing.T) {
	var contractErr *ContractError
	for _, request := range []EraseRequest{{}, {ResourceID: strings.Repeat("x", 257)}} {
		if _, err := NewEraseCommand(request, "e", requestedAt); !errors.As(err, &contractErr) {
			t.Errorf("%+v: want a ContractError, got %v", request, err)
		}
	}
	if _, err := NewEraseCommand(EraseRequest{ThreadID: "t"}, "", requestedAt); !errors.As(err, &contractErr) {
		t.Errorf("an empty command id: want a ContractError, got %v", err)
	}
}

func TestCommandIDsAreFreshUUIDs(t *testing.T) {
	a, _ := newCommandID()
	b, _ := newCommandID()
	if a == b || len(a) != 36 || a[14] != '4' || !strings.ContainsRune("89ab", rune(a[19])) {
		t.Fatalf("%s %s", a, b)
	}
}

func contextOf(t *testing.T, thread string, version int64, through, resource string) *ContextRecord {
	t.Helper()
	raw, _ := json.Marshal(map[string]any{"schema": ContextSchema, "thread_id": thread, "resource_id": resource,
		"version": version, "through_message_id": through, "observations": "", "hints": map[string]any{},
		"messages": []any{}, "system_blocks": []any{}, "tokens": map[string]int{"messages": 0, "observations": 0},
		"generation": 0})
	var context ContextRecord
	if err := Decode(ContextSchema, raw, &context); err != nil {
		t.Fatal(err)
	}
	return &context
}

func receiptOf(contexts int64) *ErasedEvent {
	return &ErasedEvent{EraseID: "e", Found: contexts > 0, Removed: ErasedCounts{Contexts: contexts}, Parts: 1}
}

func through(context *ContextRecord) string {
	if context == nil || context.ThroughMessageID == nil {
		return ""
	}
	return *context.ThroughMessageID
}

func awaitShortly(v *contextView, thread, message string) (*ContextRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	return v.awaitIncluding(ctx, thread, message)
}

func TestATombstoneForgetsTheThreadAndTheNextConversationIsTaken(t *testing.T) {
	v := newContextView()
	v.received(contextOf(t, "t", 4, "m4", "user-1"))
	v.tombstone("t")
	if v.latestOf("t") != nil {
		t.Fatal("the erased context is still held")
	}
	if _, err := awaitShortly(v, "t", "m4"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting for an erased message: %v", err)
	}
	v.received(contextOf(t, "t", 1, "n1", "user-1")) // a fresh conversation: its versions start again
	if through(v.latestOf("t")) != "n1" {
		t.Fatal("the fresh conversation's context is not taken")
	}
}

func TestErasedContextsReadAfterTheReceiptAndBeforeTheTombstoneAreDropped(t *testing.T) {
	v := newContextView()
	v.received(contextOf(t, "t", 3, "m3", "user-1"))
	watch := v.beginErase()
	v.erased(EraseRequest{ThreadID: "t"}, receiptOf(1), watch)
	v.endErase(watch)
	v.received(contextOf(t, "t", 4, "m4", "user-1")) // published before the erase, read late
	if v.latestOf("t") != nil {
		t.Fatal("an erased context came back")
	}
	if _, err := awaitShortly(v, "t", "m4"); err == nil {
		t.Fatal("AwaitContext returned an erased context")
	}
	done := make(chan *ContextRecord)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		context, _ := v.awaitIncluding(ctx, "t", "n1")
		done <- context
	}()
	v.tombstone("t")
	v.received(contextOf(t, "t", 1, "n1", "user-1"))
	if through(<-done) != "n1" {
		t.Fatal("the fresh conversation's context did not arrive")
	}
}

func TestAFreshContextReadBetweenTheTombstoneAndTheReceiptIsKept(t *testing.T) {
	v := newContextView()
	v.received(contextOf(t, "t", 3, "m3", "user-1"))
	watch := v.beginErase()
	v.tombstone("t")
	v.received(contextOf(t, "t", 1, "n1", "user-1"))
	v.erased(EraseRequest{ThreadID: "t"}, receiptOf(1), watch)
	v.endErase(watch)
	if through(v.latestOf("t")) != "n1" {
		t.Fatal("a fresh conversation's context was forgotten")
	}
}

func TestNoTombstoneIsWaitedForWhenTheWorkerPublishedNone(t *testing.T) {
	v := newContextView()
	watch := v.beginErase()
	v.erased(EraseRequest{ThreadID: "t"}, receiptOf(0), watch)
	v.endErase(watch)
	v.received(contextOf(t, "t", 1, "n1", "user-1"))
	if through(v.latestOf("t")) != "n1" {
		t.Fatal("a context was dropped after an erase that found nothing")
	}
}

func TestAResourceEraseForgetsEveryThreadOfTheResourceAndNoOther(t *testing.T) {
	v := newContextView()
	v.received(contextOf(t, "a", 2, "a2", "user-1"))
	v.received(contextOf(t, "b", 5, "b5", "user-1"))
	v.received(contextOf(t, "c", 7, "c7", "user-2"))
	watch := v.beginErase()
	v.erased(EraseRequest{ResourceID: "user-1"}, receiptOf(2), watch)
	v.endErase(watch)
	if v.latestOf("a") != nil || v.latestOf("b") != nil || through(v.latestOf("c")) != "c7" {
		t.Fatal("the wrong threads were forgotten")
	}
	v.received(contextOf(t, "a", 3, "a3", "user-1"))
	if v.latestOf("a") != nil {
		t.Fatal("an erased context came back")
	}
	v.tombstone("a")
	v.received(contextOf(t, "a", 1, "x1", "user-1"))
	if through(v.latestOf("a")) != "x1" {
		t.Fatal("the fresh conversation's context is not taken")
	}
}

func TestTheOrderOfMessagesPublishedToAnErasedThreadIsForgotten(t *testing.T) {
	v := newContextView()
	v.published("t", "m1")
	v.published("t", "m2")
	if !v.includes(contextOf(t, "t", 2, "m2", "user-1"), "m1") {
		t.Fatal("m2 was published after m1")
	}
	v.tombstone("t")
	if v.includes(contextOf(t, "t", 1, "m2", "user-1"), "m1") {
		t.Fatal("a fresh conversation reusing the id m2 includes the erased m1")
	}
}
