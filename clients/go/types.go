package omstream

import (
	"encoding/json"

	"go.opentelemetry.io/otel/trace"
)

// The payload types of the wire contract. They are written by hand and checked against schemas/ by
// TestTypesMatchTheSchemas (every property is a field with its wire name; required fields are never omitted;
// optional fields are pointers or omitempty). Free-form data (metadata, tool args and results, extracted values)
// stays raw JSON, exactly as sent.

// Schema tags of the records.
const (
	MessageSchema        = "om.message/v1"
	CommandSchema        = "om.command/v1"
	ContextSchema        = "om.context/v1"
	DeadLetterSchema     = "om.dlq/v1"
	RecallRequestSchema  = "om.recall.request/v1"
	RecallResponseSchema = "om.recall.response/v1"
	// om.context/v2 (contexts by reference, OM_CONTEXT_WIRE=v2): a Client assembles them into a ContextRecord
	// (assembly.go)
	ContextCursorSchema = "om.context/v2"
	ContextIndexSchema  = "om.context-index/v1"
	ContextBlockSchema  = "om.context-block/v1"
)

// Part is one part of a message; Type says which fields apply (text, image, file, tool-call, tool-result,
// reasoning).
type Part struct {
	Type       string          `json:"type"`
	Text       *string         `json:"text,omitempty"`
	URL        *string         `json:"url,omitempty"`
	Data       *string         `json:"data,omitempty"`
	MimeType   *string         `json:"mime_type,omitempty"`
	Filename   *string         `json:"filename,omitempty"`
	Width      *int64          `json:"width,omitempty"`
	Height     *int64          `json:"height,omitempty"`
	SizeBytes  *int64          `json:"size_bytes,omitempty"`
	Detail     *string         `json:"detail,omitempty"`
	ToolCallID *string         `json:"tool_call_id,omitempty"`
	ToolName   *string         `json:"tool_name,omitempty"`
	Args       json.RawMessage `json:"args,omitempty"`
	Result     json.RawMessage `json:"result,omitempty"`
	IsError    *bool           `json:"is_error,omitempty"`
}

// TextPart is a text part.
func TextPart(text string) Part { return Part{Type: "text", Text: &text} }

// Author says who wrote a message in a thread several people or agents write to. Kind is "human", "agent" or
// "tool"; Name (optional) is what the Observer's transcript and observations use, ID when absent. Neither may hold
// a line break or another control character.
type Author struct {
	ID   string  `json:"id"`
	Name *string `json:"name,omitempty"`
	Kind string  `json:"kind"`
}

// Message is a chat message (the fields of om.message/v1 without the schema tag, as contexts carry them).
type Message struct {
	MessageID  string  `json:"message_id"`
	ThreadID   string  `json:"thread_id"`
	ResourceID string  `json:"resource_id"`
	Role       string  `json:"role"`
	CreatedAt  string  `json:"created_at"`
	Parts      []Part  `json:"parts"`
	Model      *string `json:"model,omitempty"`
	// PromptCacheRetention is the OpenAI prompt-cache retention of the actor's call of Model ("in_memory" or
	// "24h"); with activateAfterIdle "auto" it sets how long an OpenAI actor may stay idle before activation.
	PromptCacheRetention *string         `json:"prompt_cache_retention,omitempty"`
	Metadata             json.RawMessage `json:"metadata,omitempty"`
	// Author is who wrote the message in a shared thread (nil: the thread's user or its assistant, as before).
	Author *Author `json:"author,omitempty"`
}

// MessageRecord is om.message/v1, published to the messages topic with key = thread id.
type MessageRecord struct {
	Schema string `json:"schema"`
	Message
}

