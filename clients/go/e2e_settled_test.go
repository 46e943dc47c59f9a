//go:build e2e

package omstream

// Settled end to end against real Kafka and a running om-stream worker (see e2e_test.go): under the threshold,
// for a message the question overtakes, past the threshold, for the newest message, and a timeout.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestE2ESettled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	client := e2eClient(ctx, t)
	defer client.Close()
	thread := "go-settled-" + randomSuffix()
	messageID := func(index int) string { return fmt.Sprintf("%s-m%d", thread, index) }
	publish := func(index int) string {
		t.Helper()
		role := "user"
		if index%2 == 1 {
			role = "assistant"
		}
		sent, err := client.Publish(ctx, MessageRecord{Message: Message{
			MessageID: messageID(index), ThreadID: thread, ResourceID: "r1", Role: role,
			CreatedAt: time.Date(2026, 3, 1, 9, 0, 30*index, 0, time.UTC).Format(time.RFC3339),
			Parts:     []Part{TextPart(fmt.Sprintf("turn %d: %s", index, words))},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return sent.MessageID
	}
	named := func(p *ProgressEvent) string {
		if p.Through == nil || p.Through.MessageID == nil {
			return ""
		}
		return *p.Through.MessageID
	}
	// settles says p is what Settled returns once memory has settled through id, the newest message: the answer to
	// its question saying so, or a progress event after an answer that placed the message, settled through it
	settles := func(p *ProgressEvent, id string) bool {
		if p.Through != nil {
			return p.RequestID != nil && named(p) == id && p.Through.Settled && p.Through.Status != "unknown"
		}
		return p.RequestID == nil && p.SettledThrough != nil && p.SettledThrough.MessageID != nil &&
			*p.SettledThrough.MessageID == id
	}

	// under the message threshold: settled as soon as it is taken in, with nothing observed
	first := publish(0)
	quiet, err := client.Settled(ctx, thread, first, SettledOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if quiet.ThreadID != thread || quiet.RequestID == nil || named(quiet) != first ||
		quiet.Through.Status != "unobserved" || !quiet.Through.Settled || quiet.ObservedThrough != nil {
		t.Fatalf("under the threshold: %+v (through %+v)", quiet, quiet.Through)
	}

	// a message not sent yet: the worker answers "unknown" and the client waits; once the message is published,
	// the client asks again and returns
	watch, err := client.Events(ctx, thread, false)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()
	type outcome struct {
		progress *ProgressEvent
		err      error
	}
	waiter := make(chan outcome, 1)
	go func() {
		p, err := client.Settled(ctx, thread, messageID(1), SettledOptions{Timeout: 2 * time.Minute})
		waiter <- outcome{p, err}
	}()
	for {
		next, stop := context.WithTimeout(ctx, time.Minute)
		event, err := watch.Next(next)
		stop()
		if err != nil {
			t.Fatalf("no answer to the question about %s: %v", messageID(1), err)
		}
		if p, ok := event.Data.(*ProgressEvent); ok && named(p) == messageID(1) {
			if p.Through.Status != "unknown" || p.Through.Settled {
				t.Fatalf("a message not sent is not known: %+v", p.Through)
			}
			break
		}
	}
	select {
	case early := <-waiter:
		t.Fatalf("Settled returned for a message not sent: %+v, %v", early.progress, early.err)
	case <-time.After(time.Second):
	}
	publish(1)
	answered := <-waiter
	if answered.err != nil {
		t.Fatal(answered.err)
	}
	if !settles(answered.progress, messageID(1)) {
		t.Fatalf("after the message came: %+v (through %+v)", answered.progress, answered.progress.Through)
	}

	// past the threshold: settled once an observation covers the messages (the answer says so, or a progress
	// event after it reaches the message)
	var last string
	for index := 2; index < 10; index++ {
		last = publish(index)
	}
	landed, err := client.Settled(ctx, thread, last, SettledOptions{Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !settles(landed, last) {
		t.Fatalf("past the threshold: %+v (through %+v)", landed, landed.Through)
	}
	// settled stays settled without new input: asked again (about the newest message), the answer says so at
	// once, and an observation has landed
	newest, err := client.Settled(ctx, thread, "", SettledOptions{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if named(newest) != last || !newest.Through.Settled || newest.ObservedThrough == nil ||
		newest.LatestMessage == nil || newest.LatestMessage.MessageID == nil || *newest.LatestMessage.MessageID != last {
		t.Fatalf("the newest message: %+v (through %+v)", newest, newest.Through)
	}
	current, err := client.AwaitContext(ctx, thread, last)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(current.Observations, "<observations>") {
		t.Fatalf("settled past the threshold, but the context holds no observation: %.60q", current.Observations)
	}

	// a message that never comes: the wait ends with the timeout, not before
	began := time.Now()
	never, err := client.Settled(ctx, thread, "never-sent", SettledOptions{Timeout: 2 * time.Second})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "never-sent") {
		t.Fatalf("a message never sent must time out, got %+v, %v", never, err)
	}
	if waited := time.Since(began); waited < 2*time.Second {
		t.Fatalf("timed out after %s, before its 2 s", waited)
	}
}
