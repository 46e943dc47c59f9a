// Package omstream is the Go client of om-stream (Observational Memory for AI agents as a Kafka sidecar).
//
// A Client publishes om.message/v1 records (key = thread id, murmur2-partitioned like the Java client), waits
// for the context that includes a message it published (read-your-writes over the compacted context topic),
// follows a thread's data-om-* events with their CloudEvents attributes, and calls the recall tool over the
// om.recall.requests -> om.recall.responses topic pair; Erase forgets a thread, or a resource and every thread
// of it, for good (an erase command on om.commands, and its data-om-erased receipt); Settled waits until a thread's
// memory has caught up through a message (a progress command, and the data-om-progress events that answer it).
// Every payload is validated against the published JSON Schemas (embedded) and written in its RFC 8785 normal
// form. Every record a Client publishes carries the trace context of the ctx it was given (W3C traceparent and
// tracestate headers), and every context it reads keeps the worker's (ContextRecord.SpanContext, .TraceContext):
// see tracing.go. Contexts come whole (om.context/v1) or by reference (om.context/v2, OM_CONTEXT_WIRE=v2: a cursor
// on the context topic, the system blocks on om.context.index and om.context.blocks, read from their beginning once
// the first cursor comes); either way AwaitContext and LatestContext return the same ContextRecord (assembly.go).
package omstream

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Topics are the om-stream topic names (the worker's OM_KAFKA_TOPIC_* settings). ContextIndex and ContextBlocks
// are om.context/v2's, read once a v2 context comes.
type Topics struct {
	Messages, Commands, Events, Context, ContextIndex, ContextBlocks, RecallRequests, RecallResponses string
}

// DefaultTopics are the worker's default topic names.
func DefaultTopics() Topics {
	return Topics{Messages: "om.messages", Commands: "om.commands", Events: "om.events", Context: "om.context",
		ContextIndex: "om.context.index", ContextBlocks: "om.context.blocks",
		RecallRequests: "om.recall.requests", RecallResponses: "om.recall.responses"}
}

// Config configures a Client. Opts go to every franz-go client (TLS, SASL, logging, ...).
type Config struct {
	Brokers      []string
	Topics       Topics
	Opts         []kgo.Opt
	TopicTimeout time.Duration // how long to wait for the worker to create a topic (default 30 s)
	// MessagesAPI completes an om.context/v2 context whose raw messages the Client does not hold (it started after
	// they were published) through the worker's HTTP API; nil: such a context waits for one it can assemble.
	MessagesAPI *MessagesAPI
}

// Published is where a message landed.
type Published struct {
	MessageID string
	Partition int32
	Offset    int64
}

const rememberedPerThread = 4096

// Client talks to om-stream over Kafka. It is safe for concurrent use.
type Client struct {
	cfg      Config
	producer *kgo.Client
	contexts *tail
	view     *contextView

	// om.context/v2: the index and blocks tails (started at the first cursor), and the Client's lifetime, which
	// bounds the runs it fetches
	referencesMu sync.Mutex
	references   []*tail
	closed       bool
	life         context.Context
	end          context.CancelFunc

	mu            sync.Mutex // guards pending
	responsesOnce sync.Once
	responses     *tail
	responsesErr  error
	pending       map[string]chan *RecallResponse
}

// New connects and starts following the context topic from its current end.
func New(ctx context.Context, cfg Config) (*Client, error) {
	defaults := DefaultTopics()
	for _, pair := range []struct {
		field    *string
		fallback string
	}{
		{&cfg.Topics.Messages, defaults.Messages}, {&cfg.Topics.Commands, defaults.Commands},
		{&cfg.Topics.Events, defaults.Events},
		{&cfg.Topics.Context, defaults.Context}, {&cfg.Topics.ContextIndex, defaults.ContextIndex},
		{&cfg.Topics.ContextBlocks, defaults.ContextBlocks}, {&cfg.Topics.RecallRequests, defaults.RecallRequests},
		{&cfg.Topics.RecallResponses, defaults.RecallResponses},
	} {
		if *pair.field == "" {
			*pair.field = pair.fallback
		}
	}
	if cfg.TopicTimeout == 0 {
		cfg.TopicTimeout = 30 * time.Second
	}
	if _, err := theContract(); err != nil {
		return nil, err
	}
	// No compression by default: franz-go would use snappy, which the worker's Kafka client (aiokafka) can only
	// read with an optional library it does not install; gzip is always readable (kgo.ProducerBatchCompression).
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.RecordPartitioner(Partitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2 * time.Millisecond),
		kgo.ProducerBatchCompression(kgo.NoCompression())}, cfg.Opts...)
	producer, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, producer: producer, view: newContextView(), pending: map[string]chan *RecallResponse{}}
	c.life, c.end = context.WithCancel(context.Background())
	c.contexts, err = startTail(ctx, cfg, cfg.Topics.Context, false, nil, c.onContext)
	if err != nil {
		c.end()
		producer.Close()
		return nil, err
	}
	return c, nil
}

