"""Activity transitions: schedule, start, heartbeat, complete, fail, cancel, time out, retry."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from temporalio.api.command.v1 import ScheduleActivityTaskCommandAttributes
from temporalio.api.common.v1 import Payloads, RetryPolicy, WorkerVersionStamp
from temporalio.api.enums.v1 import RetryState, TaskQueueKind, TimeoutType, WorkflowTaskFailedCause
from temporalio.api.failure.v1 import Failure, TimeoutFailureInfo
from temporalio.api.history.v1 import (
    ActivityTaskCanceledEventAttributes,
    ActivityTaskCompletedEventAttributes,
    ActivityTaskFailedEventAttributes,
    ActivityTaskScheduledEventAttributes,
    ActivityTaskStartedEventAttributes,
    ActivityTaskTimedOutEventAttributes,
    HistoryEvent,
)
from temporalio.api.taskqueue.v1 import TaskQueue

from engine.errors import FailedPrecondition, InvalidArgument
from engine.history import limits, parking, retry, retry_jitter, standalone_outcome, workflow_task
from engine.history.errors import CommandFailure, RunClosed, StaleTask
from engine.history.events import duration, new_event, seconds
from engine.history.machines import ActivityState, transition
from engine.history.mutation import Mutation, TaskKind, TimerKind
from engine.history.state import ActivityInfo

_BAD_ATTRS = WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_BAD_SCHEDULE_ACTIVITY_ATTRIBUTES
_TIMEOUT_NAMES = {
    TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE: "StartToClose",
    TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START: "ScheduleToStart",
    TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE: "ScheduleToClose",
    TimeoutType.TIMEOUT_TYPE_HEARTBEAT: "Heartbeat",
}
RETRY_SCHEDULE_TO_CLOSE_MESSAGE = (
    "Not enough time to schedule next retry before activity ScheduleToClose timeout, giving up retrying"
)
MAX_ID_LENGTH = 1000
SERVER_SOURCE = "Server"


def _normalized_timeouts(
    attrs: ScheduleActivityTaskCommandAttributes, run_timeout: float
) -> tuple[float, ...]:
    """(schedule_to_close, schedule_to_start, start_to_close, heartbeat) as Temporal derives them."""
    s2c = seconds(attrs.schedule_to_close_timeout)
    s2s = seconds(attrs.schedule_to_start_timeout)
    st2c = seconds(attrs.start_to_close_timeout)
    hb = seconds(attrs.heartbeat_timeout)
    for name, value in (
        ("ScheduleToCloseTimeout", s2c),
        ("ScheduleToStartTimeout", s2s),
        ("StartToCloseTimeout", st2c),
        ("HeartbeatTimeout", hb),
    ):
        if value < 0:
            raise CommandFailure(_BAD_ATTRS, f"Invalid {name}: cannot be negative.")
    if s2c > 0:
        if run_timeout > 0:
            s2c = min(s2c, run_timeout)
        s2s = min(s2s, s2c) if s2s > 0 else s2c
        st2c = min(st2c, s2c) if st2c > 0 else s2c
    elif st2c > 0:
        s2c = run_timeout
        if run_timeout > 0:
            st2c = min(st2c, run_timeout)
        if s2s <= 0:
            s2s = s2c
        elif s2c > 0:
            s2s = min(s2s, s2c)
    else:
        raise CommandFailure(
            _BAD_ATTRS,
            "A valid StartToClose or ScheduleToCloseTimeout is not set on ScheduleActivityTaskCommand.",
        )
    hb = min(hb, st2c) if hb > 0 else 0.0
    return s2c, s2s, st2c, hb


def schedule(m: Mutation, *, completed_event_id: int, attrs: ScheduleActivityTaskCommandAttributes) -> int:
    """The ScheduleActivityTask command: validate, normalise, write ActivityTaskScheduled, queue the task."""
    state = m.state
    if not attrs.activity_id:
        raise CommandFailure(_BAD_ATTRS, "ActivityId is not set on ScheduleActivityTaskCommand.")
    if len(attrs.activity_id) > MAX_ID_LENGTH:
        raise CommandFailure(_BAD_ATTRS, "ActivityId exceeds length limit.")
    if not attrs.activity_type.name:
        raise CommandFailure(_BAD_ATTRS, "ActivityType is not set on ScheduleActivityTaskCommand.")
    if len(state.activities) >= limits.PENDING_ACTIVITIES:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_PENDING_ACTIVITIES_LIMIT_EXCEEDED,
            f"the workflow already has {limits.PENDING_ACTIVITIES} pending activities, the most a run may have",
        )
    if state.activity_by_id(attrs.activity_id) is not None:
        raise CommandFailure(
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_SCHEDULE_ACTIVITY_DUPLICATE_ID,
            f"Activity ID {attrs.activity_id} is already in use.",
        )
    s2c, s2s, st2c, hb = _normalized_timeouts(attrs, state.run_timeout)
    try:
        policy = retry.normalized(attrs.retry_policy if attrs.HasField("retry_policy") else None)
    except retry.RetryPolicyError as e:
        raise CommandFailure(_BAD_ATTRS, str(e)) from None
    header = attrs.header if attrs.HasField("header") else None
    problem = retry_jitter.header_problem(header) or parking.header_problem(header)
    if problem is not None:
        raise CommandFailure(_BAD_ATTRS, problem)
    task_queue = attrs.task_queue.name or state.task_queue
    event_attrs = ActivityTaskScheduledEventAttributes(
        activity_id=attrs.activity_id,
        activity_type=attrs.activity_type,
        task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
        header=attrs.header,
        input=attrs.input if attrs.HasField("input") else None,
        schedule_to_close_timeout=duration(s2c),
        schedule_to_start_timeout=duration(s2s),
        start_to_close_timeout=duration(st2c),
        heartbeat_timeout=duration(hb),
        workflow_task_completed_event_id=completed_event_id,
        retry_policy=policy,
        use_workflow_build_id=attrs.use_workflow_build_id,
        priority=attrs.priority if attrs.HasField("priority") else None,
    )
    event = m.add(new_event(event_attrs))
    sid = event.event_id
    state.activities[sid] = ActivityInfo(
        scheduled_event_id=sid,
        activity_id=attrs.activity_id,
        activity_type=attrs.activity_type.name,
        task_queue=task_queue,
        scheduled=event_attrs.SerializeToString(),
        scheduled_time=m.now,
        schedule_to_close=s2c,
        schedule_to_start=s2s,
        start_to_close=st2c,
        heartbeat=hb,
        attempt_scheduled_time=m.now,
    )
    if not attrs.request_eager_execution:
        # Eager ones are started in this same transaction and handed to the worker (completion.complete).
        m.task(TaskKind.ACTIVITY, task_queue, sid, 1)
    _arm_schedule_timers(m, state.activities[sid], first=True)
    return sid


def scheduled_attributes(info: ActivityInfo) -> ActivityTaskScheduledEventAttributes:
    return ActivityTaskScheduledEventAttributes.FromString(info.scheduled)


def retry_policy(info: ActivityInfo) -> RetryPolicy:
    """The retry policy in force: the scheduled one, unless an operator updated it."""
    if info.retry_policy is not None:
        return RetryPolicy.FromString(info.retry_policy)
    return scheduled_attributes(info).retry_policy


def dispatch_attributes(info: ActivityInfo) -> ActivityTaskScheduledEventAttributes:
    """What a worker is handed: the scheduled attributes with the retry policy in force.

    Temporal's task carries the timeouts of the scheduled event even after an option update (only
    the server enforces the updated ones), and the retry policy of the activity's current state.
    """
    attrs = scheduled_attributes(info)
    if info.retry_policy is not None:
        attrs.retry_policy.CopyFrom(RetryPolicy.FromString(info.retry_policy))
    return attrs


def expiration(info: ActivityInfo) -> datetime | None:
    if info.schedule_to_close <= 0:
        return None
    return info.scheduled_time + timedelta(seconds=info.schedule_to_close)


def _arm_schedule_timers(m: Mutation, info: ActivityInfo, *, first: bool) -> None:
    sid, attempt = info.scheduled_event_id, info.attempt
    if first and info.schedule_to_close > 0:
        m.timer(
            TimerKind.ACTIVITY_TIMEOUT,
            info.scheduled_time + timedelta(seconds=info.schedule_to_close),
            event_id=sid,
            attempt=0,  # whichever attempt is current
            detail=TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE,
        )
    if info.schedule_to_start > 0 and (
        info.schedule_to_close <= 0 or info.schedule_to_start < info.schedule_to_close
    ):
        m.timer(
            TimerKind.ACTIVITY_TIMEOUT,
            info.attempt_scheduled_time + timedelta(seconds=info.schedule_to_start),
            event_id=sid,
            attempt=attempt,
            detail=TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START,
        )


def rearm(m: Mutation, info: ActivityInfo, *, delay: float = 0.0) -> None:
    """Queue a pending activity's task and timeouts again (a reset run takes over activities not yet
    started; a standalone activity's first attempt waits `delay`, its start delay)."""
    m.task(TaskKind.ACTIVITY, info.task_queue, info.scheduled_event_id, info.attempt, delay=delay)
    _arm_schedule_timers(m, info, first=True)