// CommandRecord is om.command/v1, published to the commands topic with key = thread id (a resource erase:
// key = resource id). ThreadID is left empty (omitted) only by an erase of a whole resource; Scope and RequestedAt
// are the erase's; RetentionDays is the override's; ThroughMessageID is the progress question's (nil: the
// thread's newest message).
type CommandRecord struct {
	Schema            string  `json:"schema"`
	CommandID         string  `json:"command_id"`
	ThreadID          string  `json:"thread_id,omitempty"`
	ResourceID        *string `json:"resource_id,omitempty"`
	Command           string  `json:"command"`
	Scope             *string `json:"scope,omitempty"`
	RequestedAt       *string `json:"requested_at,omitempty"`
	Guidance          *string `json:"guidance,omitempty"`
	MessageTokens     *int64  `json:"message_tokens,omitempty"`
	ObservationTokens *int64  `json:"observation_tokens,omitempty"`
	RetentionDays     *int64  `json:"retention_days,omitempty"`
	Force             *bool   `json:"force,omitempty"`
	Replace           *bool   `json:"replace,omitempty"`
	ThroughMessageID  *string `json:"through_message_id,omitempty"`
}

// ContextHints are the Observer's continuation hints.
type ContextHints struct {
	CurrentTask       *string `json:"current_task,omitempty"`
	SuggestedResponse *string `json:"suggested_response,omitempty"`
}

// ContextTokens counts the context's message and observation tokens.
type ContextTokens struct {
	Messages     int64 `json:"messages"`
	Observations int64 `json:"observations"`
}

// ContextRecord is om.context/v1: what the agent sends to its model next (compacted topic, key = thread id).
type ContextRecord struct {
	Schema           string        `json:"schema"`
	ThreadID         string        `json:"thread_id"`
	ResourceID       string        `json:"resource_id"`
	Version          int64         `json:"version"`
	ThroughMessageID *string       `json:"through_message_id"` // required; null before the first message
	Observations     string        `json:"observations"`
	Hints            ContextHints  `json:"hints"`
	Messages         []Message     `json:"messages"`
	SystemBlocks     []string      `json:"system_blocks"`
	Continuation     *string       `json:"continuation,omitempty"`
	Tokens           ContextTokens `json:"tokens"`
	Generation       int64         `json:"generation"`
	ThreadTitle      *string       `json:"thread_title,omitempty"`

	// the trace context of the record it was read from (never on the wire): SpanContext, TraceContext
	spanContext trace.SpanContext
}

// MessageRun names a v2 context's raw messages: the pinned message, then the thread's messages first..through
// (Count of them, less those created before ExpireBefore and the Excluded ids).
type MessageRun struct {
	FirstMessageID   *string  `json:"first_message_id,omitempty"`
	ThroughMessageID *string  `json:"through_message_id,omitempty"`
	Count            *int64   `json:"count,omitempty"`
	PinnedMessageID  *string  `json:"pinned_message_id,omitempty"`
	ExpireBefore     *int64   `json:"expire_before,omitempty"`
	Excluded         []string `json:"excluded,omitempty"`
}

// ContextCursor is om.context/v2: a context by reference (compacted topic om.context, key = thread id).
type ContextCursor struct {
	Schema           string        `json:"schema"`
	ThreadID         string        `json:"thread_id"`
	ResourceID       string        `json:"resource_id"`
	Version          int64         `json:"version"`
	Generation       int64         `json:"generation"`
	ThreadTitle      *string       `json:"thread_title,omitempty"`
	ThroughMessageID *string       `json:"through_message_id"` // required; null before the first message
	IndexVersion     int64         `json:"index_version"`
	Raw              MessageRun    `json:"raw"`
	NewMessages      []Message     `json:"new_messages,omitempty"`
	Hints            ContextHints  `json:"hints"`
	Tokens           ContextTokens `json:"tokens"`
	Continuation     *string       `json:"continuation,omitempty"`
}

// ContextIndex is om.context-index/v1: a thread's system blocks by digest (compacted topic om.context.index).
type ContextIndex struct {
	Schema   string   `json:"schema"`
	ThreadID string   `json:"thread_id"`
	Version  int64    `json:"version"`
	Blocks   []string `json:"blocks"`
}

