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

Targets (`Rule.targets`) are every field of the request that can name a namespace: the `namespace`
field, DescribeNamespace's `id`, DeleteNamespace's `namespace_id`, task tokens (which embed the
namespace id of their task), the inner requests of ExecuteMultiOperation and the commands of a
workflow task that name a namespace. The interceptor checks each one that is set: the key must cover
every namespace the request names, and the fields that name what the call acts on must agree, so no
handler can act on a namespace other than the one authorised. `INERT` lists the fields that look
like targets but pick nothing (links, failure details, page tokens...), with why.
tests/unit/test_methods_table.py walks every request message and fails on a field of either kind
that a row does not declare, so a new method or SDK release cannot add an unchecked target silently.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

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


class Kind(enum.Enum):
    NAME = "name"
    """A namespace name."""
    ID = "id"
    """A namespace id."""
    TOKEN = "token"
    """A task token this server issued: it carries the id of its task's namespace."""


@dataclass(frozen=True, slots=True)
class Target:
    """A request field that can name a namespace."""

    path: str
    """Dotted field path from the request; `[]` after a repeated field means each element."""
    kind: Kind
    agree: bool = True
    """True: names the namespace the call acts on, so it must agree with every other such field.
    False: names a namespace the call reaches besides its own (a child's or an external workflow's);
    the key must cover it, and the history rules decide whether the call may reach it."""

    @property
    def top(self) -> bool:
        """A field of the request itself that can name the call's namespace (one must be set)."""
        return self.kind is not Kind.TOKEN and "." not in self.path


NAMESPACE = Target("namespace", Kind.NAME)
TASK_TOKEN = Target("task_token", Kind.TOKEN)


@dataclass(frozen=True, slots=True)
class Rule:
    scope: Scope
    access: Access
    bucket: Bucket
    audit: Audit = Audit.NONE
    targets: tuple[Target, ...] = (NAMESPACE,)
    """Every field that can name a namespace (see the module docstring); empty for CLUSTER and SYSTEM."""

    def plus(self, *targets: Target) -> Rule:
        """This rule with more target fields."""
        return replace(self, targets=self.targets + targets)


def values_at(message: Any, path: str) -> Iterator[Any]:
    """The non-empty values of the field at `path` (`a[].b.c`) in `message`; unset messages yield none."""
    head, _, rest = path.partition(".")
    name = head.removesuffix("[]")
    if head.endswith("[]"):
        items = list(getattr(message, name))
    elif rest:
        items = [getattr(message, name)] if message.HasField(name) else []
    else:
        items = [getattr(message, name)]
    for item in items:
        if rest:
            yield from values_at(item, rest)
        elif item:
            yield item


def _commands(*attributes: str) -> tuple[Target, ...]:
    return tuple(Target(f"commands[].{a}.namespace", Kind.NAME, agree=False) for a in attributes)


R = Rule(Scope.NAMESPACE, Access.READ, Bucket.NONE)
W = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.NONE)
A = Rule(Scope.NAMESPACE, Access.ADMIN, Bucket.NONE)
ACT = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.ACTIONS)
POLL = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.POLLS)
VIS = Rule(Scope.NAMESPACE, Access.READ, Bucket.VISIBILITY)
CLUSTER = Rule(Scope.CLUSTER, Access.READ, Bucket.NONE, targets=())
SYSTEM = Rule(Scope.SYSTEM, Access.ADMIN, Bucket.NONE, targets=())
# Worker calls that name their task by a token.
W_TOKEN = W.plus(TASK_TOKEN)
# Audited rows: operator actions (recorded by the interceptor) and namespace changes (by the service).
W_AUD = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.NONE, Audit.CALL)
ACT_AUD = Rule(Scope.NAMESPACE, Access.WRITE, Bucket.ACTIONS, Audit.CALL)
A_AUD = Rule(Scope.NAMESPACE, Access.ADMIN, Bucket.NONE, Audit.CALL)
A_CHANGE = Rule(Scope.NAMESPACE, Access.ADMIN, Bucket.NONE, Audit.CHANGE)

