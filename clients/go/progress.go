package omstream

// Has memory caught up? The data-om-progress types, the progress command, and Settled, which waits over Kafka
// alone until a thread's memory has settled through a message (the Python client's OMClient.settled, step for
// step).
//
// The worker answers a progress command (om.commands) with a data-om-progress event carrying the command's id as
// requestId and where the message stands (through: its seq, its status, whether memory has settled through it).
// After that answer, every change of the thread's progress is published too (at most once per batch), so the
// client needs nothing from before it asked:
//
//  1. follow the thread's partition of om.events from its end, then ask (nothing published after the question can
//     be missed, and the answer reflects everything the worker took in before it);
//  2. the answer settled: done. The message taken in but not settled: remember its seq, and wait for a progress
//     event whose settledThrough.seq reaches it (settled through a message means settled through every earlier
//     one). The message not taken in yet (it travels another topic than the question, so the question may
//     overtake it): wait for a context of the thread that includes it, received after the question, and ask again.
//
// Every claim is about a state the worker committed: a progress event is published after its state is written. A
// worker that dies while a client waits publishes nothing: the wait ends with a timeout.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// MessageMark is a message of the thread and its place in the record: Seq numbers the record's messages in
// arrival order, so every message of the thread up to Seq is at or before it. MessageID is nil when the record
// does not name it (in resource scope a log segment covering several threads names only its newest message).
type MessageMark struct {
	MessageID *string `json:"messageId,omitempty"`
	Seq       int64   `json:"seq"`
}

// UnobservedMessages counts the thread's messages no observation in the log covers.
type UnobservedMessages struct {
	Messages int64 `json:"messages"`
	Tokens   int64 `json:"tokens"`
}

// BufferedChunk is an observation chunk computed in the background, waiting for activation.
type BufferedChunk struct {
	CycleID           string `json:"cycleId"`
	FirstMessageID    string `json:"firstMessageId"`
	LastMessageID     string `json:"lastMessageId"`
	FirstSeq          int64  `json:"firstSeq"`
	LastSeq           int64  `json:"lastSeq"`
	Messages          int64  `json:"messages"`
	MessageTokens     int64  `json:"messageTokens"`
	ObservationTokens int64  `json:"observationTokens"`
}

// RunningCycle is an Observer or Reflector call in flight (Kind: buffer, sync or manual; Blocking: contexts wait
// for it).
type RunningCycle struct {
	CycleID        string  `json:"cycleId"`
	Kind           string  `json:"kind"`
	OperationType  string  `json:"operationType"`
	Attempt        int64   `json:"attempt"`
	StartedAt      string  `json:"startedAt"`
	Tokens         int64   `json:"tokens"`
	Messages       int64   `json:"messages"`
	FirstMessageID *string `json:"firstMessageId,omitempty"`
	LastMessageID  *string `json:"lastMessageId,omitempty"`
	Blocking       bool    `json:"blocking"`
}

// ThroughMessage is where one message stands: Status is unknown (not taken in, yet), unobserved, observing,
// buffered or observed; Settled says it is observed, or nothing pending would observe it without new input.
type ThroughMessage struct {
	MessageID *string `json:"messageId,omitempty"`
	Seq       *int64  `json:"seq,omitempty"`
	Status    string  `json:"status"`
	Settled   bool    `json:"settled"`
}

// ProgressEvent is data-om-progress (om-stream's own): how far a thread's memory has caught up. RequestID and
// Through are set in the answer to a progress command (and in the HTTP answers).
type ProgressEvent struct {
	RecordID        string             `json:"recordId"`
	ThreadID        string             `json:"threadId"`
	LatestMessage   *MessageMark       `json:"latestMessage,omitempty"`
	ObservedThrough *MessageMark       `json:"observedThrough,omitempty"`
	SettledThrough  *MessageMark       `json:"settledThrough,omitempty"`
	Unobserved      UnobservedMessages `json:"unobserved"`
	Buffered        []BufferedChunk    `json:"buffered"`
	InFlight        []RunningCycle     `json:"inFlight"`
	WaitingFor      []string           `json:"waitingFor"`
	Pending         bool               `json:"pending"`
	GenerationCount int64              `json:"generationCount"`
	RequestID       *string            `json:"requestId,omitempty"`
	Through         *ThroughMessage    `json:"through,omitempty"`
}

// NewProgressCommand is the progress command (om.command/v1) asking where throughMessageID ("" for the thread's
// newest message) stands; resourceID is needed when the worker runs in resource scope. It is checked against the
// schema.
func NewProgressCommand(threadID, throughMessageID, resourceID, commandID string) (CommandRecord, error) {
	command := CommandRecord{Schema: CommandSchema, CommandID: commandID, Command: "progress", ThreadID: threadID}
	if throughMessageID != "" {
		command.ThroughMessageID = &throughMessageID
	}
	if resourceID != "" {
		command.ResourceID = &resourceID
	}
	return validCommand(command)
}

