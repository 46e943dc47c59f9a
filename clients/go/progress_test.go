package omstream

import (
	"errors"
	"testing"
)

// Settled's rules, fed the progress events the worker publishes (the Python client's settle, step for step).

func progressEvent(thread string, request *string, through *ThroughMessage, settledThrough *int64) *ProgressEvent {
	p := &ProgressEvent{RecordID: thread, ThreadID: thread, Buffered: []BufferedChunk{}, InFlight: []RunningCycle{},
		WaitingFor: []string{}, RequestID: request, Through: through}
	if settledThrough != nil {
		p.SettledThrough = &MessageMark{Seq: *settledThrough}
	}
	return p
}

func ref[T any](v T) *T { return &v }

func TestSettlingEndsOnTheAnswerThatSaysSettled(t *testing.T) {
	s := settling{threadID: "t", throughMessageID: "m-3", requestID: "q1"}
	steps := []struct {
		event *ProgressEvent
		want  settleStep
	}{
		{progressEvent("other", ref("q1"), &ThroughMessage{Status: "observed", Settled: true}, nil), keepWaiting},
		{progressEvent("t", ref("q0"), &ThroughMessage{Status: "observed", Settled: true}, nil), keepWaiting},
		{progressEvent("t", ref("q1"), nil, nil), keepWaiting},
		{progressEvent("t", nil, nil, ref(int64(99))), keepWaiting}, // not answered yet: no seq to reach
		{progressEvent("t", ref("q1"), &ThroughMessage{MessageID: ref("m-3"), Seq: ref(int64(3)),
			Status: "unobserved", Settled: true}, nil), settledNow},
	}
	for i, step := range steps {
		if got, _ := s.take(step.event); got != step.want {
			t.Fatalf("event %d: %v, want %v", i, got, step.want)
		}
	}
}

func TestSettlingWaitsForSettledThroughToReachTheAnswersSeq(t *testing.T) {
	s := settling{threadID: "t", requestID: "q1"}
	answer := progressEvent("t", ref("q1"), &ThroughMessage{MessageID: ref("m-7"), Seq: ref(int64(7)),
		Status: "observing"}, ref(int64(2)))
	if got, _ := s.take(answer); got != keepWaiting || s.target == nil || *s.target != 7 {
		t.Fatalf("the answer placed the message at %v (%v)", s.target, got)
	}
	for _, seq := range []int64{2, 6} {
		if got, _ := s.take(progressEvent("t", nil, nil, ref(seq))); got != keepWaiting {
			t.Fatalf("settled through %d is not through 7", seq)
		}
	}
	if got, _ := s.take(progressEvent("t", nil, nil, nil)); got != keepWaiting {
		t.Fatal("no settledThrough is not through 7")
	}
	if got, _ := s.take(progressEvent("other", nil, nil, ref(int64(9)))); got != keepWaiting {
		t.Fatal("another thread's progress")
	}
	if got, _ := s.take(progressEvent("t", nil, nil, ref(int64(7)))); got != settledNow {
		t.Fatal("settled through 7 settles 7")
	}
	s.target = ref(int64(7))
	if got, _ := s.take(progressEvent("t", nil, nil, ref(int64(12)))); got != settledNow {
		t.Fatal("settled through 12 settles 7")
	}
}

func TestSettlingAsksAgainForAMessageNotTakenInYet(t *testing.T) {
	named := settling{threadID: "t", throughMessageID: "m-9", requestID: "q1"}
	unknown := progressEvent("t", ref("q1"), &ThroughMessage{MessageID: ref("m-9"), Status: "unknown"}, nil)
	if got, wanted := named.take(unknown); got != askAgain || wanted != "m-9" {
		t.Fatalf("%v %q", got, wanted)
	}
	// the newest message asked about: the one the answer names
	newest := settling{threadID: "t", requestID: "q1"}
	if got, wanted := newest.take(unknown); got != askAgain || wanted != "m-9" {
		t.Fatalf("%v %q", got, wanted)
	}
	nothing := progressEvent("t", ref("q1"), &ThroughMessage{Status: "unknown"}, nil)
	if got, _ := newest.take(nothing); got != keepWaiting {
		t.Fatalf("nothing to wait for: %v", got)
	}
}

func TestTheProgressCommandIsValidatedAgainstTheSchema(t *testing.T) {
	command, err := NewProgressCommand("thread-1", "m-7", "", "cmd-7")
	if err != nil {
		t.Fatal(err)
	}
	got, err := EncodeCanonical(CommandSchema, command)
	if err != nil {
		t.Fatal(err)
	}
	if want := string(read(t, "valid/command-progress.canonical.json")); string(got) != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	newest, err := NewProgressCommand("t", "", "user-1", "cmd-8")
	if err != nil || newest.ThroughMessageID != nil || *newest.ResourceID != "user-1" {
		t.Fatalf("%+v %v", newest, err)
	}
	var contractErr *ContractError
	if _, err := NewProgressCommand("", "m-7", "", "cmd-9"); !errors.As(err, &contractErr) {
		t.Fatalf("a progress command without a thread must be refused, got %v", err)
	}
}
