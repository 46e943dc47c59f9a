"""Restoring a record from the state another deployment held (``om-stream import``): the exported state's form
checked field by field, and what ``decide`` does with a :class:`~om_stream.core.inputs.RestoreRecord`.

A restore sets the record's state and changes nothing in it: its ids, counters, context version, timers and
overrides go on from where the exporting deployment left them, so the next input is decided here as it would have
been there. It is not settled like other inputs (the state was settled when it was exported). Two things leave:
each thread's context as it stands, at the version it had (an agent reading the new deployment's context topic
finds it there), unless a blocking cycle holds contexts back; and the Observer/Reflector calls the state has in
flight, asked again under the same request ids (their answers were meant for the other deployment).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from om_stream.core import observation, reflection
from om_stream.core.commands import PersistRetention, PublishContext, RejectInput
from om_stream.core.config import ResolvedConfig
from om_stream.core.inputs import RestoreRecord
from om_stream.core.state import RecordState
from om_stream.core.step import Step
from om_stream.core.views import context_spec

__all__ = ["checked_state", "restore_record"]

_STATE = TypeAdapter(RecordState)


def checked_state(data: Mapping[str, Any]) -> RecordState:
    """A record's state from the form its table holds (``RecordState.to_dict``), every field checked against its
    type: an export is a file anyone may have edited, and a state that only fails when an input reaches it would
    fail there. Raises ``ValueError`` saying what is wrong."""
    try:
        state = RecordState.from_dict(dict(data))
    except (TypeError, KeyError, ValueError, AttributeError) as exc:
        raise ValueError(f"not a record state: {type(exc).__name__}: {exc}") from None
    try:
        _STATE.validate_python(dataclasses.asdict(state))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
        raise ValueError(f"not a record state: {problems}") from None
    return state


def restore_record(step: Step, event: RestoreRecord, config_of: Callable[[RecordState], ResolvedConfig]) -> None:
    """``step.state`` becomes ``event.state``; ``config_of`` gives a state's configuration (its overrides)."""
    current, incoming = step.state, event.state
    if (incoming.key, incoming.scope) != (current.key, current.scope):
        step.add(RejectInput(current.key, "invalid_restore",
                             f"the state is of record {incoming.record_id!r}, not {current.record_id!r}"))
        return
    if current.holds_conversation and incoming.resource_id != current.resource_id:
        step.add(RejectInput(current.key, "resource_mismatch",
                             f"record {current.record_id!r} belongs to another resource than "
                             f"{incoming.resource_id!r}; the restore was not applied"))
        return
    state = step.state = incoming.clone()
    step.config = config_of(state)
    if state.override_retention_days is not None:  # the store keeps a record's own window for recall to read
        step.add(PersistRetention(state.key, state.resource_id, state.override_retention_days))
    for cycle in state.cycles:
        if cycle.operation == "observation":
            observation.request_observation(step, cycle)
        else:
            reflection.request_reflection(step, cycle)
    if state.blocking_cycle() is None:  # otherwise the contexts stay owed, as they were
        for thread_id in sorted(state.threads):
            step.add(PublishContext(context_spec(state, thread_id, step.config, state.context_version, step.now)))