// Close stops every consumer and the producer.
func (c *Client) Close() {
	c.end() // a run being fetched is given up
	c.contexts.close()
	c.referencesMu.Lock()
	c.closed = true
	for _, t := range c.references {
		t.close()
	}
	c.referencesMu.Unlock()
	if c.responses != nil {
		c.responses.close()
	}
	c.producer.Close()
}

// -- messages and read-your-writes --------------------------------------------------------------------------

// Publish sends one message (key = thread id) and waits for the broker's acknowledgement.
func (c *Client) Publish(ctx context.Context, message MessageRecord) (Published, error) {
	message.Schema = MessageSchema
	value, err := c.encode(MessageSchema, message)
	if err != nil {
		return Published{}, err
	}
	c.view.published(message.ThreadID, message.MessageID)
	record := &kgo.Record{Topic: c.cfg.Topics.Messages, Key: []byte(message.ThreadID), Value: value,
		Headers: RecordHeaders(ctx)}
	if err := c.producer.ProduceSync(ctx, record).FirstErr(); err != nil {
		return Published{}, err
	}
	return Published{MessageID: message.MessageID, Partition: record.Partition, Offset: record.Offset}, nil
}

// encode writes a payload in its canonical normal form, refusing one that does not match its schema.
func (c *Client) encode(name string, payload any) ([]byte, error) {
	value, err := EncodeCanonical(name, payload)
	if err != nil {
		return nil, err
	}
	if _, err := Validate(name, value); err != nil {
		return nil, err
	}
	return value, nil
}

// Includes says whether a context reflects messageID: it is the context's last message, or this client published
// the context's last message after it, or it is among the context's raw messages.
func (c *Client) Includes(context *ContextRecord, messageID string) bool {
	return c.view.includes(context, messageID)
}

// LatestContext is the newest context of the thread seen since the client started (nil if none, or erased since).
func (c *Client) LatestContext(threadID string) *ContextRecord {
	return c.view.latestOf(threadID)
}

// AwaitContext returns the first context of threadID that includes messageID. Bound it with ctx (a deadline).
func (c *Client) AwaitContext(ctx context.Context, threadID, messageID string) (*ContextRecord, error) {
	return c.view.awaitIncluding(ctx, threadID, messageID)
}

func (c *Client) onContext(record *kgo.Record) error {
	if record.Value == nil { // a tombstone: the thread was erased, its context is gone
		c.view.tombstone(string(record.Key))
		return nil
	}
	var tag struct {
		Schema string `json:"schema"`
	}
	if err := json.Unmarshal(record.Value, &tag); err == nil && tag.Schema == ContextCursorSchema {
		var cursor ContextCursor
		if err := Decode(ContextCursorSchema, record.Value, &cursor); err != nil {
			return err
		}
		// the cursor is kept even when the two topics cannot be read yet (the next cursor tries again): its
		// new_messages are part of the run the client holds
		followed := c.followReferences()
		c.fetchRun(c.view.cursor(&cursor, SpanContextFromHeaders(record.Headers)))
		return followed
	}
	context, err := DecodeContextRecord(record.Value, record.Headers)
	if err != nil {
		return err
	}
	c.view.received(context)
	return nil
}

// followReferences starts reading the index and blocks topics from their beginning (once: at the first v2 cursor;
// a cursor can name blocks published before the Client started).
func (c *Client) followReferences() error {
	c.referencesMu.Lock()
	defer c.referencesMu.Unlock()
	if c.references != nil || c.closed {
		return nil
	}
	var started []*tail
	for _, follow := range []struct {
		topic  string
		handle func(*kgo.Record) error
	}{{c.cfg.Topics.ContextIndex, c.onIndex}, {c.cfg.Topics.ContextBlocks, c.onBlock}} {
		t, err := startTail(c.life, c.cfg, follow.topic, true, nil, follow.handle)
		if err != nil {
			for _, s := range started {
				s.close()
			}
			return err // the next cursor tries again
		}
		started = append(started, t)
	}
	c.references = started
	return nil
}

