"""Processing transfer rows: the cross-run half of child workflows, external signals and cancels.

Each transfer is two steps, each its own transaction on one run: act on the other run (start the
child, signal, cancel, report), then record the outcome on the owning run and delete the row under
the shard's fence. Both steps are idempotent, so a crash or a lost lease only repeats work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime

from perdura import clock
from temporalio.api.enums.v1 import (
    CancelExternalWorkflowExecutionFailedCause,
    ParentClosePolicy,
    SignalExternalWorkflowExecutionFailedCause,
    StartChildWorkflowExecutionFailedCause,
)
from temporalio.api.history.v1 import (
    HistoryEvent,
    RequestCancelExternalWorkflowExecutionInitiatedEventAttributes,
    SignalExternalWorkflowExecutionInitiatedEventAttributes,
    StartChildWorkflowExecutionInitiatedEventAttributes,
)
from temporalio.api.workflowservice.v1 import StartWorkflowExecutionRequest

from engine.errors import AlreadyExists, NotFound
from engine.history import children, lifecycle, versioning
from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, TransferKind
from engine.history.state import ParentInfo
from engine.models import Execution, Transfer
from engine.persistence import encryption, leases, store
from engine.schedules.rules import scheduled_by
from engine.services import deployments, workflows, write_path
from engine.services.write_path import run_update
from engine.shards import parking, schedules, visibility_index
from engine.shards.budget import Budget
from tenants.models import Namespace

log = logging.getLogger(__name__)
BATCH = 100


def _record(row: Transfer, shard: int, range_id: int, apply: Callable[[Mutation], None] | None) -> None:
    """Step two: on the owning run, under the fence, record the outcome and delete the row."""

    def body() -> None:
        if Transfer.objects.filter(pk=row.pk).delete()[0] == 0:
            return  # another processor finished it
        if apply is None:
            return
        execution = store.lock_execution(row.execution_id)
        if execution is None:
            return
        try:
            write_path.apply_locked(execution, lambda _e, m: apply(m))
        except StaleTask:
            pass  # the run moved past it: the row goes, the run stays as it is

    write_path.in_transaction(body, shard=shard, range_id=range_id)


def _details(row: Transfer, execution: Execution) -> bytes:
    return encryption.unseal(
        execution.namespace_id,
        row.details,
        encryption.transfer_aad(execution.namespace_id, execution.run_id, row.event_id),
    )


def _start_child(row: Transfer, execution: Execution, shard: int, range_id: int) -> None:
    parent_state = store.decode_state(execution)
    if not parent_state.running or row.event_id not in parent_state.children:
        _record(row, shard, range_id, None)
        return
    attrs = StartChildWorkflowExecutionInitiatedEventAttributes.FromString(_details(row, execution))
    namespace = Namespace.objects.get(pk=execution.namespace_id)
    request = StartWorkflowExecutionRequest(
        namespace=namespace.name,
        workflow_id=attrs.workflow_id,
        workflow_type=attrs.workflow_type,
        task_queue=attrs.task_queue,
        input=attrs.input if attrs.HasField("input") else None,
        workflow_execution_timeout=attrs.workflow_execution_timeout,
        workflow_run_timeout=attrs.workflow_run_timeout,
        workflow_task_timeout=attrs.workflow_task_timeout,
        identity=f"parent {execution.workflow_id}",
        # Same id for every attempt of this transfer: a repeat finds the child it already started.
        request_id=f"{execution.run_id}:{row.event_id}",
        workflow_id_reuse_policy=attrs.workflow_id_reuse_policy,
        retry_policy=attrs.retry_policy if attrs.HasField("retry_policy") else None,
        header=attrs.header if attrs.HasField("header") else None,
        memo=attrs.memo if attrs.HasField("memo") else None,
        search_attributes=attrs.search_attributes if attrs.HasField("search_attributes") else None,
        priority=attrs.priority if attrs.HasField("priority") else None,
    )
    root_id, root_run = parent_state.workflow_id, parent_state.run_id
    if parent_state.parent is not None:
        root_id, root_run = parent_state.parent.root_workflow_id, parent_state.parent.root_run_id
    parent = ParentInfo(
        namespace=namespace.name,
        namespace_id=str(namespace.id),
        workflow_id=execution.workflow_id,
        run_id=execution.run_id,
        initiated_event_id=row.event_id,
        root_workflow_id=root_id,
        root_run_id=root_run,
    )
    inherited = versioning.inherited_by_child(
        parent_state,
        attrs.task_queue.name,
        lambda queue, name, build_id: deployments.version_in_queue(namespace.id, queue, name, build_id),
    )
    try:
        result = workflows.workflow_start(
            namespace=namespace, request=request, parent=parent, inherited=inherited
        )
    except AlreadyExists:
        initiated = HistoryEvent(start_child_workflow_execution_initiated_event_attributes=attrs)
        _record(
            row,
            shard,
            range_id,
            lambda m: children.child_start_failed(
                m,
                initiated_event_id=row.event_id,
                cause=StartChildWorkflowExecutionFailedCause.START_CHILD_WORKFLOW_EXECUTION_FAILED_CAUSE_WORKFLOW_ALREADY_EXISTS,
                initiated=initiated,
            ),
        )
        return
    _record(
        row,
        shard,
        range_id,
        lambda m: children.child_started(
            m, initiated_event_id=row.event_id, run_id=result.run_id, header=attrs.header
        ),
    )


def _child_closed(row: Transfer, execution: Execution, shard: int, range_id: int) -> None:
    child_state = store.decode_state(execution)
    close = HistoryEvent.FromString(_details(row, execution))
    parent = child_state.parent
    if parent is not None:
        try:
            run_update(
                namespace_id=parent.namespace_id,
                workflow_id=parent.workflow_id,
                run_id=parent.run_id,
                apply=lambda _e, m: children.child_closed(
                    m, initiated_event_id=parent.initiated_event_id, close=close
                ),
            )
        except (NotFound, StaleTask):
            pass  # the parent closed, or already recorded it
    _record(row, shard, range_id, None)


def _signal_external(row: Transfer, execution: Execution, shard: int, range_id: int) -> None:
    attrs = SignalExternalWorkflowExecutionInitiatedEventAttributes.FromString(_details(row, execution))
    cause = 0
    try:
        run_update(
            namespace_id=execution.namespace_id,
            workflow_id=attrs.workflow_execution.workflow_id,
            run_id=attrs.workflow_execution.run_id,
            apply=lambda _e, m: lifecycle.signal(
                m,
                signal_name=attrs.signal_name,
                input=attrs.input if attrs.HasField("input") else None,
                identity=f"workflow {execution.workflow_id}",
                request_id=f"{execution.run_id}:{row.event_id}",
                header=attrs.header if attrs.HasField("header") else None,
            ),
        )
    except NotFound:
        cause = SignalExternalWorkflowExecutionFailedCause.SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND
    _record(
        row,
        shard,
        range_id,
        lambda m: children.external_outcome(
            m, initiated_event_id=row.event_id, signal=True, failed_cause=cause
        ),
    )


def _cancel_external(row: Transfer, execution: Execution, shard: int, range_id: int) -> None:
    attrs = RequestCancelExternalWorkflowExecutionInitiatedEventAttributes.FromString(
        _details(row, execution)
    )

    def cancel(_e: Execution, m: Mutation) -> None:
        if not m.state.running:
            raise NotFound("workflow execution already completed")
        lifecycle.request_cancel(m, identity=f"workflow {execution.workflow_id}", reason=attrs.reason)

    cause = 0
    try:
        run_update(
            namespace_id=execution.namespace_id,
            workflow_id=attrs.workflow_execution.workflow_id,
            run_id=attrs.workflow_execution.run_id,
            apply=cancel,
        )
    except NotFound:
        cause = CancelExternalWorkflowExecutionFailedCause.CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED_CAUSE_EXTERNAL_WORKFLOW_EXECUTION_NOT_FOUND
    _record(
        row,
        shard,
        range_id,
        lambda m: children.external_outcome(
            m, initiated_event_id=row.event_id, signal=False, failed_cause=cause
        ),
    )


def _parent_close_policy(row: Transfer, execution: Execution, shard: int, range_id: int) -> None:
    parent_state = store.decode_state(execution)
    child = parent_state.children.get(row.event_id)
    if child is not None and child.run_id:
        try:
            if child.parent_close_policy == ParentClosePolicy.PARENT_CLOSE_POLICY_TERMINATE:
                run_update(
                    namespace_id=execution.namespace_id,
                    workflow_id=child.workflow_id,
                    run_id="",
                    apply=lambda _e, m: lifecycle.terminate(
                        m,
                        reason="by parent close policy",
                        details=None,
                        identity=f"workflow {execution.workflow_id}",
                    ),
                )
            else:
                run_update(
                    namespace_id=execution.namespace_id,
                    workflow_id=child.workflow_id,
                    run_id="",
                    apply=lambda _e, m: lifecycle.request_cancel(
                        m, identity=f"workflow {execution.workflow_id}", reason="by parent close policy"
                    ),
                )
        except NotFound:
            pass  # the child already closed
    _record(row, shard, range_id, None)


def _schedule_run_closed(row: Transfer, execution: Execution, shard: int, range_id: int) -> None:
    schedule_id = scheduled_by(store.decode_state(execution).search_attributes)
    if schedule_id is not None:
        schedules.schedule_wake(namespace_id=execution.namespace_id, schedule_id=schedule_id)
    _record(row, shard, range_id, None)


_HANDLERS: dict[int, Callable[[Transfer, Execution, int, int], None]] = {
    TransferKind.START_CHILD: _start_child,
    TransferKind.CHILD_CLOSED: _child_closed,
    TransferKind.SIGNAL_EXTERNAL: _signal_external,
    TransferKind.CANCEL_EXTERNAL: _cancel_external,
    TransferKind.PARENT_CLOSE_POLICY: _parent_close_policy,
    TransferKind.SCHEDULE_RUN_CLOSED: _schedule_run_closed,
}


def kind_name(kind: int) -> str:
    try:
        return TransferKind(kind).name
    except ValueError:
        return f"UNKNOWN({kind})"


def _due(shard: int, now: datetime) -> list[Transfer]:
    """Rows whose retry time has passed, then fresh rows in creation order (parked rows are in neither
    partial index). A row backing off never holds up the fresh rows behind it."""
    live = Transfer.objects.filter(shard=shard, parked_at__isnull=True).exclude(kind=TransferKind.VISIBILITY)
    retried = list(live.filter(retry_at__lte=now).order_by("retry_at", "id")[:BATCH])
    return retried + list(live.filter(retry_at__isnull=True).order_by("id")[:BATCH])


def process(shard: int, range_id: int, *, budget: Budget | None = None) -> int:
    """Process the shard's due transfer rows, each on its own; returns how many were handled.

    A row whose handler raises is charged a failed attempt and backs off (or is parked); the rows
    behind it go on in the same pass.

    Raises:
        leases.LeaseLost: another worker took the shard (the rows stay for it).
    """
    budget = budget or Budget()
    handled = 0
    tried: set[int] = set()
    while not budget.spent():
        rows = [r for r in _due(shard, clock.now()) if r.pk not in tried]
        if not rows:
            break
        for row in rows:
            if budget.spent():
                break
            tried.add(row.pk)
            execution = Execution.objects.filter(pk=row.execution_id).first()
            if execution is None:
                Transfer.objects.filter(pk=row.pk).delete()
                continue
            try:
                handler = _HANDLERS.get(row.kind)
                if handler is None:
                    raise ValueError(f"unknown transfer kind {row.kind}")
                handler(row, execution, shard, range_id)
            except leases.LeaseLost:
                raise
            except Exception as e:  # noqa: BLE001 - the row pays for it, never the shard
                parking.row_failed(
                    queue=parking.TRANSFER,
                    pk=row.pk,
                    shard=shard,
                    range_id=range_id,
                    error=e,
                    label=kind_name(row.kind),
                )
                continue
            handled += 1
    if budget.spent():
        return handled
    # Visibility rows go to OpenSearch in bulk, apart: an outage leaves them without holding up the rest.
    return handled + visibility_index.process(shard, range_id, budget=budget)


def shards_with_transfers(now: datetime) -> list[int]:
    """Shards with a transfer row due by `now` (fresh, or past its retry time; never parked)."""
    live = Transfer.objects.filter(parked_at__isnull=True)
    fresh = live.filter(retry_at__isnull=True).values_list("shard", flat=True).distinct()
    retried = live.filter(retry_at__lte=now).values_list("shard", flat=True).distinct()
    return sorted(set(fresh) | set(retried))
