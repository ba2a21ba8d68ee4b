"""An archived run described from its events alone (engine/services/archived_runs.py): the close event's
status and time, the start event's type, queue, timeouts, parent and backoff, search attributes and memo
as later upserts left them; a history that is not a closed run's whole history is refused."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from temporalio.api.common.v1 import Memo, Payload, SearchAttributes, WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus
from temporalio.api.history.v1 import (
    HistoryEvent,
    UpsertWorkflowSearchAttributesEventAttributes,
    WorkflowExecutionContinuedAsNewEventAttributes,
    WorkflowExecutionStartedEventAttributes,
    WorkflowPropertiesModifiedEventAttributes,
)
from temporalio.api.taskqueue.v1 import TaskQueue

from engine.services import archived_runs

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
E = EventType


def _json(text: str) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=text.encode())


def _event(event_id: int, kind: EventType.ValueType, at: timedelta, **attributes: object) -> HistoryEvent:
    event = HistoryEvent(event_id=event_id, event_type=kind, **attributes)  # type: ignore[arg-type]
    event.event_time.FromDatetime(T0 + at)
    return event


def _history() -> list[HistoryEvent]:
    started = WorkflowExecutionStartedEventAttributes(
        workflow_id="wf",
        workflow_type=WorkflowType(name="Billing"),
        task_queue=TaskQueue(name="billing"),
        first_execution_run_id="first-run",
        parent_workflow_namespace_id="ns-id",
        parent_workflow_execution=WorkflowExecution(workflow_id="parent", run_id="parent-run"),
        root_workflow_execution=WorkflowExecution(workflow_id="root", run_id="root-run"),
        memo=Memo(fields={"keep": _json('"k"'), "drop": _json('"d"')}),
        search_attributes=SearchAttributes(indexed_fields={"Region": _json('"eu"'), "Tier": _json('"gold"')}),
    )
    started.first_workflow_task_backoff.FromSeconds(5)
    started.workflow_run_timeout.FromSeconds(60)
    upsert = UpsertWorkflowSearchAttributesEventAttributes(
        search_attributes=SearchAttributes(indexed_fields={"Region": _json('"us"'), "Tier": _json("null")})
    )
    modified = WorkflowPropertiesModifiedEventAttributes(
        upserted_memo=Memo(fields={"drop": _json("null"), "added": _json('"a"')})
    )
    return [
        _event(
            1,
            E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED,
            timedelta(0),
            workflow_execution_started_event_attributes=started,
        ),
        _event(
            2,
            E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
            timedelta(seconds=6),
            upsert_workflow_search_attributes_event_attributes=upsert,
        ),
        _event(
            3,
            E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED,
            timedelta(seconds=7),
            workflow_properties_modified_event_attributes=modified,
        ),
        _event(
            4,
            E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
            timedelta(seconds=9),
            workflow_execution_continued_as_new_event_attributes=WorkflowExecutionContinuedAsNewEventAttributes(
                new_execution_run_id="next-run"
            ),
        ),
    ]


def test_a_closed_run_is_described_from_its_start_upserts_and_close():
    events = _history()
    described = archived_runs.describe_archived(events, run_id="this-run")
    info = described.workflow_execution_info
    assert info.status == WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW
    assert (info.execution.workflow_id, info.execution.run_id) == ("wf", "this-run")
    assert (info.type.name, info.task_queue, info.first_run_id) == ("Billing", "billing", "first-run")
    assert info.start_time.ToDatetime(tzinfo=UTC) == T0
    assert info.execution_time.ToDatetime(tzinfo=UTC) == T0 + timedelta(seconds=5)  # after the backoff
    assert info.close_time.ToDatetime(tzinfo=UTC) == T0 + timedelta(seconds=9)
    assert info.execution_duration.ToTimedelta() == timedelta(seconds=4)
    assert info.history_length == 4
    assert info.history_size_bytes == sum(e.ByteSize() for e in events)
    assert dict(info.search_attributes.indexed_fields) == {"Region": _json('"us"')}  # null removes
    assert dict(info.memo.fields) == {"keep": _json('"k"'), "added": _json('"a"')}
    assert (info.parent_namespace_id, info.parent_execution.run_id) == ("ns-id", "parent-run")
    assert info.root_execution == WorkflowExecution(workflow_id="root", run_id="root-run")
    assert described.execution_config.task_queue.name == "billing"
    assert described.execution_config.workflow_run_timeout.ToTimedelta() == timedelta(seconds=60)
    assert not described.execution_config.HasField("workflow_execution_timeout")


def test_a_history_that_is_not_a_closed_runs_whole_history_is_refused():
    events = _history()
    with pytest.raises(archived_runs.NotAnArchivedRun, match="close event"):
        archived_runs.describe_archived(events[:-1], run_id="r")
    with pytest.raises(archived_runs.NotAnArchivedRun, match="WorkflowExecutionStarted"):
        archived_runs.describe_archived(events[1:], run_id="r")
    with pytest.raises(archived_runs.NotAnArchivedRun):
        archived_runs.describe_archived([], run_id="r")


def test_reverse_pages_run_newest_first_below_the_token():
    events = _history()
    assert [e.event_id for e in archived_runs.reverse_page(events, before_event_id=5, page_size=3)] == [
        4,
        3,
        2,
    ]
    assert [e.event_id for e in archived_runs.reverse_page(events, before_event_id=2, page_size=3)] == [1]
    assert archived_runs.reverse_page(events, before_event_id=1, page_size=3) == []
