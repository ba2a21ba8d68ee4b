"""Run reads: describe a run, page its history (with the long-poll the SDK's result() relies on), and the
same of a run deleted after its history was archived."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine.archival import history as archival_history
from engine.archival import s3
from engine.errors import FailedPrecondition, NotFound, Unavailable
from engine.history import workflow_task
from engine.history.state import OPEN_STATUSES, MutableState
from engine.models import Execution
from engine.persistence import store
from engine.services import archived_runs


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    execution: Execution
    state: MutableState


def run_snapshot(*, namespace_id: uuid.UUID, workflow_id: str, run_id: str) -> RunSnapshot:
    execution = store.find_execution(namespace_id, workflow_id, run_id, lock=False)
    return RunSnapshot(execution=execution, state=store.decode_state(execution))


def run_row(*, namespace_id: uuid.UUID, workflow_id: str, run_id: str) -> Execution:
    """The run (the current one when `run_id` is empty), its state not opened.

    Raises:
        NotFound: no such run in this namespace.
    """
    return store.find_execution(namespace_id, workflow_id, run_id, lock=False)


def reload(execution: Execution) -> Execution:
    """The run as it is now.

    Raises:
        NotFound: it was deleted (retention, or a namespace's deletion) meanwhile.
    """
    found = store.load_execution(execution.pk)
    if found is None:
        raise NotFound(
            f"workflow execution not found for workflow ID {execution.workflow_id!r} "
            f"and run ID {execution.run_id!r}"
        )
    return found


def history_page(execution: Execution, *, first_event_id: int, page_size: int) -> list[HistoryEvent]:
    """Up to `page_size` events from `first_event_id`, below the run's next event id as last read."""
    events = []
    for event in store.history_events(
        execution, first_event_id=first_event_id, last_event_id=execution.next_event_id - 1
    ):
        events.append(event)
        if len(events) >= page_size:
            return events
    if execution.status in OPEN_STATUSES:
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


def last_event(execution: Execution) -> HistoryEvent | None:
    """The run's newest event (what Temporal answers a close-event read of a paused run)."""
    last = execution.next_event_id - 1
    for event in store.history_events(execution, first_event_id=last, last_event_id=last):
        return event
    return None


def history_reverse_page(execution: Execution, *, before_event_id: int, page_size: int) -> list[HistoryEvent]:
    """Up to `page_size` events just below `before_event_id`, newest first."""
    first = max(before_event_id - page_size, 1)
    events = list(store.history_events(execution, first_event_id=first, last_event_id=before_event_id - 1))
    events.reverse()
    return events


def archived_history(
    *, namespace_id: uuid.UUID, workflow_id: str, run_id: str
) -> tuple[str, list[HistoryEvent]] | None:
    """(run id, events) of a deleted run whose history was archived, read from where it went; None when
    the run has no archive (the workflow id's newest archived run when `run_id` is empty).

    Raises:
        Unavailable: the store does not answer (a client retries).
        FailedPrecondition: the archive is missing from its bucket or does not open.
    """
    record = archival_history.find(namespace_id, workflow_id, run_id)
    if record is None:
        return None
    try:
        return record.run_id, archival_history.read(record)
    except s3.StoreError as e:
        raise Unavailable(f"the history archive cannot be read now: {e}") from None
    except archival_history.ArchiveCheckFailed as e:
        raise FailedPrecondition(str(e)) from None


def archived_description(
    *, namespace_id: uuid.UUID, workflow_id: str, run_id: str
) -> rr.DescribeWorkflowExecutionResponse | None:
    """DescribeWorkflowExecution's answer for a deleted run whose history was archived, from its archive;
    None when the run has no archive (the workflow id's newest archived run when `run_id` is empty).

    Raises:
        Unavailable: the store does not answer (a client retries).
        FailedPrecondition: the archive is missing from its bucket, does not open, or is not a closed
            run's whole history.
    """
    archived = archived_history(namespace_id=namespace_id, workflow_id=workflow_id, run_id=run_id)
    if archived is None:
        return None
    found_run_id, events = archived
    try:
        return archived_runs.describe_archived(events, run_id=found_run_id)
    except archived_runs.NotAnArchivedRun as e:
        raise FailedPrecondition(str(e)) from None
