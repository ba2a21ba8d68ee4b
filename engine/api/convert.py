"""Conversions between engine values and Temporal API messages: the response builders of every RPC family."""

from __future__ import annotations

from typing import Any, Literal, get_args

import grpc
from temporalio.api.common.v1 import WorkflowExecution, WorkflowType
from temporalio.api.enums.v1 import (
    ArchivalState,
    NamespaceState,
    UpdateWorkflowExecutionLifecycleStage,
)
from temporalio.api.errordetails.v1 import MultiOperationExecutionFailure
from temporalio.api.failure.v1 import MultiOperationExecutionAborted
from temporalio.api.history.v1 import History, HistoryEvent
from temporalio.api.namespace.v1 import NamespaceConfig, NamespaceInfo
from temporalio.api.replication.v1 import ClusterReplicationConfig, NamespaceReplicationConfig
from temporalio.api.update.v1 import UpdateRef
from temporalio.api.workflowservice.v1 import request_response_pb2 as rr

from engine import tokens
from engine.errors import EngineError
from engine.models import Execution
from engine.proto_values import dur, normal_queue, ts
from engine.services import activity_tasks, workflow_tasks
from engine.services import workflow_queries as queries
from engine.services.updates import UpdateStatus
from tenants.models import Namespace
from visibility.divisions import is_activity_host

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
    config = NamespaceConfig(
        workflow_execution_retention_ttl=dur(namespace.retention.total_seconds()),
        history_archival_state=ArchivalState.ValueType(namespace.history_archival_state),
        history_archival_uri=namespace.history_archival_uri,
        visibility_archival_state=ArchivalState.ValueType(namespace.visibility_archival_state),
        visibility_archival_uri=namespace.visibility_archival_uri,
    )
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

_SignalWithStartOptional = Literal[
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
]
"""Fields of the start a SignalWithStart makes that stay unset when the request leaves them unset."""
_SIGNAL_WITH_START_OPTIONAL: tuple[_SignalWithStartOptional, ...] = get_args(_SignalWithStartOptional)


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
        stage=UpdateWorkflowExecutionLifecycleStage.ValueType(status.stage),
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
        workflow_execution_task_queue=normal_queue(started.task_queue),
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
        workflow_execution_task_queue=normal_queue(state.task_queue),
    )


def activity_task_response(
    namespace: Namespace, started: activity_tasks.StartedActivityTask
) -> rr.PollActivityTaskQueueResponse:
    execution = started.execution
    scheduled = started.scheduled
    response = rr.PollActivityTaskQueueResponse(
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
    if is_activity_host(execution.workflow_id):
        # A standalone activity: no workflow around it, its own run id instead (Temporal's response).
        response.ClearField("workflow_type")
        response.ClearField("workflow_execution")
        response.activity_run_id = execution.run_id
    return response


# --- runs as describe and list show them ------------------------------------------------------------
