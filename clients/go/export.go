package omstream

import "encoding/json"

// The om.export/v1 types (written by hand and checked against the schema like the other payload types).

// ExportLine is one line of an om.export/v1 file (JSON Lines: om-stream export, GET /v1/resources/{id}/export):
// the fields of every line type in one struct, Type saying which apply (header, state, thread, message, record,
// segment, generation, recall-point, end).
type ExportLine struct {
	Type string `json:"type"`
	// header
	Schema        *string `json:"schema,omitempty"`
	ResourceID    *string `json:"resource_id,omitempty"`
	Scope         *string `json:"scope,omitempty"`
	TokenEncoding *string `json:"token_encoding,omitempty"`
	ExportedAt    *string `json:"exported_at,omitempty"`
	Generator     *string `json:"generator,omitempty"`
	// every line of a record
	RecordKey *string `json:"record_key,omitempty"`
	// state: the record's control state, in the form the worker's state table holds it
	State json.RawMessage `json:"state,omitempty"`
	// thread
	ThreadID              *string         `json:"thread_id,omitempty"`
	CreatedAt             *int64          `json:"created_at,omitempty"`
	UpdatedAt             *int64          `json:"updated_at,omitempty"`
	Title                 *string         `json:"title,omitempty"`
	CurrentTask           *string         `json:"current_task,omitempty"`
	SuggestedResponse     *string         `json:"suggested_response,omitempty"`
	Extracted             json.RawMessage `json:"extracted,omitempty"`
	LastObservedMessageID *string         `json:"last_observed_message_id,omitempty"`
	WorkingMemory         json.RawMessage `json:"working_memory,omitempty"`
	// message
	Seq     *int64   `json:"seq,omitempty"`
	Tokens  *int64   `json:"tokens,omitempty"`
	Message *Message `json:"message,omitempty"`
	// record
	Epoch *int64 `json:"epoch,omitempty"`
	// segment and generation
	SegmentID          *string       `json:"segment_id,omitempty"`
	Kind               *string       `json:"kind,omitempty"`
	Generation         *int64        `json:"generation,omitempty"`
	Text               *string       `json:"text,omitempty"`
	CycleID            *string       `json:"cycle_id,omitempty"`
	ThreadIDs          []string      `json:"thread_ids,omitempty"`
	FirstMessageID     *string       `json:"first_message_id,omitempty"`
	LastMessageID      *string       `json:"last_message_id,omitempty"`
	MessageIDs         []string      `json:"message_ids,omitempty"`
	MessageTokens      *int64        `json:"message_tokens,omitempty"`
	BoundaryAt         *int64        `json:"boundary_at,omitempty"`
	Generations        []int64       `json:"generations,omitempty"`
	Ranges             []ExportRange `json:"ranges,omitempty"`
	Replaced           []string      `json:"replaced,omitempty"`
	SegmentIDs         []string      `json:"segment_ids,omitempty"`
	ReflectionID       *string       `json:"reflection_id,omitempty"`
	ReplacedSegmentIDs []string      `json:"replaced_segment_ids,omitempty"`
	ObservationTokens  *int64        `json:"observation_tokens,omitempty"`
	// recall-point
	SourceID   *string `json:"source_id,omitempty"`
	Chunk      *int64  `json:"chunk,omitempty"`
	ObservedAt *int64  `json:"observed_at,omitempty"`
	Range      *string `json:"range,omitempty"`
	Cursor     *string `json:"cursor,omitempty"`
	// AuthorKeys are a message point's author as a search by author matches it (its id, the name shown for it)
	AuthorKeys []string `json:"author_keys,omitempty"`
	// end
	Counts              *ExportCounts `json:"counts,omitempty"`
	RecordsWithoutState []string      `json:"records_without_state,omitempty"`
}

// ExportRange is a run of one thread's messages an exported segment covers.
type ExportRange struct {
	ThreadID       string `json:"thread_id"`
	FirstMessageID string `json:"first_message_id"`
	LastMessageID  string `json:"last_message_id"`
	FirstSeq       *int64 `json:"first_seq,omitempty"`
	LastSeq        *int64 `json:"last_seq,omitempty"`
}

// ExportCounts is how many lines of each type an export holds (its end line).
type ExportCounts struct {
	States       int64 `json:"states"`
	Threads      int64 `json:"threads"`
	Messages     int64 `json:"messages"`
	Records      int64 `json:"records"`
	Segments     int64 `json:"segments"`
	Generations  int64 `json:"generations"`
	RecallPoints int64 `json:"recall_points"`
}
