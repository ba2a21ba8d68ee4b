"""Describing a run that retention deleted after archiving it, from its archived history alone.

The archive holds every event of a closed run, so the description is derived from them: the start event
gives the type, task queue, timeouts, parent and first memo and search attributes; later upserts and
property changes are merged as the live run merged them; the close event gives the status and close
time. Nothing pending is left on a closed run, so there are no pending activities, children or workflow
task. The hot store is not read (the run's rows are gone); neither is the archive index, which exists only
when the namespace archives visibility, whereas a run with a history archive always has its events.
"""

from __future__ import annotations

from datetime import UTC, timedelta

from temporalio.api.common.v1 import Memo, SearchAttributes, WorkflowExecution
from temporalio.api.enums.v1 import EventType, WorkflowExecutionStatus
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflow.v1 import WorkflowExecutionConfig, WorkflowExecutionInfo
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine.history.commands import merged_memo, merged_search_attributes

E = EventType
S = WorkflowExecutionStatus

# The event that closed a run, and the status it closed with (a closed run's last event is one of them).
CLOSE_STATUS: dict[int, WorkflowExecutionStatus.ValueType] = {
    E.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED: S.WORKFLOW_EXECUTION_STATUS_COMPLETED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED: S.WORKFLOW_EXECUTION_STATUS_FAILED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED: S.WORKFLOW_EXECUTION_STATUS_CANCELED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: S.WORKFLOW_EXECUTION_STATUS_TERMINATED,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW: S.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW,
    E.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT: S.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
}


class NotAnArchivedRun(ValueError):
    """The events do not begin with the run's start or do not end with its close."""


def describe_archived(events: list[HistoryEvent], *, run_id: str) -> rr.DescribeWorkflowExecutionResponse:
    """DescribeWorkflowExecution's answer for an archived (closed) run, from its whole history.

    Args:
        events: every event of the run, in order, payloads opened as a history read answers them.
        run_id: the run's id (the start event does not carry it).

    Returns:
        The run's info and config, with nothing pending.

    Raises:
        NotAnArchivedRun: the events are not a closed run's whole history.
    """
    if not events or events[0].event_type != E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        raise NotAnArchivedRun("the archived history does not begin with WorkflowExecutionStarted")
    close = events[-1]
    if close.event_type not in CLOSE_STATUS:
        raise NotAnArchivedRun("the archived history does not end with the run's close event")
    first = events[0]
    start = first.workflow_execution_started_event_attributes
    memo = start.memo.SerializeToString() if start.HasField("memo") else b""
    attributes = start.search_attributes.SerializeToString() if start.HasField("search_attributes") else b""
    for event in events:
        if event.event_type == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            upsert = event.upsert_workflow_search_attributes_event_attributes.search_attributes
            attributes = merged_search_attributes(attributes, upsert)
        elif event.event_type == E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
            memo = merged_memo(memo, event.workflow_properties_modified_event_attributes.upserted_memo)
    start_time = first.event_time.ToDatetime(tzinfo=UTC)
    # A delayed or cron start begins to execute after its first workflow task's backoff.
    execution_time = start_time + start.first_workflow_task_backoff.ToTimedelta()
    close_time = close.event_time.ToDatetime(tzinfo=UTC)
    info = WorkflowExecutionInfo(
        execution=WorkflowExecution(workflow_id=start.workflow_id, run_id=run_id),
        type=start.workflow_type,
        start_time=first.event_time,
        close_time=close.event_time,
        status=CLOSE_STATUS[close.event_type],
        history_length=close.event_id,
        task_queue=start.task_queue.name,
        history_size_bytes=sum(e.ByteSize() for e in events),
        first_run_id=start.first_execution_run_id,
        memo=Memo.FromString(memo) if memo else None,
        search_attributes=SearchAttributes.FromString(attributes) if attributes else None,
    )
    info.execution_time.FromDatetime(execution_time)
    info.execution_duration.FromTimedelta(max(close_time - execution_time, timedelta(0)))
    root = WorkflowExecution(workflow_id=start.workflow_id, run_id=run_id)
    if start.HasField("parent_workflow_execution"):
        info.parent_namespace_id = start.parent_workflow_namespace_id
        info.parent_execution.CopyFrom(start.parent_workflow_execution)
        if start.HasField("root_workflow_execution"):
            root = start.root_workflow_execution
    info.root_execution.CopyFrom(root)
    config = WorkflowExecutionConfig(
        task_queue=start.task_queue,
        workflow_execution_timeout=start.workflow_execution_timeout
        if start.HasField("workflow_execution_timeout")
        else None,
        workflow_run_timeout=start.workflow_run_timeout if start.HasField("workflow_run_timeout") else None,
        default_workflow_task_timeout=start.workflow_task_timeout
        if start.HasField("workflow_task_timeout")
        else None,
        user_metadata=first.user_metadata if first.HasField("user_metadata") else None,
    )
    return rr.DescribeWorkflowExecutionResponse(execution_config=config, workflow_execution_info=info)


def reverse_page(events: list[HistoryEvent], *, before_event_id: int, page_size: int) -> list[HistoryEvent]:
    """Up to `page_size` archived events just below `before_event_id`, newest first (as the live read)."""
    below = [e for e in events if e.event_id < before_event_id]
    return list(reversed(below[-page_size:]))