def pending(m: Mutation, scheduled_event_id: int, attempt: int) -> ActivityInfo:
    """The activity a token names, if that attempt is still the current one and started."""
    if not m.state.running:
        raise RunClosed("workflow execution already completed")
    info = m.state.activities.get(scheduled_event_id)
    if info is None or info.attempt != attempt or info.state is not ActivityState.STARTED:
        raise StaleTask("activity task not found")
    return info


def start(
    m: Mutation,
    *,
    scheduled_event_id: int,
    attempt: int,
    identity: str,
    request_id: str,
    build_id: str = "",
    task_queue: str | None = None,
    visible_at: datetime | None = None,
) -> ActivityInfo:
    """A poller took the activity task: record the attempt started (no event yet) and arm its timeouts.

    `task_queue` and `visible_at` describe the task row (None when started eagerly, without one): a row
    from before the attempt was paused, moved to another queue or rescheduled is stale.
    """
    info = m.state.activities.get(scheduled_event_id) if m.state.running else None
    if info is None or info.attempt != attempt or info.state is not ActivityState.SCHEDULED or info.paused:
        raise StaleTask("activity task not found")
    if m.state.paused:
        raise StaleTask("the run is paused")  # its row is dropped; unpausing queues the attempt again
    if task_queue is not None and task_queue != info.task_queue:
        raise StaleTask("activity task was moved to another task queue")
    if visible_at is not None and visible_at < (info.task_visible_at or info.attempt_scheduled_time):
        raise StaleTask("activity task was rescheduled")
    with transition(info, {ActivityState.SCHEDULED}, ActivityState.STARTED):
        info.started_time = m.now
        info.started_identity = identity
        info.started_request_id = request_id
        info.started_build_id = build_id
    m.drop_timers(TimerKind.ACTIVITY_TIMEOUT, scheduled_event_id, attempt)  # this attempt's schedule-to-start
    m.timer(
        TimerKind.ACTIVITY_TIMEOUT,
        m.now + timedelta(seconds=info.start_to_close),
        event_id=scheduled_event_id,
        attempt=attempt,
        detail=TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE,
    )
    if info.heartbeat > 0:
        m.timer(
            TimerKind.ACTIVITY_TIMEOUT,
            m.now + timedelta(seconds=info.heartbeat),
            event_id=scheduled_event_id,
            attempt=attempt,
            detail=TimeoutType.TIMEOUT_TYPE_HEARTBEAT,
        )
    return info


