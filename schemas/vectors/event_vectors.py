"""The shared test vectors of the ``data-om-*`` lifecycle events (``generate.py`` writes them with the others).

One valid payload per event type, or several where a field's forms differ: each as a producer writes it.
"""

from __future__ import annotations

from typing import Any


def vector(name: str, schema: str, value: Any, style: str = "pretty") -> dict[str, Any]:
    return {"name": name, "schema": schema, "value": value, "style": style}


MARKER = {"messageTokens": 30000, "observationTokens": 40000, "scope": "thread", "activateAfterIdle": "auto"}
EVENT_BASE = {"recordId": "thread-1", "threadId": "thread-1"}
CYCLE = {"cycleId": "thread-1:obs:3", "operationType": "observation"}
PROGRESS = {
    **EVENT_BASE, "latestMessage": {"messageId": "m-14", "seq": 15}, "observedThrough": {"messageId": "m-3",
                                                                                        "seq": 3},
    "settledThrough": {"messageId": "m-3", "seq": 3}, "unobserved": {"messages": 12, "tokens": 9300},
    "buffered": [{"cycleId": "thread-1:buf:4", "firstMessageId": "m-4", "lastMessageId": "m-8", "firstSeq": 4,
                  "lastSeq": 8, "messages": 5, "messageTokens": 6000, "observationTokens": 310}],
    "inFlight": [{"cycleId": "thread-1:buf:6", "kind": "buffer", "operationType": "observation", "attempt": 2,
                  "startedAt": "2026-03-01T09:05:00.000Z", "tokens": 2900, "messages": 6,
                  "firstMessageId": "m-9", "lastMessageId": "m-14", "blocking": True}],
    "waitingFor": ["idle-activation", "buffering-retry"], "pending": True, "generationCount": 1}