// ContextBlock is om.context-block/v1: one system block (compacted topic om.context.blocks, key =
// <thread id>/<digest>).
type ContextBlock struct {
	Schema   string `json:"schema"`
	ThreadID string `json:"thread_id"`
	Digest   string `json:"digest"`
	Text     string `json:"text"`
}

// ThreadMessages is the answer of GET /v1/threads/{id}/messages?from=&through=.
type ThreadMessages struct {
	ThreadID string    `json:"thread_id"`
	Messages []Message `json:"messages"`
}

// DeadLetterRecord is om.dlq/v1.
type DeadLetterRecord struct {
	Schema          string      `json:"schema"`
	Reason          string      `json:"reason"`
	Detail          string      `json:"detail"`
	SourceTopic     string      `json:"source_topic"`
	SourcePartition int64       `json:"source_partition"`
	SourceOffset    int64       `json:"source_offset"`
	KeyB64          *string     `json:"key_b64,omitempty"`
	ValueB64        string      `json:"value_b64"`
	Headers         [][2]string `json:"headers,omitempty"`
	FailedAt        string      `json:"failed_at"`
}

// RetrievalConfig is the recall options of the agent's memory.
type RetrievalConfig struct {
	Vector       *bool   `json:"vector,omitempty"`
	Scope        *string `json:"scope,omitempty"`
	Instructions *string `json:"instructions,omitempty"`
}

// RecallArguments are the recall tool's arguments, spelled as the tool spells them.
type RecallArguments struct {
	Mode       *string `json:"mode,omitempty"`
	Query      *string `json:"query,omitempty"`
	Cursor     *string `json:"cursor,omitempty"`
	ThreadID   *string `json:"threadId,omitempty"`
	Anchor     *string `json:"anchor,omitempty"`
	Page       *int64  `json:"page,omitempty"`
	Limit      *int64  `json:"limit,omitempty"`
	Detail     *string `json:"detail,omitempty"`
	PartType   *string `json:"partType,omitempty"`
	ToolName   *string `json:"toolName,omitempty"`
	PartIndex  *int64  `json:"partIndex,omitempty"`
	CharOffset *int64  `json:"charOffset,omitempty"`
	Before     *string `json:"before,omitempty"`
	After      *string `json:"after,omitempty"`
	// Author keeps only the messages of one author (its id, or the name shown for it) in messages and search modes.
	Author *string `json:"author,omitempty"`
}

// RecallRequest is om.recall.request/v1 (key = resource id).
type RecallRequest struct {
	Schema        string           `json:"schema"`
	CorrelationID string           `json:"correlation_id"`
	ResourceID    string           `json:"resource_id"`
	ThreadID      *string          `json:"thread_id,omitempty"`
	Retrieval     *RetrievalConfig `json:"retrieval,omitempty"`
	Arguments     *RecallArguments `json:"arguments,omitempty"`
}

// RecallResult is one of the recall modes' results; Mode says which fields apply (messages, threads, search).
type RecallResult struct {
	Mode           string  `json:"mode"`
	Count          int64   `json:"count"`
	Messages       *string `json:"messages,omitempty"`
	Cursor         *string `json:"cursor,omitempty"`
	Page           *int64  `json:"page,omitempty"`
	Limit          *int64  `json:"limit,omitempty"`
	Detail         *string `json:"detail,omitempty"`
	HasNextPage    *bool   `json:"hasNextPage,omitempty"`
	HasPrevPage    *bool   `json:"hasPrevPage,omitempty"`
	Truncated      *bool   `json:"truncated,omitempty"`
	TokenOffset    *int64  `json:"tokenOffset,omitempty"`
	ThreadID       *string `json:"threadId,omitempty"`
	PartIndex      *int64  `json:"partIndex,omitempty"`
	NextCharOffset *int64  `json:"nextCharOffset,omitempty"`
	Note           *string `json:"note,omitempty"`
	Threads        *string `json:"threads,omitempty"`
	HasMore        *bool   `json:"hasMore,omitempty"`
	Results        *string `json:"results,omitempty"`
}

