"""Run-level writes from clients: start (with id reuse and conflict policies), signal, cancel, terminate."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError
from perdura import clock
from temporalio.api.common.v1 import Header, Payloads
from temporalio.api.enums.v1 import (
    WorkflowExecutionStatus,
    WorkflowIdConflictPolicy,
    WorkflowIdReusePolicy,
)
from temporalio.api.errordetails.v1 import WorkflowExecutionAlreadyStartedFailure
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine import ids
from engine.errors import AlreadyExists, FailedPrecondition, InvalidArgument, NotFound
from engine.history import cron, lifecycle, versioning, workflow_task
from engine.history.mutation import Mutation, TaskKind
from engine.history.state import OPEN_STATUSES, ParentInfo
from engine.models import CurrentRun, Execution
from engine.persistence import store
from engine.persistence import visibility as visibility_store
from engine.services import recent_events, task_handoff, workflow_tasks
from engine.services.write_path import apply_locked, in_transaction, run_update
from tenants.models import Namespace

_FAILED_STATUSES = {
    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_FAILED,
    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CANCELED,
    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED,
    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
}


@dataclass(frozen=True, slots=True)
class StartResult:
    run_id: str
    started: bool
    eager_workflow_task: workflow_tasks.StartedWorkflowTask | None = None
    """The first workflow task, started for the caller's own worker (eager workflow start)."""


def _already_started(message: str, request_id: str, run_id: str) -> AlreadyExists:
    return AlreadyExists(
        message, WorkflowExecutionAlreadyStartedFailure(start_request_id=request_id, run_id=run_id)
    )


def _terminate_for_new_start(execution: Execution, new_run_id: str) -> None:
    execution = Execution.objects.select_for_update().get(pk=execution.pk)
    if execution.status not in OPEN_STATUSES:  # the row's status is the state's, as of the last persist
        return
    apply_locked(
        execution,
        lambda _e, m: lifecycle.terminate(
            m,
            reason="TerminateIfRunning WorkflowIdReusePolicy Policy",
            details=None,
            identity=f"terminated by {new_run_id}",
        ),
    )


def _first_task_backoff(request: StartWorkflowExecutionRequest) -> float:
    """A start delay, or for a cron workflow the wait until its schedule's first time."""
    if request.cron_schedule:
        return cron.next_backoff(request.cron_schedule, clock.now())
    if request.HasField("workflow_start_delay"):
        return request.workflow_start_delay.ToTimedelta().total_seconds()
    return 0.0


def require_accepting_starts(*, namespace: Namespace) -> None:
    """Refuse a new run from a client or a schedule in a namespace that is not registered (deprecated).

    As Temporal's frontend: StartWorkflowExecution and SignalWithStartWorkflowExecution (even onto a
    running run) are refused, and schedules take no new action; what runs there goes on (signals,
    queries, child starts, continue-as-new), and it can still be described and listed.

    Raises:
        FailedPrecondition: the namespace is deprecated (Temporal's status and message).
    """
    if namespace.state != Namespace.State.REGISTERED:
        state = Namespace.State(namespace.state).label
        raise FailedPrecondition(f"Namespace has invalid state: {state}. Must be Registered.")


def workflow_start(
    *,
    namespace: Namespace,
    request: StartWorkflowExecutionRequest,
    on_running: Callable[[Execution], None] | None = None,
    signal: Callable[[Mutation], None] | None = None,
    parent: ParentInfo | None = None,
    inherited: versioning.Inherited | None = None,
) -> StartResult:
    """Start a run, or apply the workflow id policies to the current one.

    `on_running` (signal-with-start) is applied to a running current run instead of starting;
    `signal` is applied to a new run right after its start event. A child gets the versioning its parent
    passes on (`inherited`).

    Raises:
        AlreadyExists: the id is taken under the request's policies (details carry the run id).
        InvalidArgument: an inconsistent policy combination.
    """
    conflict = request.workflow_id_conflict_policy
    reuse = request.workflow_id_reuse_policy
    if (
        reuse == WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING
        and conflict != WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_UNSPECIFIED
    ):
        raise InvalidArgument(
            "Invalid WorkflowIDReusePolicy: WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING cannot be used together "
            "with a WorkflowIDConflictPolicy."
        )
    # IntegrityError: another start created the current-run row at the same moment; decide again against it.
    return in_transaction(
        lambda: _start_txn(namespace, request, on_running, signal, parent, inherited),
        attempts=2,
        retry_on=(IntegrityError,),
    )


