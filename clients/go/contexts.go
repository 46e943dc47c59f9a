package omstream

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/trace"
)

// contextView is what a Client knows of its threads' contexts: the latest context read from the compacted
// context topic per thread, the order of the messages it published (read-your-writes), and what an erase takes
// away. No Kafka here: the client feeds it the records it reads, so its rules are tested on their own.
//
// Erasure: the worker publishes a tombstone (key = thread id, value null) on the context topic for every thread it
// erases, before the erase's receipt. The context topic and the events topic are read on their own, so the receipt
// may come first. Until a thread's tombstone is read, a context of it read from the topic was published before the
// erase: it is dropped. After the tombstone every context is a fresh conversation's (the topic's order per key).
//
// om.context/v2: the cursors, indexes and blocks read go through the view's assembly (assembly.go); a context
// assembled is received like an om.context/v1 record, with the trace context of its cursor's record. An erase
// forgets what the assembly holds of the thread too.
type contextView struct {
	mu                sync.Mutex
	latest            map[string]*ContextRecord
	changed           chan struct{} // closed and replaced whenever a context arrives
	sent              map[string]map[string]uint64
	order             map[string][]string
	sequence          uint64
	erasing           map[*erasureWatch]struct{}
	awaitingTombstone map[string]struct{}
	assembly          *contextAssembly
}

// erasureWatch is one erase in flight, from before its command is sent until its receipt is applied: the threads
// whose tombstone was read since it began.
type erasureWatch struct {
	tombstoned map[string]struct{}
}

func newContextView() *contextView {
	return &contextView{latest: map[string]*ContextRecord{}, changed: make(chan struct{}),
		sent: map[string]map[string]uint64{}, order: map[string][]string{},
		erasing: map[*erasureWatch]struct{}{}, awaitingTombstone: map[string]struct{}{},
		assembly: newContextAssembly(threadsHeld)}
}

// published notes that this client published messageID to threadID (after everything it published before).
func (v *contextView) published(threadID, messageID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.sequence++
	sent := v.sent[threadID]
	if sent == nil {
		sent = map[string]uint64{}
		v.sent[threadID] = sent
	}
	if _, seen := sent[messageID]; !seen {
		v.order[threadID] = append(v.order[threadID], messageID)
	}
	sent[messageID] = v.sequence
	if order := v.order[threadID]; len(order) > rememberedPerThread {
		delete(sent, order[0])
		v.order[threadID] = order[1:]
	}
}

func (v *contextView) includes(context *ContextRecord, messageID string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.includesLocked(context, messageID)
}

func (v *contextView) includesLocked(context *ContextRecord, messageID string) bool {
	through := context.ThroughMessageID
	if through != nil && *through == messageID {
		return true
	}
	sent := v.sent[context.ThreadID]
	mine, known := sent[messageID]
	if through != nil && known {
		if last, ok := sent[*through]; ok && last > mine {
			return true
		}
	}
	for _, m := range context.Messages {
		if m.MessageID == messageID {
			return true
		}
	}
	return false
}

func (v *contextView) latestOf(threadID string) *ContextRecord {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.latest[threadID]
}

// awaitIncluding returns the first context of threadID that includes messageID, bounded by ctx.
func (v *contextView) awaitIncluding(ctx context.Context, threadID, messageID string) (*ContextRecord, error) {
	return v.await(ctx, threadID, func(context *ContextRecord) bool {
		return v.includesLocked(context, messageID)
	}, "includes message "+messageID)
}

// await returns the thread's latest context once ready says it is the one (ready is called with v.mu held),
// bounded by ctx; what describes the context waited for, in the error.
func (v *contextView) await(ctx context.Context, threadID string, ready func(*ContextRecord) bool,
	what string) (*ContextRecord, error) {
	for {
		v.mu.Lock()
		latest, changed := v.latest[threadID], v.changed
		met := latest != nil && ready(latest)
		v.mu.Unlock()
		if met {
			return latest, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, fmt.Errorf("no context of thread %s %s: %w", threadID, what, ctx.Err())
		}
	}
}