// RecallFailure says why a call was not answered: invalid_request (fix the call) or unavailable (retry later).
type RecallFailure struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// RecallResponse is om.recall.response/v1: exactly one of Result and Error.
type RecallResponse struct {
	Schema        string         `json:"schema"`
	CorrelationID string         `json:"correlation_id"`
	Result        *RecallResult  `json:"result,omitempty"`
	Error         *RecallFailure `json:"error,omitempty"`
}

// -- events (data-om-*/v1; the type is the ce_type header) -------------------------------------------------------

// MarkerConfig is the thresholds in force when an event was produced.
type MarkerConfig struct {
	MessageTokens     int64           `json:"messageTokens"`
	ObservationTokens int64           `json:"observationTokens"`
	Scope             string          `json:"scope"`
	ActivateAfterIdle json.RawMessage `json:"activateAfterIdle,omitempty"` // milliseconds or "auto"
}

// ExtractionFailure is an extractor that found nothing usable.
type ExtractionFailure struct {
	Slug  string `json:"slug"`
	Error string `json:"error"`
}

// Window is a token count and its threshold.
type Window struct {
	Tokens    int64 `json:"tokens"`
	Threshold int64 `json:"threshold"`
}

// ActiveWindows are the message and observation windows.
type ActiveWindows struct {
	Messages     Window `json:"messages"`
	Observations Window `json:"observations"`
}

// BufferedObservations describes the buffered observation chunks.
type BufferedObservations struct {
	Chunks                  int64  `json:"chunks"`
	MessageTokens           int64  `json:"messageTokens"`
	ProjectedMessageRemoval int64  `json:"projectedMessageRemoval"`
	ObservationTokens       int64  `json:"observationTokens"`
	Status                  string `json:"status"`
}

// BufferedReflection describes the buffered reflection.
type BufferedReflection struct {
	InputObservationTokens int64  `json:"inputObservationTokens"`
	ObservationTokens      int64  `json:"observationTokens"`
	Status                 string `json:"status"`
}

// BufferedWindows are the buffered observations and reflection.
type BufferedWindows struct {
	Observations BufferedObservations `json:"observations"`
	Reflection   BufferedReflection   `json:"reflection"`
}

// StatusWindows are the active and buffered windows.
type StatusWindows struct {
	Active   ActiveWindows   `json:"active"`
	Buffered BufferedWindows `json:"buffered"`
}

// StatusEvent is data-om-status. Progress is set only in the answer of GET /v1/threads/{id}/status, never on
// the events topic.
type StatusEvent struct {
	RecordID        string         `json:"recordId"`
	ThreadID        string         `json:"threadId"`
	Windows         StatusWindows  `json:"windows"`
	StepNumber      int64          `json:"stepNumber"`
	GenerationCount int64          `json:"generationCount"`
	Progress        *ProgressEvent `json:"progress,omitempty"`
}

// ObservationStartEvent is data-om-observation-start.
type ObservationStartEvent struct {
	RecordID        string       `json:"recordId"`
	ThreadID        string       `json:"threadId"`
	CycleID         string       `json:"cycleId"`
	OperationType   string       `json:"operationType"`
	StartedAt       string       `json:"startedAt"`
	TokensToObserve int64        `json:"tokensToObserve"`
	ThreadIDs       []string     `json:"threadIds"`
	Config          MarkerConfig `json:"config"`
}

// ObservationEndEvent is data-om-observation-end.
type ObservationEndEvent struct {
	RecordID           string               `json:"recordId"`
	ThreadID           string               `json:"threadId"`
	CycleID            string               `json:"cycleId"`
	OperationType      string               `json:"operationType"`
	CompletedAt        string               `json:"completedAt"`
	DurationMs         int64                `json:"durationMs"`
	TokensObserved     int64                `json:"tokensObserved"`
	ObservationTokens  int64                `json:"observationTokens"`
	Observations       string               `json:"observations"`
	CurrentTask        *string              `json:"currentTask,omitempty"`
	SuggestedResponse  *string              `json:"suggestedResponse,omitempty"`
	ExtractedValues    json.RawMessage      `json:"extractedValues,omitempty"`
	ExtractionFailures *[]ExtractionFailure `json:"extractionFailures,omitempty"`
	FallbackModel      *string              `json:"fallbackModel,omitempty"`
}

