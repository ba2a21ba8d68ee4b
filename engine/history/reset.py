"""Reset: a new run that repeats the base run's history up to a workflow task, fails that task, and
gets the signals and updates that came after it again (Temporal's ResetWorkflowExecution).

Two pure steps. `rebuild.rebuild` turns a prefix of a history back into the mutable state the run had at
its end: the same state the live transitions built, derived from the events alone. `reset_run`
then writes the new run's first mutation from it.
"""

from __future__ import annotations

from datetime import datetime

from temporalio.api.enums.v1 import (
    EventType,
    ResetReapplyExcludeType,
    ResetReapplyType,
    UpdateAdmittedEventOrigin,
    WorkflowTaskFailedCause,
)
from temporalio.api.failure.v1 import Failure, ResetWorkflowFailureInfo
from temporalio.api.history.v1 import (
    HistoryEvent,
    WorkflowExecutionSignaledEventAttributes,
    WorkflowExecutionUpdateAdmittedEventAttributes,
    WorkflowTaskFailedEventAttributes,
)
from temporalio.api.update.v1 import Request

from engine.history import activity, workflow_task
from engine.history.errors import ResetRejected
from engine.history.events import attributes, new_event
from engine.history.mutation import Mutation, TimerKind, TransferKind
from engine.history.rebuild import apply_event, rebuild
from engine.history.sources import IdSource

RESETTER_IDENTITY = "history-resetter"
"""Who terminates the run a reset replaces (Temporal's consts.IdentityResetter)."""


def exclusions(reapply_type: int, exclude_types: list[int]) -> set[int]:
    """The reapply exclusions a request asks for, with the deprecated reapply type folded in."""
    excluded = set(exclude_types)
    if reapply_type == ResetReapplyType.RESET_REAPPLY_TYPE_SIGNAL:
        excluded.add(ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE)
    elif reapply_type == ResetReapplyType.RESET_REAPPLY_TYPE_NONE:
        excluded |= {
            ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL,
            ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE,
        }
    return excluded


def check_point(finish_event_id: int, next_event_id: int) -> None:
    if finish_event_id <= 1 or finish_event_id >= next_event_id:
        raise ResetRejected("Workflow task finish ID must be > 1 && <= workflow last event ID.")


def reset_run(
    *,
    base_events: list[HistoryEvent],
    later_events: list[HistoryEvent],
    finish_event_id: int,
    namespace_id: str,
    namespace: str,
    base_run_id: str,
    new_run_id: str,
    reason: str,
    request_id: str,
    excluded: set[int],
    now: datetime,
    ids: IdSource,
) -> Mutation:
    """The new run's first mutation.

    `base_events` is the base run's history through `finish_event_id - 1`; `later_events` are the
    events after the reset point, from the base run and the runs that continued it, in order.
    Raises ResetRejected when the point is not a workflow task's end or children are pending.
    """
    state = rebuild(base_events, namespace_id=namespace_id, namespace=namespace, run_id=new_run_id, now=now)
    state.start_request_id = request_id
    wft = state.workflow_task
    if wft is None:
        raise ResetRejected(
            "Can only reset workflow to event ID in range [WorkflowTaskScheduled +1, WorkflowTaskStarted + 1]: "
            f"{finish_event_id}"
        )
    if state.children:
        raise ResetRejected("WorkflowResetter encountered pending child workflows.")
    m = Mutation(state, now, ids)
    m.events = list(base_events)
    if not wft.started_event_id:
        wft.identity = workflow_task.HISTORY_SERVICE_IDENTITY
        wft.started_event_id = m.add(workflow_task.started_event(state, wft, state.history_size)).event_id
    m.add(
        new_event(
            WorkflowTaskFailedEventAttributes(
                scheduled_event_id=wft.scheduled_event_id,
                started_event_id=wft.started_event_id,
                cause=WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW,
                failure=Failure(message=reason, reset_workflow_failure_info=ResetWorkflowFailureInfo()),
                identity=workflow_task.HISTORY_SERVICE_IDENTITY,
                base_run_id=base_run_id,
                new_run_id=new_run_id,
            )
        )
    )
    state.workflow_task = None
    _reapply(m, later_events, excluded)
    _rearm(m, base_events)
    workflow_task.schedule(m)
    return m


def _reapply(m: Mutation, events: list[HistoryEvent], excluded: set[int]) -> None:
    signals = ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_SIGNAL not in excluded
    update_requests = ResetReapplyExcludeType.RESET_REAPPLY_EXCLUDE_TYPE_UPDATE not in excluded
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED and signals:
            attrs = event.workflow_execution_signaled_event_attributes
            m.add(
                new_event(
                    WorkflowExecutionSignaledEventAttributes(
                        signal_name=attrs.signal_name,
                        input=attrs.input if attrs.HasField("input") else None,
                        identity=attrs.identity,
                        header=attrs.header if attrs.HasField("header") else None,
                        request_id=attrs.request_id,
                    )
                )
            )
            apply_event(m.state, m.events[-1], m.now)
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED and update_requests:
            _admit(m, event.workflow_execution_update_admitted_event_attributes.request)
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED and update_requests:
            accepted = event.workflow_execution_update_accepted_event_attributes
            if accepted.HasField("accepted_request"):
                _admit(m, accepted.accepted_request)
            # Without the request it was admitted by an earlier UpdateAdmitted event, reapplied above.


def _admit(m: Mutation, request: Request) -> None:
    event = m.add(
        new_event(
            WorkflowExecutionUpdateAdmittedEventAttributes(
                request=request, origin=UpdateAdmittedEventOrigin.UPDATE_ADMITTED_EVENT_ORIGIN_REAPPLY
            )
        )
    )
    apply_event(m.state, event, m.now)


def _rearm(m: Mutation, base_events: list[HistoryEvent]) -> None:
    """Tasks, timers and transfers for what is pending at the reset point: the base run's rows are not ours."""
    state = m.state
    for info in state.activities.values():
        activity.rearm(m, info)
    for timer in state.timers.values():
        m.timer(TimerKind.USER_TIMER, timer.fire_at, event_id=timer.started_event_id)
    if state.run_expiration is not None:
        m.timer(TimerKind.WORKFLOW_RUN_TIMEOUT, state.run_expiration)
    # A signal or cancel request the base run had not seen delivered is sent again, as Temporal does.
    by_id = {e.event_id: e for e in base_events}
    for initiated in state.external_signals:
        m.transfer(TransferKind.SIGNAL_EXTERNAL, initiated, attributes(by_id[initiated]).SerializeToString())
    for initiated in state.external_cancels:
        m.transfer(TransferKind.CANCEL_EXTERNAL, initiated, attributes(by_id[initiated]).SerializeToString())
