//go:build e2e

package omstream

// Contexts by reference end to end: a worker with OM_CONTEXT_WIRE=v2 and an API token (started by
// clients/test_clients_e2e.py), real Kafka. The contexts a Client assembles from cursors, indexes and blocks equal,
// byte for byte, the worker's own rendering of them (GET /v1/threads/{id}/context), through observations and a
// reflection; a Client started late fetches the run it lacks through GET /v1/threads/{id}/messages with the token;
// an erase leaves it no context of the thread.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"
)

func workerAPI(t *testing.T) *MessagesAPI {
	t.Helper()
	return &MessagesAPI{BaseURL: "http://127.0.0.1:" + env(t, "OM_WORKER_WEB_PORT"),
		Token: env(t, "OM_WORKER_API_TOKEN")}
}

// servedContext is the worker's own om.context/v1 rendering of the thread's latest context, canonical.
func servedContext(ctx context.Context, t *testing.T, api *MessagesAPI, thread string) ([]byte, int64) {
	t.Helper()
	request, err := http.NewRequestWithContext(ctx, http.MethodGet,
		api.BaseURL+"/v1/threads/"+url.PathEscape(thread)+"/context", nil)
	if err != nil {
		t.Fatal(err)
	}
	request.Header.Set("Authorization", "Bearer "+api.Token)
	response, err := http.DefaultClient.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	defer response.Body.Close()
	body, _ := io.ReadAll(response.Body)
	if response.StatusCode != http.StatusOK {
		t.Fatalf("GET context: %d %s", response.StatusCode, body)
	}
	var served ContextRecord
	if err := Decode(ContextSchema, body, &served); err != nil {
		t.Fatal(err)
	}
	canonical, err := EncodeCanonical(ContextSchema, &served)
	if err != nil {
		t.Fatal(err)
	}
	return canonical, served.Version
}

// sameAsServed waits for the Client's context of the worker's latest version and checks that they are the same
// bytes (a newer context in between: asks the worker again).
func sameAsServed(ctx context.Context, t *testing.T, client *Client, api *MessagesAPI, thread string) *ContextRecord {
	t.Helper()
	for attempt := 0; attempt < 5; attempt++ {
		served, version := servedContext(ctx, t, api, thread)
		wait, stop := context.WithTimeout(ctx, time.Minute)
		held, err := client.view.await(wait, thread, func(c *ContextRecord) bool { return c.Version >= version },
			fmt.Sprintf("of version %d", version))
		stop()
		if err != nil {
			t.Fatal(err)
		}
		if held.Version > version {
			continue
		}
		got, err := EncodeCanonical(ContextSchema, held)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, served) {
			t.Fatalf("version %d: the assembled context differs from the worker's\n got: %s\nwant: %s", version, got,
				served)
		}
		return held
	}
	t.Fatal("the thread's context kept changing")
	return nil
}

func TestE2EContextWireV2AssemblesTheWorkersContexts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	api := workerAPI(t)
	thread, quiet := "go-v2-"+randomSuffix()+"-ü😀", "go-v2-quiet-"+randomSuffix()
	message := func(thread string, index int, text string) MessageRecord {
		role := "user"
		if index%2 == 1 {
			role = "assistant"
		}
		return MessageRecord{Message: Message{
			MessageID: fmt.Sprintf("%s-m%d", thread, index), ThreadID: thread, ResourceID: "r1", Role: role,
			CreatedAt: time.Date(2026, 3, 1, 9, 0, 30*index, 0, time.UTC).Format(time.RFC3339),
			Parts:     []Part{TextPart(text)},
		}}
	}

	early := e2eClient(ctx, t) // no MessagesAPI: it assembles from what it reads alone
	const turns = 14
	var last *ContextRecord
	for index := 0; index < turns; index++ {
		sent, err := early.Publish(ctx, message(thread, index, fmt.Sprintf("turn %d: %s", index, words)))
		if err != nil {
			t.Fatal(err)
		}
		wait, stop := context.WithTimeout(ctx, time.Minute)
		if _, err := early.AwaitContext(wait, thread, sent.MessageID); err != nil {
			t.Fatal(err)
		}
		_, err = early.Settled(wait, thread, sent.MessageID, SettledOptions{})
		stop()
		if err != nil {
			t.Fatal(err)
		}
		last = sameAsServed(ctx, t, early, api, thread)
	}
	// a few short messages under the observation threshold: they stay raw, in every context of the thread
	const quietTurns = 5
	for index := 0; index < quietTurns; index++ {
		sent, err := early.Publish(ctx, message(quiet, index, fmt.Sprintf("early %d", index)))
		if err != nil {
			t.Fatal(err)
		}
		wait, stop := context.WithTimeout(ctx, time.Minute)
		_, err = early.AwaitContext(wait, quiet, sent.MessageID)
		stop()
		if err != nil {
			t.Fatal(err)
		}
	}
	early.Close()
	if last.Observations == "" || last.Generation == 0 {
		t.Fatalf("the conversation reached no reflection: generation %d, observations %.40q", last.Generation,
			last.Observations)
	}

	config := e2eConfig(t)
	config.MessagesAPI = api
	late, err := New(ctx, config)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	// its first cursor of the quiet thread carries only the message it publishes: the others are fetched
	sent, err := late.Publish(ctx, message(quiet, quietTurns, "late"))
	if err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(ctx, time.Minute)
	assembled, err := late.AwaitContext(wait, quiet, sent.MessageID)
	stop()
	if err != nil {
		t.Fatal(err)
	}
	if len(assembled.Messages) != quietTurns+1 {
		t.Fatalf("the run holds %d messages: the late client fetched none it never saw", len(assembled.Messages))
	}
	sameAsServed(ctx, t, late, api, quiet)

	receipt, err := late.Erase(ctx, EraseRequest{ThreadID: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if !receipt.Found || late.LatestContext(quiet) != nil {
		t.Fatalf("after the erase: found %v, context %v", receipt.Found, late.LatestContext(quiet))
	}
}