func (c *Client) onIndex(record *kgo.Record) error {
	if len(record.Key) == 0 || record.Key[0] == 0xff {
		return nil // a segment roll's tombstone (a key no thread can have: not UTF-8)
	}
	var index *ContextIndex
	if record.Value != nil {
		index = new(ContextIndex)
		if err := Decode(ContextIndexSchema, record.Value, index); err != nil {
			return err
		}
	}
	c.fetchRun(c.view.index(string(record.Key), index))
	return nil
}

func (c *Client) onBlock(record *kgo.Record) error {
	if len(record.Key) < 24 || record.Key[0] == 0xff {
		return nil // a segment roll's tombstone, or not a block key
	}
	key := string(record.Key) // <thread id>/<digest>: the digest has a fixed length (22)
	threadID, digest := key[:len(key)-23], key[len(key)-22:]
	var text *string
	if record.Value != nil {
		var block ContextBlock
		if err := Decode(ContextBlockSchema, record.Value, &block); err != nil {
			return err
		}
		text = &block.Text
	}
	c.fetchRun(c.view.block(threadID, digest, text))
	return nil
}

// fetchRun completes a cursor whose raw messages the Client does not hold, when it can.
func (c *Client) fetchRun(cursor *ContextCursor) {
	if cursor == nil {
		return
	}
	if c.cfg.MessagesAPI == nil {
		fmt.Printf("omstream: the context of thread %s names messages this client does not hold, and it has no "+
			"MessagesAPI to fetch them: it waits for a context it can assemble\n", cursor.ThreadID)
		return
	}
	messages, err := c.cfg.MessagesAPI.Run(c.life, cursor)
	if err != nil {
		fmt.Printf("omstream: the messages API could not give a run of thread %s: %v\n", cursor.ThreadID, err)
		return
	}
	c.view.fetched(cursor, messages)
}

// -- events --------------------------------------------------------------------------------------------------

// EventEnvelope is one event: Data is a pointer to the event's type (*StatusEvent, *ActivationEvent, ...), validated
// against the schema that ce_type names; ID is deterministic, so a replayed event repeats it (dedupe on it).
type EventEnvelope struct {
	Type, ID, Source, Subject, Time, SpecVersion string
	Data                                         any
	Headers                                      map[string]string
	Partition                                    int32
	Offset                                       int64
}

// EventStream is a thread's events, read from its partition only.
type EventStream struct {
	threadID string
	events   chan *EventEnvelope
	tail     *tail
}

// Events starts following the events of threadID, from now (or from the beginning of its partition): events
// caused by anything published after Events returns are never missed.
func (c *Client) Events(ctx context.Context, threadID string, fromBeginning bool) (*EventStream, error) {
	stream := &EventStream{threadID: threadID, events: make(chan *EventEnvelope, 1024)}
	choose := func(count int) []int32 { return []int32{int32(PartitionFor(threadID, count))} }
	tail, err := startTail(ctx, c.cfg, c.cfg.Topics.Events, fromBeginning, choose, stream.onRecord)
	if err != nil {
		return nil, err
	}
	stream.tail = tail
	return stream, nil
}

func (s *EventStream) onRecord(record *kgo.Record) error {
	if string(record.Key) != s.threadID || record.Value == nil {
		return nil
	}
	headers := map[string]string{}
	for _, h := range record.Headers {
		headers[h.Key] = string(h.Value)
	}
	name := headers["ce_type"] + "/v1"
	newValue, known := PayloadTypes[name]
	if !known {
		return nil // an event type this client does not know (a newer worker)
	}
	data := newValue()
	if err := Decode(name, record.Value, data); err != nil {
		return err
	}
	s.events <- &EventEnvelope{Type: headers["ce_type"], ID: headers["ce_id"], Source: headers["ce_source"],
		Subject: headers["ce_subject"], Time: headers["ce_time"], SpecVersion: headers["ce_specversion"],
		Data: data, Headers: headers, Partition: record.Partition, Offset: record.Offset}
	return nil
}

// Next is the next event of the thread; bound it with ctx.
func (s *EventStream) Next(ctx context.Context) (*EventEnvelope, error) {
	select {
	case event := <-s.events:
		return event, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no event of thread %s: %w", s.threadID, ctx.Err())
	}
}

// Close stops following the thread.
func (s *EventStream) Close() { s.tail.close() }

// -- recall -----------------------------------------------------------------------------------------------------

// RecallOptions are the optional parts of a recall request.
type RecallOptions struct {
	ThreadID  *string          // the agent's current thread (what threadId "current" means)
	Retrieval *RetrievalConfig // the memory's retrieval options
}