@dataclass(frozen=True, slots=True)
class HeartbeatAnswer:
    """What a heartbeat tells the worker about its attempt."""

    cancel_requested: bool
    paused: bool = False
    """An operator paused the activity: the SDK cancels the attempt (it may still complete)."""
    reset: bool = False
    """An operator reset the activity while this attempt ran: the SDK cancels it."""


def heartbeat(
    m: Mutation, *, scheduled_event_id: int, attempt: int, details: Payloads | None
) -> HeartbeatAnswer:
    """Record a heartbeat; the answer says whether the attempt was cancelled, paused or reset."""
    info = pending(m, scheduled_event_id, attempt)
    info.last_heartbeat_time = m.now
    if details is not None and details.payloads:
        info.heartbeat_details = details.SerializeToString()
    return HeartbeatAnswer(
        cancel_requested=info.cancel_requested, paused=info.paused, reset=info.reset_requested
    )


def _started_event(m: Mutation, info: ActivityInfo) -> int:
    """Write (or buffer) the ActivityTaskStarted event of the final attempt; returns its id (0 if buffered)."""
    event = m.add_external(
        new_event(
            ActivityTaskStartedEventAttributes(
                scheduled_event_id=info.scheduled_event_id,
                identity=info.started_identity,
                request_id=info.started_request_id,
                attempt=info.attempt,
                last_failure=Failure.FromString(info.last_failure) if info.last_failure else None,
                worker_version=WorkerVersionStamp(build_id=info.started_build_id)
                if info.started_build_id
                else None,
            )
        ),
        at=info.started_time,
    )
    return event.event_id if event is not None else 0


