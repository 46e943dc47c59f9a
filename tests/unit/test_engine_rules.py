"""The state machine's rules, one test per rule of the seeds (driven through core.decide by tests.support.sim).

Token counts in the simulator: one token per word plus one per message, no conversation overhead, so a message of
9 words costs 10 tokens.
"""

from __future__ import annotations

from collections import Counter

from om_stream.core.commands import ActivateChunks, CommitGeneration
from om_stream.core.inputs import ObserveNow
from tests.support.engine_cases import TEN, buffered, events, sync_only
from tests.support.sim import Outcome, Sim

# -- buffering ---------------------------------------------------------------------------------------------------

def test_buffering_starts_each_time_pending_tokens_cross_a_buffer_tokens_interval() -> None:
    sim = Sim(buffered())
    starts = []
    for _ in range(7):
        sim.say("t1", "user", TEN)
        sim.settle(1)  # no time for results: only the triggers
        starts.append(len(events(sim, "data-om-buffering-start")))
        sim.settle()
    # bufferTokens 20: the 2nd message reaches 20, the 4th 40, the 6th 60
    assert starts == [0, 1, 1, 2, 2, 3, 3]


def test_buffering_gets_denser_near_the_threshold() -> None:
    sim = Sim(buffered())
    for _ in range(8):
        sim.say("t1", "user", TEN)
        sim.settle()
    tokens_at_start = [e.tokens_to_buffer for e in events(sim, "data-om-buffering-start")]
    # from 100 - 1.1*20 = 78 tokens on, the interval halves to 10: a cycle at 80 follows the one at 60
    assert len(tokens_at_start) == 4
    assert tokens_at_start[-1] == 20


def test_buffering_waits_for_half_an_interval_of_new_messages() -> None:
    sim = Sim(buffered(bufferTokens=40))
    sim.say("t1", "user", " ".join(["w"] * 40))  # 41 tokens crosses 40
    sim.settle()
    assert len(events(sim, "data-om-buffering-start")) == 1
    sim.say("t1", "user", " ".join(["w"] * 10))
    sim.settle()
    assert len(events(sim, "data-om-buffering-start")) == 1


def test_buffered_chunks_stay_invisible_until_activation() -> None:
    sim = Sim(buffered())
    for _ in range(4):
        sim.say("t1", "user", TEN)
        sim.settle()
    context = sim.last_context()
    assert sim.state().buffered
    assert context.segment_ids == ()
    assert len(context.message_ids) == 4


# -- activation --------------------------------------------------------------------------------------------------

def test_activation_at_the_threshold_keeps_about_the_retention_floor() -> None:
    sim = Sim(buffered())
    for _ in range(10):
        sim.say("t1", "user", TEN)
        sim.settle()
    activation = events(sim, "data-om-activation")
    assert len([c for c in sim.commands if isinstance(c, ActivateChunks)]) == 1  # once, one event per chunk
    assert {e.triggered_by for e in activation} == {"threshold"}
    # bufferActivation 0.8 of 100: keep about 20 tokens raw
    assert 10 <= sim.state().unobserved_tokens <= 30
    assert sim.last_context().segment_ids


def test_activation_with_absolute_buffer_activation_retains_that_many_tokens() -> None:
    sim = Sim({"observation": {"messageTokens": 2000, "bufferTokens": 400, "bufferActivation": 1000},
               "reflection": {"observationTokens": 100_000}})
    for _ in range(21):
        sim.say("t1", "user", " ".join(["w"] * 99))
        sim.settle()
    assert events(sim, "data-om-activation")
    assert 600 <= sim.state().unobserved_tokens <= 1400


def test_activation_reports_message_and_observation_tokens_and_the_buffer_cycles() -> None:
    sim = Sim(buffered())
    for _ in range(10):
        sim.say("t1", "user", TEN)
        sim.settle()
    activation = events(sim, "data-om-activation")[0]
    ends = {e.cycle_id: e for e in events(sim, "data-om-buffering-end")}
    assert activation.buffer_cycle_ids
    assert all(c in ends for c in activation.buffer_cycle_ids)
    assert activation.observation_tokens == sum(ends[c].buffered_tokens for c in activation.buffer_cycle_ids)
    assert activation.tokens_activated == sum(ends[c].tokens_buffered for c in activation.buffer_cycle_ids)
    assert activation.messages_activated == activation.tokens_activated // 10
    emitted = next(e for e in sim.events if e.event is activation)
    assert emitted.observations_from  # the runner fills the activated text from the stored chunks