// AskProgress publishes a progress command (key = thread id) and returns its id, which the answering
// data-om-progress event carries as RequestID.
func (c *Client) AskProgress(ctx context.Context, threadID, throughMessageID, resourceID string) (string, error) {
	id, err := newCommandID()
	if err != nil {
		return "", err
	}
	command, err := NewProgressCommand(threadID, throughMessageID, resourceID, id)
	if err != nil {
		return "", err
	}
	value, err := c.encode(CommandSchema, command)
	if err != nil {
		return "", err
	}
	record := &kgo.Record{Topic: c.cfg.Topics.Commands, Key: []byte(threadID), Value: value,
		Headers: RecordHeaders(ctx)}
	if err := c.producer.ProduceSync(ctx, record).FirstErr(); err != nil {
		return "", err
	}
	return id, nil
}

// SettledOptions are the optional parts of a Settled call.
type SettledOptions struct {
	ResourceID string        // the thread's resource, needed when the worker runs in resource scope
	Timeout    time.Duration // how long to wait (default 30 s; ctx may end the wait sooner)
}

// Settled waits until the thread's memory has settled through throughMessageID ("" for its newest message when
// the worker answers): the observation covering it has landed in the active log, or nothing in flight or
// scheduled would observe it without new input (it stays under the message threshold, or buffered until that is
// reached). It returns the thread's progress; after the timeout (a worker that is down answers nothing) an error
// that wraps context.DeadlineExceeded. Needs only Kafka.
func (c *Client) Settled(ctx context.Context, threadID, throughMessageID string, opts SettledOptions) (*ProgressEvent, error) {
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	late := func() error {
		asked := throughMessageID
		if asked == "" {
			asked = "its newest message"
		}
		return fmt.Errorf("memory of thread %s has not settled through %s after %s: %w", threadID, asked, timeout,
			wait.Err())
	}
	events, err := c.Events(wait, threadID, false)
	if err != nil {
		if wait.Err() != nil {
			return nil, late()
		}
		return nil, err
	}
	defer events.Close()
	askedAfter := c.LatestContext(threadID)
	s := settling{threadID: threadID, throughMessageID: throughMessageID}
	if s.requestID, err = c.AskProgress(wait, threadID, throughMessageID, opts.ResourceID); err != nil {
		if wait.Err() != nil {
			return nil, late()
		}
		return nil, err
	}
	for {
		event, err := events.Next(wait)
		if err != nil {
			return nil, late()
		}
		progress, ok := event.Data.(*ProgressEvent)
		if !ok {
			continue
		}
		switch next, wanted := s.take(progress); next {
		case settledNow:
			return progress, nil
		case askAgain:
			// not taken in when the question was: ask again once a context received since shows it is
			previous := askedAfter
			_, err := c.view.await(wait, threadID, func(context *ContextRecord) bool {
				return context != previous && c.view.includesLocked(context, wanted)
			}, "shows message "+wanted)
			if err != nil {
				return nil, late()
			}
			askedAfter = c.LatestContext(threadID)
			if s.requestID, err = c.AskProgress(wait, threadID, throughMessageID, opts.ResourceID); err != nil {
				if wait.Err() != nil {
					return nil, late()
				}
				return nil, err
			}
		}
	}
}

// settling is where a Settled call stands: the id of the question it asked last and, once an answer placed the
// message, its seq. No Kafka here: Settled feeds it the progress events it reads, so its rules are tested alone.
type settling struct {
	threadID, throughMessageID, requestID string
	target                                *int64
}

type settleStep int

const (
	keepWaiting settleStep = iota
	settledNow
	askAgain // wait for a context that includes the returned message id, then ask again
)

// take reads one progress event of the thread's partition.
func (s *settling) take(progress *ProgressEvent) (settleStep, string) {
	if progress.ThreadID != s.threadID {
		return keepWaiting, ""
	}
	if progress.RequestID != nil {
		if *progress.RequestID != s.requestID || progress.Through == nil {
			return keepWaiting, "" // another client's answer
		}
		through := progress.Through
		if through.Settled {
			return settledNow, ""
		}
		if through.Status != "unknown" && through.Seq != nil {
			seq := *through.Seq
			s.target = &seq
			return keepWaiting, ""
		}
		wanted := s.throughMessageID
		if wanted == "" && through.MessageID != nil {
			wanted = *through.MessageID
		}
		if wanted == "" {
			return keepWaiting, "" // the thread had no message: an answer says settled, so this is not reached
		}
		return askAgain, wanted
	}
	if s.target != nil && progress.SettledThrough != nil && progress.SettledThrough.Seq >= *s.target {
		return settledNow, ""
	}
	return keepWaiting, ""
}
