"""Conversions between engine values and Temporal API messages: the response builders of every RPC family."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp
from perdura import clock
from temporalio.api.common.v1 import Memo, SearchAttributes, WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import (
    NamespaceState,
    PendingActivityState,
    TaskQueueKind,
    WorkflowExecutionStatus,
)
from temporalio.api.errordetails.v1 import MultiOperationExecutionFailure
from temporalio.api.failure.v1 import MultiOperationExecutionAborted
from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.api.namespace.v1 import NamespaceConfig, NamespaceInfo
from temporalio.api.replication.v1 import ClusterReplicationConfig, NamespaceReplicationConfig
from temporalio.api.sdk.v1 import UserMetadata
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.update.v1 import UpdateRef
from temporalio.api.workflow.v1 import (
    PendingActivityInfo,
    PendingChildExecutionInfo,
    PendingWorkflowTaskInfo,
    WorkflowExecutionConfig,
    WorkflowExecutionInfo,
)
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import tokens
from engine.errors import EngineError
from engine.history import activity, activity_control
from engine.history.state import ActivityInfo
from engine.models import Execution
from engine.persistence import visibility as visibility_store
from engine.services import activity_tasks, queries, reads, workflow_tasks
from engine.services.search_attributes import apply_types
from engine.services.updates import UpdateStatus
from tenants.models import Namespace
from visibility.backends.sql import Record
from visibility.search_attributes import SaType, from_micros

_PendingState = PendingActivityState


def ts(value: datetime | None) -> Timestamp | None:
    if value is None:
        return None
    out = Timestamp()
    out.FromDatetime(value)
    return out


def ts_micros(value: int | None) -> Timestamp | None:
    """A visibility record's time (microseconds since the epoch) as a Timestamp."""
    return ts(from_micros(value)) if value is not None else None


def dur(seconds: float) -> Duration | None:
    if not seconds:
        return None
    out = Duration()
    out.FromTimedelta(timedelta(seconds=seconds))
    return out


def _normal_queue(name: str) -> TaskQueue:
    return TaskQueue(name=name, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL)


# --- namespaces -------------------------------------------------------------------------------------


def namespace_info(namespace: Namespace) -> tuple[NamespaceInfo, NamespaceConfig, NamespaceReplicationConfig]:
    """A namespace as Temporal describes it (never any key material)."""
    info = NamespaceInfo(
        name=namespace.name,
        state=NamespaceState.ValueType(namespace.state),
        description=namespace.description,
        owner_email=namespace.owner_email,
        id=str(namespace.id),
        capabilities=NamespaceInfo.Capabilities(
            eager_workflow_start=True, sync_update=True, async_update=True
        ),
    )
    config = NamespaceConfig(workflow_execution_retention_ttl=dur(namespace.retention_days * 86400.0))
    replication = NamespaceReplicationConfig(
        active_cluster_name="active", clusters=[ClusterReplicationConfig(cluster_name="active")]
    )
    return info, config, replication


def describe_namespace(namespace: Namespace) -> rr.DescribeNamespaceResponse:
    info, config, replication = namespace_info(namespace)
    return rr.DescribeNamespaceResponse(
        namespace_info=info, config=config, replication_config=replication, is_global_namespace=False
    )


# --- starts -----------------------------------------------------------------------------------------

_SIGNAL_WITH_START_OPTIONAL = (
    "input",
    "memo",
    "search_attributes",
    "header",
    "retry_policy",
    "workflow_start_delay",
    "priority",
    "workflow_execution_timeout",
    "workflow_run_timeout",
    "workflow_task_timeout",
    "user_metadata",
)


def start_of_signal_with_start(
    request: rr.SignalWithStartWorkflowExecutionRequest,
) -> rr.StartWorkflowExecutionRequest:
    """The start a signal-with-start asks for, with the message fields it left unset still unset."""
    start = rr.StartWorkflowExecutionRequest(
        namespace=request.namespace,
        workflow_id=request.workflow_id,
        workflow_type=request.workflow_type,
        task_queue=request.task_queue,
        input=request.input,
        workflow_execution_timeout=request.workflow_execution_timeout,
        workflow_run_timeout=request.workflow_run_timeout,
        workflow_task_timeout=request.workflow_task_timeout,
        identity=request.identity,
        request_id=request.request_id,
        workflow_id_reuse_policy=request.workflow_id_reuse_policy,
        workflow_id_conflict_policy=request.workflow_id_conflict_policy,
        retry_policy=request.retry_policy,
        cron_schedule=request.cron_schedule,
        memo=request.memo,
        search_attributes=request.search_attributes,
        header=request.header,
        workflow_start_delay=request.workflow_start_delay,
        user_metadata=request.user_metadata,
        priority=request.priority,
    )
    for field in _SIGNAL_WITH_START_OPTIONAL:
        if not request.HasField(field):
            start.ClearField(field)
    return start


def multi_operation_error(error: EngineError, *, failed: int) -> EngineError:
    """Temporal's shape for a failed multi-operation: one status per operation, the others aborted."""
    statuses = []
    for index in range(2):
        if index == failed:
            status = MultiOperationExecutionFailure.OperationStatus(
                code=getattr(grpc.StatusCode, error.code).value[0], message=error.message
            )
            if error.details is not None:
                status.details.add().Pack(error.details)
        else:
            status = MultiOperationExecutionFailure.OperationStatus(
                code=grpc.StatusCode.ABORTED.value[0], message="Operation was aborted."
            )
            status.details.add().Pack(MultiOperationExecutionAborted())
        statuses.append(status)
    wrapped = type(error)(f"MultiOperation could not be executed: {error.message}")
    wrapped.details = MultiOperationExecutionFailure(statuses=statuses)
    return wrapped