def test_activation_keeps_contexts_within_block_after_when_buffering_lags() -> None:
    # buffering results take long: pending runs past blockAfter before enough chunks exist
    sim = Sim(buffered(blockAfter=1.5), outcome=lambda r: Outcome(delay_ms=15_000))
    for _ in range(16):
        sim.say("t1", "user", TEN, advance_ms=1_000)
    sim.settle()
    limit = 150
    assert all(p.spec.message_tokens - p.newest_tokens <= limit for p in sim.contexts)
    assert "m16" in sim.last_context().message_ids  # the current question stays, even once activated


# -- synchronous observation -----------------------------------------------------------------------------------

def test_without_buffering_the_observer_runs_at_the_threshold_and_the_context_waits() -> None:
    sim = Sim(sync_only(50))
    for _ in range(4):
        sim.say("t1", "user", TEN)
    published_before = len(sim.contexts)
    sim.say("t1", "user", TEN)  # reaches 50
    assert len(sim.contexts) == published_before  # no context until the observation is done
    # the cycle's start, then the thread's progress saying it runs
    assert [e.event_type for e in (x.event for x in sim.events)][-2:] == ["data-om-observation-start",
                                                                         "data-om-progress"]
    sim.settle()
    context = sim.last_context()
    assert context.through_message_id == "m5"
    assert context.segment_ids
    assert events(sim, "data-om-observation-end")[0].tokens_observed == 50


def test_sync_observation_past_block_after_when_buffering_cannot_keep_up() -> None:
    sim = Sim(buffered(blockAfter=1.2), outcome=lambda r: Outcome(ok=r.kind != "buffer"))
    for _ in range(13):
        sim.say("t1", "user", TEN)
        sim.settle(10)
    assert events(sim, "data-om-buffering-failed")
    assert events(sim, "data-om-observation-end")
    assert all(p.spec.message_tokens - p.newest_tokens <= 120 for p in sim.contexts)


def test_when_every_model_fails_past_the_limit_the_offline_model_observes() -> None:
    sim = Sim(sync_only(50),
              outcome=lambda r: Outcome(ok=False, error="HTTP 429"))
    for _ in range(5):
        sim.say("t1", "user", TEN)
    sim.settle()
    failed = events(sim, "data-om-observation-failed")
    ended = events(sim, "data-om-observation-end")
    assert failed[0].next_action == "observe with the offline model"
    assert ended[0].fallback_model == "offline"
    assert sim.last_context().through_message_id == "m5"


def test_a_lost_result_fails_over_to_the_offline_model_within_the_blocking_timeout() -> None:
    sim = Sim(sync_only(50),
              outcome=lambda r: Outcome(lost=True))
    for _ in range(5):
        sim.say("t1", "user", TEN)
    start = sim.now
    sim.settle()
    published = next(p for p in sim.contexts if p.spec.through_message_id == "m5")
    assert published.at - start <= sim.limits.blocking_timeout_ms + 1_000


def test_a_background_cycle_without_result_is_asked_again_after_its_deadline() -> None:
    attempts: Counter[str] = Counter()

    def lose_first(request: object) -> Outcome:
        attempts[request.cycle_id] += 1  # type: ignore[attr-defined]
        return Outcome(lost=attempts[request.cycle_id] == 1)  # type: ignore[attr-defined]

    sim = Sim(buffered(), outcome=lose_first)
    sim.say("t1", "user", " ".join(["w"] * 25))
    sim.settle()
    assert max(attempts.values()) == 2
    assert events(sim, "data-om-buffering-end")


# -- turns and tools ---------------------------------------------------------------------------------------------

def test_the_current_turn_user_message_stays_in_the_context_once_observed() -> None:
    sim = Sim(sync_only(40))
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", TEN)
    question = sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", TEN, tool_calls=("c1",))
    sim.say("t1", "tool", TEN, tool_results=("c1",))
    sim.settle()
    assert sim.observed_count.get(question.message_id) == 1
    assert question.message_id in sim.last_context().message_ids