def _close(m: Mutation, info: ActivityInfo, event: HistoryEvent | None) -> None:
    """The activity has its outcome (`event`, None if buffered): its workflow gets a task to see it, or
    the run hosting it as a standalone activity closes with it."""
    with transition(info, {ActivityState.SCHEDULED, ActivityState.STARTED}, ActivityState.CLOSED):
        del m.state.activities[info.scheduled_event_id]
    m.drop_timers(TimerKind.ACTIVITY_TIMEOUT, info.scheduled_event_id)
    if info.paused:  # cancelled by its workflow while paused or parked
        parking.reindex(m)
    if m.state.standalone is not None:
        standalone_outcome.closed(m, info, event)
        return
    workflow_task.schedule(m)


def complete(
    m: Mutation, *, scheduled_event_id: int, attempt: int, result: Payloads | None, identity: str
) -> None:
    info = pending(m, scheduled_event_id, attempt)
    started_id = _started_event(m, info)
    event = m.add_external(
        new_event(
            ActivityTaskCompletedEventAttributes(
                result=result if result is not None and result.payloads else None,
                scheduled_event_id=scheduled_event_id,
                started_event_id=started_id,
                identity=identity,
            )
        )
    )
    _close(m, info, event)


def _retry(m: Mutation, info: ActivityInfo, failure: Failure) -> RetryState.ValueType:
    """Start the next attempt if the policy allows; returns the retry state."""
    info.last_attempt_complete_time = m.now
    if info.cancel_requested:
        return RetryState.RETRY_STATE_CANCEL_REQUESTED
    if failure.WhichOneof(
        "failure_info"
    ) == "timeout_failure_info" and failure.timeout_failure_info.timeout_type in (
        TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START,
        TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE,
    ):
        return RetryState.RETRY_STATE_TIMEOUT
    policy = retry_policy(info)
    if info.paused:
        # Temporal keeps a paused activity pending whatever its policy says (only a non-retryable failure
        # ends it): the next attempt waits, undispatched, for an unpause.
        if not retry.is_retryable(failure, list(policy.non_retryable_error_types)):
            return RetryState.RETRY_STATE_NON_RETRYABLE_FAILURE
        m.drop_timers(TimerKind.ACTIVITY_TIMEOUT, info.scheduled_event_id)
        _next_attempt(info, failure)
        return RetryState.RETRY_STATE_IN_PROGRESS
    fraction = retry_jitter.header_fraction(scheduled_attributes(info).header)
    decision = retry.decide(
        policy=policy,
        attempt=info.attempt,
        failure=failure,
        now=m.now,
        expiration=expiration(info),
        jitter=m.retry_jitter if fraction is None else fraction,
        jitter_key=f"activity|{m.state.run_id}|{info.scheduled_event_id}|{info.attempt}",
    )
    if not decision.retry:
        if decision.retry_state == RetryState.RETRY_STATE_MAXIMUM_ATTEMPTS_REACHED and _parks(m, info):
            _park(m, info, failure)
            return RetryState.RETRY_STATE_IN_PROGRESS
        return decision.retry_state
    m.drop_timers(TimerKind.ACTIVITY_TIMEOUT, info.scheduled_event_id, info.attempt)
    _next_attempt(info, failure)
    info.reset_requested = False
    if info.reset_heartbeats:
        info.heartbeat_details = b""
        info.last_heartbeat_time = None
        info.reset_heartbeats = False
    info.attempt_scheduled_time = m.now + timedelta(seconds=decision.delay)
    info.task_visible_at = None
    m.task(TaskKind.ACTIVITY, info.task_queue, info.scheduled_event_id, info.attempt, delay=decision.delay)
    _arm_schedule_timers(m, info, first=False)
    return decision.retry_state


