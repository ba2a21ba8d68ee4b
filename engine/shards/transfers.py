"""Processing transfer rows: the cross-run half of child workflows, external signals and cancels.

Each transfer is two steps, each its own transaction on one run: act on the other run (start the
child, signal, cancel, report), then record the outcome on the owning run and delete the row under
the shard's fence. Both steps are idempotent, so a crash or a lost lease only repeats work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction
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
from engine.history import children, lifecycle
from engine.history.errors import StaleTask
from engine.history.mutation import Mutation, TransferKind
from engine.history.state import ParentInfo
from engine.models import Execution, Transfer
from engine.persistence import encryption, store
from engine.schedules.rules import scheduled_by
from engine.services import schedules, workflows
from engine.services.update import run_update
from engine.shards import leases, visibility_index
from tenants.models import Namespace

log = logging.getLogger(__name__)
BATCH = 100


def _record(row: Transfer, shard: int, range_id: int, apply: Callable[[Mutation], None] | None) -> None:
    """Step two: on the owning run, under the fence, record the outcome and delete the row."""
    with transaction.atomic():
        leases.check(shard, range_id)
        if Transfer.objects.filter(pk=row.pk).delete()[0] == 0:
            return  # another processor finished it
        if apply is None:
            return
        execution = store.lock_execution(row.execution_id)
        if execution is None:
            return
        m = Mutation(store.decode_state(execution), clock.now())
        try:
            apply(m)
        except StaleTask:
            return
        store.persist(execution, m)


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
    try:
        result = workflows.workflow_start(namespace=namespace, request=request, parent=parent)
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


_HANDLERS = {
    TransferKind.START_CHILD: _start_child,
    TransferKind.CHILD_CLOSED: _child_closed,
    TransferKind.SIGNAL_EXTERNAL: _signal_external,
    TransferKind.CANCEL_EXTERNAL: _cancel_external,
    TransferKind.PARENT_CLOSE_POLICY: _parent_close_policy,
    TransferKind.SCHEDULE_RUN_CLOSED: _schedule_run_closed,
}


def process(shard: int, range_id: int) -> int:
    """Process the shard's transfer rows in order; returns how many were handled."""
    handled = 0
    while True:
        rows = list(
            Transfer.objects.filter(shard=shard).exclude(kind=TransferKind.VISIBILITY).order_by("id")[:BATCH]
        )
        for row in rows:
            execution = Execution.objects.filter(pk=row.execution_id).first()
            if execution is None:
                Transfer.objects.filter(pk=row.pk).delete()
                continue
            try:
                _HANDLERS[TransferKind(row.kind)](row, execution, shard, range_id)
            except leases.LeaseLost:
                raise
            except Exception:
                log.exception(
                    "transfer %s (%s) failed; it stays and is retried", row.pk, TransferKind(row.kind).name
                )
                continue
            handled += 1
        if len(rows) < BATCH:
            # Visibility rows go to OpenSearch in bulk, apart: an outage leaves them without holding up the rest.
            return handled + visibility_index.process(shard, range_id)


def shards_with_transfers() -> list[int]:
    return list(Transfer.objects.values_list("shard", flat=True).distinct().order_by("shard"))
