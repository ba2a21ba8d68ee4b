"""Standalone activities: start (with the id reuse and conflict policies), read, cancel, terminate, delete.

Each is hosted by a run of its own (engine/history/standalone.py) whose workflow id is the activity id
behind a prefix (visibility.divisions), so the write path, the task queues, the timers and retention
serve it as they serve workflows; workers take and finish its attempts with the usual activity RPCs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError
from perdura import clock
from temporalio.api.enums.v1 import ActivityIdConflictPolicy, ActivityIdReusePolicy, WorkflowExecutionStatus
from temporalio.api.errordetails.v1 import ActivityExecutionAlreadyStartedFailure
from temporalio.api.workflowservice.v1 import StartActivityExecutionRequest

from engine import ids
from engine.errors import AlreadyExists, NotFound
from engine.history import standalone
from engine.history.mutation import Mutation
from engine.history.state import MutableState
from engine.models import CurrentRun, Execution
from engine.persistence import store
from engine.services import workflows
from engine.services.write_path import in_transaction, run_update
from tenants.models import Namespace
from visibility.divisions import activity_host_id

RUNNING = WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_RUNNING
_FAILED_STATUSES = {
    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_FAILED,
    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_CANCELED,
    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TERMINATED,
    WorkflowExecutionStatus.WORKFLOW_EXECUTION_STATUS_TIMED_OUT,
}
ALREADY_STARTED = "activity execution already started"


@dataclass(frozen=True, slots=True)
class ActivityStart:
    run_id: str
    started: bool


@dataclass(frozen=True, slots=True)
class ActivitySnapshot:
    execution: Execution
    state: MutableState


def _already_started(request_id: str, run_id: str) -> AlreadyExists:
    return AlreadyExists(
        ALREADY_STARTED, ActivityExecutionAlreadyStartedFailure(start_request_id=request_id, run_id=run_id)
    )


def activity_start(*, namespace: Namespace, request: StartActivityExecutionRequest) -> ActivityStart:
    """Start a standalone activity, or apply the id policies to the activity id's current run.

    Raises:
        AlreadyExists: the id is taken under the request's policies (details carry the run id).
        InvalidArgument: a request the activity rules refuse (engine.history.standalone.start).
    """
    workflows.require_accepting_starts(namespace=namespace)
    # IntegrityError: another start created the current-run row at the same moment; decide again against it.
    return in_transaction(lambda: _start_txn(namespace, request), attempts=2, retry_on=(IntegrityError,))


def _start_txn(namespace: Namespace, request: StartActivityExecutionRequest) -> ActivityStart:
    host_id = activity_host_id(request.activity_id)
    current = CurrentRun.objects.select_for_update().filter(namespace=namespace, workflow_id=host_id).first()
    if current is not None:
        previous = Execution.objects.get(namespace=namespace, workflow_id=host_id, run_id=current.run_id)
        if request.request_id and request.request_id == current.start_request_id:
            return ActivityStart(run_id=current.run_id, started=True)
        if previous.status == RUNNING:
            if (
                request.id_conflict_policy
                == ActivityIdConflictPolicy.ACTIVITY_ID_CONFLICT_POLICY_USE_EXISTING
            ):
                return ActivityStart(run_id=previous.run_id, started=False)
            raise _already_started(current.start_request_id, previous.run_id)
        reuse = request.id_reuse_policy
        if reuse == ActivityIdReusePolicy.ACTIVITY_ID_REUSE_POLICY_REJECT_DUPLICATE or (
            reuse == ActivityIdReusePolicy.ACTIVITY_ID_REUSE_POLICY_ALLOW_DUPLICATE_FAILED_ONLY
            and previous.status not in _FAILED_STATUSES
        ):
            raise _already_started(current.start_request_id, previous.run_id)
    run_id = ids.new_run_id()
    m = standalone.start(
        namespace_id=str(namespace.id),
        namespace=namespace.name,
        run_id=run_id,
        request=request,
        now=clock.now(),
        ids=ids.SYSTEM,
    )
    store.insert(namespace.id, ids.shard_for(namespace.id, host_id, settings.PERDURA_SHARDS), m)
    if not namespace.has_standalone_activities:  # as read before this transaction: it may be set since
        # From now on workflow filters leave host runs out (visibility.selectors). Set in this transaction, so
        # no host run is ever committed while the flag is off (the object is left as read: a retry sets it too).
        Namespace.objects.filter(pk=namespace.pk, has_standalone_activities=False).update(
            has_standalone_activities=True
        )
    if current is None:
        CurrentRun.objects.create(
            namespace=namespace, workflow_id=host_id, run_id=run_id, start_request_id=request.request_id
        )
    else:
        current.run_id = run_id
        current.start_request_id = request.request_id
        current.save(update_fields=["run_id", "start_request_id"])
    return ActivityStart(run_id=run_id, started=True)


def _not_found(activity_id: str, run_id: str) -> NotFound:
    if run_id:
        return NotFound(f"activity execution not found for ID {activity_id!r} and run ID {run_id!r}")
    return NotFound(f"activity execution not found for ID {activity_id!r}")


def activity_snapshot(*, namespace: Namespace, activity_id: str, run_id: str) -> ActivitySnapshot:
    """The activity's run (the id's newest when `run_id` is empty) and its state.

    Raises:
        NotFound: no such activity in this namespace.
    """
    try:
        execution = store.find_execution(namespace.id, activity_host_id(activity_id), run_id, lock=False)
    except NotFound:
        raise _not_found(activity_id, run_id) from None
    return ActivitySnapshot(execution=execution, state=store.decode_state(execution))


def _update(namespace: Namespace, activity_id: str, run_id: str, apply: Callable[[Mutation], None]) -> None:
    try:
        run_update(
            namespace_id=namespace.id,
            workflow_id=activity_host_id(activity_id),
            run_id=run_id,
            apply=lambda _e, m: apply(m),
        )
    except NotFound:
        raise _not_found(activity_id, run_id) from None


def activity_request_cancel(
    *, namespace: Namespace, activity_id: str, run_id: str, reason: str, identity: str, request_id: str
) -> None:
    """Ask the activity to stop (engine.history.standalone.request_cancel).

    Raises:
        NotFound: no such activity.
        FailedPrecondition: it is closed, or another request asked already.
    """

    def apply(m: Mutation) -> None:
        standalone.request_cancel(m, reason=reason, identity=identity, request_id=request_id)

    _update(namespace, activity_id, run_id, apply)


def activity_terminate(
    *, namespace: Namespace, activity_id: str, run_id: str, reason: str, identity: str, request_id: str
) -> None:
    """Close the activity TERMINATED (engine.history.standalone.terminate).

    Raises:
        NotFound: no such activity.
        FailedPrecondition: it is closed already.
    """

    def apply(m: Mutation) -> None:
        standalone.terminate(m, reason=reason, identity=identity, request_id=request_id)

    _update(namespace, activity_id, run_id, apply)


def activity_delete(*, namespace: Namespace, activity_id: str, run_id: str) -> None:
    """Delete the activity's run (terminated first if it is still running), as a workflow run is deleted.

    Raises:
        NotFound: no such activity.
    """
    try:
        workflows.workflow_delete(
            namespace=namespace, workflow_id=activity_host_id(activity_id), run_id=run_id
        )
    except NotFound:
        raise _not_found(activity_id, run_id) from None
