package omstream

import (
	"context"
	"crypto/rand"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// EraseRequest names what to erase: a thread (ThreadID; add its ResourceID when the worker runs in resource
// scope, which dead-letters a command without it, so no receipt comes), or a whole resource with every thread of
// it (ResourceID alone).
type EraseRequest struct {
	ThreadID   string
	ResourceID string
}

// NewEraseCommand is the erase command (om.command/v1) for request, with its id and the time it was requested.
// It is checked against the schema: a request that names nothing, or an id the schema refuses, is a
// *ContractError.
func NewEraseCommand(request EraseRequest, commandID string, now time.Time) (CommandRecord, error) {
	if request.ThreadID == "" && request.ResourceID == "" {
		return CommandRecord{}, &ContractError{"invalid_fields",
			[]string{"an erase names a ThreadID, a ResourceID, or both"}}
	}
	scope, requested := "resource", now.UTC().Format(time.RFC3339Nano)
	if request.ThreadID != "" {
		scope = "thread"
	}
	command := CommandRecord{Schema: CommandSchema, CommandID: commandID, Command: "erase", Scope: &scope,
		ThreadID: request.ThreadID, RequestedAt: &requested}
	if request.ResourceID != "" {
		resource := request.ResourceID
		command.ResourceID = &resource
	}
	return validCommand(command)
}

// CommandKey is the key a command is published under: its thread, or its resource for an erase of a whole
// resource.
func CommandKey(command CommandRecord) string {
	if command.ThreadID != "" {
		return command.ThreadID
	}
	if command.ResourceID != nil {
		return *command.ResourceID
	}
	return ""
}

// newCommandID is a random (version 4) UUID, as the other clients write command ids.
func newCommandID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// Erase removes a thread, or a resource and every thread of it, from every store of the worker, for good: it
// publishes an erase command (key = the thread, or the resource) and waits for its receipt, the data-om-erased
// event with its id (bound the wait with ctx; the erase goes on without it). Messages published after Erase
// returns start a fresh memory. Erasing something unknown succeeds: the receipt says Found false. The client
// forgets what it holds of the erased threads: LatestContext and AwaitContext never return a context published
// before the erase.
func (c *Client) Erase(ctx context.Context, request EraseRequest) (*ErasedEvent, error) {
	id, err := newCommandID()
	if err != nil {
		return nil, err
	}
	command, err := NewEraseCommand(request, id, time.Now())
	if err != nil {
		return nil, err
	}
	value, err := c.encode(CommandSchema, command)
	if err != nil {
		return nil, err
	}
	key := CommandKey(command)
	watch := c.view.beginErase()
	defer c.view.endErase(watch)
	events, err := c.Events(ctx, key, false) // positioned before the command goes: the receipt is not missed
	if err != nil {
		return nil, err
	}
	defer events.Close()
	record := &kgo.Record{Topic: c.cfg.Topics.Commands, Key: []byte(key), Value: value,
		Headers: RecordHeaders(ctx)}
	if err := c.producer.ProduceSync(ctx, record).FirstErr(); err != nil {
		return nil, err
	}
	for {
		event, err := events.Next(ctx)
		if err != nil {
			return nil, fmt.Errorf("no receipt for erase %s (it goes on; its receipt will be a data-om-erased event "+
				"keyed %q on %s): %w", id, key, c.cfg.Topics.Events, ctx.Err())
		}
		if receipt, ok := event.Data.(*ErasedEvent); ok && receipt.EraseID == id {
			c.view.erased(request, receipt, watch)
			return receipt, nil
		}
	}
}

// validCommand returns the command if its canonical bytes pass the schema, or the reason they do not.
func validCommand(command CommandRecord) (CommandRecord, error) {
	value, err := EncodeCanonical(CommandSchema, command)
	if err != nil {
		return CommandRecord{}, err
	}
	if _, err := Validate(CommandSchema, value); err != nil {
		return CommandRecord{}, err
	}
	return command, nil
}
