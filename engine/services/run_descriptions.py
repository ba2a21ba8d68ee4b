"""How a run is described to people and clients: DescribeWorkflowExecution's answer, a listed run's info and a
pending activity. The gRPC API answers with them, and the console shows them (engine/services/console_reads.py)."""

from __future__ import annotations

from datetime import datetime

from perdura import clock
from temporalio.api.common.v1 import Memo, SearchAttributes, WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import (
    ParentClosePolicy,
    PendingActivityState,
    PendingWorkflowTaskState,
    WorkflowExecutionStatus,
)
from temporalio.api.sdk.v1 import UserMetadata
from temporalio.api.workflow.v1 import (
    PendingActivityInfo,
    PendingChildExecutionInfo,
    PendingWorkflowTaskInfo,
    WorkflowExecutionConfig,
    WorkflowExecutionInfo,
)
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine.history import activity, activity_control, run_options, versioning
from engine.history.state import ActivityInfo
from engine.persistence import visibility as visibility_store
from engine.proto_values import dur, normal_queue, ts, ts_micros
from engine.services import reads
from engine.services.search_attributes import apply_types
from visibility.backends.base import Record
from visibility.search_attributes import SaType


def pending_activity(a: ActivityInfo, now: datetime) -> PendingActivityInfo:
    """One pending activity: its state (paused ones as PAUSED or PAUSE_REQUESTED), attempt and options."""
    scheduled = activity.scheduled_attributes(a)
    options = activity_control.current_options(a)
    if a.cancel_requested:
        state = PendingActivityState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
    elif a.started_time is not None:
        state = (
            PendingActivityState.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED
            if a.paused
            else PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
        )
    else:
        state = (
            PendingActivityState.PENDING_ACTIVITY_STATE_PAUSED
            if a.paused
            else PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED
        )
    item = PendingActivityInfo(
        activity_id=a.activity_id,
        activity_type=scheduled.activity_type,
        state=state,
        last_heartbeat_time=ts(a.last_heartbeat_time),
        last_started_time=ts(a.started_time),
        attempt=a.attempt,
        maximum_attempts=options.retry_policy.maximum_attempts,
        scheduled_time=ts(a.attempt_scheduled_time),
        expiration_time=ts(activity.expiration(a)),
        last_worker_identity=a.started_identity or a.last_worker_identity,
        last_attempt_complete_time=ts(a.last_attempt_complete_time),
        paused=a.paused,
        priority=options.priority,
    )
    if state == PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED and a.attempt_scheduled_time > now:
        # Waiting out a retry backoff (Temporal shows neither while paused or once dispatched).
        item.next_attempt_schedule_time.FromDatetime(a.attempt_scheduled_time)
        if a.last_attempt_complete_time is not None:
            item.current_retry_interval.FromTimedelta(a.attempt_scheduled_time - a.last_attempt_complete_time)
    if a.paused:
        item.pause_info.manual.identity = a.pause_identity
        item.pause_info.manual.reason = a.pause_reason
        if a.pause_time is not None:
            item.pause_info.pause_time.FromDatetime(a.pause_time)
    options.task_queue.normal_name = options.task_queue.name
    item.activity_options.CopyFrom(options)
    if a.heartbeat_details:
        item.heartbeat_details.ParseFromString(a.heartbeat_details)
    if a.last_failure:
        item.last_failure.ParseFromString(a.last_failure)
    return item


