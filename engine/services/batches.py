"""Batch operations: start (snapshot the targets), stop, describe, list, and the step a shard takes.

A batch is a BatchOperation row and one BatchTarget row per run, written together when it starts, so
runs that start later are never touched. The shard that owns the batch row (engine/shards/batches.py)
calls `batch_step` for one target at a time: the action on the run (through the write path), the
target's outcome and the batch's counters commit in one transaction fenced on that shard's lease. A
worker killed mid-batch leaves each target either done (with its counters) or untouched, so the next
owner neither skips nor repeats one: a signal is delivered once per run.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import IntegrityError, transaction
from perdura import clock
from temporalio.api.enums.v1 import ResetType, ResourceExhaustedCause, ResourceExhaustedScope
from temporalio.api.errordetails.v1 import ResourceExhaustedFailure
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest, StartBatchOperationRequest

from engine import ids
from engine.batches import rules
from engine.errors import (
    AlreadyExists,
    EngineError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
    Unavailable,
)
from engine.history import activity_control, lifecycle
from engine.history.activity_control import Target
from engine.history.errors import RunClosed
from engine.history.mutation import Mutation
from engine.models import BatchOperation, BatchTarget, CurrentRun
from engine.persistence import encryption, store, wakeups
from engine.services import reset, reset_preview, workflows
from engine.services.write_path import apply_locked
from tenants.models import Namespace
from visibility import selectors
from visibility.query.parser import QueryError
from visibility.search_attributes import SearchAttributeError

SNAPSHOT_PAGE = 1000
DEFAULT_IDENTITY = "perdura-batcher"
"""The identity a batch's actions carry in the runs' histories when its request named none."""
CONCURRENT_LIMIT = "Max concurrent batch operations is reached"


# --- sealing ------------------------------------------------------------------------------------------


def _seal(namespace_id: uuid.UUID, job_id: str, request: StartBatchOperationRequest, field: str) -> bytes:
    only = StartBatchOperationRequest()
    getattr(only, field).CopyFrom(getattr(request, field))
    return encryption.seal(namespace_id, only.SerializeToString(), encryption.batch_aad(namespace_id, job_id))


def operation_of(row: BatchOperation) -> StartBatchOperationRequest:
    """The batch's operation, opened: a request holding only its operation field."""
    plain = encryption.unseal(
        row.namespace_id, bytes(row.operation), encryption.batch_aad(row.namespace_id, row.job_id)
    )
    return StartBatchOperationRequest.FromString(plain)


# --- start and stop -----------------------------------------------------------------------------------


def _concurrent_limit() -> ResourceExhausted:
    return ResourceExhausted(
        CONCURRENT_LIMIT,
        ResourceExhaustedFailure(
            cause=ResourceExhaustedCause.RESOURCE_EXHAUSTED_CAUSE_CONCURRENT_LIMIT,
            scope=ResourceExhaustedScope.RESOURCE_EXHAUSTED_SCOPE_NAMESPACE,
        ),
    )


def _query_error(e: Exception) -> InvalidArgument:
    return InvalidArgument(f"invalid visibility query: {str(e).removeprefix('invalid query: ')}")


def _snapshot_query(namespace: Namespace, query: str) -> list[rules.Target]:
    targets: list[rules.Target] = []
    token = b""
    try:
        while True:
            records, token = selectors.execution_scan(
                namespace_id=namespace.id, query=query, page_size=SNAPSHOT_PAGE, page_token=token
            )
            targets.extend(rules.Target(r.workflow_id, r.run_id) for r in records)
            if not token:
                return targets
    except (QueryError, SearchAttributeError) as e:
        raise _query_error(e) from None


def _snapshot_listed(namespace: Namespace, listed: tuple[rules.Target, ...]) -> list[rules.Target]:
    """The listed runs, an empty run id resolved to the workflow's current run now (or kept empty when
    there is none: the step then finds nothing and counts the target done, as Temporal does)."""
    current = dict(
        CurrentRun.objects.filter(
            namespace=namespace, workflow_id__in=[t.workflow_id for t in listed if not t.run_id]
        ).values_list("workflow_id", "run_id")
    )
    return [t if t.run_id else rules.Target(t.workflow_id, current.get(t.workflow_id, "")) for t in listed]