// Recall makes one recall tool call for the tenant resourceID; the response carries Result or Error.
func (c *Client) Recall(ctx context.Context, resourceID string, args RecallArguments, opts RecallOptions) (*RecallResponse, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	request := RecallRequest{Schema: RecallRequestSchema, CorrelationID: hex.EncodeToString(id),
		ResourceID: resourceID, ThreadID: opts.ThreadID, Retrieval: opts.Retrieval, Arguments: &args}
	return c.SendRecall(ctx, request)
}

// SendRecall sends a prepared request and waits (bounded by ctx) for the response with its correlation id.
func (c *Client) SendRecall(ctx context.Context, request RecallRequest) (*RecallResponse, error) {
	request.Schema = RecallRequestSchema
	value, err := c.encode(RecallRequestSchema, request)
	if err != nil {
		return nil, err
	}
	c.responsesOnce.Do(func() {
		c.responses, c.responsesErr = startTail(ctx, c.cfg, c.cfg.Topics.RecallResponses, false, nil, c.onResponse)
	})
	if c.responsesErr != nil {
		return nil, c.responsesErr
	}
	answer := make(chan *RecallResponse, 1)
	c.mu.Lock()
	c.pending[request.CorrelationID] = answer
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, request.CorrelationID)
		c.mu.Unlock()
	}()
	record := &kgo.Record{Topic: c.cfg.Topics.RecallRequests, Key: []byte(request.ResourceID), Value: value,
		Headers: RecordHeaders(ctx)}
	if err := c.producer.ProduceSync(ctx, record).FirstErr(); err != nil {
		return nil, err
	}
	select {
	case response := <-answer:
		return response, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("no recall response for %s (does a worker serve %s?): %w", request.CorrelationID,
			c.cfg.Topics.RecallRequests, ctx.Err())
	}
}

func (c *Client) onResponse(record *kgo.Record) error {
	if record.Value == nil {
		return nil
	}
	var response RecallResponse
	if err := Decode(RecallResponseSchema, record.Value, &response); err != nil {
		return err
	}
	c.mu.Lock()
	answer := c.pending[response.CorrelationID]
	c.mu.Unlock()
	if answer != nil {
		select {
		case answer <- &response:
		default:
		}
	}
	return nil
}

// -- following a topic from now ---------------------------------------------------------------------------------

// tail reads a topic from the end offsets listed before it starts (or from the start offsets), so whatever the
// worker publishes after the caller's own record is read. No consumer group: partitions are assigned directly.
type tail struct {
	client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func listOffsets(ctx context.Context, cfg Config, topic string, start bool) (kadm.ListedOffsets, error) {
	admin, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...)}, cfg.Opts...)...)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	deadline := time.Now().Add(cfg.TopicTimeout)
	for {
		var listed kadm.ListedOffsets
		if start {
			listed, err = adm.ListStartOffsets(ctx, topic)
		} else {
			listed, err = adm.ListEndOffsets(ctx, topic)
		}
		if err == nil && len(listed[topic]) > 0 && listed.Error() == nil {
			return listed, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = listed.Error()
			}
			return nil, fmt.Errorf("topic %s is not there (is the om-stream worker running?): %v", topic, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func startTail(ctx context.Context, cfg Config, topic string, fromBeginning bool, choose func(int) []int32,
	handle func(*kgo.Record) error) (*tail, error) {
	listed, err := listOffsets(ctx, cfg, topic, fromBeginning)
	if err != nil {
		return nil, err
	}
	partitions := listed[topic]
	wanted := map[int32]bool{}
	if choose != nil {
		for _, p := range choose(len(partitions)) {
			wanted[p] = true
		}
	}
	offsets := map[int32]kgo.Offset{}
	for p, o := range partitions {
		if choose == nil || wanted[p] {
			offsets[p] = kgo.NewOffset().At(o.Offset)
		}
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(cfg.Brokers...), kgo.FetchMaxWait(250 * time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets})}, cfg.Opts...)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	t := &tail{client: client, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(t.done)
		for {
			fetches := client.PollFetches(runCtx)
			if runCtx.Err() != nil || fetches.IsClientClosed() {
				return
			}
			fetches.EachError(func(topic string, partition int32, err error) {
				if !errors.Is(err, context.Canceled) {
					fmt.Printf("omstream: fetching %s[%d]: %v\n", topic, partition, err)
				}
			})
			fetches.EachRecord(func(record *kgo.Record) {
				if err := handle(record); err != nil {
					// one unreadable record must not stop the tail
					fmt.Printf("omstream: record %s[%d]@%d not handled: %v\n", record.Topic, record.Partition,
						record.Offset, err)
				}
			})
		}
	}()
	return t, nil
}

func (t *tail) close() {
	t.cancel()
	<-t.done
	t.client.Close()
}
