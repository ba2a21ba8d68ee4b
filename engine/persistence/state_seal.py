"""The payload-bearing fields of a data subject's run state, sealed under the subject's key.

The run state is sealed whole under the namespace key (store.encode_state); for a run with a subject,
the fields that hold payloads are sealed again, payload by payload, as its history batches are
(engine/persistence/subject_seal.py), so that destroying the subject's key erases them in the state
too: the input a retry would start again with, the memo, pending activities' inputs, heartbeat details
and failures, buffered signals, updates' requests and outcomes. The other fields (ids, times, counters,
search attributes) stay as they are: describing, listing and terminating the run keep working.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from google.protobuf.message import Message
from temporalio.api.common.v1 import Memo, Payloads
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import (
    ActivityTaskScheduledEventAttributes,
    HistoryEvent,
    WorkflowExecutionStartedEventAttributes,
)
from temporalio.api.sdk.v1 import UserMetadata
from temporalio.api.update.v1 import Outcome, Request

from engine.history import state as state_codec
from engine.history.state import MutableState
from engine.persistence import subject_seal

_Change = Callable[[type[Message], bytes], bytes]


def _each_field(state: MutableState, change: _Change) -> None:
    """Replace each payload-bearing field of `state` by `change(its message type, its bytes)`."""
    if state.memo:
        state.memo = change(Memo, state.memo)
    if state.start_attrs:
        state.start_attrs = change(WorkflowExecutionStartedEventAttributes, state.start_attrs)
    if state.user_metadata:
        state.user_metadata = change(UserMetadata, state.user_metadata)
    state.buffered = [change(HistoryEvent, b) for b in state.buffered]
    for activity in state.activities.values():
        activity.scheduled = change(ActivityTaskScheduledEventAttributes, activity.scheduled)
        if activity.heartbeat_details:
            activity.heartbeat_details = change(Payloads, activity.heartbeat_details)
        if activity.last_failure:
            activity.last_failure = change(Failure, activity.last_failure)
    for update in state.updates.values():
        update.request = change(Request, update.request)
        if update.outcome:
            update.outcome = change(Outcome, update.outcome)


def seal_state(namespace_id: uuid.UUID, subject: str, state: MutableState) -> bytes:
    """The state's encoding with its payloads sealed under the subject's key (`state` is not changed)."""
    copy = state_codec.load(state_codec.dump(state))
    seal = subject_seal.sealer(namespace_id, subject)
    _each_field(copy, lambda kind, data: subject_seal.seal_message(kind.FromString(data), seal))
    return subject_seal.MARK + state_codec.dump(copy)


def open_state(namespace_id: uuid.UUID, data: bytes) -> MutableState:
    """A state as stored: a subject's sealed payloads opened, or erased markers once its key is gone."""
    if not data.startswith(subject_seal.MARK):
        return state_codec.load(data)
    state = state_codec.load(data[len(subject_seal.MARK) :])
    open_ = subject_seal.opener(subject_seal.Keys(namespace_id))
    _each_field(state, lambda kind, raw: subject_seal.open_message(kind, raw, open_))
    return state
