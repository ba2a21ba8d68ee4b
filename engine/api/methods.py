"""The per-RPC access table: what every WorkflowService and OperatorService method needs.

One row per method, as Temporal's common/api/metadata.go. The auth interceptor (engine/api/auth.py)
reads it on every call; tests/unit/test_methods_table.py fails when a method of the service
descriptors has no row, so a new SDK release cannot add an unguarded method silently.

Scopes say where the namespace comes from; access levels (tenants.roles.Access) say which key role
suffices: reader keys READ, operator keys WRITE, admin keys ADMIN. Workers poll and respond to tasks,
which hands out work and writes history, so a worker needs an operator key.

Buckets (tenants.quotas.Bucket) say which of the namespace's rate limits a call draws a token from
(engine/api/ratelimits.py): ACT for starts, signals and updates, POLL for worker polls, VIS for
list/count queries; every other row draws none. The unit test fails on a row without a bucket.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tenants.quotas import Bucket
from tenants.roles import Access

WORKFLOW_SERVICE = "temporal.api.workflowservice.v1.WorkflowService"
OPERATOR_SERVICE = "temporal.api.operatorservice.v1.OperatorService"


class Scope(enum.Enum):
    NAMESPACE = "namespace"
    """The request's `namespace` field names the namespace; the key must cover it."""
    CLUSTER = "cluster"
    """No namespace: any valid key may call (system info; ListNamespaces shows only the key's own)."""
    REGISTER = "register"
    """RegisterNamespace: the new name must carry the key's organisation suffix."""
    SYSTEM = "system"
    """The whole installation (remote clusters, Nexus endpoints): the operator only, never a key."""


@dataclass(frozen=True, slots=True)
class Rule:
    scope: Scope
    access: Access
    bucket: Bucket


R = Rule(Scope.NAMESPACE, Access.READ, Bucket.NONE)
W = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.NONE)
A = Rule(Scope.NAMESPACE, Access.ADMIN, Bucket.NONE)
ACT = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.ACTIONS)
POLL = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.POLLS)
VIS = Rule(Scope.NAMESPACE, Access.READ, Bucket.VISIBILITY)
CLUSTER = Rule(Scope.CLUSTER, Access.READ, Bucket.NONE)
SYSTEM = Rule(Scope.SYSTEM, Access.ADMIN, Bucket.NONE)

