"""ResetWorkflowExecution: terminate the current run and start one from a point of the base run's history."""

from __future__ import annotations

from perdura import clock
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import ResetWorkflowExecutionRequest

from engine import ids
from engine.errors import InvalidArgument, NotFound
from engine.history import lifecycle, reset
from engine.history.errors import ResetRejected
from engine.history.state import OPEN_STATUSES
from engine.models import CurrentRun, Execution
from engine.persistence import store
from engine.services.write_path import apply_locked, in_transaction
from tenants.models import Namespace


def workflow_reset(*, namespace: Namespace, request: ResetWorkflowExecutionRequest) -> str:
    """Reset and return the new run's id (the current one, if this request id already reset it).

    Raises:
        NotFound: no such run.
        InvalidArgument: the point is not the end of a workflow task, or children are pending there.
    """
    try:
        return in_transaction(lambda: _reset_txn(namespace, request), attempts=3)
    except ResetRejected as e:
        raise InvalidArgument(str(e)) from None


def _reset_txn(namespace: Namespace, request: ResetWorkflowExecutionRequest) -> str:
    workflow_id = request.workflow_execution.workflow_id
    # Lock order as a start's: the current-run row, then the run it names.
    current = (
        CurrentRun.objects.select_for_update().filter(namespace=namespace, workflow_id=workflow_id).first()
    )
    if current is None:
        raise NotFound(f"workflow not found for ID: {workflow_id}")
    if current.start_request_id == request.request_id:
        return current.run_id
    base = store.find_execution(namespace.id, workflow_id, request.workflow_execution.run_id, lock=False)
    reset.check_point(request.workflow_task_finish_event_id, base.next_event_id)
    now = clock.now()
    running = store.find_execution(namespace.id, workflow_id, current.run_id, lock=True)
    if running.status in OPEN_STATUSES:
        apply_locked(
            running,
            lambda _e, m: lifecycle.terminate(
                m, reason=request.reason, details=None, identity=reset.RESETTER_IDENTITY
            ),
            now=now,
        )
    base_events = list(store.history_events(base, last_event_id=request.workflow_task_finish_event_id - 1))
    new_run_id = ids.new_run_id()
    m = reset.reset_run(
        base_events=base_events,
        later_events=later_events(namespace, base, request.workflow_task_finish_event_id, current.run_id),
        finish_event_id=request.workflow_task_finish_event_id,
        namespace_id=str(namespace.id),
        namespace=namespace.name,
        base_run_id=base.run_id,
        new_run_id=new_run_id,
        reason=request.reason,
        request_id=request.request_id,
        excluded=reset.exclusions(request.reset_reapply_type, list(request.reset_reapply_exclude_types)),
        now=now,
        ids=ids.SYSTEM,
    )
    store.insert(namespace.id, base.shard, m)
    current.run_id = new_run_id
    current.start_request_id = request.request_id
    current.save(update_fields=["run_id", "start_request_id"])
    return new_run_id


def later_events(
    namespace: Namespace, base: Execution, first_event_id: int, current_run_id: str
) -> list[HistoryEvent]:
    """The base run's events from the reset point on, then those of each run that continued it, up to
    the current run (Temporal reapplies signals and updates along the continue-as-new chain)."""
    events = list(store.history_events(base, first_event_id=first_event_id))
    run = base
    while events and run.run_id != current_run_id:
        last = events[-1]
        if last.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            break
        next_run_id = last.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        try:
            run = store.find_execution(namespace.id, base.workflow_id, next_run_id, lock=False)
        except NotFound:
            break  # a deleted run ends the chain
        events += list(store.history_events(run))
    return events
