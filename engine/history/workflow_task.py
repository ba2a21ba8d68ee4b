"""Workflow task transitions: schedule, start, complete, fail and time out (Temporal's attempt rules)."""

from __future__ import annotations

from datetime import timedelta

from temporalio.api.common.v1 import WorkerVersionStamp
from temporalio.api.enums.v1 import (
    SuggestContinueAsNewReason,
    TaskQueueKind,
    TimeoutType,
    WorkflowTaskFailedCause,
)
from temporalio.api.failure.v1 import Failure
from temporalio.api.history.v1 import (
    HistoryEvent,
    WorkflowTaskFailedEventAttributes,
    WorkflowTaskScheduledEventAttributes,
    WorkflowTaskStartedEventAttributes,
    WorkflowTaskTimedOutEventAttributes,
)
from temporalio.api.taskqueue.v1 import TaskQueue

from engine.history import limits
from engine.history.errors import StaleTask
from engine.history.events import duration, new_event, set_time
from engine.history.mutation import Mutation, TaskKind, TimerKind
from engine.history.state import MutableState, WorkflowTaskInfo

HISTORY_SERVICE_IDENTITY = "history-service"
_RETRY_BACKOFF_MIN_ATTEMPTS = 3
_RETRY_INITIAL_INTERVAL = 5.0
_RETRY_MAX_INTERVAL = 600.0


def start_to_close_timeout(default: float, attempt: int) -> float:
    """The timeout of a given attempt: after the third, it grows so a failing task retries ever slower."""
    if attempt <= _RETRY_BACKOFF_MIN_ATTEMPTS:
        return default
    exponent = min(
        attempt - _RETRY_BACKOFF_MIN_ATTEMPTS - 1, 32
    )  # capped: the maximum is reached long before
    backoff = _RETRY_INITIAL_INTERVAL * 2.0**exponent
    return default + min(backoff, _RETRY_MAX_INTERVAL)


def _task_queue(state: MutableState, name: str) -> TaskQueue:
    if name != state.task_queue:
        return TaskQueue(name=name, kind=TaskQueueKind.TASK_QUEUE_KIND_STICKY, normal_name=state.task_queue)
    return TaskQueue(name=name, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL)


def _scheduled_event(state: MutableState, wft: WorkflowTaskInfo) -> HistoryEvent:
    return new_event(
        WorkflowTaskScheduledEventAttributes(
            task_queue=_task_queue(state, wft.task_queue),
            start_to_close_timeout=duration(wft.timeout),
            attempt=wft.attempt,
        )
    )


def started_event(state: MutableState, wft: WorkflowTaskInfo, history_size: int) -> HistoryEvent:
    reasons = []
    if history_size >= limits.HISTORY_SIZE_SUGGEST_CONTINUE_AS_NEW:
        reasons.append(SuggestContinueAsNewReason.SUGGEST_CONTINUE_AS_NEW_REASON_HISTORY_SIZE_TOO_LARGE)
    if state.next_event_id - 1 >= limits.HISTORY_COUNT_SUGGEST_CONTINUE_AS_NEW:
        reasons.append(SuggestContinueAsNewReason.SUGGEST_CONTINUE_AS_NEW_REASON_TOO_MANY_HISTORY_EVENTS)
    return new_event(
        WorkflowTaskStartedEventAttributes(
            scheduled_event_id=wft.scheduled_event_id,
            identity=wft.identity,
            request_id=wft.request_id,
            history_size_bytes=history_size,
            worker_version=WorkerVersionStamp(build_id=wft.build_id) if wft.build_id else None,
            suggest_continue_as_new=bool(reasons),
            suggest_continue_as_new_reasons=reasons,
            target_worker_deployment_version_changed=wft.target_version_changed,
        )
    )


def schedule(m: Mutation, *, speculative: bool = False) -> None:
    """Schedule the run's next workflow task, unless one is already pending.

    `speculative`: the task only carries an update, so it is written to history only if the worker does
    more than reject it.
    """
    state = m.state
    if state.workflow_task is not None or not state.running or state.awaiting_backoff:
        return
    if state.paused:
        # No task while paused (Temporal's ScheduleWorkflowTask); what a finished task left buffered is
        # written now, and unpausing schedules the task that delivers it.
        if m.flush_buffer():
            state.wft_attempt = 1  # new events: the task unpausing schedules is a first attempt
        return
    if m.flush_buffer():
        state.wft_attempt = 1
        speculative = False  # the task must be written: it delivers the events just flushed
    attempt = state.wft_attempt
    wft = WorkflowTaskInfo(
        scheduled_event_id=state.next_event_id,
        attempt=attempt,
        task_queue=state.sticky_queue or state.task_queue,
        timeout=start_to_close_timeout(state.workflow_task_timeout, attempt),
        scheduled_time=m.now,
        speculative=speculative and attempt == 1,
    )
    if not wft.deferred:
        wft.scheduled_event_id = m.add(_scheduled_event(state, wft)).event_id
    # else: a transient or speculative task; its events get ids only when it completes.
    state.workflow_task = wft
    m.task(TaskKind.WORKFLOW, wft.task_queue, wft.scheduled_event_id, attempt)
    if state.sticky_queue:
        # Nobody may be polling the sticky queue any more (the worker died): fall back after a while.
        m.timer(
            TimerKind.WORKFLOW_TASK_SCHEDULE_TO_START,
            m.now + timedelta(seconds=state.sticky_timeout),
            event_id=wft.scheduled_event_id,
            attempt=attempt,
        )