def test_a_cycle_never_separates_a_tool_call_from_its_result() -> None:
    sim = Sim(sync_only(40))
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", " ".join(["w"] * 30), tool_calls=("c1",))  # crosses the threshold, call open
    sim.settle()
    assert "m2" in sim.last_context().message_ids  # the open call stays raw
    sim.say("t1", "tool", TEN, tool_results=("c1",))
    sim.settle()
    context = sim.last_context()
    assert ("m2" in context.message_ids) == ("m3" in context.message_ids)


# -- hints, titles, events ---------------------------------------------------------------------------------------

def test_activation_keeps_the_continuation_hints() -> None:
    sim = Sim(buffered())
    sim.say("t1", "user", TEN)
    state = sim.state()
    sim.apply(state.key, state.resource_id, ObserveNow(force=True))  # a synchronous observation sets the task
    sim.settle()
    assert sim.last_context().current_task == "the current task"
    for _ in range(10):  # buffered chunks carry no hints; activating them must not clear the stored task
        sim.say("t1", "user", TEN)
        sim.settle()
    assert events(sim, "data-om-activation")
    assert sim.last_context().current_task == "the current task"


def test_buffering_end_reports_this_cycles_output_tokens() -> None:
    sim = Sim(buffered())
    for _ in range(8):
        sim.say("t1", "user", TEN)
        sim.settle()
    ends = events(sim, "data-om-buffering-end")
    assert len(ends) >= 3
    for end in ends:
        assert end.buffered_tokens == sim.accountant.count_text(end.observations)


def test_a_buffering_end_publishes_a_context_only_when_it_changed_what_one_shows() -> None:
    def titled(title: str | None):  # type: ignore[no-untyped-def]
        sim = Sim(buffered(threadTitle=True))
        original = sim._result

        def with_title(request, outcome):  # type: ignore[no-untyped-def]
            from dataclasses import replace
            return replace(original(request, outcome), thread_title=title)

        sim._result = with_title  # type: ignore[method-assign]
        return sim

    for title in (None, "Trip to Lisbon"):
        sim = titled(title)
        sim.say("t1", "user", TEN)
        sim.say("t1", "user", TEN)  # 20 tokens: a buffering cycle starts
        assert len(events(sim, "data-om-buffering-start")) == 1
        contexts, statuses = len(sim.contexts), len(events(sim, "data-om-status"))
        sim.settle()
        assert len(events(sim, "data-om-buffering-end")) == 1
        # the chunk is in no context until activated: without a new title the agent's context and its status stay
        # as they were (the next message's context shows the chunk in its status)
        assert len(sim.contexts) - contexts == (0 if title is None else 1)
        assert len(events(sim, "data-om-status")) - statuses == (0 if title is None else 1)
        if title is not None:
            assert sim.last_context().thread_title == title
        sim.say("t1", "user", TEN)
        assert events(sim, "data-om-status")[-1].windows.buffered.observations.chunks == 1


def test_start_end_and_failed_events_share_the_cycle_id() -> None:
    outcomes = iter([Outcome(ok=False, text="* partial line"), Outcome()] * 20)
    sim = Sim(buffered(), outcome=lambda r: next(outcomes))
    for _ in range(9):
        sim.say("t1", "user", TEN)
        sim.settle()
    starts = {e.cycle_id for e in events(sim, "data-om-buffering-start")}
    finished = [e.cycle_id for e in events(sim, "data-om-buffering-end") + events(sim, "data-om-buffering-failed")]
    assert sorted(finished) == sorted(starts)


def test_failed_events_carry_the_partial_observations() -> None:
    sim = Sim(buffered(), outcome=lambda r: Outcome(ok=False, text="* 🔴 partial work"))
    sim.say("t1", "user", " ".join(["w"] * 25))
    sim.settle(10_000)
    failed = events(sim, "data-om-buffering-failed")
    assert failed[0].observations == "* 🔴 partial work"


def test_status_is_published_with_every_context() -> None:
    sim = Sim(buffered())
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", TEN)
    statuses = events(sim, "data-om-status")
    assert len(statuses) == len(sim.contexts) == 2
    assert statuses[-1].windows.active.messages.tokens == 20
    assert statuses[-1].windows.active.messages.threshold == 100
    assert statuses[-1].step_number == 1