// ObservationFailedEvent is data-om-observation-failed.
type ObservationFailedEvent struct {
	RecordID        string  `json:"recordId"`
	ThreadID        string  `json:"threadId"`
	CycleID         string  `json:"cycleId"`
	OperationType   string  `json:"operationType"`
	FailedAt        string  `json:"failedAt"`
	DurationMs      int64   `json:"durationMs"`
	TokensAttempted int64   `json:"tokensAttempted"`
	Error           string  `json:"error"`
	Observations    *string `json:"observations,omitempty"`
	NextAction      *string `json:"nextAction,omitempty"`
}

// BufferingStartEvent is data-om-buffering-start.
type BufferingStartEvent struct {
	RecordID       string       `json:"recordId"`
	ThreadID       string       `json:"threadId"`
	CycleID        string       `json:"cycleId"`
	OperationType  string       `json:"operationType"`
	StartedAt      string       `json:"startedAt"`
	TokensToBuffer int64        `json:"tokensToBuffer"`
	ThreadIDs      []string     `json:"threadIds"`
	Config         MarkerConfig `json:"config"`
}

// BufferingEndEvent is data-om-buffering-end.
type BufferingEndEvent struct {
	RecordID           string               `json:"recordId"`
	ThreadID           string               `json:"threadId"`
	CycleID            string               `json:"cycleId"`
	OperationType      string               `json:"operationType"`
	CompletedAt        string               `json:"completedAt"`
	DurationMs         int64                `json:"durationMs"`
	TokensBuffered     int64                `json:"tokensBuffered"`
	BufferedTokens     int64                `json:"bufferedTokens"`
	Observations       string               `json:"observations"`
	ExtractedValues    json.RawMessage      `json:"extractedValues,omitempty"`
	ExtractionFailures *[]ExtractionFailure `json:"extractionFailures,omitempty"`
}

// BufferingFailedEvent is data-om-buffering-failed.
type BufferingFailedEvent struct {
	RecordID        string  `json:"recordId"`
	ThreadID        string  `json:"threadId"`
	CycleID         string  `json:"cycleId"`
	OperationType   string  `json:"operationType"`
	FailedAt        string  `json:"failedAt"`
	DurationMs      int64   `json:"durationMs"`
	TokensAttempted int64   `json:"tokensAttempted"`
	Error           string  `json:"error"`
	Observations    *string `json:"observations,omitempty"`
}

// ActivationEvent is data-om-activation.
type ActivationEvent struct {
	RecordID          string       `json:"recordId"`
	ThreadID          string       `json:"threadId"`
	CycleID           string       `json:"cycleId"`
	OperationType     string       `json:"operationType"`
	ActivatedAt       string       `json:"activatedAt"`
	ChunksActivated   int64        `json:"chunksActivated"`
	TokensActivated   int64        `json:"tokensActivated"`
	ObservationTokens int64        `json:"observationTokens"`
	MessagesActivated int64        `json:"messagesActivated"`
	GenerationCount   int64        `json:"generationCount"`
	Observations      string       `json:"observations"`
	TriggeredBy       string       `json:"triggeredBy"`
	BufferCycleIDs    []string     `json:"bufferCycleIds"`
	LastActivityAt    *int64       `json:"lastActivityAt,omitempty"`
	TTLExpiredMs      *int64       `json:"ttlExpiredMs,omitempty"`
	PreviousModel     *string      `json:"previousModel,omitempty"`
	CurrentModel      *string      `json:"currentModel,omitempty"`
	Config            MarkerConfig `json:"config"`
}

// ThreadUpdateEvent is data-om-thread-update.
type ThreadUpdateEvent struct {
	RecordID  string  `json:"recordId"`
	ThreadID  string  `json:"threadId"`
	CycleID   string  `json:"cycleId"`
	OldTitle  *string `json:"oldTitle,omitempty"`
	NewTitle  string  `json:"newTitle"`
	Timestamp string  `json:"timestamp"`
}

