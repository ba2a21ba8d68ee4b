"""Run reads: describe a run, page its history (with the long-poll the SDK's result() relies on)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from temporalio.api.history.v1 import HistoryEvent

from engine.history import workflow_task
from engine.history.state import RUNNING, MutableState
from engine.models import Execution
from engine.persistence import store


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    execution: Execution
    state: MutableState


def run_snapshot(*, namespace_id: uuid.UUID, workflow_id: str, run_id: str) -> RunSnapshot:
    execution = store.find_execution(namespace_id, workflow_id, run_id, lock=False)
    return RunSnapshot(execution=execution, state=store.decode_state(execution))


def reload(execution: Execution) -> Execution:
    return Execution.objects.get(pk=execution.pk)


def history_page(execution: Execution, *, first_event_id: int, page_size: int) -> list[HistoryEvent]:
    """Up to `page_size` events from `first_event_id`, below the run's next event id as last read."""
    events = []
    for event in store.history_events(
        execution, first_event_id=first_event_id, last_event_id=execution.next_event_id - 1
    ):
        events.append(event)
        if len(events) >= page_size:
            return events
    if execution.status == RUNNING:
        state = store.decode_state(execution)
        if state.workflow_task is not None and state.workflow_task.speculative:
            return events  # a speculative task may leave no trace: readers never see it, as in Temporal
        events.extend(
            e
            for e in workflow_task.transient_events(state, include_unstarted=True)
            if e.event_id >= first_event_id
        )
    return events


def close_event(execution: Execution) -> HistoryEvent | None:
    state = store.decode_state(execution)
    if not state.close_event_id:
        return None
    for event in store.history_events(
        execution, first_event_id=state.close_event_id, last_event_id=state.close_event_id
    ):
        return event
    return None


def history_reverse_page(execution: Execution, *, before_event_id: int, page_size: int) -> list[HistoryEvent]:
    """Up to `page_size` events just below `before_event_id`, newest first."""
    first = max(before_event_id - page_size, 1)
    events = list(store.history_events(execution, first_event_id=first, last_event_id=before_event_id - 1))
    events.reverse()
    return events
