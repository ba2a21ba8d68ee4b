"""The WorkflowService and OperatorService over gRPC: a table from each RPC to its handler in engine/api/rpc/.

Who may call each method, its rate-limit bucket and its audit mode are rows of engine/api/methods.py.
Methods not listed here answer UNIMPLEMENTED with their name (engine/api/rpc/unimplemented.py).
"""

from __future__ import annotations

from engine.api import generated
from engine.api.errors import handler
from engine.api.rpc import (
    activity_control,
    activity_tasks,
    batches,
    deployments,
    legacy_versioning,
    namespaces,
    operator,
    schedules,
    standalone_activities,
    system,
    task_queues,
    unimplemented,
    visibility,
    workflow_control,
    workflow_messages,
    workflow_reads,
    workflow_start,
    workflow_tasks,
)


class WorkflowService(generated.WorkflowServiceServicer):
    """temporal.api.workflowservice.v1.WorkflowService."""

    GetSystemInfo = handler(system.get_system_info)

    CreateWorkerDeployment = handler(deployments.create_worker_deployment)
    CreateWorkerDeploymentVersion = handler(deployments.create_worker_deployment_version)
    SetWorkerDeploymentManager = handler(deployments.set_worker_deployment_manager)
    DescribeWorkerDeployment = handler(deployments.describe_worker_deployment)
    ListWorkerDeployments = handler(deployments.list_worker_deployments)
    DescribeWorkerDeploymentVersion = handler(deployments.describe_worker_deployment_version)
    SetWorkerDeploymentCurrentVersion = handler(deployments.set_worker_deployment_current_version)
    SetWorkerDeploymentRampingVersion = handler(deployments.set_worker_deployment_ramping_version)
    DeleteWorkerDeploymentVersion = handler(deployments.delete_worker_deployment_version)
    DeleteWorkerDeployment = handler(deployments.delete_worker_deployment)
    UpdateWorkerDeploymentVersionMetadata = handler(deployments.update_worker_deployment_version_metadata)

    UpdateWorkerBuildIdCompatibility = handler(legacy_versioning.update_worker_build_id_compatibility)
    GetWorkerBuildIdCompatibility = handler(legacy_versioning.get_worker_build_id_compatibility)
    GetWorkerTaskReachability = handler(legacy_versioning.get_worker_task_reachability)
    UpdateWorkerVersioningRules = handler(legacy_versioning.update_worker_versioning_rules)
    GetWorkerVersioningRules = handler(legacy_versioning.get_worker_versioning_rules)
    DescribeDeployment = handler(legacy_versioning.describe_deployment)
    ListDeployments = handler(legacy_versioning.list_deployments)
    GetCurrentDeployment = handler(legacy_versioning.get_current_deployment)
    SetCurrentDeployment = handler(legacy_versioning.set_current_deployment)
    GetDeploymentReachability = handler(legacy_versioning.get_deployment_reachability)

    RegisterNamespace = handler(namespaces.register_namespace)
    DescribeNamespace = handler(namespaces.describe_namespace)
    ListNamespaces = handler(namespaces.list_namespaces)
    UpdateNamespace = handler(namespaces.update_namespace)
    DeprecateNamespace = handler(namespaces.deprecate_namespace)

    StartWorkflowExecution = handler(workflow_start.start_workflow_execution)
    SignalWithStartWorkflowExecution = handler(workflow_start.signal_with_start_workflow_execution)
    ExecuteMultiOperation = handler(workflow_start.execute_multi_operation)

    RequestCancelWorkflowExecution = handler(workflow_control.request_cancel_workflow_execution)
    TerminateWorkflowExecution = handler(workflow_control.terminate_workflow_execution)
    ResetWorkflowExecution = handler(workflow_control.reset_workflow_execution)
    DeleteWorkflowExecution = handler(workflow_control.delete_workflow_execution)
    PauseWorkflowExecution = handler(workflow_control.pause_workflow_execution)
    UnpauseWorkflowExecution = handler(workflow_control.unpause_workflow_execution)
    UpdateWorkflowExecutionOptions = handler(workflow_control.update_workflow_execution_options)

    SignalWorkflowExecution = handler(workflow_messages.signal_workflow_execution)
    QueryWorkflow = handler(workflow_messages.query_workflow)
    RespondQueryTaskCompleted = handler(workflow_messages.respond_query_task_completed)
    UpdateWorkflowExecution = handler(workflow_messages.update_workflow_execution)
    PollWorkflowExecutionUpdate = handler(workflow_messages.poll_workflow_execution_update)

    DescribeWorkflowExecution = handler(workflow_reads.describe_workflow_execution)
    GetWorkflowExecutionHistory = handler(workflow_reads.get_workflow_execution_history)
    GetWorkflowExecutionHistoryReverse = handler(workflow_reads.get_workflow_execution_history_reverse)

    PollWorkflowTaskQueue = handler(workflow_tasks.poll_workflow_task_queue)
    RespondWorkflowTaskCompleted = handler(workflow_tasks.respond_workflow_task_completed)
    RespondWorkflowTaskFailed = handler(workflow_tasks.respond_workflow_task_failed)
    ResetStickyTaskQueue = handler(workflow_tasks.reset_sticky_task_queue)

    PollActivityTaskQueue = handler(activity_tasks.poll_activity_task_queue)
    RecordActivityTaskHeartbeat = handler(activity_tasks.record_activity_task_heartbeat)
    RecordActivityTaskHeartbeatById = handler(activity_tasks.record_activity_task_heartbeat_by_id)
    RespondActivityTaskCompleted = handler(activity_tasks.respond_activity_task_completed)
    RespondActivityTaskCompletedById = handler(activity_tasks.respond_activity_task_completed_by_id)
    RespondActivityTaskFailed = handler(activity_tasks.respond_activity_task_failed)
    RespondActivityTaskFailedById = handler(activity_tasks.respond_activity_task_failed_by_id)
    RespondActivityTaskCanceled = handler(activity_tasks.respond_activity_task_canceled)
    RespondActivityTaskCanceledById = handler(activity_tasks.respond_activity_task_canceled_by_id)

    PauseActivity = handler(activity_control.pause_activity)
    UnpauseActivity = handler(activity_control.unpause_activity)
    ResetActivity = handler(activity_control.reset_activity)
    UpdateActivityOptions = handler(activity_control.update_activity_options)
    PauseActivityExecution = handler(activity_control.pause_activity_execution)
    UnpauseActivityExecution = handler(activity_control.unpause_activity_execution)
    ResetActivityExecution = handler(activity_control.reset_activity_execution)
    UpdateActivityExecutionOptions = handler(activity_control.update_activity_execution_options)

    StartActivityExecution = handler(standalone_activities.start_activity_execution)
    DescribeActivityExecution = handler(standalone_activities.describe_activity_execution)
    PollActivityExecution = handler(standalone_activities.poll_activity_execution)
    ListActivityExecutions = handler(standalone_activities.list_activity_executions)
    CountActivityExecutions = handler(standalone_activities.count_activity_executions)
    RequestCancelActivityExecution = handler(standalone_activities.request_cancel_activity_execution)
    TerminateActivityExecution = handler(standalone_activities.terminate_activity_execution)
    DeleteActivityExecution = handler(standalone_activities.delete_activity_execution)

    DescribeTaskQueue = handler(task_queues.describe_task_queue)
    ShutdownWorker = handler(task_queues.shutdown_worker)

    CreateSchedule = handler(schedules.create_schedule)
    DescribeSchedule = handler(schedules.describe_schedule)
    UpdateSchedule = handler(schedules.update_schedule)
    PatchSchedule = handler(schedules.patch_schedule)
    DeleteSchedule = handler(schedules.delete_schedule)
    ListSchedules = handler(schedules.list_schedules)
    CountSchedules = handler(schedules.count_schedules)
    ListScheduleMatchingTimes = handler(schedules.list_schedule_matching_times)

    ListWorkflowExecutions = handler(visibility.list_workflow_executions)
    ListArchivedWorkflowExecutions = handler(visibility.list_archived_workflow_executions)
    ScanWorkflowExecutions = handler(visibility.scan_workflow_executions)
    CountWorkflowExecutions = handler(visibility.count_workflow_executions)
    ListOpenWorkflowExecutions = handler(visibility.list_open_workflow_executions)
    ListClosedWorkflowExecutions = handler(visibility.list_closed_workflow_executions)
    GetSearchAttributes = handler(visibility.get_search_attributes)

    StartBatchOperation = handler(batches.start_batch_operation)
    StopBatchOperation = handler(batches.stop_batch_operation)
    DescribeBatchOperation = handler(batches.describe_batch_operation)
    ListBatchOperations = handler(batches.list_batch_operations)


class OperatorService(generated.OperatorServiceServicer):
    """temporal.api.operatorservice.v1.OperatorService."""

    AddSearchAttributes = handler(operator.add_search_attributes)
    RemoveSearchAttributes = handler(operator.remove_search_attributes)
    ListSearchAttributes = handler(operator.list_search_attributes)
    DeleteNamespace = handler(namespaces.delete_namespace)


unimplemented.fill(WorkflowService, generated.WorkflowServiceServicer)
unimplemented.fill(OperatorService, generated.OperatorServiceServicer)