def batch_start(*, namespace: Namespace, request: StartBatchOperationRequest) -> BatchOperation:
    """Start a batch: check it, snapshot its targets and write them with the batch row, in one transaction.

    Raises:
        InvalidArgument: a malformed request or visibility query.
        ResourceExhausted: another batch of the namespace is running (Temporal's concurrent limit).
        AlreadyExists: the namespace already had a batch with this job id.
    """
    plan = rules.check_start(request)
    if plan.query:
        # A bad query is refused before anything is locked.
        try:
            selectors.filter_parse(namespace_id=namespace.id, query=plan.query)
        except (QueryError, SearchAttributeError) as e:
            raise _query_error(e) from None
    now = clock.now()
    rps = rules.effective_rps(request.max_operations_per_second, settings.PERDURA_BATCH_RPS)
    shard = ids.shard_for(namespace.id, f"batch/{request.job_id}", settings.PERDURA_SHARDS)
    with transaction.atomic():
        running = BatchOperation.objects.filter(namespace=namespace, state=rules.RUNNING)
        if running.exists():
            raise _concurrent_limit()
        if BatchOperation.objects.filter(namespace=namespace, job_id=request.job_id).exists():
            raise AlreadyExists(f"Batch operation with JobId {request.job_id} already exists.")
        if plan.query:
            targets = _snapshot_query(namespace, plan.query)
        else:
            targets = _snapshot_listed(namespace, plan.targets)
        try:
            with transaction.atomic():
                row = BatchOperation.objects.create(
                    namespace=namespace,
                    job_id=request.job_id,
                    shard=shard,
                    operation_type=plan.operation_type,
                    state=rules.RUNNING,
                    reason=request.reason,
                    identity=plan.identity,
                    query=plan.query,
                    operation=_seal(namespace.id, request.job_id, request, plan.operation_field),
                    rps=rps,
                    paced_until=now,
                    next_wakeup_at=now,
                    total=len(targets),
                    start_time=now,
                )
        except IntegrityError:
            # Another start won the race between the checks and the insert: the same answers.
            if BatchOperation.objects.filter(namespace=namespace, state=rules.RUNNING).exists():
                raise _concurrent_limit() from None
            raise AlreadyExists(f"Batch operation with JobId {request.job_id} already exists.") from None
        BatchTarget.objects.bulk_create(
            (
                BatchTarget(batch=row, seq=i, workflow_id=t.workflow_id, run_id=t.run_id)
                for i, t in enumerate(targets)
            ),
            batch_size=500,
        )
        wakeups.schedule_due(shard)
    return row


def batch_stop(*, namespace: Namespace, job_id: str, reason: str, identity: str) -> None:
    """Stop a running batch: the targets not yet done are left alone; it reads as FAILED, as in Temporal.

    Raises:
        InvalidArgument: no job id or reason.
        NotFound: no such batch, or it is no longer running (Temporal's words for both).
    """
    if not job_id:
        raise InvalidArgument("JobId is not set on request.")
    if not reason:
        raise InvalidArgument("Reason is not set on request.")
    with transaction.atomic():
        row = BatchOperation.objects.select_for_update().filter(namespace=namespace, job_id=job_id).first()
        if row is None:
            raise NotFound(f"workflow not found for ID: {job_id}")
        if row.state != rules.RUNNING:
            raise NotFound("workflow execution already completed")
        now = clock.now()
        BatchOperation.objects.filter(pk=row.pk).update(
            state=rules.FAILED,
            close_time=now,
            next_wakeup_at=None,
            stop_reason=reason,
            stop_identity=identity,
        )


# --- reading ------------------------------------------------------------------------------------------


def batch_get(*, namespace: Namespace, job_id: str) -> BatchOperation:
    """The namespace's batch with this job id.

    Raises:
        InvalidArgument: no job id.
        NotFound: no such batch.
    """
    if not job_id:
        raise InvalidArgument("JobId is not set on request.")
    row = BatchOperation.objects.filter(namespace=namespace, job_id=job_id).first()
    if row is None:
        raise NotFound(f"workflow not found for ID: {job_id}")
    return row


def batch_listed_targets(*, batch: BatchOperation, limit: int = 1000) -> list[BatchTarget]:
    """The runs a batch without a query was given (Describe's `executions`), in their order."""
    if batch.query:
        return []
    return list(BatchTarget.objects.filter(batch=batch).order_by("seq")[:limit])