// received takes a context read from the topic.
func (v *contextView) received(context *ContextRecord) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.receivedLocked(context)
}

// cursor takes an om.context/v2 cursor read from the context topic (span: its record's trace context); it returns
// the cursor when its run must be fetched (fetched), else nil.
func (v *contextView) cursor(cursor *ContextCursor, span trace.SpanContext) *ContextCursor {
	v.mu.Lock()
	defer v.mu.Unlock()
	if _, erased := v.awaitingTombstone[cursor.ThreadID]; erased {
		return nil // published before the erase that removed it
	}
	return v.deliver(v.assembly.onCursor(cursor, span))
}

// index takes a record of the index topic (nil: a tombstone); it returns a cursor whose run must be fetched.
func (v *contextView) index(threadID string, index *ContextIndex) *ContextCursor {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.deliver(v.assembly.onIndex(threadID, index))
}

// block takes a record of the blocks topic (text nil: a tombstone); it returns a cursor whose run must be fetched.
func (v *contextView) block(threadID, digest string, text *string) *ContextCursor {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.deliver(v.assembly.onBlock(threadID, digest, text))
}

// fetched takes the run fetched for a cursor that cursor, index or block handed back.
func (v *contextView) fetched(cursor *ContextCursor, messages []Message) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.deliver(v.assembly.withRun(cursor, messages), nil)
}

func (v *contextView) deliver(context *ContextRecord, wanted *ContextCursor) *ContextCursor {
	if context != nil {
		v.receivedLocked(context)
	}
	return wanted
}

func (v *contextView) receivedLocked(context *ContextRecord) {
	if _, erased := v.awaitingTombstone[context.ThreadID]; erased {
		return // published before the erase that removed it
	}
	if current := v.latest[context.ThreadID]; current != nil && current.Version > context.Version {
		return // an older context, replayed
	}
	v.latest[context.ThreadID] = context
	close(v.changed)
	v.changed = make(chan struct{})
}

// tombstone takes a tombstone read from the topic: the thread was erased, its context is gone.
func (v *contextView) tombstone(threadID string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.forget(threadID)
	delete(v.awaitingTombstone, threadID)
	for watch := range v.erasing {
		watch.tombstoned[threadID] = struct{}{}
	}
}

// beginErase is called before an erase's command is sent: the tombstones read from then on are noted.
func (v *contextView) beginErase() *erasureWatch {
	v.mu.Lock()
	defer v.mu.Unlock()
	watch := &erasureWatch{tombstoned: map[string]struct{}{}}
	v.erasing[watch] = struct{}{}
	return watch
}

// endErase ends an erase's watch (receipt or not).
func (v *contextView) endErase(watch *erasureWatch) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.erasing, watch)
}

// erased applies a receipt: the erased threads' contexts and published messages are forgotten. A thread whose
// tombstone was read since the erase began holds only a fresh conversation's context, kept; for the others, when
// the worker published tombstones (Removed.Contexts), contexts are dropped until the thread's tombstone is read.
func (v *contextView) erased(request EraseRequest, receipt *ErasedEvent, watch *erasureWatch) {
	v.mu.Lock()
	defer v.mu.Unlock()
	var threads []string
	if request.ThreadID != "" {
		threads = []string{request.ThreadID}
	} else {
		for thread, context := range v.latest {
			if context.ResourceID == request.ResourceID {
				threads = append(threads, thread)
			}
		}
	}
	for _, thread := range threads {
		if _, fresh := watch.tombstoned[thread]; fresh {
			continue
		}
		v.forget(thread)
		if receipt.Removed.Contexts > 0 {
			v.awaitingTombstone[thread] = struct{}{}
		}
	}
}

func (v *contextView) forget(threadID string) {
	delete(v.latest, threadID)
	delete(v.sent, threadID)
	delete(v.order, threadID)
	v.assembly.forget(threadID)
}