def describe_execution(snap: reads.RunSnapshot) -> rr.DescribeWorkflowExecutionResponse:
    """DescribeWorkflowExecution's answer for a run: its info, config and pending work."""
    s = snap.state
    info = WorkflowExecutionInfo(
        execution=WorkflowExecution(workflow_id=s.workflow_id, run_id=s.run_id),
        type=WorkflowType(name=s.workflow_type),
        start_time=ts(s.start_time),
        close_time=ts(s.close_time),
        status=WorkflowExecutionStatus.ValueType(s.status),
        history_length=s.next_event_id - 1,
        execution_time=ts(s.execution_time),
        task_queue=s.task_queue,
        state_transition_count=s.state_transitions,
        history_size_bytes=s.history_size,
        first_run_id=s.first_run_id,
        memo=Memo.FromString(s.memo) if s.memo else None,
        search_attributes=SearchAttributes.FromString(s.search_attributes) if s.search_attributes else None,
    )
    if s.close_time is not None:
        info.execution_duration.FromTimedelta(s.close_time - s.execution_time)
    options = run_options.current(s)
    if options.HasField("priority"):
        info.priority.CopyFrom(options.priority)
    versioning_info = versioning.info(s)
    if versioning_info is not None:
        info.versioning_info.CopyFrom(versioning_info)
    root = WorkflowExecution(workflow_id=s.workflow_id, run_id=s.run_id)
    if s.parent is not None:
        info.parent_namespace_id = s.parent.namespace_id
        info.parent_execution.CopyFrom(
            WorkflowExecution(workflow_id=s.parent.workflow_id, run_id=s.parent.run_id)
        )
        root = WorkflowExecution(workflow_id=s.parent.root_workflow_id, run_id=s.parent.root_run_id)
    info.root_execution.CopyFrom(root)
    now = clock.now()
    pending = [
        pending_activity(a, now) for a in sorted(s.activities.values(), key=lambda a: a.scheduled_event_id)
    ]
    response = rr.DescribeWorkflowExecutionResponse(
        execution_config=WorkflowExecutionConfig(
            task_queue=normal_queue(s.task_queue),
            workflow_execution_timeout=dur(s.execution_timeout),
            workflow_run_timeout=dur(s.run_timeout),
            default_workflow_task_timeout=dur(s.workflow_task_timeout),
            user_metadata=UserMetadata.FromString(s.user_metadata) if s.user_metadata else None,
        ),
        workflow_execution_info=info,
        pending_activities=pending,
        pending_children=[
            PendingChildExecutionInfo(
                workflow_id=c.workflow_id,
                run_id=c.run_id,
                workflow_type_name=c.workflow_type,
                initiated_id=c.initiated_event_id,
                parent_close_policy=ParentClosePolicy.ValueType(c.parent_close_policy),
            )
            for c in sorted(s.children.values(), key=lambda c: c.initiated_event_id)
        ],
    )
    wft = s.workflow_task
    if wft is not None:
        response.pending_workflow_task.CopyFrom(
            PendingWorkflowTaskInfo(
                state=PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED
                if wft.started_event_id
                else PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_SCHEDULED,
                scheduled_time=ts(wft.scheduled_time),
                original_scheduled_time=ts(wft.scheduled_time),
                started_time=ts(wft.started_time),
                attempt=wft.attempt,
            )
        )
    if s.pause is not None:
        pause_info = response.workflow_extended_info.pause_info
        pause_info.paused_time.FromDatetime(s.pause.pause_time)
        pause_info.identity = s.pause.identity
        pause_info.reason = s.pause.reason
    return response


def execution_info(record: Record, custom: dict[str, SaType]) -> WorkflowExecutionInfo:
    """A run's WorkflowExecutionInfo as list and scan return it."""
    info = WorkflowExecutionInfo(
        execution=WorkflowExecution(workflow_id=record.workflow_id, run_id=record.run_id),
        type=WorkflowType(name=record.workflow_type),
        start_time=ts_micros(record.start_time),
        close_time=ts_micros(record.close_time),
        status=WorkflowExecutionStatus.ValueType(record.status),
        history_length=record.history_length,
        execution_time=ts_micros(record.execution_time),
        task_queue=record.task_queue,
        state_transition_count=record.state_transition_count,
        history_size_bytes=record.history_size_bytes,
        first_run_id=record.first_run_id,
        root_execution=WorkflowExecution(workflow_id=record.root_workflow_id, run_id=record.root_run_id),
    )
    if record.execution_duration is not None:
        info.execution_duration.FromNanoseconds(record.execution_duration)
    if record.parent_workflow_id is not None:
        info.parent_execution.CopyFrom(
            WorkflowExecution(workflow_id=record.parent_workflow_id, run_id=record.parent_run_id or "")
        )
    memo = visibility_store.memo_open(record.namespace_id, record.run_id, record.memo)
    if memo:
        info.memo.CopyFrom(Memo.FromString(memo))
    if record.search_attributes:
        attrs = SearchAttributes.FromString(record.search_attributes)
        # The SDK decodes typed attributes by this header; older clients may not have sent it.
        apply_types(attrs, custom)
        info.search_attributes.CopyFrom(attrs)
    return info