def test_thread_title_updates_only_when_enabled() -> None:
    def titled(request: object) -> Outcome:
        return Outcome()

    for enabled in (False, True):
        sim = Sim({"observation": {"messageTokens": 30, "bufferTokens": False, "threadTitle": enabled},
                   "reflection": {"observationTokens": 10_000}}, outcome=titled)
        original = sim._result

        def with_title(request, outcome, original=original):  # type: ignore[no-untyped-def]
            from dataclasses import replace
            return replace(original(request, outcome), thread_title="Trip to Lisbon")

        sim._result = with_title  # type: ignore[method-assign]
        for _ in range(3):
            sim.say("t1", "user", TEN)
        sim.settle()
        updates = events(sim, "data-om-thread-update")
        assert bool(updates) == enabled
        assert (sim.last_context().thread_title == "Trip to Lisbon") == enabled


# -- reflection --------------------------------------------------------------------------------------------------

def test_reflection_runs_at_observation_tokens_and_starts_a_new_generation() -> None:
    sim = Sim(sync_only(20, 40))
    for _ in range(30):
        sim.say("t1", "user", TEN)
        sim.settle()
    assert sim.state().generation >= 1
    assert any(isinstance(c, CommitGeneration) for c in sim.commands)
    assert sim.state().log[0].kind == "reflection"


def test_buffered_reflection_replaces_only_the_segments_it_covered() -> None:
    slow_reflections = Sim(buffered(bufferTokens=0.5, bufferActivation=1.0),
                           outcome=lambda r: Outcome(delay_ms=5_000 if r.__class__.__name__ == "RequestReflection"
                                                     else 10))
    slow_reflections.options = {}
    sim = Sim({"observation": {"messageTokens": 40, "bufferTokens": 0.5, "bufferActivation": 1.0},
               "reflection": {"observationTokens": 60, "bufferActivation": 0.5}})
    commits: list[CommitGeneration] = []
    for _ in range(40):
        sim.say("t1", "user", TEN)
        sim.settle()
        commits += [c for c in sim.commands if isinstance(c, CommitGeneration) and c not in commits]
    assert commits
    for commit in commits:
        assert commit.segment_ids[0] == commit.reflection_id
        assert not set(commit.replaced_segment_ids) & set(commit.segment_ids[1:])


def test_a_buffered_chunk_survives_a_reflection() -> None:
    sim = Sim({"observation": {"messageTokens": 60, "bufferTokens": 0.2},
               "reflection": {"observationTokens": 40, "bufferActivation": 0.5}})
    survived = 0
    for _ in range(60):
        before = list(sim.states[next(iter(sim.states))].buffered) if sim.states else []
        generation = sim.states[next(iter(sim.states))].generation if sim.states else 0
        sim.say("t1", "user", TEN)
        sim.settle()
        state = sim.state()
        if state.generation > generation and before:
            kept = [c.id for c in before if c.id not in {s.id for s in state.log}]
            assert all(any(b.id == k for b in state.buffered) for k in kept)
            survived += len(kept)
    assert sim.state().generation >= 1


def test_an_empty_or_degenerate_reflection_is_never_committed() -> None:
    def empty_reflection(request: object) -> Outcome:
        return Outcome(text="") if request.__class__.__name__ == "RequestReflection" else Outcome()

    sim = Sim(sync_only(20, 40),
              outcome=empty_reflection)
    for _ in range(20):
        sim.say("t1", "user", TEN)
        sim.settle()
    assert sim.state().generation == 0 or all(
        seg.kind == "observation" for seg in sim.state().log[1:])
    assert not any(isinstance(c, CommitGeneration) and c.reflection_id not in sim.segments for c in sim.commands)
    assert events(sim, "data-om-observation-failed")


def test_a_failing_reflection_backs_off_instead_of_looping() -> None:
    sim = Sim(sync_only(20, 40),
              outcome=lambda r: Outcome(ok=r.__class__.__name__ != "RequestReflection"))
    for _ in range(12):
        sim.say("t1", "user", TEN)
        sim.settle(5)
    reflections = [r for r in sim.requests if r.__class__.__name__ == "RequestReflection" and not r.use_offline_model]
    # a handful of attempts for a log that keeps failing, not one per message
    assert 1 <= len(reflections) <= 4