def _clear_sticky(m: Mutation) -> bool:
    """Drop stickiness (after a failure, a timeout, or the worker going away); True if it was set."""
    if not m.state.sticky_queue:
        return False
    m.state.sticky_queue = ""
    m.state.sticky_timeout = 0.0
    return True


def unstick(m: Mutation) -> None:
    """The sticky worker is gone: move a pending, unstarted task to the normal queue, no event written."""
    state = m.state
    wft = state.workflow_task
    _clear_sticky(m)
    if state.running and wft is not None and not wft.started_event_id and wft.task_queue != state.task_queue:
        wft.task_queue = state.task_queue
        m.drop_timers(TimerKind.WORKFLOW_TASK_SCHEDULE_TO_START, wft.scheduled_event_id)
        m.task(TaskKind.WORKFLOW, wft.task_queue, wft.scheduled_event_id, wft.attempt)


def schedule_to_start_timeout(m: Mutation, *, scheduled_event_id: int, attempt: int) -> None:
    """A task waited too long on a sticky queue: time it out and schedule it on the normal queue."""
    state = m.state
    if not state.running:
        raise StaleTask("run closed")
    wft = _pending(state, scheduled_event_id, attempt)
    if wft.started_event_id or wft.task_queue == state.task_queue:
        raise StaleTask("workflow task started or no longer sticky")
    materialize_speculative(m)
    m.add(
        new_event(
            WorkflowTaskTimedOutEventAttributes(
                scheduled_event_id=wft.scheduled_event_id,
                started_event_id=0,
                timeout_type=TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START,
            )
        )
    )
    state.workflow_task = None
    _clear_sticky(m)
    state.wft_attempt = 1
    schedule(m)


def _pending(state: MutableState, scheduled_event_id: int, attempt: int | None = None) -> WorkflowTaskInfo:
    wft = state.workflow_task
    if (
        wft is None
        or wft.scheduled_event_id != scheduled_event_id
        or (attempt is not None and wft.attempt != attempt)
    ):
        raise StaleTask("workflow task not found")
    return wft


def start(
    m: Mutation,
    *,
    scheduled_event_id: int,
    attempt: int,
    request_id: str,
    identity: str,
    task_queue: str | None = None,
    build_id: str = "",
    target_version_changed: bool = False,
) -> WorkflowTaskInfo:
    """A poller took the task (from `task_queue`): record it started and arm its start-to-close timeout."""
    state = m.state
    if not state.running:
        raise StaleTask("workflow task not found")
    wft = _pending(state, scheduled_event_id, attempt)
    if wft.started_event_id:
        raise StaleTask("workflow task already started")
    if task_queue is not None and task_queue != wft.task_queue:
        raise StaleTask("workflow task moved to another queue")
    if state.paused:
        raise StaleTask("the run is paused")  # its row is dropped; unpausing queues the task again
    if wft.task_queue != state.task_queue:
        m.drop_timers(TimerKind.WORKFLOW_TASK_SCHEDULE_TO_START, wft.scheduled_event_id)
    wft.request_id = request_id
    wft.identity = identity
    wft.build_id = build_id
    wft.target_version_changed = target_version_changed
    if wft.deferred and wft.scheduled_event_id != state.next_event_id:
        # Events arrived since this transient or speculative task was scheduled: it becomes a normal task.
        wft.attempt = 1
        wft.speculative = False
        state.wft_attempt = 1
        wft.scheduled_event_id = m.add(_scheduled_event(state, wft)).event_id
    wft.started_time = m.now
    if not wft.deferred:
        wft.started_event_id = m.add(started_event(state, wft, state.history_size)).event_id
    else:
        wft.started_event_id = wft.scheduled_event_id + 1
    m.timer(
        TimerKind.WORKFLOW_TASK_TIMEOUT,
        m.now + timedelta(seconds=wft.timeout),
        event_id=wft.scheduled_event_id,
        attempt=wft.attempt,
    )
    return wft