// TemporalMarkerEvent is data-om-temporal-marker.
type TemporalMarkerEvent struct {
	RecordID          string `json:"recordId"`
	ThreadID          string `json:"threadId"`
	MessageID         string `json:"messageId"`
	PrecedesMessageID string `json:"precedesMessageId"`
	GapMs             int64  `json:"gapMs"`
	GapText           string `json:"gapText"`
	Text              string `json:"text"`
}

// CondensationEvent is data-om-condensation (om-stream's own): the engine condensed the observation log itself
// to keep it within its bound.
type CondensationEvent struct {
	RecordID           string  `json:"recordId"`
	ThreadID           string  `json:"threadId"`
	CycleID            *string `json:"cycleId,omitempty"`
	CondensedAt        string  `json:"condensedAt"`
	Reason             string  `json:"reason"`
	TokensBefore       int64   `json:"tokensBefore"`
	TokensAfter        *int64  `json:"tokensAfter,omitempty"`
	TargetTokens       int64   `json:"targetTokens"`
	ObservationsFolded *int64  `json:"observationsFolded,omitempty"`
}

// ErasedCounts is what an erase removed, per store (counts only, never content).
type ErasedCounts struct {
	Messages     int64 `json:"messages"`
	Observations int64 `json:"observations"`
	Generations  int64 `json:"generations"`
	Threads      int64 `json:"threads"`
	CycleResults int64 `json:"cycleResults"`
	RecallPoints int64 `json:"recallPoints"`
	StateRecords int64 `json:"stateRecords"`
	Contexts     int64 `json:"contexts"`
}

// ErasedEvent is data-om-erased (om-stream's own): the receipt of an erase, keyed on the events topic by the
// erased subject (the thread id, or the resource id; ThreadID is nil for a resource erase). Found is false when
// nothing of the subject was held.
type ErasedEvent struct {
	RecordID    string       `json:"recordId"`
	ThreadID    *string      `json:"threadId,omitempty"`
	EraseID     string       `json:"eraseId"`
	Scope       string       `json:"scope"`
	ResourceID  *string      `json:"resourceId,omitempty"`
	Found       bool         `json:"found"`
	Removed     ErasedCounts `json:"removed"`
	RequestedAt string       `json:"requestedAt"`
	CompletedAt string       `json:"completedAt"`
	Verified    bool         `json:"verified"`
	Parts       int64        `json:"parts"`
}

// ExpiredCounts is what a retention purge removed, per store (counts only, never content).
type ExpiredCounts struct {
	Messages     int64 `json:"messages"`
	Observations int64 `json:"observations"` // segments removed whole
	Rewritten    int64 `json:"rewritten"`    // segments written again without their expired entries
	Entries      int64 `json:"entries"`      // entries cut from the segments written again
	Threads      int64 `json:"threads"`
	CycleResults int64 `json:"cycleResults"`
}

// ExpiredEvent is data-om-expired (om-stream's own): the receipt of a retention purge of a record, keyed on the
// events topic by its thread (in resource scope, the record's primary thread; ThreadIDs lists them all). Cutoff
// is the instant before which what was created is gone; NextPurgeAt is nil when nothing left will expire.
type ExpiredEvent struct {
	RecordID      string        `json:"recordId"`
	ThreadID      string        `json:"threadId"`
	ExpiryID      string        `json:"expiryId"`
	ThreadIDs     []string      `json:"threadIds"`
	RetentionDays int64         `json:"retentionDays"`
	Cutoff        string        `json:"cutoff"`
	ExpiredAt     string        `json:"expiredAt"`
	Removed       ExpiredCounts `json:"removed"`
	NextPurgeAt   *string       `json:"nextPurgeAt,omitempty"`
}

// -- HTTP bodies ----------------------------------------------------------------------------------------------