EVENT_VECTORS: list[dict[str, Any]] = [
    vector("event-status", "data-om-status/v1", {**EVENT_BASE, "stepNumber": 4, "generationCount": 0, "windows": {
        "active": {"messages": {"tokens": 812, "threshold": 30000},
                   "observations": {"tokens": 0, "threshold": 40000}},
        "buffered": {"observations": {"chunks": 1, "messageTokens": 600, "projectedMessageRemoval": 600,
                                      "observationTokens": 120, "status": "complete"},
                     "reflection": {"inputObservationTokens": 0, "observationTokens": 0, "status": "idle"}}}}),
    vector("event-observation-start", "data-om-observation-start/v1", {
        **EVENT_BASE, **CYCLE, "startedAt": "2026-03-01T09:00:02.000Z", "tokensToObserve": 31000,
        "threadIds": ["thread-1"], "config": MARKER}),
    vector("event-observation-end", "data-om-observation-end/v1", {
        **EVENT_BASE, **CYCLE, "completedAt": "2026-03-01T09:00:05.000Z", "durationMs": 3000,
        "tokensObserved": 31000, "observationTokens": 900, "observations": "* 🔴 (09:00) User likes trains.",
        "currentTask": "Book a train", "suggestedResponse": None, "extractedValues": {"city": "Zürich", "n": 2},
        "extractionFailures": [{"slug": "budget", "error": "not found"}], "fallbackModel": "offline"}),
    vector("event-observation-failed", "data-om-observation-failed/v1", {
        **EVENT_BASE, **CYCLE, "failedAt": "2026-03-01T09:00:05.000Z", "durationMs": 3000,
        "tokensAttempted": 31000, "error": "rate limited", "nextAction": "retry in 2s"}),
    vector("event-buffering-start", "data-om-buffering-start/v1", {
        **EVENT_BASE, **CYCLE, "startedAt": "2026-03-01T09:00:02.000Z", "tokensToBuffer": 6000,
        "threadIds": ["thread-1", "thread-2"],
        "config": {"messageTokens": 30000, "observationTokens": 40000, "scope": "resource"}}),
    vector("event-buffering-end", "data-om-buffering-end/v1", {
        **EVENT_BASE, **CYCLE, "completedAt": "2026-03-01T09:00:04.000Z", "durationMs": 2000,
        "tokensBuffered": 6000, "bufferedTokens": 300, "observations": "* 🟡 (09:01) Mentioned a budget."}),
    vector("event-buffering-failed", "data-om-buffering-failed/v1", {
        **EVENT_BASE, "cycleId": "thread-1:ref:1", "operationType": "reflection", "failedAt": "2026-03-01T09:00:04Z",
        "durationMs": 1, "tokensAttempted": 40000, "error": "timeout", "observations": "partial"}),
    # one event per activated chunk, under the chunk's buffering cycleId; ttlExpiredMs is the time since the last
    # activity (09:00:00), not the excess over activateAfterIdle
    vector("event-activation", "data-om-activation/v1", {
        **EVENT_BASE, "cycleId": "thread-1:obs:1", "operationType": "observation",
        "activatedAt": "2026-03-01T09:05:01.000Z", "chunksActivated": 1, "tokensActivated": 6000,
        "observationTokens": 300, "messagesActivated": 7, "generationCount": 0, "observations": "* 🔴 (09:00) …",
        "triggeredBy": "ttl", "bufferCycleIds": ["thread-1:obs:1"], "lastActivityAt": 1772355600000,
        "ttlExpiredMs": 301000, "previousModel": None, "config": {**MARKER, "activateAfterIdle": 300000}}),
    vector("event-thread-update", "data-om-thread-update/v1", {
        **EVENT_BASE, "cycleId": "thread-1:obs:3", "oldTitle": None, "newTitle": "Trip to Zürich 🚆",
        "timestamp": "2026-03-01T09:00:05.000Z"}),
    vector("event-temporal-marker", "data-om-temporal-marker/v1", {
        **EVENT_BASE, "messageId": "thread-1:gap:m-10", "precedesMessageId": "m-10", "gapMs": 259200000,
        "gapText": "3 days later", "text": "<system-reminder>3 days have passed.</system-reminder>"}),
    vector("event-condensation", "data-om-condensation/v1", {
        **EVENT_BASE, "cycleId": "thread-1:refl:4", "condensedAt": "2026-03-01T09:00:06.000Z",
        "reason": "over_target", "tokensBefore": 5210, "tokensAfter": 3190, "targetTokens": 4000,
        "observationsFolded": 37}),
    vector("event-erased-thread", "data-om-erased/v1", {
        "recordId": "thread:thread-1", "threadId": "thread-1", "eraseId": "erase-1", "scope": "thread",
        "resourceId": "user-1", "found": True,
        "removed": {"messages": 42, "observations": 5, "generations": 1, "threads": 1, "cycleResults": 6,
                    "recallPoints": 57, "stateRecords": 1, "contexts": 1},
        "requestedAt": "2026-03-01T09:00:00.250Z", "completedAt": "2026-03-01T09:00:01.125Z", "verified": True,
        "parts": 1}),
    vector("event-erased-unknown-resource", "data-om-erased/v1", {
        "recordId": "resource:user-404", "threadId": None, "eraseId": "erase-2", "scope": "resource",
        "resourceId": "user-404", "found": False,
        "removed": {"messages": 0, "observations": 0, "generations": 0, "threads": 0, "cycleResults": 0,
                    "recallPoints": 0, "stateRecords": 0, "contexts": 0},
        "requestedAt": "2026-03-01T09:00:00Z", "completedAt": "2026-03-01T09:00:02Z", "verified": True,
        "parts": 12}, style="shuffled"),
    vector("event-expired", "data-om-expired/v1", {
        "recordId": "thread:thread-1", "threadId": "thread-1", "expiryId": "exp-3f2a9c1d-0-118",
        "threadIds": ["thread-1"], "retentionDays": 30, "cutoff": "2026-01-30T09:00:00.000Z",
        "expiredAt": "2026-03-01T09:00:00.000Z",
        "removed": {"messages": 12, "observations": 1, "rewritten": 1, "entries": 9, "threads": 0,
                    "cycleResults": 2},
        "nextPurgeAt": "2026-03-01T09:14:00.000Z"}),
    vector("event-expired-everything", "data-om-expired/v1", {
        "recordId": "resource:user-1", "threadId": "thread-a", "expiryId": "exp-0a1b2c3d-1-7",
        "threadIds": ["thread-a", "thread-b"], "retentionDays": 1, "cutoff": "2026-02-28T09:00:00Z",
        "expiredAt": "2026-03-01T09:00:00Z",
        "removed": {"messages": 3, "observations": 2, "rewritten": 0, "entries": 0, "threads": 2,
                    "cycleResults": 0}}, style="shuffled"),
    # a cycle started: a chunk is buffered, another buffering runs, the thread's messages are pending
    vector("event-progress", "data-om-progress/v1", PROGRESS),
    # the answer to a progress command: where the message asked about stands
    vector("event-progress-answer", "data-om-progress/v1", {
        **EVENT_BASE, "latestMessage": {"messageId": "m-9", "seq": 9},
        "observedThrough": {"messageId": "m-9", "seq": 9}, "settledThrough": {"messageId": "m-9", "seq": 9},
        "unobserved": {"messages": 0, "tokens": 0}, "buffered": [],
        "inFlight": [{"cycleId": "thread-1:refl:5", "kind": "buffer", "operationType": "reflection", "attempt": 1,
                      "startedAt": "2026-03-01T09:06:00.000Z", "tokens": 41000, "messages": 0,
                      "firstMessageId": None, "lastMessageId": None, "blocking": False}],
        "waitingFor": [], "pending": False, "generationCount": 2, "requestId": "cmd-7",
        "through": {"messageId": "m-7", "seq": None, "status": "observed", "settled": True}}),
    # resource scope: the log names no message of this thread alone
    vector("event-progress-resource-answer", "data-om-progress/v1", {
        "recordId": "resource:user-1", "threadId": "thread-2", "latestMessage": {"messageId": "m-30", "seq": 30},
        "observedThrough": {"messageId": None, "seq": 21}, "settledThrough": {"messageId": "m-30", "seq": 30},
        "unobserved": {"messages": 3, "tokens": 410}, "buffered": [], "inFlight": [], "waitingFor": [],
        "pending": False, "generationCount": 0, "requestId": "0b9c6a8e-6a2f-4f7e-9a55-1f6d2f0e1c2d",
        "through": {"messageId": "m-30", "seq": 30, "status": "unobserved", "settled": True}}),
    vector("event-status-with-progress", "data-om-status/v1", {
        **EVENT_BASE, "stepNumber": 1, "generationCount": 0, "windows": {
            "active": {"messages": {"tokens": 40, "threshold": 30000},
                       "observations": {"tokens": 0, "threshold": 40000}},
            "buffered": {"observations": {"chunks": 0, "messageTokens": 0, "projectedMessageRemoval": 0,
                                          "observationTokens": 0, "status": "idle"},
                         "reflection": {"inputObservationTokens": 0, "observationTokens": 0, "status": "idle"}}},
        "progress": {**EVENT_BASE, "latestMessage": {"messageId": "m-1", "seq": 1}, "observedThrough": None,
                     "settledThrough": {"messageId": "m-1", "seq": 1}, "unobserved": {"messages": 1, "tokens": 40},
                     "buffered": [], "inFlight": [], "waitingFor": [], "pending": False, "generationCount": 0,
                     "requestId": None,
                     "through": {"messageId": "m-1", "seq": 1, "status": "unobserved", "settled": True}}}),
    vector("event-condensation-as-rendered", "data-om-condensation/v1", {
        **EVENT_BASE, "cycleId": None, "condensedAt": "2026-03-01T09:00:07.000Z", "reason": "context_over_bound",
        "tokensBefore": 5210, "tokensAfter": None, "targetTokens": 4800, "observationsFolded": None}),
]