def _start_txn(
    namespace: Namespace,
    request: StartWorkflowExecutionRequest,
    on_running: Callable[[Execution], None] | None,
    signal: Callable[[Mutation], None] | None,
    parent: ParentInfo | None = None,
    inherited: versioning.Inherited | None = None,
) -> StartResult:
    new_run_id = ids.new_run_id()
    # Most starts are of a new id: one statement claims it. The others read and lock its current run.
    fresh = store.claim_workflow_id(namespace.id, request.workflow_id, new_run_id, request.request_id)
    current = (
        None
        if fresh
        else CurrentRun.objects.select_for_update()
        .filter(namespace=namespace, workflow_id=request.workflow_id)
        .first()
    )
    if current is not None:
        previous = store.find_execution(namespace.id, request.workflow_id, current.run_id, lock=False)
        if request.request_id and request.request_id == current.start_request_id:
            return StartResult(run_id=current.run_id, started=True)
        if previous.status in OPEN_STATUSES:
            if on_running is not None:
                on_running(previous)
                return StartResult(run_id=previous.run_id, started=False)
            conflict = request.workflow_id_conflict_policy
            if conflict == WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING:
                return StartResult(run_id=previous.run_id, started=False)
            if (
                conflict == WorkflowIdConflictPolicy.WORKFLOW_ID_CONFLICT_POLICY_TERMINATE_EXISTING
                or request.workflow_id_reuse_policy
                == WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_TERMINATE_IF_RUNNING
            ):
                _terminate_for_new_start(previous, new_run_id)
            else:
                raise _already_started(
                    f"Workflow execution is already running. WorkflowId: {request.workflow_id}, "
                    f"RunId: {previous.run_id}.",
                    current.start_request_id,
                    previous.run_id,
                )
        else:
            reuse = request.workflow_id_reuse_policy
            if reuse == WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE:
                raise _already_started(
                    f"Workflow execution already finished. WorkflowId: {request.workflow_id}, "
                    f"RunId: {previous.run_id}. Workflow Id reuse policy: reject duplicate workflow Id.",
                    current.start_request_id,
                    previous.run_id,
                )
            if (
                reuse == WorkflowIdReusePolicy.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY
                and previous.status not in _FAILED_STATUSES
            ):
                raise _already_started(
                    f"Workflow execution already finished successfully. WorkflowId: {request.workflow_id}, "
                    f"RunId: {previous.run_id}. Workflow Id reuse policy: allow duplicate workflow Id if last run failed.",
                    current.start_request_id,
                    previous.run_id,
                )
    m = lifecycle.start(
        namespace_id=str(namespace.id),
        namespace=namespace.name,
        run_id=new_run_id,
        request=request,
        now=clock.now(),
        ids=ids.SYSTEM,
        schedule_first_task=signal is None,
        parent=parent,
        inherited=inherited,
        first_task_backoff=_first_task_backoff(request),
    )
    if signal is not None:
        signal(m)
    eager = None
    wft = m.state.workflow_task
    if request.request_eager_execution and wft is not None:
        # Eager start: the caller's own worker takes the first task, in this very transaction.
        m.drop_task(TaskKind.WORKFLOW, wft.scheduled_event_id)
        eager = workflow_task.start(
            m,
            scheduled_event_id=wft.scheduled_event_id,
            attempt=wft.attempt,
            request_id=request.request_id,
            identity=request.identity,
        )
    shard = ids.shard_for(namespace.id, request.workflow_id, settings.PERDURA_SHARDS)
    execution = store.new_execution(namespace.id, shard, m)
    with task_handoff.handing_over(execution, m):  # its first task, to a poll waiting in this process
        store.write_new(execution, m)
    recent_events.remember_on_commit(execution, m)
    if fresh:
        pass
    elif current is None:  # the id's current run was deleted since the claim found it
        CurrentRun.objects.create(
            namespace=namespace,
            workflow_id=request.workflow_id,
            run_id=new_run_id,
            start_request_id=request.request_id,
        )
    else:
        current.run_id = new_run_id
        current.start_request_id = request.request_id
        current.save(update_fields=["run_id", "start_request_id"])
    if eager is not None:
        return StartResult(
            run_id=new_run_id,
            started=True,
            eager_workflow_task=workflow_tasks.started_task_for(execution, m, eager),
        )
    return StartResult(run_id=new_run_id, started=True)