// CommandRequest is the body of POST /v1/threads/{id}/observe, /reflect and /override (the token counts,
// RetentionDays and Replace are the override's).
type CommandRequest struct {
	ResourceID        *string `json:"resource_id,omitempty"`
	Guidance          *string `json:"guidance,omitempty"`
	Force             *bool   `json:"force,omitempty"`
	MessageTokens     *int64  `json:"message_tokens,omitempty"`
	ObservationTokens *int64  `json:"observation_tokens,omitempty"`
	RetentionDays     *int64  `json:"retention_days,omitempty"`
	Replace           *bool   `json:"replace,omitempty"`
}

// CommandAccepted is the 202 answer of observe/reflect/override.
type CommandAccepted struct {
	Accepted  bool   `json:"accepted"`
	CommandID string `json:"command_id"`
}

// EraseAccepted is the 202 answer of DELETE /v1/threads/{id} and DELETE /v1/resources/{id}.
type EraseAccepted struct {
	Accepted bool   `json:"accepted"`
	EraseID  string `json:"erase_id"`
	Status   string `json:"status"`
}

// ErasureStatus is the answer of GET /v1/erasures/{id}: "running", or "done" with what it removed.
type ErasureStatus struct {
	EraseID     string            `json:"erase_id"`
	State       string            `json:"state"`
	Found       *bool             `json:"found,omitempty"`
	Removed     *map[string]int64 `json:"removed,omitempty"` // a pointer: an empty map is a value, not an absence
	CompletedAt *string           `json:"completed_at,omitempty"`
}

// HTTPError is a 4xx answer of the HTTP API.
type HTTPError struct {
	Error  string          `json:"error"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// PayloadTypes maps every schema name to a new value of its Go type.
var PayloadTypes = map[string]func() any{
	MessageSchema:                   func() any { return new(MessageRecord) },
	CommandSchema:                   func() any { return new(CommandRecord) },
	ContextSchema:                   func() any { return new(ContextRecord) },
	ContextCursorSchema:             func() any { return new(ContextCursor) },
	ContextIndexSchema:              func() any { return new(ContextIndex) },
	ContextBlockSchema:              func() any { return new(ContextBlock) },
	"om.http.thread-messages/v1":    func() any { return new(ThreadMessages) },
	DeadLetterSchema:                func() any { return new(DeadLetterRecord) },
	RecallRequestSchema:             func() any { return new(RecallRequest) },
	RecallResponseSchema:            func() any { return new(RecallResponse) },
	"data-om-status/v1":             func() any { return new(StatusEvent) },
	"data-om-observation-start/v1":  func() any { return new(ObservationStartEvent) },
	"data-om-observation-end/v1":    func() any { return new(ObservationEndEvent) },
	"data-om-observation-failed/v1": func() any { return new(ObservationFailedEvent) },
	"data-om-buffering-start/v1":    func() any { return new(BufferingStartEvent) },
	"data-om-buffering-end/v1":      func() any { return new(BufferingEndEvent) },
	"data-om-buffering-failed/v1":   func() any { return new(BufferingFailedEvent) },
	"data-om-activation/v1":         func() any { return new(ActivationEvent) },
	"data-om-thread-update/v1":      func() any { return new(ThreadUpdateEvent) },
	"data-om-temporal-marker/v1":    func() any { return new(TemporalMarkerEvent) },
	"data-om-condensation/v1":       func() any { return new(CondensationEvent) },
	"data-om-erased/v1":             func() any { return new(ErasedEvent) },
	"data-om-expired/v1":            func() any { return new(ExpiredEvent) },
	"data-om-progress/v1":           func() any { return new(ProgressEvent) },
	"om.http.command-request/v1":    func() any { return new(CommandRequest) },
	"om.http.command-accepted/v1":   func() any { return new(CommandAccepted) },
	"om.http.erase-accepted/v1":     func() any { return new(EraseAccepted) },
	"om.http.erasure-status/v1":     func() any { return new(ErasureStatus) },
	"om.http.error/v1":              func() any { return new(HTTPError) },
	"om.export/v1":                  func() any { return new(ExportLine) },
}