WORKFLOW_METHODS: dict[str, Rule] = {
    # namespaces
    "RegisterNamespace": Rule(Scope.REGISTER, Access.ADMIN, Bucket.NONE),
    "DescribeNamespace": R,
    "ListNamespaces": CLUSTER,
    "UpdateNamespace": A,
    "DeprecateNamespace": A,
    # starting and controlling runs
    "StartWorkflowExecution": ACT,
    "ExecuteMultiOperation": ACT,
    "SignalWorkflowExecution": ACT,
    "SignalWithStartWorkflowExecution": ACT,
    "RequestCancelWorkflowExecution": W,
    "TerminateWorkflowExecution": W,
    "ResetWorkflowExecution": W,
    "DeleteWorkflowExecution": W,
    "UpdateWorkflowExecution": ACT,
    "UpdateWorkflowExecutionOptions": W,
    "PauseWorkflowExecution": W,
    "UnpauseWorkflowExecution": W,
    # reading runs
    "GetWorkflowExecutionHistory": R,
    "GetWorkflowExecutionHistoryReverse": R,
    "DescribeWorkflowExecution": R,
    "QueryWorkflow": R,
    "PollWorkflowExecutionUpdate": R,
    # visibility
    "ListOpenWorkflowExecutions": VIS,
    "ListClosedWorkflowExecutions": VIS,
    "ListWorkflowExecutions": VIS,
    "ListArchivedWorkflowExecutions": VIS,
    "ScanWorkflowExecutions": VIS,
    "CountWorkflowExecutions": VIS,
    # It lists the attributes registered in every namespace: a key uses OperatorService.ListSearchAttributes.
    "GetSearchAttributes": SYSTEM,
    # workers: polls hand out tasks, responses write history
    "PollWorkflowTaskQueue": POLL,
    "RespondWorkflowTaskCompleted": W,
    "RespondWorkflowTaskFailed": W,
    "PollActivityTaskQueue": POLL,
    "RecordActivityTaskHeartbeat": W,
    "RecordActivityTaskHeartbeatById": W,
    "RespondActivityTaskCompleted": W,
    "RespondActivityTaskCompletedById": W,
    "RespondActivityTaskFailed": W,
    "RespondActivityTaskFailedById": W,
    "RespondActivityTaskCanceled": W,
    "RespondActivityTaskCanceledById": W,
    "RespondQueryTaskCompleted": W,
    "ResetStickyTaskQueue": W,
    "ShutdownWorker": W,
    "RecordWorkerHeartbeat": W,
    "FetchWorkerConfig": R,
    "UpdateWorkerConfig": W,
    "ListWorkers": R,
    "CountWorkers": R,
    "DescribeWorker": R,
    "PollNexusTaskQueue": POLL,
    "RespondNexusTaskCompleted": W,
    "RespondNexusTaskFailed": W,
    # task queues
    "DescribeTaskQueue": R,
    "ListTaskQueuePartitions": R,
    "UpdateTaskQueueConfig": W,
    # system
    "GetClusterInfo": CLUSTER,
    "GetSystemInfo": CLUSTER,
    # schedules
    "CreateSchedule": W,
    "DescribeSchedule": R,
    "UpdateSchedule": W,
    "PatchSchedule": W,
    "ListScheduleMatchingTimes": R,
    "DeleteSchedule": W,
    "ListSchedules": VIS,
    "CountSchedules": VIS,
    # worker versioning and deployments
    "UpdateWorkerBuildIdCompatibility": W,
    "GetWorkerBuildIdCompatibility": R,
    "UpdateWorkerVersioningRules": W,
    "GetWorkerVersioningRules": R,
    "GetWorkerTaskReachability": R,
    "DescribeDeployment": R,
    "DescribeWorkerDeploymentVersion": R,
    "ListDeployments": R,
    "GetDeploymentReachability": R,
    "GetCurrentDeployment": R,
    "SetCurrentDeployment": W,
    "SetWorkerDeploymentCurrentVersion": W,
    "DescribeWorkerDeployment": R,
    "DeleteWorkerDeployment": W,
    "DeleteWorkerDeploymentVersion": W,
    "SetWorkerDeploymentRampingVersion": W,
    "ListWorkerDeployments": R,
    "CreateWorkerDeployment": W,
    "CreateWorkerDeploymentVersion": W,
    "UpdateWorkerDeploymentVersionComputeConfig": W,
    "ValidateWorkerDeploymentVersionComputeConfig": R,
    "UpdateWorkerDeploymentVersionMetadata": W,
    "SetWorkerDeploymentManager": W,
    # batch operations and workflow rules
    "StartBatchOperation": W,
    "StopBatchOperation": W,
    "DescribeBatchOperation": R,
    "ListBatchOperations": R,
    "CreateWorkflowRule": W,
    "DescribeWorkflowRule": R,
    "DeleteWorkflowRule": W,
    "ListWorkflowRules": R,
    "TriggerWorkflowRule": W,
    # activity operator calls
    "UpdateActivityOptions": W,
    "PauseActivity": W,
    "UnpauseActivity": W,
    "ResetActivity": W,
    "UpdateActivityExecutionOptions": W,
    "PauseActivityExecution": W,
    "UnpauseActivityExecution": W,
    "ResetActivityExecution": W,
    # standalone activities and Nexus operations
    "StartActivityExecution": ACT,
    "DescribeActivityExecution": R,
    "PollActivityExecution": R,
    "ListActivityExecutions": VIS,
    "CountActivityExecutions": VIS,
    "RequestCancelActivityExecution": W,
    "TerminateActivityExecution": W,
    "DeleteActivityExecution": W,
    "StartNexusOperationExecution": ACT,
    "DescribeNexusOperationExecution": R,
    "PollNexusOperationExecution": R,
    "ListNexusOperationExecutions": VIS,
    "CountNexusOperationExecutions": VIS,
    "RequestCancelNexusOperationExecution": W,
    "TerminateNexusOperationExecution": W,
    "DeleteNexusOperationExecution": W,
}

OPERATOR_METHODS: dict[str, Rule] = {
    "AddSearchAttributes": A,
    "RemoveSearchAttributes": A,
    "ListSearchAttributes": R,
    "DeleteNamespace": A,
    "AddOrUpdateRemoteCluster": SYSTEM,
    "RemoveRemoteCluster": SYSTEM,
    "ListClusters": SYSTEM,
    "GetNexusEndpoint": SYSTEM,
    "CreateNexusEndpoint": SYSTEM,
    "UpdateNexusEndpoint": SYSTEM,
    "DeleteNexusEndpoint": SYSTEM,
    "ListNexusEndpoints": SYSTEM,
}

_SERVICES = {WORKFLOW_SERVICE: WORKFLOW_METHODS, OPERATOR_SERVICE: OPERATOR_METHODS}


def guarded(full_method: str) -> bool:
    """True for a method of a service the interceptor guards (`/package.Service/Method`)."""
    service, _, _ = full_method.lstrip("/").rpartition("/")
    return service in _SERVICES


def rule_for(full_method: str) -> Rule | None:
    """The rule of `/package.Service/Method`, or None if the method has no row (denied to keys)."""
    service, _, method = full_method.lstrip("/").rpartition("/")
    table = _SERVICES.get(service)
    return None if table is None else table.get(method)