def transient_events(state: MutableState, *, include_unstarted: bool = False) -> list[HistoryEvent]:
    """The not-yet-written events of a transient task: scheduled and started, as the poller must see them.

    History reads (`include_unstarted`) also show a transient task that is only scheduled, as Temporal does.
    """
    wft = state.workflow_task
    if wft is None or not wft.deferred or not (wft.started_event_id or include_unstarted):
        return []
    if wft.scheduled_event_id != state.next_event_id:
        return []  # events arrived since it was scheduled: it will start as a normal task, with new ids
    scheduled = _scheduled_event(state, wft)
    scheduled.event_id = wft.scheduled_event_id
    set_time(scheduled.event_time, wft.scheduled_time)
    if not wft.started_event_id:
        return [scheduled]
    started = started_event(state, wft, state.history_size)
    started.event_id = wft.started_event_id
    assert wft.started_time is not None
    set_time(started.event_time, wft.started_time)
    return [scheduled, started]


def write_transient(m: Mutation, wft: WorkflowTaskInfo) -> None:
    for event in transient_events(m.state, include_unstarted=True):
        m.add(event, at=event.event_time.ToDatetime(tzinfo=m.now.tzinfo))
    wft.speculative = False


def materialize_speculative(m: Mutation) -> None:
    """A speculative task that fails or times out is kept in history like a normal first attempt."""
    wft = m.state.workflow_task
    if wft is not None and wft.speculative:
        write_transient(m, wft)


def started_task(
    state: MutableState, scheduled_event_id: int, started_event_id: int, attempt: int
) -> WorkflowTaskInfo:
    # Transient attempts reuse the scheduled and started ids, so only the attempt tells a late answer to a
    # timed-out attempt from an answer to the attempt that replaced it (Temporal checks it too).
    wft = _pending(state, scheduled_event_id, attempt)
    if not wft.started_event_id or wft.started_event_id != started_event_id:
        raise StaleTask("workflow task not found")
    return wft


def fail(
    m: Mutation,
    *,
    scheduled_event_id: int,
    started_event_id: int,
    attempt: int,
    cause: int,
    failure: Failure | None,
    identity: str,
    binary_checksum: str = "",
) -> None:
    """The worker (or the server, for a bad command) failed the task: record it and retry."""
    state = m.state
    if not state.running:
        raise StaleTask("workflow task not found")
    wft = started_task(state, scheduled_event_id, started_event_id, attempt)
    _fail(m, wft, cause=cause, failure=failure, identity=identity, binary_checksum=binary_checksum)
    schedule(m)


def _fail(
    m: Mutation,
    wft: WorkflowTaskInfo,
    *,
    cause: int,
    failure: Failure | None,
    identity: str,
    binary_checksum: str = "",
) -> None:
    state = m.state
    materialize_speculative(m)
    if wft.attempt == 1:
        m.add(
            new_event(
                WorkflowTaskFailedEventAttributes(
                    scheduled_event_id=wft.scheduled_event_id,
                    started_event_id=wft.started_event_id,
                    cause=WorkflowTaskFailedCause.ValueType(cause),
                    failure=failure,
                    identity=identity,
                    binary_checksum=binary_checksum,
                )
            )
        )
    state.workflow_task = None
    m.drop_timers(TimerKind.WORKFLOW_TASK_TIMEOUT, wft.scheduled_event_id)
    # A failure on a sticky queue first retries on the normal queue, at the same attempt (Temporal's rule).
    # An unhandled-command failure always has buffered events, so the next schedule() resets this to 1.
    state.wft_attempt = wft.attempt if _clear_sticky(m) else wft.attempt + 1


def fail_for_close(m: Mutation) -> None:
    """Before a forced close (terminate), fail a started workflow task and write what was buffered."""
    wft = m.state.workflow_task
    if wft is not None and wft.started_event_id:
        _fail(
            m,
            wft,
            cause=WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND,
            failure=None,
            identity=HISTORY_SERVICE_IDENTITY,
        )
    m.flush_buffer()


def time_out(m: Mutation, *, scheduled_event_id: int, attempt: int) -> None:
    """The start-to-close timer fired: if the task is still the one started, time it out and retry."""
    state = m.state
    if not state.running:
        raise StaleTask("run closed")
    wft = _pending(state, scheduled_event_id, attempt)
    if not wft.started_event_id:
        raise StaleTask("workflow task not started")
    materialize_speculative(m)
    if wft.attempt == 1:
        m.add(
            new_event(
                WorkflowTaskTimedOutEventAttributes(
                    scheduled_event_id=wft.scheduled_event_id,
                    started_event_id=wft.started_event_id,
                    timeout_type=TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE,
                )
            )
        )
    state.workflow_task = None
    state.wft_attempt = wft.attempt if _clear_sticky(m) else wft.attempt + 1
    schedule(m)