WORKFLOW_METHODS: dict[str, Rule] = {
    # namespaces
    "RegisterNamespace": Rule(Scope.REGISTER, Access.ADMIN, Bucket.NONE, Audit.CHANGE),
    "DescribeNamespace": R.plus(Target("id", Kind.ID)),
    "ListNamespaces": CLUSTER,
    "UpdateNamespace": A_CHANGE,
    "DeprecateNamespace": A_CHANGE,
    # starting and controlling runs
    "StartWorkflowExecution": ACT_AUD,
    "ExecuteMultiOperation": ACT_AUD.plus(
        Target("operations[].start_workflow.namespace", Kind.NAME),
        Target("operations[].update_workflow.namespace", Kind.NAME),
    ),
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
    "RespondWorkflowTaskCompleted": W_TOKEN.plus(
        *_commands(
            "start_child_workflow_execution_command_attributes",
            "signal_external_workflow_execution_command_attributes",
            "request_cancel_external_workflow_execution_command_attributes",
        )
    ),
    "RespondWorkflowTaskFailed": W_TOKEN,
    "PollActivityTaskQueue": POLL,
    "RecordActivityTaskHeartbeat": W_TOKEN,
    "RecordActivityTaskHeartbeatById": W,
    "RespondActivityTaskCompleted": W_TOKEN,
    "RespondActivityTaskCompletedById": W,
    "RespondActivityTaskFailed": W_TOKEN,
    "RespondActivityTaskFailedById": W,
    "RespondActivityTaskCanceled": W_TOKEN,
    "RespondActivityTaskCanceledById": W,
    "RespondQueryTaskCompleted": W_TOKEN,
    "ResetStickyTaskQueue": W,
    "ShutdownWorker": W,
    "RecordWorkerHeartbeat": W,
    "FetchWorkerConfig": R,
    "UpdateWorkerConfig": W,
    "ListWorkers": R,
    "CountWorkers": R,
    "DescribeWorker": R,
    "PollNexusTaskQueue": POLL,
    "RespondNexusTaskCompleted": W_TOKEN,
    "RespondNexusTaskFailed": W_TOKEN,
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
    "SetWorkerDeploymentCurrentVersion": W_AUD,
    "DescribeWorkerDeployment": R,
    "DeleteWorkerDeployment": W_AUD,
    "DeleteWorkerDeploymentVersion": W_AUD,
    "SetWorkerDeploymentRampingVersion": W_AUD,
    "ListWorkerDeployments": R,
    "CreateWorkerDeployment": W_AUD,
    "CreateWorkerDeploymentVersion": W_AUD,
    "UpdateWorkerDeploymentVersionComputeConfig": W,
    "ValidateWorkerDeploymentVersionComputeConfig": R,
    "UpdateWorkerDeploymentVersionMetadata": W_AUD,
    "SetWorkerDeploymentManager": W_AUD,
    # batch operations and workflow rules
    "StartBatchOperation": W_AUD,
    "StopBatchOperation": W_AUD,
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
    "StartActivityExecution": ACT_AUD,
    "DescribeActivityExecution": R,
    "PollActivityExecution": R,
    "ListActivityExecutions": VIS,
    "CountActivityExecutions": VIS,
    "RequestCancelActivityExecution": W_AUD,
    "TerminateActivityExecution": W_AUD,
    "DeleteActivityExecution": W_AUD,
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
    "DeleteNamespace": A_CHANGE.plus(Target("namespace_id", Kind.ID)),
    "AddOrUpdateRemoteCluster": SYSTEM,
    "RemoveRemoteCluster": SYSTEM,
    "ListClusters": SYSTEM,
    "GetNexusEndpoint": SYSTEM,
    "CreateNexusEndpoint": SYSTEM,
    "UpdateNexusEndpoint": SYSTEM,
    "DeleteNexusEndpoint": SYSTEM,
    "ListNexusEndpoints": SYSTEM,
}

INERT: dict[tuple[str, str], str] = {
    # (message, field): why the field names no target of the call.
    ("temporal.api.common.v1.Link.WorkflowEvent", "namespace"): "a link is stored as given, never followed",
    ("temporal.api.common.v1.Link.Workflow", "namespace"): "a link is stored as given, never followed",
    ("temporal.api.common.v1.Link.Activity", "namespace"): "a link is stored as given, never followed",
    ("temporal.api.common.v1.Link.NexusOperation", "namespace"): "a link is stored as given, never followed",
    ("temporal.api.failure.v1.ChildWorkflowExecutionFailureInfo", "namespace"): "failure detail, stored",
    ("temporal.api.failure.v1.NexusOperationFailureInfo", "operation_token"): "failure detail, stored",
    ("temporal.api.nexus.v1.StartOperationResponse.Async", "operation_token"): "Nexus: not implemented",
    ("temporal.api.workflowservice.v1.RegisterNamespaceRequest", "security_token"): "deprecated, ignored",
    ("temporal.api.workflowservice.v1.UpdateNamespaceRequest", "security_token"): "deprecated, ignored",
    ("temporal.api.workflowservice.v1.DeprecateNamespaceRequest", "security_token"): "deprecated, ignored",
    ("temporal.api.workflowservice.v1.UpdateScheduleRequest", "conflict_token"): "a version of the schedule",
    (
        "temporal.api.workflowservice.v1.DescribeActivityExecutionRequest",
        "long_poll_token",
    ): "not implemented",
    ("temporal.api.workflowservice.v1.DescribeNexusOperationExecutionRequest", "long_poll_token"): (
        "not implemented"
    ),
    (
        "temporal.api.workflowservice.v1.UpdateWorkerVersioningRulesRequest",
        "conflict_token",
    ): "not implemented",
    ("temporal.api.workflowservice.v1.SetWorkerDeploymentCurrentVersionRequest", "conflict_token"): (
        "a revision of the deployment's routing, compared within the request's namespace"
    ),
    ("temporal.api.workflowservice.v1.SetWorkerDeploymentRampingVersionRequest", "conflict_token"): (
        "a revision of the deployment's routing, compared within the request's namespace"
    ),
    (
        "temporal.api.workflowservice.v1.SetWorkerDeploymentManagerRequest",
        "conflict_token",
    ): "not implemented",
}
"""Fields that look like targets (a namespace, an id of a namespace request, a token) but are not."""

PAGE_TOKEN = "next_page_token"
"""Page tokens are read within the namespace the request names (every query is scoped by it)."""

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