def batch_list(
    *, namespace: Namespace, page_size: int, after_pk: int | None
) -> tuple[list[BatchOperation], int | None]:
    """A page of the namespace's batches, newest first, and the last row's id when more may follow."""
    size = page_size if 0 < page_size <= 1000 else 1000
    rows = BatchOperation.objects.filter(namespace=namespace).order_by("-id")
    if after_pk is not None:
        rows = rows.filter(pk__lt=after_pk)
    page = list(rows[: size + 1])
    more = len(page) > size
    page = page[:size]
    return page, (page[-1].pk if more else None)


# --- the shard's step ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StepResult:
    acted: bool
    """A target was taken (done or failed)."""
    wake_at: datetime | None
    """When the batch is due again (None: it has closed, or is no longer the caller's to take)."""


def _identity(row: BatchOperation) -> str:
    return row.identity or DEFAULT_IDENTITY


def _request_id(row: BatchOperation, target: BatchTarget) -> str:
    """The same for every attempt at the same target: a signal or reset repeated by a client is deduplicated."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"perdura/batch/{row.namespace_id}/{row.job_id}/{target.seq}"))


def _on_run(row: BatchOperation, target: BatchTarget, apply: Callable[[Mutation], None]) -> None:
    """Lock the target's run and apply `apply` to it through the write path (its version is checked)."""
    execution = store.find_execution(row.namespace_id, target.workflow_id, target.run_id, lock=True)
    apply_locked(execution, lambda _e, m: apply(m))


def _reset(row: BatchOperation, target: BatchTarget, op: StartBatchOperationRequest) -> None:
    options = op.reset_operation.options
    namespace = row.namespace
    points = reset_preview.reset_points(
        namespace=namespace, workflow_id=target.workflow_id, run_id=target.run_id
    )
    first = options.HasField("first_workflow_task") or (
        not options.HasField("last_workflow_task")
        and op.reset_operation.reset_type == ResetType.RESET_TYPE_FIRST_WORKFLOW_TASK
    )
    if options.HasField("workflow_task_id"):
        point = options.workflow_task_id
    elif not points:
        raise FailedPrecondition("The run has no completed workflow task to reset to.")
    else:
        point = points[0].event_id if first else points[-1].event_id
    reapply = options.reset_reapply_type or op.reset_operation.reset_reapply_type
    request = ResetWorkflowExecutionRequest(
        namespace=namespace.name,
        reason=row.reason,
        workflow_task_finish_event_id=point,
        request_id=_request_id(row, target),
        reset_reapply_type=reapply,
        reset_reapply_exclude_types=options.reset_reapply_exclude_types,
        identity=_identity(row),
    )
    request.workflow_execution.workflow_id = target.workflow_id
    request.workflow_execution.run_id = target.run_id
    reset.workflow_reset(namespace=namespace, request=request)


def _activities(m: Mutation, operation_type: int, op: StartBatchOperationRequest) -> None:
    """Unpause or reset the run's activities of the named type (or all), as the single-run RPCs do: how a
    query such as `PerduraParked IS NOT NULL` redrives parked activities in bulk (parking.py)."""
    if operation_type == rules.UNPAUSE_ACTIVITIES:
        unpause = op.unpause_activities_operation
        activity_control.unpause(
            m,
            target=Target(activity_type=unpause.type, match_all=unpause.match_all),
            reset_attempts=unpause.reset_attempts,
            reset_heartbeat=unpause.reset_heartbeat,
            jitter=unpause.jitter.ToTimedelta().total_seconds(),
            draw=random.random,
        )
        return
    reset_op = op.reset_activities_operation
    activity_control.reset(
        m,
        target=Target(activity_type=reset_op.type, match_all=reset_op.match_all),
        reset_heartbeat=reset_op.reset_heartbeat,
        keep_paused=reset_op.keep_paused,
        restore_original_options=reset_op.restore_original_options,
        jitter=reset_op.jitter.ToTimedelta().total_seconds(),
        draw=random.random,
    )