def update_response(status: UpdateStatus, update_id: str) -> rr.UpdateWorkflowExecutionResponse:
    return rr.UpdateWorkflowExecutionResponse(
        update_ref=UpdateRef(
            workflow_execution=WorkflowExecution(
                workflow_id=status.execution.workflow_id, run_id=status.run_id
            ),
            update_id=update_id,
        ),
        outcome=status.outcome,
        stage=status.stage,
    )


# --- tasks handed to workers ------------------------------------------------------------------------


def _task_token(namespace: Namespace, execution: Execution, **task: Any) -> bytes:
    return tokens.encode(
        tokens.TaskToken(
            namespace_id=str(namespace.id), workflow_id=execution.workflow_id, run_id=execution.run_id, **task
        )
    )


def _execution_of(execution: Execution) -> WorkflowExecution:
    return WorkflowExecution(workflow_id=execution.workflow_id, run_id=execution.run_id)


def workflow_task_response(
    namespace: Namespace, started: workflow_tasks.StartedWorkflowTask, events: list[HistoryEvent]
) -> rr.PollWorkflowTaskQueueResponse:
    """A started workflow task with its history (`events`, then the task's transient events)."""
    execution = started.execution
    return rr.PollWorkflowTaskQueueResponse(
        task_token=_task_token(
            namespace,
            execution,
            scheduled_event_id=started.scheduled_event_id,
            attempt=started.attempt,
            started_event_id=started.started_event_id,
        ),
        workflow_execution=_execution_of(execution),
        workflow_type=WorkflowType(name=started.workflow_type),
        previous_started_event_id=started.previous_started_event_id,
        started_event_id=started.started_event_id,
        attempt=started.attempt,
        history=History(events=[*events, *started.transient_events]),
        workflow_execution_task_queue=_normal_queue(started.task_queue),
        scheduled_time=ts(started.scheduled_time),
        started_time=ts(started.started_time),
        messages=started.messages,
        queries=started.queries,
    )


def query_task_response(
    namespace: Namespace, started: queries.StartedQuery, events: list[HistoryEvent]
) -> rr.PollWorkflowTaskQueueResponse:
    """A query task: the run's history so far and the query, under a token that names the query."""
    execution = started.execution
    state = started.state
    return rr.PollWorkflowTaskQueueResponse(
        task_token=_task_token(
            namespace, execution, scheduled_event_id=0, attempt=0, query_id=started.query_id
        ),
        workflow_execution=_execution_of(execution),
        workflow_type=WorkflowType(name=state.workflow_type),
        previous_started_event_id=state.last_completed_wft_started_event_id,
        history=History(events=events),
        query=started.query,
        workflow_execution_task_queue=_normal_queue(state.task_queue),
    )


def activity_task_response(
    namespace: Namespace, started: activity_tasks.StartedActivityTask
) -> rr.PollActivityTaskQueueResponse:
    execution = started.execution
    scheduled = started.scheduled
    return rr.PollActivityTaskQueueResponse(
        task_token=_task_token(
            namespace,
            execution,
            scheduled_event_id=started.scheduled_event_id,
            attempt=started.attempt,
            activity_id=scheduled.activity_id,
        ),
        workflow_namespace=namespace.name,
        workflow_type=WorkflowType(name=started.workflow_type),
        workflow_execution=_execution_of(execution),
        activity_type=scheduled.activity_type,
        activity_id=scheduled.activity_id,
        header=scheduled.header,
        input=scheduled.input if scheduled.HasField("input") else None,
        heartbeat_details=started.heartbeat_details,
        scheduled_time=ts(started.scheduled_time),
        current_attempt_scheduled_time=ts(started.attempt_scheduled_time),
        started_time=ts(started.started_time),
        attempt=started.attempt,
        schedule_to_close_timeout=scheduled.schedule_to_close_timeout,
        start_to_close_timeout=scheduled.start_to_close_timeout,
        heartbeat_timeout=scheduled.heartbeat_timeout,
        retry_policy=scheduled.retry_policy,
        priority=scheduled.priority if scheduled.HasField("priority") else None,
    )


# --- runs as describe and list show them ------------------------------------------------------------


def pending_activity(a: ActivityInfo, now: datetime) -> PendingActivityInfo:
    """One pending activity: its state (paused ones as PAUSED or PAUSE_REQUESTED), attempt and options."""
    scheduled = activity.scheduled_attributes(a)
    options = activity_control.current_options(a)
    if a.cancel_requested:
        state = _PendingState.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED
    elif a.started_time is not None:
        state = (
            _PendingState.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED
            if a.paused
            else _PendingState.PENDING_ACTIVITY_STATE_STARTED
        )
    else:
        state = (
            _PendingState.PENDING_ACTIVITY_STATE_PAUSED
            if a.paused
            else _PendingState.PENDING_ACTIVITY_STATE_SCHEDULED
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
    if state == _PendingState.PENDING_ACTIVITY_STATE_SCHEDULED and a.attempt_scheduled_time > now:
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
            task_queue=_normal_queue(s.task_queue),
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
                parent_close_policy=c.parent_close_policy,
            )
            for c in sorted(s.children.values(), key=lambda c: c.initiated_event_id)
        ],
    )
    wft = s.workflow_task
    if wft is not None:
        response.pending_workflow_task.CopyFrom(
            PendingWorkflowTaskInfo(
                state=2 if wft.started_event_id else 1,
                scheduled_time=ts(wft.scheduled_time),
                original_scheduled_time=ts(wft.scheduled_time),
                started_time=ts(wft.started_time),
                attempt=wft.attempt,
            )
        )
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