def _parks(m: Mutation, info: ActivityInfo) -> bool:
    """Whether the activity parks when its retries are exhausted (a standalone one fails: its run is it)."""
    if m.state.standalone is not None:
        return False
    return parking.parks(scheduled_attributes(info).header, m.park_on_exhausted)


def _park(m: Mutation, info: ActivityInfo, failure: Failure) -> None:
    """Park it: paused (no attempt dispatched, no timeout) with the park identity, until a redrive."""
    attempts = info.attempt
    m.drop_timers(TimerKind.ACTIVITY_TIMEOUT, info.scheduled_event_id)
    _next_attempt(info, failure)
    info.paused = True
    info.pause_time = m.now
    info.pause_identity = parking.IDENTITY
    info.pause_reason = parking.reason(attempts, failure.message)
    info.pause_request_id = ""
    parking.reindex(m)


def _next_attempt(info: ActivityInfo, failure: Failure) -> None:
    with transition(info, {ActivityState.SCHEDULED, ActivityState.STARTED}, ActivityState.SCHEDULED):
        info.attempt += 1
        info.started_time = None
        info.last_worker_identity = info.started_identity
        info.started_identity = ""
        info.started_request_id = ""
        info.started_build_id = ""
        info.last_failure = failure.SerializeToString()


def fail(
    m: Mutation,
    *,
    scheduled_event_id: int,
    attempt: int,
    failure: Failure,
    identity: str,
    last_heartbeat_details: Payloads | None,
) -> None:
    """The attempt failed: retry it (no event) or record the activity failed."""
    info = pending(m, scheduled_event_id, attempt)
    if last_heartbeat_details is not None and last_heartbeat_details.payloads:
        info.heartbeat_details = last_heartbeat_details.SerializeToString()
    retry_state = _retry(m, info, failure)
    if retry_state == RetryState.RETRY_STATE_IN_PROGRESS:
        return
    started_id = _started_event(m, info)
    event = m.add_external(
        new_event(
            ActivityTaskFailedEventAttributes(
                failure=failure,
                scheduled_event_id=scheduled_event_id,
                started_event_id=started_id,
                identity=identity,
                retry_state=retry_state,
            )
        )
    )
    _close(m, info, event)


def canceled(
    m: Mutation, *, scheduled_event_id: int, attempt: int, details: Payloads | None, identity: str
) -> None:
    """The worker confirmed cancellation of a started attempt (only valid after the workflow asked for it)."""
    info = pending(m, scheduled_event_id, attempt)
    if not info.cancel_requested and m.state.standalone is not None:
        raise FailedPrecondition(
            "invalid transition from Started: the activity's cancellation was not requested"
        )
    if not info.cancel_requested:
        raise InvalidArgument(
            "unable to mark activity as canceled without activity being request canceled first"
        )
    started_id = _started_event(m, info)
    event = m.add_external(
        new_event(
            ActivityTaskCanceledEventAttributes(
                details=details if details is not None and details.payloads else None,
                latest_cancel_requested_event_id=info.cancel_requested_event_id,
                scheduled_event_id=scheduled_event_id,
                started_event_id=started_id,
                identity=identity,
            )
        )
    )
    _close(m, info, event)


