package omstream

// Assembling om.context/v2 contexts (contexts by reference, OM_CONTEXT_WIRE=v2) into the ContextRecord an
// om.context/v1 record is: the cursors of the context topic, the block index (om.context.index) and the blocks
// (om.context.blocks), read apart, since Kafka keeps order within a topic-partition, not across topics. The rules
// are those of the worker's om_stream/wire/context_refs.py and the Python client's om_stream/client/assembly.py;
// the shared vectors (schemas/vectors/context-v2.json) hold all three clients to the same deliveries.
//
// Per thread it holds the latest index, the blocks (until tombstoned), the newest cursor not yet assembled, and the
// messages it knows in position order (those of the last context it assembled, then every cursor's NewMessages
// since). A cursor waits until the index it names and all of its blocks are held; a newer cursor replaces it (it
// covers every message the older one did). When the run of messages does not check out (the client started late,
// or compaction removed a cursor), the cursor is handed back once, for its run to be fetched from the worker
// (GET /v1/threads/{id}/messages), instead of giving a wrong context. No I/O and no locking here: contextView
// guards it, the Client reads the topics and fetches.

import (
	"container/list"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// threadsHeld is how many threads' indexes and blocks are held (the ones heard from last).
const threadsHeld = 16_384

const (
	observationsOpen  = "<observations>"
	observationsClose = "</observations>"
)

type assemblyThread struct {
	id      string
	index   *ContextIndex
	blocks  map[string]string
	pending *ContextCursor
	span    trace.SpanContext // the pending cursor's record's trace context, given to the context it becomes
	asked   bool              // the pending cursor's run was handed back for fetching already (once per cursor)
	known   []Message
}

type contextAssembly struct {
	limit   int
	threads map[string]*list.Element // of *assemblyThread; the list runs from the least recently heard from
	order   *list.List
}

func newContextAssembly(limit int) *contextAssembly {
	return &contextAssembly{limit: limit, threads: map[string]*list.Element{}, order: list.New()}
}

// thread is the thread's state, moved to the end (the threads heard from last are kept).
func (a *contextAssembly) thread(threadID string) *assemblyThread {
	if element, ok := a.threads[threadID]; ok {
		a.order.MoveToBack(element)
		return element.Value.(*assemblyThread)
	}
	state := &assemblyThread{id: threadID, blocks: map[string]string{}}
	a.threads[threadID] = a.order.PushBack(state)
	for a.order.Len() > a.limit {
		oldest := a.order.Front()
		delete(a.threads, oldest.Value.(*assemblyThread).id)
		a.order.Remove(oldest)
	}
	return state
}

// onCursor takes a cursor read from the context topic (span: its record's trace context). It returns the context
// assembled, or the cursor whose run must be fetched (withRun), or neither: still waiting.
func (a *contextAssembly) onCursor(cursor *ContextCursor, span trace.SpanContext) (*ContextRecord, *ContextCursor) {
	state := a.thread(cursor.ThreadID)
	if state.pending != nil && state.pending.Version > cursor.Version {
		return nil, nil // an older cursor read again (at-least-once): the pending one covers it
	}
	state.known = knownMessages(state.known, cursor)
	state.pending, state.span, state.asked = cursor, span, false
	return a.step(cursor.ThreadID)
}

// onIndex takes an index read from om.context.index (nil: its tombstone).
func (a *contextAssembly) onIndex(threadID string, index *ContextIndex) (*ContextRecord, *ContextCursor) {
	a.thread(threadID).index = index
	return a.step(threadID)
}

// onBlock takes a block read from om.context.blocks (text nil: its tombstone).
func (a *contextAssembly) onBlock(threadID, digest string, text *string) (*ContextRecord, *ContextCursor) {
	state := a.thread(threadID)
	if text == nil {
		delete(state.blocks, digest)
		return nil, nil
	}
	state.blocks[digest] = *text
	return a.step(threadID)
}

// step assembles the thread's pending cursor once its index and blocks are held.
func (a *contextAssembly) step(threadID string) (*ContextRecord, *ContextCursor) {
	element, ok := a.threads[threadID]
	if !ok {
		return nil, nil
	}
	state := element.Value.(*assemblyThread)
	if state.pending == nil || !cursorReady(state.pending, state.index, state.blocks) {
		return nil, nil
	}
	run, found := resolveRun(state.pending, state.known)
	if !found {
		if state.asked {
			return nil, nil
		}
		state.asked = true
		return nil, state.pending
	}
	return a.assembled(state, run), nil
}

// withRun assembles cursor with the messages fetched for it (pin, then the run first..through); nil when it is no
// longer the thread's pending cursor, or the fetched run does not check out either.
func (a *contextAssembly) withRun(cursor *ContextCursor, fetched []Message) *ContextRecord {
	element, ok := a.threads[cursor.ThreadID]
	if !ok {
		return nil
	}
	state := element.Value.(*assemblyThread)
	if state.pending != cursor || !cursorReady(cursor, state.index, state.blocks) {
		return nil
	}
	run, found := resolveRun(cursor, fetched)
	if !found {
		return nil
	}
	return a.assembled(state, run)
}

func (a *contextAssembly) assembled(state *assemblyThread, run []Message) *ContextRecord {
	record := rebuildContext(state.pending, state.index, state.blocks, run)
	record.spanContext = state.span
	state.pending, state.span = nil, trace.SpanContext{}
	state.known = run
	return record
}

// forget drops what is held of an erased thread.
func (a *contextAssembly) forget(threadID string) {
	if element, ok := a.threads[threadID]; ok {
		a.order.Remove(element)
		delete(a.threads, threadID)
	}
}

// -- the algorithm (om_stream/wire/context_refs.py) ---------------------------------------------------------------

// knownMessages are the messages a reader knows for a thread once it reads cursor, in position order: those of the
// context it rebuilt before that the cursor does not send again, then the cursor's NewMessages.
func knownMessages(previous []Message, cursor *ContextCursor) []Message {
	again := map[string]bool{}
	for _, m := range cursor.NewMessages {
		again[m.MessageID] = true
	}
	out := make([]Message, 0, len(previous)+len(cursor.NewMessages))
	for _, m := range previous {
		if !again[m.MessageID] {
			out = append(out, m)
		}
	}
	return append(out, cursor.NewMessages...)
}

// resolveRun finds the cursor's raw messages (pin, then run) in known (a thread's messages in position order);
// false when they are not all there (the run is then fetched).
func resolveRun(cursor *ContextCursor, known []Message) ([]Message, bool) {
	raw := cursor.Raw
	byID := map[string]Message{}
	for _, m := range known {
		byID[m.MessageID] = m
	}
	out := []Message{}
	if raw.PinnedMessageID != nil {
		pinned, ok := byID[*raw.PinnedMessageID]
		if !ok {
			return nil, false
		}
		out = append(out, pinned)
	}
	count := int64(0)
	if raw.Count != nil {
		count = *raw.Count
	}
	if count == 0 {
		return out, true
	}
	if raw.FirstMessageID == nil || raw.ThroughMessageID == nil {
		return nil, false
	}
	first, through := -1, -1
	for i, m := range known {
		if first < 0 && m.MessageID == *raw.FirstMessageID {
			first = i
		}
		if m.MessageID == *raw.ThroughMessageID {
			through = i
		}
	}
	if first < 0 || through < 0 || through < first {
		return nil, false
	}
	skip := map[string]bool{}
	for _, id := range raw.Excluded {
		skip[id] = true
	}
	if raw.PinnedMessageID != nil {
		skip[*raw.PinnedMessageID] = true
	}
	var run []Message
	for _, m := range known[first : through+1] {
		if skip[m.MessageID] {
			continue
		}
		if raw.ExpireBefore != nil {
			created, ok := createdAtMillis(m.CreatedAt)
			if !ok || created < *raw.ExpireBefore {
				continue
			}
		}
		run = append(run, m)
	}
	if int64(len(run)) != count || run[0].MessageID != *raw.FirstMessageID {
		return nil, false
	}
	return append(out, run...), true
}

// createdAtMillis is a message's created_at in epoch milliseconds, computed as the worker computes it
// (int(datetime.timestamp() * 1000): microseconds over 1e6, times 1000, truncated).
func createdAtMillis(text string) (int64, bool) {
	moment, err := time.Parse(time.RFC3339Nano, strings.Replace(NormalDateTime(text), " ", "T", 1))
	if err != nil {
		return 0, false
	}
	return int64(float64(moment.UnixMicro()) / 1e6 * 1000), true
}

// cursorReady says whether the reader holds the index the cursor names and every block of it.
func cursorReady(cursor *ContextCursor, index *ContextIndex, blocks map[string]string) bool {
	if index == nil || index.Version != cursor.IndexVersion {
		return false
	}
	for _, digest := range index.Blocks {
		if _, ok := blocks[digest]; !ok {
			return false
		}
	}
	return true
}

// observationsOf is the observation log as om.context/v1 carries it: the blocks between the first <observations>
// block and the last </observations> block, separated by a blank line, inside the two tags on lines of their own;
// the empty string without such blocks.
func observationsOf(systemBlocks []string) string {
	start, end := -1, -1
	for i, block := range systemBlocks {
		if start < 0 && block == observationsOpen {
			start = i
		}
		if block == observationsClose {
			end = i
		}
	}
	if start < 0 || end < 0 || end <= start+1 {
		return ""
	}
	return observationsOpen + "\n" + strings.Join(systemBlocks[start+1:end], "\n\n") + "\n" + observationsClose
}

// rebuildContext is the om.context/v1 record of cursor (cursorReady must hold; messages: what resolveRun or the
// messages API gave).
func rebuildContext(cursor *ContextCursor, index *ContextIndex, blocks map[string]string,
	messages []Message) *ContextRecord {
	systemBlocks := make([]string, 0, len(index.Blocks))
	for _, digest := range index.Blocks {
		systemBlocks = append(systemBlocks, blocks[digest])
	}
	return &ContextRecord{Schema: ContextSchema, ThreadID: cursor.ThreadID, ResourceID: cursor.ResourceID,
		Version: cursor.Version, ThroughMessageID: cursor.ThroughMessageID, Observations: observationsOf(systemBlocks),
		Hints: cursor.Hints, Messages: append([]Message{}, messages...), SystemBlocks: systemBlocks,
		Continuation: cursor.Continuation, Tokens: cursor.Tokens, Generation: cursor.Generation,
		ThreadTitle: cursor.ThreadTitle}
}
