"""Reset: a new run that repeats the base run's history up to a workflow task, fails that task, and
gets the signals and updates that came after it again (Temporal's ResetWorkflowExecution).

Two pure steps. `rebuild` turns a prefix of a history back into the mutable state the run had at
its end: the same state the live transitions built, derived from the events alone. `reset_run`
then writes the new run's first mutation from it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

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

from engine.history import activity, commands, lifecycle, updates, workflow_task
from engine.history.errors import ResetRejected
from engine.history.events import attributes, new_event, seconds
from engine.history.mutation import Mutation, TimerKind, TransferKind
from engine.history.state import (
    ActivityInfo,
    ChildInfo,
    ExternalRequest,
    MutableState,
    ParentInfo,
    TimerInfo,
    UpdateInfo,
    WorkflowTaskInfo,
)

RESETTER_IDENTITY = "history-resetter"
"""Who terminates the run a reset replaces (Temporal's consts.IdentityResetter)."""

E = EventType
# Events that end something pending; attributes(event) names it (scheduled or initiated event id).
_ACTIVITY_CLOSES = {
    E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED,
    E.EVENT_TYPE_ACTIVITY_TASK_FAILED,
    E.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT,
    E.EVENT_TYPE_ACTIVITY_TASK_CANCELED,
}
_CHILD_ENDS = {
    E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_FAILED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_COMPLETED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_FAILED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_CANCELED,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TIMED_OUT,
    E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_TERMINATED,
}
_SIGNAL_EXTERNAL_ENDS = {
    E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED,
    E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
}
_CANCEL_EXTERNAL_ENDS = {
    E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_CANCEL_REQUESTED,
    E.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_FAILED,
}


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


def rebuild(
    events: list[HistoryEvent], *, namespace_id: str, namespace: str, run_id: str, now: datetime
) -> MutableState:
    """The mutable state a run had after `events` (a prefix of its history, starting with its start event).

    Times that start countdowns (activity scheduling, the run timeout) are taken as `now`: the rebuilt
    run starts now. Timers keep their original fire times, as Temporal's do.
    """
    if not events or events[0].event_type != E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        raise ResetRejected("the history to reset does not begin with WorkflowExecutionStarted")
    state = _started_state(events[0], namespace_id=namespace_id, namespace=namespace, run_id=run_id, now=now)
    for event in events[1:]:
        _apply(state, event, now)
    state.next_event_id = events[-1].event_id + 1
    state.history_size = sum(e.ByteSize() for e in events)
    return state


def _started_state(
    event: HistoryEvent, *, namespace_id: str, namespace: str, run_id: str, now: datetime
) -> MutableState:
    attrs = event.workflow_execution_started_event_attributes
    execution_expiration = (
        attrs.workflow_execution_expiration_time.ToDatetime(tzinfo=now.tzinfo)
        if attrs.HasField("workflow_execution_expiration_time")
        else None
    )
    run_timeout = seconds(attrs.workflow_run_timeout)
    run_expiration = now + timedelta(seconds=run_timeout) if run_timeout else None
    if execution_expiration is not None and (run_expiration is None or run_expiration > execution_expiration):
        run_expiration = execution_expiration
    parent = None
    if attrs.HasField("parent_workflow_execution"):
        parent = ParentInfo(
            namespace=attrs.parent_workflow_namespace,
            namespace_id=attrs.parent_workflow_namespace_id,
            workflow_id=attrs.parent_workflow_execution.workflow_id,
            run_id=attrs.parent_workflow_execution.run_id,
            initiated_event_id=attrs.parent_initiated_event_id,
            root_workflow_id=attrs.root_workflow_execution.workflow_id,
            root_run_id=attrs.root_workflow_execution.run_id,
        )
    return MutableState(
        namespace_id=namespace_id,
        namespace=namespace,
        workflow_id=attrs.workflow_id,
        run_id=run_id,
        first_run_id=attrs.first_execution_run_id,
        workflow_type=attrs.workflow_type.name,
        task_queue=attrs.task_queue.name,
        start_time=now,
        execution_time=now,
        workflow_task_timeout=seconds(attrs.workflow_task_timeout),
        run_timeout=run_timeout,
        execution_timeout=seconds(attrs.workflow_execution_timeout),
        run_expiration=run_expiration,
        execution_expiration=execution_expiration,
        memo=attrs.memo.SerializeToString() if attrs.HasField("memo") else b"",
        search_attributes=attrs.search_attributes.SerializeToString()
        if attrs.HasField("search_attributes")
        else b"",
        attempt=attrs.attempt or 1,
        start_attrs=attrs.SerializeToString(),
        user_metadata=event.user_metadata.SerializeToString() if event.HasField("user_metadata") else b"",
        parent=parent,
    )


def _apply(state: MutableState, event: HistoryEvent, now: datetime) -> None:  # noqa: C901 - one case per event type
    kind = event.event_type
    at = event.event_time.ToDatetime(tzinfo=now.tzinfo)
    if kind == E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:
        attrs = event.workflow_task_scheduled_event_attributes
        state.workflow_task = WorkflowTaskInfo(
            scheduled_event_id=event.event_id,
            attempt=attrs.attempt or 1,
            task_queue=attrs.task_queue.name,
            timeout=seconds(attrs.start_to_close_timeout),
            scheduled_time=at,
        )
    elif kind == E.EVENT_TYPE_WORKFLOW_TASK_STARTED:
        attrs = event.workflow_task_started_event_attributes
        wft = state.workflow_task
        if wft is not None and wft.scheduled_event_id == attrs.scheduled_event_id:
            wft.started_event_id = event.event_id
            wft.started_time = at
            wft.request_id = attrs.request_id
            wft.identity = attrs.identity
    elif kind == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        state.last_completed_wft_started_event_id = (
            event.workflow_task_completed_event_attributes.started_event_id
        )
        state.workflow_task = None
    elif kind in (E.EVENT_TYPE_WORKFLOW_TASK_FAILED, E.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT):
        state.workflow_task = None
    elif kind == E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        attrs = event.activity_task_scheduled_event_attributes
        state.activities[event.event_id] = ActivityInfo(
            scheduled_event_id=event.event_id,
            activity_id=attrs.activity_id,
            activity_type=attrs.activity_type.name,
            task_queue=attrs.task_queue.name,
            scheduled=attrs.SerializeToString(),
            scheduled_time=now,
            schedule_to_close=seconds(attrs.schedule_to_close_timeout),
            schedule_to_start=seconds(attrs.schedule_to_start_timeout),
            start_to_close=seconds(attrs.start_to_close_timeout),
            heartbeat=seconds(attrs.heartbeat_timeout),
            attempt_scheduled_time=now,
        )
    elif kind == E.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
        attrs = event.activity_task_cancel_requested_event_attributes
        info = state.activities.get(attrs.scheduled_event_id)
        if info is not None:
            info.cancel_requested = True
            info.cancel_requested_event_id = event.event_id
    elif kind in _ACTIVITY_CLOSES:
        state.activities.pop(attributes(event).scheduled_event_id, None)
    elif kind == E.EVENT_TYPE_TIMER_STARTED:
        attrs = event.timer_started_event_attributes
        state.timers[attrs.timer_id] = TimerInfo(
            timer_id=attrs.timer_id,
            started_event_id=event.event_id,
            fire_at=at + attrs.start_to_fire_timeout.ToTimedelta(),
        )
    elif kind == E.EVENT_TYPE_TIMER_FIRED:
        state.timers.pop(event.timer_fired_event_attributes.timer_id, None)
    elif kind == E.EVENT_TYPE_TIMER_CANCELED:
        state.timers.pop(event.timer_canceled_event_attributes.timer_id, None)
    elif kind == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        attrs = event.start_child_workflow_execution_initiated_event_attributes
        state.children[event.event_id] = ChildInfo(
            initiated_event_id=event.event_id,
            workflow_id=attrs.workflow_id,
            workflow_type=attrs.workflow_type.name,
            parent_close_policy=attrs.parent_close_policy,
        )
    elif kind == E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED:
        attrs = event.child_workflow_execution_started_event_attributes
        child = state.children.get(attrs.initiated_event_id)
        if child is not None:
            child.run_id = attrs.workflow_execution.run_id
            child.started_event_id = event.event_id
    elif kind in _CHILD_ENDS:
        state.children.pop(attributes(event).initiated_event_id, None)
    elif kind == E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
        state.external_signals[event.event_id] = _external_request(event)
    elif kind in _SIGNAL_EXTERNAL_ENDS:
        state.external_signals.pop(attributes(event).initiated_event_id, None)
    elif kind == E.EVENT_TYPE_REQUEST_CANCEL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED:
        state.external_cancels[event.event_id] = _external_request(event)
    elif kind in _CANCEL_EXTERNAL_ENDS:
        state.external_cancels.pop(attributes(event).initiated_event_id, None)
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        request_id = event.workflow_execution_signaled_event_attributes.request_id
        if request_id:
            state.signal_request_ids = [*state.signal_request_ids, request_id][
                -lifecycle.MAX_SIGNAL_REQUEST_IDS :
            ]
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
        state.cancel_requested = True
    elif kind == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        state.search_attributes = commands.merged_search_attributes(
            state.search_attributes,
            event.upsert_workflow_search_attributes_event_attributes.search_attributes,
        )
    elif kind == E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED:
        state.memo = commands.merged_memo(
            state.memo, event.workflow_properties_modified_event_attributes.upserted_memo
        )
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED:
        request = event.workflow_execution_update_admitted_event_attributes.request
        state.updates[request.meta.update_id] = UpdateInfo(
            update_id=request.meta.update_id,
            request=request.SerializeToString(),
            stage=updates.ADMITTED,
            admitted_event_id=event.event_id,
        )
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        attrs = event.workflow_execution_update_accepted_event_attributes
        info = state.updates.get(attrs.protocol_instance_id)
        if info is None:
            info = state.updates[attrs.protocol_instance_id] = UpdateInfo(
                update_id=attrs.protocol_instance_id,
                request=attrs.accepted_request.SerializeToString(),
                stage=updates.ACCEPTED,
            )
        info.stage = updates.ACCEPTED
        info.accepted_event_id = event.event_id
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED:
        attrs = event.workflow_execution_update_completed_event_attributes
        info = state.updates.get(attrs.meta.update_id)
        if info is not None:
            info.stage = updates.COMPLETED
            info.outcome = attrs.outcome.SerializeToString()
    # Markers, search attribute and memo-free events, and the rest change nothing a new run needs.


def _external_request(initiated: HistoryEvent) -> ExternalRequest:
    attrs = attributes(initiated)
    return ExternalRequest(
        initiated_event_id=initiated.event_id,
        workflow_id=attrs.workflow_execution.workflow_id,
        run_id=attrs.workflow_execution.run_id,
        control=attrs.control,
    )


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
    m = Mutation(state, now)
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
        if event.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED and signals:
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
            _apply(m.state, m.events[-1], m.now)
        elif event.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ADMITTED and update_requests:
            _admit(m, event.workflow_execution_update_admitted_event_attributes.request)
        elif event.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED and update_requests:
            attrs = event.workflow_execution_update_accepted_event_attributes
            if attrs.HasField("accepted_request"):
                _admit(m, attrs.accepted_request)
            # Without the request it was admitted by an earlier UpdateAdmitted event, reapplied above.


def _admit(m: Mutation, request: object) -> None:
    event = m.add(
        new_event(
            WorkflowExecutionUpdateAdmittedEventAttributes(
                request=request, origin=UpdateAdmittedEventOrigin.UPDATE_ADMITTED_EVENT_ORIGIN_REAPPLY
            )
        )
    )
    _apply(m.state, event, m.now)


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