def cancel_scheduled(m: Mutation, info: ActivityInfo, *, details: Payloads, identity: str) -> None:
    """Cancel a cancel-requested activity no worker runs now (a standalone one): canceled at once."""
    event = m.add_external(
        new_event(
            ActivityTaskCanceledEventAttributes(
                details=details,
                latest_cancel_requested_event_id=info.cancel_requested_event_id,
                scheduled_event_id=info.scheduled_event_id,
                started_event_id=0,
                identity=identity,
            )
        )
    )
    _close(m, info, event)


def _first_expired(info: ActivityInfo, fired: TimeoutType.ValueType, started: bool) -> TimeoutType.ValueType:
    """The timeout an activity fails with when the timer of `fired` comes due.

    Temporal takes an activity's expired timeouts in (deadline, type) order, schedule-to-start before
    schedule-to-close: an attempt still waiting for a worker when both have expired times out
    SCHEDULE_TO_START, as it does when schedule-to-start defaults from schedule-to-close and both deadlines
    are the same instant (whichever timer row the shard happens to fire first)."""
    if fired != TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE or started or info.schedule_to_start <= 0:
        return fired
    schedule_to_start_deadline = info.attempt_scheduled_time + timedelta(seconds=info.schedule_to_start)
    schedule_to_close_deadline = info.scheduled_time + timedelta(seconds=info.schedule_to_close)
    if schedule_to_start_deadline <= schedule_to_close_deadline:
        return TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START
    return fired


def time_out(m: Mutation, *, scheduled_event_id: int, attempt: int, timeout_type: int) -> None:
    """An activity timer fired. Applies only if it still matches the activity's current attempt and stage."""
    info = m.state.activities.get(scheduled_event_id) if m.state.running else None
    if info is None or (attempt and attempt != info.attempt) or info.paused:
        raise StaleTask("activity timer is stale")  # a paused activity's timeouts are armed again on unpause
    started = info.state is ActivityState.STARTED
    if timeout_type == TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START and started:
        raise StaleTask("activity already started")
    if (
        timeout_type in (TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE, TimeoutType.TIMEOUT_TYPE_HEARTBEAT)
        and not started
    ):
        raise StaleTask("activity not started")
    if timeout_type == TimeoutType.TIMEOUT_TYPE_HEARTBEAT:
        last = info.last_heartbeat_time or info.started_time
        assert last is not None
        deadline = last + timedelta(seconds=info.heartbeat)
        if deadline > m.now:
            # A heartbeat arrived since this timer was armed: wait until the new deadline.
            m.timer(
                TimerKind.ACTIVITY_TIMEOUT,
                deadline,
                event_id=scheduled_event_id,
                attempt=info.attempt,
                detail=TimeoutType.TIMEOUT_TYPE_HEARTBEAT,
            )
            return
    kind = _first_expired(info, TimeoutType.ValueType(timeout_type), started)
    failure = Failure(
        message=f"activity {_TIMEOUT_NAMES[kind]} timeout",
        source=SERVER_SOURCE,
        timeout_failure_info=TimeoutFailureInfo(timeout_type=kind),
    )
    retry_state = _retry(m, info, failure)
    if retry_state == RetryState.RETRY_STATE_IN_PROGRESS:
        return
    if retry_state == RetryState.RETRY_STATE_TIMEOUT and kind != TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_START:
        failure = Failure(
            message=RETRY_SCHEDULE_TO_CLOSE_MESSAGE,
            source=SERVER_SOURCE,
            timeout_failure_info=TimeoutFailureInfo(timeout_type=TimeoutType.TIMEOUT_TYPE_SCHEDULE_TO_CLOSE),
        )
    if info.last_failure:
        failure.cause.CopyFrom(Failure.FromString(info.last_failure))
    if info.heartbeat_details:
        failure.timeout_failure_info.last_heartbeat_details.CopyFrom(
            Payloads.FromString(info.heartbeat_details)
        )
    started_id = _started_event(m, info) if started else 0
    event = m.add_external(
        new_event(
            ActivityTaskTimedOutEventAttributes(
                failure=failure,
                scheduled_event_id=scheduled_event_id,
                started_event_id=started_id,
                retry_state=retry_state,
            )
        )
    )
    _close(m, info, event)