def workflow_signal(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    signal_name: str,
    input: Payloads | None,
    identity: str,
    request_id: str,
    header: Header | None,
) -> None:
    run_update(
        namespace_id=namespace.id,
        workflow_id=workflow_id,
        run_id=run_id,
        apply=lambda _e, m: lifecycle.signal(
            m, signal_name=signal_name, input=input, identity=identity, request_id=request_id, header=header
        ),
    )


def _require_chain(m: Mutation, first_execution_run_id: str) -> None:
    """A caller naming the first run of a chain reaches only that chain's runs, as in Temporal."""
    if first_execution_run_id and m.state.first_run_id != first_execution_run_id:
        raise NotFound("workflow execution not found")


def workflow_request_cancel(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    identity: str,
    reason: str,
    first_execution_run_id: str = "",
) -> None:
    def apply(_execution: Execution, m: Mutation) -> None:
        _require_chain(m, first_execution_run_id)
        lifecycle.request_cancel(m, identity=identity, reason=reason)

    run_update(namespace_id=namespace.id, workflow_id=workflow_id, run_id=run_id, apply=apply)


def workflow_terminate(
    *,
    namespace: Namespace,
    workflow_id: str,
    run_id: str,
    reason: str,
    details: Payloads | None,
    identity: str,
    first_execution_run_id: str = "",
) -> None:
    def apply(_execution: Execution, m: Mutation) -> None:
        _require_chain(m, first_execution_run_id)
        lifecycle.terminate(m, reason=reason, details=details, identity=identity)

    run_update(namespace_id=namespace.id, workflow_id=workflow_id, run_id=run_id, apply=apply)


def signal_locked(execution: Execution, apply: Callable[[Mutation], None]) -> None:
    """Inside the caller's transaction (signal-with-start holds the current-run row): lock a run and signal it."""
    execution = Execution.objects.select_for_update().get(pk=execution.pk)
    apply_locked(execution, lambda _e, m: apply(m))


def workflow_delete(*, namespace: Namespace, workflow_id: str, run_id: str) -> None:
    """Delete a run and its history (terminating it first if it is still running).

    Raises:
        NotFound: no such run.
    """
    execution = store.find_execution(namespace.id, workflow_id, run_id, lock=False)
    if execution.status in OPEN_STATUSES:
        try:
            workflow_terminate(
                namespace=namespace,
                workflow_id=workflow_id,
                run_id=execution.run_id,
                reason="Delete workflow execution",
                details=None,
                identity="history-service",
            )
        except NotFound:
            pass

    def delete() -> None:
        visibility_store.forget_on_commit(execution.pk)
        Execution.objects.filter(pk=execution.pk).delete()
        CurrentRun.objects.filter(
            namespace=namespace, workflow_id=workflow_id, run_id=execution.run_id
        ).delete()

    in_transaction(delete)
