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

Audit (the last column) says what the audit log (tenants/audit.py) keeps of a call: CALL rows (operator
actions on runs and schedules: start, signal, cancel, terminate, reset, update, delete...) are recorded
by the interceptor after the call with its status code; CHANGE rows (namespace settings) are recorded
by the control-plane service in the change's own transaction, and by the interceptor only when refused
or failed. Reads and worker calls (polls, completions, heartbeats) are not recorded: they are most of
the traffic and change nothing an operator decides.
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


class Audit(enum.Enum):
    NONE = "none"
    """Not recorded: reads and worker calls."""
    CALL = "call"
    """Recorded by the interceptor after the call, with its outcome (operator actions on runs)."""
    CHANGE = "change"
    """Recorded by the control-plane service with the change; by the interceptor if refused or failed."""


@dataclass(frozen=True, slots=True)
class Rule:
    scope: Scope
    access: Access
    bucket: Bucket
    audit: Audit = Audit.NONE


R = Rule(Scope.NAMESPACE, Access.READ, Bucket.NONE)
W = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.NONE)
A = Rule(Scope.NAMESPACE, Access.ADMIN, Bucket.NONE)
ACT = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.ACTIONS)
POLL = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.POLLS)
VIS = Rule(Scope.NAMESPACE, Access.READ, Bucket.VISIBILITY)
CLUSTER = Rule(Scope.CLUSTER, Access.READ, Bucket.NONE)
SYSTEM = Rule(Scope.SYSTEM, Access.ADMIN, Bucket.NONE)
# Audited rows: operator actions (recorded by the interceptor) and namespace changes (by the service).
W_AUD = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.NONE, Audit.CALL)
ACT_AUD = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.ACTIONS, Audit.CALL)
A_AUD = Rule(Scope.NAMESPACE, Access.ADMIN, Bucket.NONE, Audit.CALL)
A_CHANGE = Rule(Scope.NAMESPACE, Access.ADMIN, Bucket.NONE, Audit.CHANGE)

WORKFLOW_METHODS: dict[str, Rule] = {
    # namespaces
    "RegisterNamespace": Rule(Scope.REGISTER, Access.ADMIN, Bucket.NONE, Audit.CHANGE),
    "DescribeNamespace": R,
    "ListNamespaces": CLUSTER,
    "UpdateNamespace": A_CHANGE,
    "DeprecateNamespace": A_CHANGE,
    # starting and controlling runs
    "StartWorkflowExecution": ACT_AUD,
    "ExecuteMultiOperation": ACT_AUD,
    "SignalWorkflowExecution": ACT_AUD,
    "SignalWithStartWorkflowExecution": ACT_AUD,
    "RequestCancelWorkflowExecution": W_AUD,
    "TerminateWorkflowExecution": W_AUD,
    "ResetWorkflowExecution": W_AUD,
    "DeleteWorkflowExecution": W_AUD,
    "UpdateWorkflowExecution": ACT_AUD,
    "UpdateWorkflowExecutionOptions": W_AUD,
    "PauseWorkflowExecution": W_AUD,
    "UnpauseWorkflowExecution": W_AUD,
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
    "CreateSchedule": W_AUD,
    "DescribeSchedule": R,
    "UpdateSchedule": W_AUD,
    "PatchSchedule": W_AUD,
    "ListScheduleMatchingTimes": R,
    "DeleteSchedule": W_AUD,
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
    "UpdateActivityOptions": W_AUD,
    "PauseActivity": W_AUD,
    "UnpauseActivity": W_AUD,
    "ResetActivity": W_AUD,
    "UpdateActivityExecutionOptions": W_AUD,
    "PauseActivityExecution": W_AUD,
    "UnpauseActivityExecution": W_AUD,
    "ResetActivityExecution": W_AUD,
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
    # Search attributes have no control-plane service of their own: the interceptor records them.
    "AddSearchAttributes": A_AUD,
    "RemoveSearchAttributes": A_AUD,
    "ListSearchAttributes": R,
    "DeleteNamespace": A_CHANGE,
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