def test_a_reflection_that_does_not_shrink_is_not_committed() -> None:
    sim = Sim(sync_only(20, 40),
              outcome=lambda r: Outcome(text=" ".join(["x"] * 500))
              if r.__class__.__name__ == "RequestReflection" else Outcome())
    for _ in range(12):
        sim.say("t1", "user", TEN)
        sim.settle()
    refused = [e for e in events(sim, "data-om-observation-failed") if e.operation_type == "reflection"]
    assert refused
    assert "not smaller than its input" in refused[0].error
    committed = [c.reflection_id for c in sim.commands if isinstance(c, CommitGeneration)]
    assert all("x x x" not in sim.segments[r] for r in committed)  # only the offline model's smaller one


# -- idle, provider change, temporal markers ---------------------------------------------------------------------

def test_idle_activation_after_activate_after_idle() -> None:
    sim = Sim({"activateAfterIdle": "5m", **buffered()})
    for _ in range(2):
        sim.say("t1", "user", " ".join(["w"] * 14))
        sim.say("t1", "assistant", " ".join(["w"] * 14))
        sim.settle(10_000)
    assert sim.state().buffered
    sim.say("t1", "user", TEN, advance_ms=6 * 60_000)
    activation = events(sim, "data-om-activation")
    assert activation
    assert activation[0].triggered_by == "ttl"
    assert activation[0].last_activity_at is not None


def test_idle_activation_auto_uses_the_actor_providers_cache_lifetime() -> None:
    for model, idle_minutes, expected in (("anthropic/claude-sonnet-4-5", 6, True),
                                          ("gemini/gemini-2.5-flash", 6, False)):
        sim = Sim({"activateAfterIdle": "auto", **buffered()})
        sim.say("t1", "user", " ".join(["w"] * 14), model=model)
        sim.say("t1", "assistant", " ".join(["w"] * 14), model=model)
        sim.settle(1_000)
        sim.say("t1", "user", TEN, advance_ms=idle_minutes * 60_000, model=model)
        assert bool(events(sim, "data-om-activation")) == expected, model


def test_observation_activate_after_idle_false_disables_the_inherited_setting() -> None:
    sim = Sim({"activateAfterIdle": "5m", **buffered(activateAfterIdle=False)})
    sim.say("t1", "user", " ".join(["w"] * 29))
    sim.say("t1", "assistant", TEN)
    sim.settle(1_000)
    sim.say("t1", "user", TEN, advance_ms=60 * 60_000)
    assert not events(sim, "data-om-activation")


def test_provider_change_activates_buffered_observations() -> None:
    sim = Sim({"activateOnProviderChange": True, **buffered()})
    sim.say("t1", "user", " ".join(["w"] * 14), model="openai/gpt-5-mini")
    sim.say("t1", "assistant", " ".join(["w"] * 14), model="openai/gpt-5-mini")
    sim.settle(10_000)
    sim.say("t1", "user", TEN, model="anthropic/claude-sonnet-4-5")
    activation = events(sim, "data-om-activation")
    assert activation
    assert activation[0].triggered_by == "provider_change"
    assert activation[0].previous_model == "openai/gpt-5-mini"
    assert activation[0].current_model == "anthropic/claude-sonnet-4-5"


def test_temporal_marker_before_a_user_message_after_ten_minutes() -> None:
    sim = Sim({"temporalMarkers": True, **buffered()})
    sim.say("t1", "user", TEN)
    sim.say("t1", "assistant", TEN)
    sim.say("t1", "user", TEN, advance_ms=9 * 60_000)
    assert not events(sim, "data-om-temporal-marker")
    sim.say("t1", "user", TEN, advance_ms=(2 * 60 + 5) * 60_000)
    markers = events(sim, "data-om-temporal-marker")
    assert len(markers) == 1
    assert markers[0].gap_text == "2 hours 5 minutes"
    context = sim.last_context()
    assert context.message_ids.index(markers[0].message_id) == context.message_ids.index(
        markers[0].precedes_message_id) - 1


def test_buffer_on_idle_buffers_at_the_end_of_a_turn() -> None:
    for on_idle in (False, True):
        sim = Sim(buffered(bufferOnIdle=on_idle))
        sim.say("t1", "user", "w w w")
        sim.say("t1", "assistant", "w w w")
        sim.settle()
        assert bool(events(sim, "data-om-buffering-start")) == on_idle