def _act(row: BatchOperation, target: BatchTarget) -> None:
    """Apply the batch's action to one run, inside the step's transaction."""
    op = operation_of(row)
    identity = _identity(row)
    if row.operation_type == rules.TERMINATE:
        details = op.termination_operation.details if op.termination_operation.HasField("details") else None
        _on_run(
            row,
            target,
            lambda m: lifecycle.terminate(m, reason=row.reason, details=details, identity=identity),
        )
    elif row.operation_type == rules.CANCEL:
        _on_run(row, target, lambda m: lifecycle.request_cancel(m, identity=identity, reason=""))
    elif row.operation_type == rules.SIGNAL:
        signal = op.signal_operation
        _on_run(
            row,
            target,
            lambda m: lifecycle.signal(
                m,
                signal_name=signal.signal,
                input=signal.input if signal.HasField("input") else None,
                identity=identity,
                request_id=_request_id(row, target),
                header=signal.header if signal.HasField("header") else None,
            ),
        )
    elif row.operation_type == rules.DELETE:
        workflows.workflow_delete(
            namespace=row.namespace, workflow_id=target.workflow_id, run_id=target.run_id
        )
    elif row.operation_type == rules.RESET:
        _reset(row, target, op)
    elif row.operation_type in (rules.UNPAUSE_ACTIVITIES, rules.RESET_ACTIVITIES):
        _on_run(row, target, lambda m: _activities(m, row.operation_type, op))
    else:
        raise ValueError(f"unknown batch operation type {row.operation_type}")


def _close(row: BatchOperation, now: datetime) -> None:
    BatchOperation.objects.filter(pk=row.pk).update(
        state=rules.COMPLETED, close_time=now, next_wakeup_at=None
    )


def batch_step_locked(pk: int, shard: int) -> StepResult:
    """Inside the caller's fenced transaction: take the batch's next target if its pace allows.

    A target whose run is gone or closed counts as done (Temporal's batcher does the same); one the
    action refuses (an engine error: an invalid reset point, a limit of the run) counts as failed with
    its error. Anything else (a transient conflict, a run that cannot be read, the database) raises, so
    that nothing of the step is written and the batch row is charged for it.
    """
    row = (
        BatchOperation.objects.select_for_update()
        .select_related("namespace")
        .filter(pk=pk, shard=shard, parked_at__isnull=True)
        .first()
    )
    if row is None:
        return StepResult(acted=False, wake_at=None)
    if row.state != rules.RUNNING:
        if row.next_wakeup_at is not None:  # stopped, then redriven: nothing is due any more
            BatchOperation.objects.filter(pk=row.pk).update(next_wakeup_at=None)
        return StepResult(acted=False, wake_at=None)
    now = clock.now()
    if not rules.may_act(row.paced_until, now):
        wake = rules.wake_at(row.paced_until)
        if row.next_wakeup_at != wake:
            BatchOperation.objects.filter(pk=row.pk).update(next_wakeup_at=wake)
            wakeups.schedule_due(shard)
        return StepResult(acted=False, wake_at=wake)
    pending = BatchTarget.objects.filter(batch=row, outcome=BatchTarget.PENDING).order_by("seq")
    target = pending.first()
    if target is None:
        _close(row, now)
        return StepResult(acted=False, wake_at=None)
    outcome, error = BatchTarget.COMPLETED, ""
    try:
        with transaction.atomic():
            _act(row, target)
    except (NotFound, RunClosed):
        pass  # gone or closed: nothing to do, as Temporal's batcher counts it
    except Unavailable:
        raise  # transient (a lost race on the run's version): the step is tried again
    except EngineError as e:
        # The action refused this run (an invalid reset point, a limit of the run): the target fails
        # with its error, and the batch goes on, as Temporal's batcher counts it.
        outcome, error = BatchTarget.FAILED, e.message
    BatchTarget.objects.filter(pk=target.pk).update(outcome=outcome, error=error[:2000])
    paced = rules.after_action(row.paced_until, now, row.rps)
    counts = (
        {"completed": row.completed + 1} if outcome == BatchTarget.COMPLETED else {"failed": row.failed + 1}
    )
    # A step that succeeds clears the failures of earlier attempts, as a schedule's tick does.
    BatchOperation.objects.filter(pk=row.pk).update(paced_until=paced, failures=0, last_error="", **counts)
    if not pending.exclude(pk=target.pk).exists():
        _close(row, now)
        return StepResult(acted=True, wake_at=None)
    wake = paced if rules.may_act(paced, now) else rules.wake_at(paced)
    BatchOperation.objects.filter(pk=row.pk).update(next_wakeup_at=wake)
    if wake > now:
        wakeups.schedule_due(shard)
    return StepResult(acted=True, wake_at=wake)
